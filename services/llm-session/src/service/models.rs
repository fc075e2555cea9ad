//! The configured providers and models as ListModels reports them: what CreateSession
//! accepts, with the reason a provider cannot be used (never its key or headers).

use ploke_proto::session::v1::{ListModelsResponse, ModelInfo, ProviderInfo};

use super::SessionService;
use crate::error::SessionError;

impl SessionService {
    /// Every configured provider, sorted by name, and the one used when a session names none.
    pub fn models(&self) -> ListModelsResponse {
        let providers = self
            .providers
            .iter()
            .map(|(name, config)| ProviderInfo {
                name: name.clone(),
                default_model: config.default_model.clone().unwrap_or_default(),
                models: config
                    .models
                    .iter()
                    .map(|m| ModelInfo {
                        id: m.id.clone(),
                        context_window: m.context_window,
                        supports_tools: m.supports_tools,
                    })
                    .collect(),
                unusable_reason: match self.provider(name) {
                    Ok(_) => String::new(),
                    Err(SessionError::ProviderUnusable { reason, .. }) => reason,
                    Err(e) => e.to_string(),
                },
            })
            .collect();
        ListModelsResponse {
            providers,
            default_provider: self.provider_name("").unwrap_or_default(),
        }
    }
}
