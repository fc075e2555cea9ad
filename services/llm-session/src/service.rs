//! llm-session's domain: sessions, turns and the event log. The request loop and the durable
//! log are the capability of the llm-session issue; until it lands, requests are validated
//! (workspace, provider) and answered with `NotYet`.

use std::collections::BTreeMap;

use ploke_runtime::client::TracedChannel;
use ploke_runtime::config::{ProviderConfig, SessionConfig};
use ploke_runtime::workspaces::Workspaces;

use crate::error::SessionError;

/// The llm-session domain service.
#[derive(Debug, Clone)]
pub struct SessionService {
    workspaces: Workspaces,
    providers: BTreeMap<String, ProviderConfig>,
    #[allow(dead_code)]
    settings: SessionConfig,
    /// Channel to tool-executor (ListTools, ExecuteTool).
    #[allow(dead_code)]
    tools: TracedChannel,
}

impl SessionService {
    /// A service over `workspaces` with `providers`, calling tool-executor through `tools`.
    pub fn new(
        workspaces: Workspaces,
        providers: BTreeMap<String, ProviderConfig>,
        settings: SessionConfig,
        tools: TracedChannel,
    ) -> Self {
        Self {
            workspaces,
            providers,
            settings,
            tools,
        }
    }

    /// Start a session.
    pub fn create(&self, workspace_root: &str, provider: &str) -> Result<(), SessionError> {
        self.workspaces.resolve(workspace_root)?;
        if !provider.is_empty() && !self.providers.contains_key(provider) {
            let configured: Vec<&str> = self.providers.keys().map(String::as_str).collect();
            return Err(SessionError::UnknownProvider {
                name: provider.to_owned(),
                configured: if configured.is_empty() {
                    "none".to_owned()
                } else {
                    configured.join(", ")
                },
            });
        }
        Err(SessionError::NotYet("durable sessions"))
    }

    /// Anything that needs an existing session.
    pub fn existing(&self, session_id: &str) -> Result<(), SessionError> {
        Err(SessionError::NoSuchSession(session_id.to_owned()))
    }

    /// List sessions.
    pub fn list(&self) -> Result<(), SessionError> {
        Err(SessionError::NotYet("durable sessions"))
    }
}
