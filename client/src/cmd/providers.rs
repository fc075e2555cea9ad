//! Finding a model provider when `ploke.toml` configures none: `OPENAI_API_KEY`, then
//! `OPENROUTER_API_KEY`, then an Ollama answering on localhost.

use std::time::Duration;

use ploke_runtime::PlokeConfig;
use ploke_runtime::config::{ModelConfig, ProviderConfig};

/// What to do when there is no provider.
pub(crate) const NONE_HINT: &str = "set OPENAI_API_KEY or OPENROUTER_API_KEY, start Ollama on \
     127.0.0.1:11434, or add [providers.NAME] to the workspace's ploke.toml or to \
     ~/.config/ploke/config.toml (`ploke config` shows what is read); search and index work without one";

/// A refused CreateSession as the user reads it: a missing provider comes with the hint.
pub(crate) fn session_refused(s: tonic::Status) -> anyhow::Error {
    match s.code() {
        tonic::Code::FailedPrecondition => anyhow::anyhow!("{} ({})", s.message(), NONE_HINT),
        _ => anyhow::anyhow!("creating a session: {}", s.message()),
    }
}

const OLLAMA: &str = "http://127.0.0.1:11434";

/// Adds a provider from the environment when none is configured; describes the one in use.
pub(crate) async fn detect(cfg: &mut PlokeConfig) -> Option<String> {
    if !cfg.providers.is_empty() {
        let name = cfg
            .session
            .default_provider
            .clone()
            .or_else(|| cfg.providers.keys().next().cloned())?;
        return Some(format!("{name} (config file)"));
    }
    let set = |var: &str| std::env::var(var).is_ok_and(|v| !v.is_empty());
    let (name, provider) = if set("OPENAI_API_KEY") {
        (
            "openai",
            ProviderConfig {
                base_url: "https://api.openai.com/v1".into(),
                api_key_env: Some("OPENAI_API_KEY".into()),
                default_model: Some("gpt-4.1-mini".into()),
                headers: Default::default(),
                models: vec![ModelConfig {
                    id: "gpt-4.1-mini".into(),
                    context_window: Some(1_047_576),
                    supports_tools: Some(true),
                }],
                preferences: None,
            },
        )
    } else if set("OPENROUTER_API_KEY") {
        (
            "openrouter",
            ProviderConfig {
                base_url: "https://openrouter.ai/api/v1".into(),
                api_key_env: Some("OPENROUTER_API_KEY".into()),
                default_model: Some("openai/gpt-4.1-mini".into()),
                headers: [("X-Title".to_owned(), "ploke".to_owned())].into(),
                models: vec![ModelConfig {
                    id: "openai/gpt-4.1-mini".into(),
                    context_window: Some(1_047_576),
                    supports_tools: Some(true),
                }],
                preferences: None,
            },
        )
    } else {
        let model = ollama_model().await?;
        (
            "ollama",
            ProviderConfig {
                base_url: format!("{OLLAMA}/v1"),
                api_key_env: None,
                default_model: Some(model),
                headers: Default::default(),
                models: Vec::new(),
                preferences: None,
            },
        )
    };
    let model = provider.default_model.clone().unwrap_or_default();
    cfg.providers.insert(name.to_owned(), provider);
    cfg.session.default_provider = Some(name.to_owned());
    Some(format!("{name} ({model}, from the environment)"))
}

/// The first model of an Ollama on localhost, if one answers quickly.
async fn ollama_model() -> Option<String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .ok()?;
    let tags: serde_json::Value = client
        .get(format!("{OLLAMA}/api/tags"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    tags["models"][0]["name"].as_str().map(str::to_owned)
}
