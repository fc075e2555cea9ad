use std::collections::HashMap;
use std::io::Write as _;

use super::*;
use std::path::Path;

use crate::cli::CommonArgs;

fn env_of(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn load(
    service: ServiceKind,
    args: &CommonArgs,
    pairs: &[(&str, &str)],
) -> Result<PlokeConfig, ConfigError> {
    let map = env_of(pairs);
    PlokeConfig::load(service, args, &|k| map.get(k).cloned())
}

#[test]
fn zero_configuration_gives_the_defaults() {
    let c = load(ServiceKind::RagSearch, &CommonArgs::default(), &[]).unwrap();
    assert_eq!(c, PlokeConfig::default());
    assert_eq!(c.listen(ServiceKind::RagSearch).port(), 50054);
    assert_eq!(c.listen(ServiceKind::Gateway).port(), 50051);
    assert_eq!(c.listen(ServiceKind::LlmSession).port(), 50052);
    assert_eq!(c.listen(ServiceKind::ToolExecutor).port(), 50053);
    assert_eq!(c.upstreams.rag_search_url, "http://127.0.0.1:50054");
    assert_eq!(c.session.max_tool_rounds, 25);
    assert_eq!(c.tool_executor.approval_timeout_secs, 600);
    assert!(!c.tool_executor.auto_approve);
}

#[test]
fn layers_apply_in_order_file_env_flags() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(
        file,
        r#"
data_dir = "/from/file"
workspaces = ["/ws/file"]

[rag_search]
listen = "127.0.0.1:6000"

[upstreams]
tool_executor_url = "http://file:1"

[providers.openai]
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"
default_model = "gpt-4.1-mini"
"#
    )
    .unwrap();
    let path = file.path().to_string_lossy().into_owned();

    // file only
    let c = load(
        ServiceKind::RagSearch,
        &CommonArgs::default(),
        &[("PLOKE_CONFIG", &path)],
    )
    .unwrap();
    assert_eq!(c.data_dir, PathBuf::from("/from/file"));
    assert_eq!(c.rag_search.listen.port(), 6000);
    assert_eq!(c.upstreams.tool_executor_url, "http://file:1");
    assert_eq!(
        c.providers["openai"].api_key_env.as_deref(),
        Some("OPENAI_API_KEY")
    );

    // env over file
    let c = load(
        ServiceKind::RagSearch,
        &CommonArgs::default(),
        &[
            ("PLOKE_CONFIG", &path),
            ("PLOKE_DATA_DIR", "/from/env"),
            ("PLOKE_LISTEN", "127.0.0.1:7000"),
            ("PLOKE_WORKSPACES", "/a:/b"),
        ],
    )
    .unwrap();
    assert_eq!(c.data_dir, PathBuf::from("/from/env"));
    assert_eq!(c.rag_search.listen.port(), 7000);
    assert_eq!(c.workspaces, vec![PathBuf::from("/a"), PathBuf::from("/b")]);

    // flags over env
    let args = CommonArgs {
        listen: Some("127.0.0.1:8000".parse().unwrap()),
        data_dir: Some(PathBuf::from("/from/flag")),
        workspace: vec![PathBuf::from("/c")],
        tool_executor_url: Some("http://flag:2".into()),
        ..CommonArgs::default()
    };
    let c = load(
        ServiceKind::RagSearch,
        &args,
        &[
            ("PLOKE_CONFIG", &path),
            ("PLOKE_DATA_DIR", "/from/env"),
            ("PLOKE_LISTEN", "127.0.0.1:7000"),
            ("PLOKE_TOOL_EXECUTOR_URL", "http://env:3"),
        ],
    )
    .unwrap();
    assert_eq!(c.data_dir, PathBuf::from("/from/flag"));
    assert_eq!(c.rag_search.listen.port(), 8000);
    assert_eq!(c.workspaces, vec![PathBuf::from("/c")]);
    assert_eq!(c.upstreams.tool_executor_url, "http://flag:2");
}

