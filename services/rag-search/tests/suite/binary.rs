//! The `ploke-rag-search` binary starts with zero configuration, reports SERVING, lists its
//! service through reflection and drains on SIGTERM.

use std::path::Path;

#[tokio::test]
async fn binary_serves_health_and_reflection_then_drains() {
    let data = tempfile::tempdir().unwrap();
    ploke_runtime::testing::check_binary(
        Path::new(env!("CARGO_BIN_EXE_ploke-rag-search")),
        "ploke.rag.v1.RagSearch",
        data.path(),
        &[],
    )
    .await
    .unwrap();
}

/// What the binary writes to stderr and how it exits, run in `dir` with only `env`.
fn run(dir: &Path, env: &[(&str, &str)]) -> (Option<i32>, Vec<String>) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ploke-rag-search"))
        .env_clear()
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    (
        out.status.code(),
        stderr.lines().map(String::from).collect(),
    )
}

/// `level`, `fields.message` and `fields.<key>` of a JSON log line.
fn fields(line: &str, key: &str) -> (String, String, String) {
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    (
        text(&v["level"]),
        text(&v["fields"]["message"]),
        text(&v["fields"][key]),
    )
}

/// A log pipeline reads a failed start and a mistyped variable like any other line: each is a
/// JSON object with `PLOKE_LOG_FORMAT=json`, and the process exits with status 1.
#[test]
fn a_failed_start_and_an_unknown_variable_are_log_lines_in_the_log_format() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[rag_search]\nno_such_key = 1\n").unwrap();

    // Its configuration refused, before the log is set up.
    let (code, lines) = run(
        dir.path(),
        &[
            ("PLOKE_LOG_FORMAT", "json"),
            ("PLOKE_CONFIG", bad.to_str().unwrap()),
        ],
    );
    assert_eq!((code, lines.len()), (Some(1), 1), "{lines:?}");
    let (level, message, error) = fields(&lines[0], "error");
    assert_eq!(
        (level.as_str(), message.as_str()),
        ("ERROR", "service stopped")
    );
    assert!(error.contains("no_such_key"), "{error}");
    // The same as text.
    let (code, lines) = run(dir.path(), &[("PLOKE_CONFIG", bad.to_str().unwrap())]);
    assert_eq!((code, lines.len()), (Some(1), 1), "{lines:?}");
    assert!(
        lines[0].contains("ERROR service stopped error=") && lines[0].contains("no_such_key"),
        "{}",
        lines[0]
    );

    // Its port taken, after the log is set up; a mistyped variable warned of first.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let (code, lines) = run(
        dir.path(),
        &[
            ("PLOKE_LOG_FORMAT", "json"),
            ("PLOKE_LISTEN", &listen),
            ("PLOKE_DATA_DIR", data),
            ("PLOKE_WORKSPACES", data),
            ("PLOKE_LISTN", "127.0.0.1:1"),
        ],
    );
    assert_eq!(code, Some(1), "{lines:?}");
    let warned = lines.iter().find(|l| l.contains("PLOKE_LISTN")).unwrap();
    assert_eq!(
        fields(warned, "variable"),
        (
            "WARN".to_owned(),
            "ignoring unknown environment variable".to_owned(),
            "PLOKE_LISTN".to_owned()
        )
    );
    let (level, message, error) = fields(lines.last().unwrap(), "error");
    assert_eq!(
        (level.as_str(), message.as_str()),
        ("ERROR", "service stopped")
    );
    assert!(error.starts_with(&format!("binding {listen}: ")), "{error}");
    // The OS error is said once, not again as the cause of the bind error.
    assert_eq!(error.matches("os error").count(), 1, "{error}");
    // Every line is JSON.
    for line in &lines {
        fields(line, "message");
    }
}
