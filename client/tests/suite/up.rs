//! `ploke up` serves one metrics endpoint for its four services when `[telemetry]
//! metrics_listen` says so: the real binary, scraped while it runs (a process of its own, so
//! the values are exact), then stopped with SIGTERM.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use ploke_runtime::testing::{metric, scrape};

use super::LIB_RS;

const CONFIG: &str = r#"
[telemetry]
metrics_listen = "127.0.0.1:0"
[rag_search]
listen = "127.0.0.1:0"
[tool_executor]
listen = "127.0.0.1:0"
[llm_session]
listen = "127.0.0.1:0"
[gateway]
listen = "127.0.0.1:0"
mcp_listen = "127.0.0.1:0"
[providers.fake]
base_url = "http://127.0.0.1:9/v1"
"#;

#[tokio::test]
async fn up_serves_the_metrics_of_all_four_services_at_one_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(workspace.join("src/lib.rs"), LIB_RS).unwrap();
    let config = dir.path().join("ploke.toml");
    std::fs::write(&config, CONFIG).unwrap();

    let mut command = Command::new(env!("CARGO_BIN_EXE_ploke"));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PLOKE_") {
            command.env_remove(key);
        }
    }
    let mut child = command
        .args(["up", "--no-tui", "--workspace"])
        .arg(&workspace)
        .arg("--config")
        .arg(&config)
        // No cached embedding model: BM25 only.
        .env("XDG_CACHE_HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut printed = Vec::new();
    let mut metrics = None;
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("ploke up printed only {printed:#?}"));
        if let Some(url) = line.trim().strip_prefix("metrics: http://") {
            metrics = url
                .strip_suffix("/metrics")
                .and_then(|a| a.parse::<SocketAddr>().ok());
        }
        let ready = line.contains("the services run until Ctrl-C");
        printed.push(line);
        if ready {
            break;
        }
    }
    let addr = metrics.unwrap_or_else(|| panic!("no metrics line in {printed:#?}"));

    let scraped = scrape(addr, "/metrics").await.unwrap();
    assert_eq!(scraped.status, 200);
    let body = &scraped.body;
    let ok = |service, method| {
        metric(
            body,
            "ploke_rpc_requests_total",
            &[("service", service), ("method", method), ("code", "OK")],
        )
    };
    // `ploke up` asked the gateway for the status and to index; the gateway asked rag-search.
    assert_eq!(
        ok("ploke.gateway.v1.Gateway", "GetSystemStatus"),
        Some(1.0),
        "{body}"
    );
    assert_eq!(ok("ploke.gateway.v1.Gateway", "IndexWorkspace"), Some(1.0));
    assert_eq!(ok("ploke.rag.v1.RagSearch", "IndexWorkspace"), Some(1.0));
    let root = workspace.display().to_string();
    assert!(
        metric(body, "ploke_index_items", &[("workspace", &root)]).is_some_and(|n| n >= 1.0),
        "{body}"
    );
    for service in ["ploke.rag.v1.RagSearch", "ploke.tools.v1.ToolExecutor"] {
        assert!(
            metric(body, "ploke_blocking_pool_size", &[("service", service)]).is_some(),
            "{service}: {body}"
        );
    }

    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}