#[test]
fn listen_applies_to_the_running_service_only() {
    let c = load(
        ServiceKind::Gateway,
        &CommonArgs::default(),
        &[("PLOKE_LISTEN", "0.0.0.0:9999")],
    )
    .unwrap();
    assert_eq!(c.gateway.listen.port(), 9999);
    assert_eq!(c.rag_search.listen.port(), 50054);
}

#[test]
fn unknown_key_in_file_is_an_error_naming_it() {
    let err = PlokeConfig::from_toml(
        "[rag_search]\nlisten = \"127.0.0.1:1\"\nembed_modle = \"/m\"\n",
        Path::new("ploke.toml"),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("ploke.toml: "), "{text}");
    assert!(text.contains("unknown field `embed_modle`"), "{text}");
    let err = PlokeConfig::from_toml("[nonsense]\n", Path::new("ploke.toml")).unwrap_err();
    assert!(
        err.to_string().contains("unknown field `nonsense`"),
        "{err}"
    );
}

#[test]
fn a_parse_error_names_the_line_without_quoting_it() {
    // A key pasted as `api_key` is an unknown field: the error must not print the key.
    let err = PlokeConfig::from_toml(
        "[providers.openai]\nbase_url = \"https://api.openai.com/v1\"\napi_key = \"sk-live-secret\"\n",
        Path::new("ploke.toml"),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("sk-live-secret"), "{text}");
    assert!(
        text.starts_with("ploke.toml: line 3, column 1: unknown field `api_key`"),
        "{text}"
    );
}

