//! The real binary's metrics, by scraping: with `[telemetry] metrics_listen` it serves
//! Prometheus text beside gRPC, counting tool calls by tool and outcome and RPCs by method and
//! code; without it, it listens on its gRPC port and nothing else. A process of its own, so
//! every value is exact.

use std::path::Path;
use std::time::Duration;

use ploke_proto::common::v1::Correlation;
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_proto::tools::v1::{
    ExecuteToolRequest, ListToolsRequest, ReadFileArgs, ToolCall, execute_tool_event, tool_call,
};
use ploke_runtime::testing::{RunningBinary, metric, scrape};

const TOOLS: &str = "ploke.tools.v1.ToolExecutor";

fn binary(config: Option<&Path>, data: &Path, workspace: &Path) -> RunningBinary {
    let paths = [data.display().to_string(), workspace.display().to_string()];
    let mut args = vec!["--data-dir", &paths[0], "--workspace", &paths[1]];
    let config = config.map(|c| c.display().to_string());
    if let Some(c) = &config {
        args.extend(["--config", c.as_str()]);
    }
    RunningBinary::start(
        Path::new(env!("CARGO_BIN_EXE_ploke-tool-executor")),
        &args,
        Duration::from_secs(30),
    )
    .unwrap()
}

/// Reads `file` and returns the kind of the call's last event.
async fn read(tools: &ToolExecutorClient<tonic::transport::Channel>, file: &str) -> &'static str {
    let request = ExecuteToolRequest {
        correlation: Some(Correlation {
            call_id: format!("read-{file}"),
            ..Default::default()
        }),
        call: Some(ToolCall {
            args: Some(tool_call::Args::ReadFile(ReadFileArgs {
                file: file.into(),
                start_line: None,
                end_line: None,
            })),
        }),
        ..Default::default()
    };
    let mut stream = tools
        .clone()
        .execute_tool(request)
        .await
        .unwrap()
        .into_inner();
    let mut last = None;
    while let Some(event) = stream.message().await.unwrap() {
        last = event.event;
    }
    match last {
        Some(execute_tool_event::Event::Result(_)) => "result",
        Some(execute_tool_event::Event::Error(_)) => "error",
        other => panic!("unexpected end {other:?}"),
    }
}

/// TCP sockets process `pid` listens on (Linux: its socket fds that `/proc/net/tcp*` lists in
/// state LISTEN).
#[cfg(target_os = "linux")]
fn listening_sockets(pid: u32) -> usize {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|row| {
                    let cols: Vec<&str> = row.split_whitespace().collect();
                    (cols.get(3) == Some(&"0A")).then(|| cols.get(9).map(|i| (*i).to_owned()))?
                })
                .collect::<Vec<_>>()
        })
        .filter(|inode| inodes.contains(inode))
        .count()
}

#[tokio::test]
async fn the_binary_serves_tool_and_rpc_metrics_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("a.txt"), "alpha\nbeta\n").unwrap();
    let config = dir.path().join("ploke.toml");
    std::fs::write(&config, "[telemetry]\nmetrics_listen = \"127.0.0.1:0\"\n").unwrap();

    let bin = binary(Some(&config), &dir.path().join("data"), &workspace);
    let addr = bin.metrics_addr.expect("the binary logs `serving metrics`");
    assert_ne!(addr.port(), 0);
    #[cfg(target_os = "linux")]
    assert_eq!(listening_sockets(bin.pid()), 2, "gRPC and metrics");
    let channel = tonic::transport::Endpoint::from_shared(bin.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let tools = ToolExecutorClient::new(channel.clone());
    tools
        .clone()
        .list_tools(ListToolsRequest::default())
        .await
        .unwrap();
    assert_eq!(read(&tools, "a.txt").await, "result");
    assert_eq!(read(&tools, "a.txt").await, "result");
    assert_eq!(read(&tools, "missing.txt").await, "error");

    let scraped = scrape(addr, "/metrics").await.unwrap();
    assert_eq!(scraped.status, 200);
    let body = &scraped.body;
    let calls = "ploke_tool_calls_total";
    assert_eq!(
        metric(body, calls, &[("tool", "read_file"), ("outcome", "OK")]),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        metric(
            body,
            calls,
            &[("tool", "read_file"), ("outcome", "NOT_FOUND")]
        ),
        Some(1.0)
    );
    // Every tool and outcome is counted from 0, so a first failure shows in `rate()`.
    assert_eq!(metric(body, calls, &[("tool", "list_dir")]), Some(0.0));
    assert_eq!(
        metric(
            body,
            calls,
            &[("tool", "read_file"), ("outcome", "TIMEOUT")]
        ),
        Some(0.0)
    );
    assert_eq!(
        metric(
            body,
            calls,
            &[("tool", "read_file"), ("outcome", "CANCELLED")]
        ),
        Some(0.0)
    );
    assert_eq!(
        metric(
            body,
            "ploke_tool_call_duration_seconds_count",
            &[("tool", "read_file"), ("outcome", "OK")]
        ),
        Some(2.0)
    );
    // A tool error is a result of the call: the RPC itself is OK.
    let rpc = |method, code| [("service", TOOLS), ("method", method), ("code", code)];
    let requests = "ploke_rpc_requests_total";
    assert_eq!(metric(body, requests, &rpc("ExecuteTool", "OK")), Some(3.0));
    assert_eq!(metric(body, requests, &rpc("ListTools", "OK")), Some(1.0));
    let pool = [("service", TOOLS)];
    assert!(metric(body, "ploke_blocking_pool_size", &pool).is_some_and(|n| n >= 1.0));
    assert_eq!(metric(body, "ploke_blocking_pool_busy", &pool), Some(0.0));
    drop((tools, channel));
    let (exit, lines) = tokio::task::spawn_blocking(move || bin.terminate())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{exit:?}\n{}", lines.join("\n"));

    // Not asked: the gRPC port is all it binds.
    let quiet = binary(None, &dir.path().join("data2"), &workspace);
    assert_eq!(quiet.metrics_addr, None);
    #[cfg(target_os = "linux")]
    assert_eq!(listening_sockets(quiet.pid()), 1, "gRPC only");
    let (exit, _) = tokio::task::spawn_blocking(move || quiet.terminate())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success());
}
