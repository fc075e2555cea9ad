//! A real third-party MCP client — the official Python SDK, `mcp` from PyPI (scripts/test
//! installs it) — against the gateway's `/mcp` in both protocol eras and against `ploke mcp`
//! over stdio (through a gateway, and with its own in-process services). Its edits wait until
//! `ploke edits approve` decides them, run here as a user would in another terminal.

use std::path::PathBuf;
use std::process::Stdio;

use ploke_runtime::ServiceKind;

use super::{LIB_RS, env, run, text};

/// The Python with the `mcp` package: `MCP_TEST_PYTHON` (scripts/test), else `python3` if it
/// has it. Required in CI; elsewhere a missing one skips, saying why.
fn python() -> Option<String> {
    let python = std::env::var("MCP_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let ok = std::process::Command::new(&python)
        .args(["-c", "import mcp, httpx2"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(python);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{python} lacks the `mcp` package (scripts/test installs it)");
    }
    eprintln!("skipped: {python} lacks the `mcp` package (pip install mcp==2.3.0)");
    None
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py")
}

/// Runs the Python client with `args`; `approve` = the gateway whose pending edits are
/// approved with `ploke edits approve` while it waits. Returns what the client printed.
async fn client(
    python: &str,
    args: Vec<String>,
    envs: &[(&str, &str)],
    approve: Option<(&std::path::Path, String)>,
) -> serde_json::Value {
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script())
        .args(args)
        .env_remove("PLOKE_GATEWAY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in envs {
        command.env(k, v);
    }
    let child = command.spawn().unwrap();
    let waited = tokio::spawn(child.wait_with_output());
    if let Some((dir, gateway)) = approve {
        let token = [("PLOKE_TOKEN", ploke_e2e::TOKEN)];
        let list = || {
            run(
                dir,
                vec![
                    "edits".into(),
                    "list".into(),
                    "--gateway".into(),
                    gateway.clone(),
                ],
                &token,
            )
        };
        let id = ploke_e2e::wait::poll(|| async {
            let out = text(&list().await.stdout);
            out.lines()
                .find(|l| l.contains("  pending  create_file"))
                .and_then(|l| l.split_whitespace().next())
                .map(str::to_owned)
                .ok_or_else(|| format!("no pending edit: {out}"))
        })
        .await;
        let approved = run(
            dir,
            vec![
                "edits".into(),
                "approve".into(),
                id.clone(),
                "--gateway".into(),
                gateway.clone(),
            ],
            &token,
        )
        .await;
        assert!(approved.status.success(), "{}", text(&approved.stderr));
    }
    let out = waited.await.unwrap().unwrap();
    assert!(
        out.status.success(),
        "python client failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // A session the client ends is ended for it (the SDK warns on any answer but 200 or 204).
    assert!(
        !text(&out.stderr).contains("Session termination failed"),
        "{}",
        text(&out.stderr)
    );
    serde_json::from_str(text(&out.stdout).trim()).unwrap()
}

#[tokio::test]
async fn the_python_sdk_uses_the_tools_over_http_and_stdio_and_edits_wait_for_ploke_edits() {
    let Some(python) = python() else { return };
    let e = env().await;
    let dir = e.sandbox.workspace_root().to_owned();
    let gateway = e.sandbox.addrs().url(ServiceKind::Gateway);
    let mcp = e.sandbox.mcp_url().unwrap();
    let expected = |created: &str| {
        serde_json::json!({
            "tools": 8,
            "context_first": "src/lib.rs",
            "read_lines": 4,
            "bad_code": "OUT_OF_RANGE",
            "created": [created],
            "state": "applied",
        })
    };
    // Streamable HTTP, 2026-07-28 and the initialize handshake.
    for mode in ["auto", "legacy"] {
        let name = format!("made_{mode}.txt");
        let args = vec![
            "http".into(),
            mcp.clone(),
            ploke_e2e::TOKEN.into(),
            mode.into(),
            "--create".into(),
            name.clone(),
        ];
        let seen = client(&python, args, &[], Some((&dir, gateway.clone()))).await;
        assert_eq!(seen, expected(&name), "{mode}");
        assert_eq!(
            std::fs::read_to_string(dir.join(&name)).unwrap(),
            "made over MCP\n"
        );
    }
    // stdio: `ploke mcp` through the gateway with the developer's token.
    let args = vec![
        "stdio".into(),
        "auto".into(),
        "--create".into(),
        "made_stdio.txt".into(),
        "--".into(),
        env!("CARGO_BIN_EXE_ploke").into(),
        "mcp".into(),
        "--gateway".into(),
        gateway.clone(),
    ];
    let seen = client(
        &python,
        args,
        &[("PLOKE_TOKEN", ploke_e2e::TOKEN)],
        Some((&dir, gateway.clone())),
    )
    .await;
    assert_eq!(seen, expected("made_stdio.txt"));
    e.sandbox.stop().await.unwrap();

    // stdio: `ploke mcp` in a checkout with nothing serving it starts the services itself.
    let own = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(own.path().join("src")).unwrap();
    std::fs::write(own.path().join("src/lib.rs"), LIB_RS).unwrap();
    let args = vec![
        "stdio".into(),
        "legacy".into(),
        "--".into(),
        env!("CARGO_BIN_EXE_ploke").into(),
        "mcp".into(),
        "--workspace".into(),
        own.path().display().to_string(),
    ];
    let seen = client(&python, args, &[("PLOKE_LOG", "warn")], None).await;
    assert_eq!(
        seen,
        serde_json::json!({"tools": 8, "context_first": "src/lib.rs", "read_lines": 4, "bad_code": "OUT_OF_RANGE"})
    );
}