#[test]
fn unknown_ploke_env_vars_are_found_for_a_warning() {
    let names: Vec<String> = ["PLOKE_WORKSPACE", "PLOKE_LISTEN", "HOME", "PLOKE_TOKEN"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    assert_eq!(
        PlokeConfig::unknown_env(&names),
        vec!["PLOKE_WORKSPACE".to_owned()]
    );
}

#[test]
fn bad_env_values_are_errors() {
    let err = load(
        ServiceKind::RagSearch,
        &CommonArgs::default(),
        &[("PLOKE_LISTEN", "nowhere")],
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("environment variable PLOKE_LISTEN: `nowhere` is not HOST:PORT"),
        "{err}"
    );
    let err = load(
        ServiceKind::RagSearch,
        &CommonArgs::default(),
        &[("PLOKE_LOG_FORMAT", "xml")],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable PLOKE_LOG_FORMAT: `xml` is not `text` or `json`"
    );
}

#[test]
fn missing_config_file_is_an_error() {
    let args = CommonArgs {
        config: Some(PathBuf::from("/definitely/not/here/ploke.toml")),
        ..CommonArgs::default()
    };
    let err = load(ServiceKind::RagSearch, &args, &[]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("reading /definitely/not/here/ploke.toml"),
        "{err}"
    );
}

#[test]
fn secrets_are_redacted_in_debug() {
    let c = load(
        ServiceKind::Gateway,
        &CommonArgs::default(),
        &[("PLOKE_GATEWAY_TOKENS", "tok-very-secret, second-secret")],
    )
    .unwrap();
    assert_eq!(c.gateway.tokens.len(), 2);
    assert_eq!(c.gateway.tokens[0].expose(), "tok-very-secret");
    let debug = format!("{c:?}");
    assert!(!debug.contains("very-secret"), "{debug}");
    assert!(!debug.contains("second-secret"), "{debug}");
    assert!(debug.contains("tokens: [***, ***]"), "{debug}");
}

#[test]
fn short_gateway_tokens_are_refused_beyond_loopback_only() {
    // On loopback (a developer's own `ploke up`, the tests): any token.
    let local = load(
        ServiceKind::Gateway,
        &CommonArgs::default(),
        &[("PLOKE_GATEWAY_TOKENS", "x")],
    );
    assert!(local.is_ok(), "{local:?}");
    let args = CommonArgs {
        listen: Some("0.0.0.0:50051".parse().unwrap()),
        ..CommonArgs::default()
    };
    let err = load(
        ServiceKind::Gateway,
        &args,
        &[("PLOKE_GATEWAY_TOKENS", "long-enough-token-1,x")],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("token 2 has fewer than 16 characters, and the gateway listens beyond loopback (0.0.0.0:50051)"),
        "{err}"
    );
    assert!(!err.contains("long-enough"), "{err}");
    assert!(
        load(
            ServiceKind::Gateway,
            &args,
            &[("PLOKE_GATEWAY_TOKENS", "long-enough-token-1")]
        )
        .is_ok()
    );
}

#[test]
fn max_connection_age_is_off_by_default_and_set_in_limits() {
    assert_eq!(PlokeConfig::default().limits.max_connection_age_secs, 0);
    let c = PlokeConfig::from_toml(
        "[limits]\nmax_connection_age_secs = 300\n",
        Path::new("ploke.toml"),
    )
    .unwrap();
    assert_eq!(c.limits.max_connection_age_secs, 300);
    assert_eq!(
        c.limits.drain_seconds,
        LimitsConfig::default().drain_seconds
    );
    let bad = PlokeConfig::from_toml(
        "[limits]\nmax_connection_age_secs = -1\n",
        Path::new("ploke.toml"),
    );
    assert!(matches!(bad, Err(ConfigError::Parse { .. })), "{bad:?}");
}

#[test]
fn the_documented_example_config_parses() {
    let text = include_str!("../../../../deploy/ploke.example.toml");
    let c = PlokeConfig::from_toml(text, Path::new("deploy/ploke.example.toml")).unwrap();
    let defaults = PlokeConfig::default();
    // Every documented value equals the code default, except the example providers.
    assert_eq!(
        PlokeConfig {
            providers: BTreeMap::new(),
            ..c.clone()
        },
        defaults
    );
    assert_eq!(
        c.providers.keys().collect::<Vec<_>>(),
        vec!["ollama", "openai"]
    );
    assert_eq!(
        c.providers["openai"].models,
        vec![ModelConfig {
            id: "gpt-4.1-mini".into(),
            context_window: Some(1_047_576),
            supports_tools: Some(true),
        }]
    );
}

#[test]
fn internal_tokens_come_from_the_environment_or_a_file_never_ploke_toml() {
    let c = load(
        ServiceKind::RagSearch,
        &CommonArgs::default(),
        &[(
            "PLOKE_INTERNAL_TOKEN",
            "new-internal-secret, old-internal-secret",
        )],
    )
    .unwrap();
    assert_eq!(
        c.internal,
        InternalConfig {
            token_file: None,
            tokens: vec![
                Secret::new("new-internal-secret"),
                Secret::new("old-internal-secret")
            ],
            allow_unauthenticated: false,
        }
    );
    let debug = format!("{c:?}");
    assert!(!debug.contains("internal-secret"), "{debug}");
    let text = "[internal]\ntoken_file = \"/run/secrets/ploke\"\nallow_unauthenticated = true\n";
    let c = PlokeConfig::from_toml(text, Path::new("ploke.toml")).unwrap();
    assert_eq!(
        c.internal,
        InternalConfig {
            token_file: Some(PathBuf::from("/run/secrets/ploke")),
            tokens: Vec::new(),
            allow_unauthenticated: true,
        }
    );
    let e = PlokeConfig::from_toml("[internal]\ntokens = [\"x\"]\n", Path::new("ploke.toml"))
        .unwrap_err();
    assert!(e.to_string().contains("unknown field `tokens`"), "{e}");
}

#[test]
fn storage_url_and_metrics_listen_come_from_env_and_the_url_is_redacted() {
    let env = |k: &str| match k {
        "PLOKE_STORAGE_URL" => Some("postgres://ploke:hunter2@db:5432/ploke".to_owned()),
        "PLOKE_METRICS_LISTEN" => Some("127.0.0.1:9100".to_owned()),
        _ => None,
    };
    let c = PlokeConfig::load(ServiceKind::LlmSession, &CommonArgs::default(), &env).unwrap();
    assert_eq!(
        c.storage.postgres_url(),
        Some("postgres://ploke:hunter2@db:5432/ploke")
    );
    assert_eq!(
        c.telemetry.metrics_listen,
        Some("127.0.0.1:9100".parse().unwrap())
    );
    assert!(!format!("{c:?}").contains("hunter2"));
}

#[test]
fn a_storage_url_that_is_not_postgres_is_refused() {
    let env = |k: &str| (k == "PLOKE_STORAGE_URL").then(|| "mysql://db/ploke".to_owned());
    let err = PlokeConfig::load(ServiceKind::LlmSession, &CommonArgs::default(), &env).unwrap_err();
    assert!(err.to_string().contains("postgres://"), "{err}");
}

#[test]
fn overlay_limits_default_and_come_from_rag_search() {
    let d = PlokeConfig::default().rag_search;
    assert_eq!(
        (
            d.overlay_max_bytes,
            d.overlay_max_files,
            d.overlay_idle_secs
        ),
        (64 * 1024 * 1024, 20_000, 86_400)
    );
    let c = PlokeConfig::from_toml(
        "[rag_search]\noverlay_max_bytes = 1024\noverlay_max_files = 3\noverlay_idle_secs = 0\n",
        Path::new("ploke.toml"),
    )
    .unwrap();
    assert_eq!(
        (
            c.rag_search.overlay_max_bytes,
            c.rag_search.overlay_max_files,
            c.rag_search.overlay_idle_secs
        ),
        (1024, 3, 0)
    );
}

#[test]
fn the_mcp_endpoint_is_off_by_default_and_set_by_file_or_env() {
    let d = PlokeConfig::default().gateway;
    assert_eq!((d.mcp_listen, d.mcp_max_result_tokens), (None, 25_000));
    let text = "[gateway]\nmcp_listen = \"0.0.0.0:50055\"\nmcp_max_result_tokens = 8000\n";
    let c = PlokeConfig::from_toml(text, Path::new("ploke.toml")).unwrap();
    assert_eq!(
        (c.gateway.mcp_listen, c.gateway.mcp_max_result_tokens),
        (Some("0.0.0.0:50055".parse().unwrap()), 8000)
    );
    let env = |k: &str| (k == "PLOKE_MCP_LISTEN").then(|| "127.0.0.1:7000".to_owned());
    let c = PlokeConfig::load(ServiceKind::Gateway, &CommonArgs::default(), &env).unwrap();
    assert_eq!(
        c.gateway.mcp_listen,
        Some("127.0.0.1:7000".parse().unwrap())
    );
    let env = |k: &str| (k == "PLOKE_MCP_LISTEN").then(|| "everywhere".to_owned());
    let e = PlokeConfig::load(ServiceKind::Gateway, &CommonArgs::default(), &env).unwrap_err();
    assert!(e.to_string().contains("PLOKE_MCP_LISTEN"), "{e}");
}

#[test]
fn a_tiny_mcp_result_cap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ploke.toml");
    std::fs::write(&path, "[gateway]\nmcp_max_result_tokens = 10\n").unwrap();
    let args = CommonArgs {
        config: Some(path),
        ..CommonArgs::default()
    };
    let e = PlokeConfig::load(ServiceKind::Gateway, &args, &|_| None).unwrap_err();
    assert!(e.to_string().contains("mcp_max_result_tokens = 10"), "{e}");
}

