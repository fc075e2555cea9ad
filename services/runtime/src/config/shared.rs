//! Settings of a shared deployment: where state lives (`[storage]`) and where metrics are
//! served (`[telemetry] metrics_listen`, kept in [`super::TelemetryConfig`]).

use serde::Deserialize;

use super::Secret;

/// `[storage]`: where sessions, events and proposals live.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// `postgres://user:password@host/db` for state shared by replicas (env
    /// `PLOKE_STORAGE_URL`); unset = SQLite under the data dir. Redacted in `Debug`: it may
    /// carry a password.
    pub url: Option<Secret>,
}

impl StorageConfig {
    /// The configured PostgreSQL URL, if state is shared.
    pub fn postgres_url(&self) -> Option<&str> {
        self.url.as_ref().map(Secret::expose)
    }

    /// Checks the URL names a database ploke can use.
    pub(super) fn validate(&self) -> Result<(), String> {
        match &self.url {
            None => Ok(()),
            Some(url) => {
                let url = url.expose();
                if url.starts_with("postgres://") || url.starts_with("postgresql://") {
                    Ok(())
                } else {
                    Err(
                        "[storage] url must start with postgres:// or postgresql:// \
                         (leave it unset for SQLite under the data dir)"
                            .to_owned(),
                    )
                }
            }
        }
    }
}
