//! `[internal]`: the shared token ploke services present to each other (docs/SECURITY.md,
//! "Service-to-service authentication").

use std::path::PathBuf;

use serde::Deserialize;

use super::Secret;

/// `[internal]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct InternalConfig {
    /// File with internal tokens, one per line (`#` starts a comment line): the first token is
    /// sent, every one is accepted.
    pub token_file: Option<PathBuf>,
    /// Tokens from `PLOKE_INTERNAL_TOKEN` (comma-separated; never read from `ploke.toml`). They
    /// come before the file's: the first of all is the one sent.
    #[serde(skip)]
    pub tokens: Vec<Secret>,
    /// Serve a backend on a non-loopback address without internal tokens. Only for a network
    /// that authenticates callers itself (a service mesh with mTLS); otherwise a backend with
    /// no token refuses to start anywhere but on loopback.
    pub allow_unauthenticated: bool,
}

impl InternalConfig {
    /// Whether no token is configured (none given, no file).
    pub fn is_unset(&self) -> bool {
        self.tokens.is_empty() && self.token_file.is_none()
    }

    /// The tokens of `PLOKE_INTERNAL_TOKEN`: comma-separated, blanks ignored.
    pub(crate) fn parse_env(value: &str) -> Vec<Secret> {
        value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Secret::new)
            .collect()
    }
}