#[test]
fn a_query_token_limit_outside_the_model_window_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ploke.toml");
    for bad in [0, 2, 129] {
        std::fs::write(&path, format!("[rag_search]\nquery_max_tokens = {bad}\n")).unwrap();
        let args = CommonArgs {
            config: Some(path.clone()),
            ..CommonArgs::default()
        };
        let e = PlokeConfig::load(ServiceKind::RagSearch, &args, &|_| None).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("query_max_tokens = {bad} is outside 3..=128")),
            "{e}"
        );
    }
}

#[test]
fn layered_files_override_key_by_key_and_every_value_says_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("config.toml");
    let workspace = dir.path().join("ploke.toml");
    std::fs::write(
        &user,
        "[gateway]\nlisten = \"127.0.0.1:7000\"\n\n[providers.openai]\nbase_url = \"https://api.openai.com/v1\"\napi_key_env = \"OPENAI_API_KEY\"\n",
    )
    .unwrap();
    std::fs::write(
        &workspace,
        "[gateway]\nlisten = \"127.0.0.1:7100\"\n\n[rag_search]\nembed_batch_size = 8\n",
    )
    .unwrap();
    // A key nobody reads is an error naming its file.
    let broken = PlokeConfig::load_layers(
        ServiceKind::Gateway,
        &[user.clone(), workspace.clone()],
        &CommonArgs::default(),
        &|_| None,
    )
    .unwrap_err();
    assert!(
        broken
            .to_string()
            .starts_with(&workspace.display().to_string()),
        "{broken}"
    );
    std::fs::write(&workspace, "[gateway]\nlisten = \"127.0.0.1:7100\"\n").unwrap();
    let args = CommonArgs {
        workspace: vec![PathBuf::from("/repo")],
        ..CommonArgs::default()
    };
    let layers = PlokeConfig::load_layers(
        ServiceKind::Gateway,
        &[user.clone(), workspace.clone()],
        &args,
        &|k| (k == "PLOKE_DATA_DIR").then(|| "/state".to_owned()),
    )
    .unwrap();
    assert_eq!(layers.config.gateway.listen.port(), 7100);
    assert_eq!(
        layers.config.providers["openai"].base_url,
        "https://api.openai.com/v1"
    );
    let mut effective = layers.config.clone();
    effective.rag_search.embed_model = Some(PathBuf::from("/models/minilm"));
    let explained = layers.explain(&effective);
    let source = |key: &str| {
        explained
            .iter()
            .find(|e| e.key == key)
            .map(|e| (e.value.as_str(), e.source.as_str()))
            .unwrap_or_else(|| panic!("{key} not explained"))
    };
    let ws = workspace.display().to_string();
    let us = user.display().to_string();
    assert_eq!(
        source("gateway.listen"),
        ("\"127.0.0.1:7100\"", ws.as_str())
    );
    assert_eq!(
        source("providers.openai.base_url"),
        ("\"https://api.openai.com/v1\"", us.as_str())
    );
    assert_eq!(source("data_dir"), ("\"/state\"", "environment"));
    assert_eq!(source("workspaces"), ("[\"/repo\"]", "flag"));
    assert_eq!(
        source("rag_search.embed_model"),
        ("\"/models/minilm\"", "derived")
    );
    assert_eq!(source("llm_session.listen").1, "default");
    // An `f32` setting shows as written, not as its widening to `f64`.
    assert_eq!(source("rag_search.dense_weight"), ("0.2", "default"));
    assert_eq!(source("rag_search.rrf_k"), ("10.0", "default"));
    assert_eq!(source("rag_search.lexical_top"), ("1", "default"));
}

