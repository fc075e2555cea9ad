//! `ploke up` as a process of its own, stopped with SIGTERM: one metrics endpoint for its four
//! services when `[telemetry] metrics_listen` says so (scraped while it runs: the values are
//! exact), and several repositories served at once.

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

/// A `ploke up --no-tui` process and the lines it printed until it was ready.
struct Up {
    child: std::process::Child,
    printed: Vec<String>,
}

impl Up {
    fn start(dir: &std::path::Path, args: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ploke"));
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PLOKE_") {
                command.env_remove(key);
            }
        }
        let mut child = command
            .args(["up", "--no-tui"])
            .args(args)
            .env("XDG_CACHE_HOME", dir)
            .env("XDG_CONFIG_HOME", dir.join("no-user-config"))
            .env("OPENAI_API_KEY", "")
            .env("OPENROUTER_API_KEY", "")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Owned by `up` from here: killed and waited for on any panic below.
        let mut up = Self {
            child,
            printed: Vec::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("ploke up printed only {:#?}", up.printed));
            let ready = line.contains("the services run until Ctrl-C");
            up.printed.push(line);
            if ready {
                return up;
            }
        }
    }

    async fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let exit = tokio::task::block_in_place(|| self.child.wait().unwrap());
        assert!(exit.success(), "{exit:?}");
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        // Already waited for after `stop`; else (a failed test) it must not outlive it.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn record(workspace: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(workspace.join(".ploke/up.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Two repositories served at once: with the default ports taken, free ones (recorded in
/// `.ploke/up.json`, where `ploke search` finds them); `--port-base` for exact ones; and a
/// second `ploke up` of the same workspace refused with the first one's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workspaces_at_once_and_never_one_twice() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (a, b) = (root.join("a"), root.join("b"));
    for ws in [&a, &b] {
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/lib.rs"), LIB_RS).unwrap();
    }
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&a)
            .status()
            .unwrap()
            .success()
    );
    // The default gateway port is taken: by this test, or already by someone else.
    let _held = std::net::TcpListener::bind("127.0.0.1:50051");
    let first = Up::start(&root, &["--workspace", a.to_str().unwrap()]);
    assert!(
        first
            .printed
            .iter()
            .any(|l| l.contains("the default ports are taken")),
        "{:#?}",
        first.printed
    );
    let gateway_a = record(&a)["gateway"].as_str().unwrap().to_owned();
    assert_ne!(gateway_a, "http://127.0.0.1:50051");
    assert_eq!(record(&a)["pid"], first.child.id());
    // ploke's state is ignored by git without a change to the repository's .gitignore.
    let status = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .current_dir(&a)
        .output()
        .unwrap();
    assert_eq!(super::text(&status.stdout), "?? src/lib.rs\n");

    let base = ploke_e2e::ports::free_run(5).expect("five free ports in a row");
    let second = Up::start(
        &root,
        &[
            "--workspace",
            b.to_str().unwrap(),
            "--port-base",
            &base.to_string(),
        ],
    );
    assert_eq!(record(&b)["gateway"], format!("http://127.0.0.1:{base}"));
    assert_eq!(
        record(&b)["mcp"],
        format!("http://127.0.0.1:{}/mcp", base + 4)
    );

    // A command in a finds a's `ploke up` by its record: no indexing of its own.
    let out = super::run(&a, vec!["search".into(), "add".into()], &[]).await;
    let stderr = super::text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        super::text(&out.stdout).contains("add"),
        "{}",
        super::text(&out.stdout)
    );
    assert!(!stderr.contains("indexing"), "{stderr}");
    // So does a command in a subdirectory of a: it stands for a (the directory above it
    // holding .ploke), so it neither indexes nor makes a .ploke of its own.
    let out = super::run(&a.join("src"), vec!["search".into(), "add".into()], &[]).await;
    let stderr = super::text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        super::text(&out.stdout).contains("src/lib.rs"),
        "{}",
        super::text(&out.stdout)
    );
    assert!(!stderr.contains("indexing"), "{stderr}");
    assert!(!a.join("src/.ploke").exists());
    // `ploke status` in b's subdirectory asks b's `ploke up`, on its own ports.
    let out = super::run(&b.join("src"), vec!["status".into()], &[]).await;
    let stdout = super::text(&out.stdout);
    assert!(out.status.success(), "{}", super::text(&out.stderr));
    assert!(
        stdout.contains(&format!("http://127.0.0.1:{base}")),
        "{stdout}"
    );

    let again = super::run(
        &root,
        vec![
            "up".into(),
            "--no-tui".into(),
            "--workspace".into(),
            a.display().to_string(),
        ],
        &[("XDG_CACHE_HOME", root.to_str().unwrap())],
    )
    .await;
    assert!(!again.status.success());
    assert_eq!(
        super::text(&again.stderr),
        format!(
            "error: another `ploke up` (pid {}) already serves {} at {gateway_a}; use it (`ploke chat`, `ploke ask` here find it) or stop it first\n",
            first.child.id(),
            a.display()
        )
    );

    first.stop().await;
    second.stop().await;
    assert!(!a.join(".ploke/up.json").exists());
    assert!(!b.join(".ploke/up.json").exists());
}

#[tokio::test]
async fn up_says_which_service_failed_and_why_not_the_refused_connection_it_caused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), LIB_RS).unwrap();
    std::fs::write(dir.path().join("ploke.toml"), CONFIG).unwrap();
    // A model directory without the model in it: rag-search cannot start.
    let model = tempfile::tempdir().unwrap();
    let model_dir = model.path().display().to_string();
    let out = super::run(
        dir.path(),
        vec!["up".into(), "--check".into()],
        &[("PLOKE_EMBED_MODEL", &model_dir)],
    )
    .await;
    let said =
        format!("error: ploke-rag-search: embedding model: {model_dir}/config.json is missing\n");
    assert!(!out.status.success());
    let stderr = super::text(&out.stderr);
    assert!(stderr.ends_with(&said), "{stderr}");
    // The same from a command whose services run in its own process.
    let out = super::run(
        dir.path(),
        vec!["search".into(), "add".into()],
        &[("PLOKE_EMBED_MODEL", &model_dir)],
    )
    .await;
    assert!(!out.status.success());
    let stderr = super::text(&out.stderr);
    assert!(stderr.ends_with(&said), "{stderr}");
}