#[test]
fn secrets_are_never_printed_by_explain() {
    let layers =
        PlokeConfig::load_layers(ServiceKind::Gateway, &[], &CommonArgs::default(), &|k| {
            (k == "PLOKE_STORAGE_URL").then(|| "postgres://u:s3cret@db/ploke".to_owned())
        })
        .unwrap();
    let explained = layers.explain(&layers.config);
    let url = explained.iter().find(|e| e.key == "storage.url").unwrap();
    assert_eq!(url.value, "\"***\"");
    assert_eq!(url.source, "environment");
    // Tokens are never part of the configuration's text at all.
    assert!(
        !explained
            .iter()
            .any(|e| e.key == "gateway.tokens" || e.key == "gateway.admin_tokens")
    );
    assert!(!explained.iter().any(|e| e.value.contains("s3cret")));
    // A file sets it too: the environment's still wins, and is named as the source.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        "[storage]\nurl = \"postgres://f:filepass@db/ploke\"\n",
    )
    .unwrap();
    let args = CommonArgs {
        config: Some(file.path().to_owned()),
        ..Default::default()
    };
    let layers = PlokeConfig::load_layers(
        ServiceKind::Gateway,
        &[file.path().to_owned()],
        &args,
        &|k| (k == "PLOKE_STORAGE_URL").then(|| "postgres://u:s3cret@db/ploke".to_owned()),
    )
    .unwrap();
    let explained = layers.explain(&layers.config);
    let url = explained.iter().find(|e| e.key == "storage.url").unwrap();
    assert_eq!(
        (url.value.as_str(), url.source.as_str()),
        ("\"***\"", "environment")
    );
    assert!(!explained.iter().any(|e| e.value.contains("filepass")));
    // A provider header that carries a credential is a secret too; others are shown.
    std::fs::write(
        file.path(),
        "[providers.p]\nbase_url = \"http://127.0.0.1:1/v1\"\n[providers.p.headers]\n\
         Authorization = \"Bearer sk-in-a-file\"\nX-Title = \"ploke\"\n",
    )
    .unwrap();
    let files = [file.path().to_owned()];
    let layers =
        PlokeConfig::load_layers(ServiceKind::LlmSession, &files, &args, &|_| None).unwrap();
    let shown: Vec<(String, String)> = layers
        .explain(&layers.config)
        .into_iter()
        .filter(|e| e.key.contains(".headers."))
        .map(|e| (e.key, e.value))
        .collect();
    assert_eq!(
        shown,
        vec![
            (
                "providers.p.headers.Authorization".to_owned(),
                "\"***\"".to_owned()
            ),
            (
                "providers.p.headers.X-Title".to_owned(),
                "\"ploke\"".to_owned()
            ),
        ]
    );
}

#[test]
fn an_empty_embed_model_variable_names_no_model() {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        "[rag_search]\nembed_model = \"/models/minilm\"\n",
    )
    .unwrap();
    let args = CommonArgs {
        config: Some(file.path().to_owned()),
        ..Default::default()
    };
    let from_file = load(ServiceKind::RagSearch, &args, &[]).unwrap();
    assert_eq!(
        from_file.rag_search.embed_model,
        Some(PathBuf::from("/models/minilm"))
    );
    let emptied = load(ServiceKind::RagSearch, &args, &[("PLOKE_EMBED_MODEL", "")]).unwrap();
    assert_eq!(emptied.rag_search.embed_model, None);
    let named = load(
        ServiceKind::RagSearch,
        &args,
        &[("PLOKE_EMBED_MODEL", "/m")],
    )
    .unwrap();
    assert_eq!(named.rag_search.embed_model, Some(PathBuf::from("/m")));
}

#[test]
fn a_key_written_where_its_variable_name_belongs_is_refused_without_being_shown() {
    let dir = tempfile::tempdir().unwrap();
    let load = |toml: &str| {
        let file = dir.path().join("ploke.toml");
        std::fs::write(&file, toml).unwrap();
        PlokeConfig::load_layers(
            ServiceKind::LlmSession,
            &[file],
            &CommonArgs::default(),
            &|_| None,
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    let key = "sk-proj-abc123DEF456";
    let provider = format!(
        "[providers.openai]\nbase_url = \"https://api.openai.com/v1\"\napi_key_env = \"{key}\"\n"
    );
    let embedding = format!(
        "[embedding]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key_env = \"{key}\"\n"
    );
    assert_eq!(
        [load(&provider), load(&embedding)],
        [
            Err(
                "invalid configuration: providers.openai.api_key_env must be the name of an \
                 environment variable (letters, digits and _, at most 128), such as \
                 OPENAI_API_KEY, not the key itself; the value is not shown"
                    .to_owned()
            ),
            Err(
                "invalid configuration: embedding.api_key_env must be the name of an \
                 environment variable (letters, digits and _, at most 128), such as \
                 OPENAI_API_KEY, not the key itself; the value is not shown"
                    .to_owned()
            ),
        ]
    );
    assert_eq!(
        load(
            "[providers.openai]\nbase_url = \"https://api.openai.com/v1\"\napi_key_env = \"OPENAI_API_KEY_2\"\n"
        ),
        Ok(())
    );
}
