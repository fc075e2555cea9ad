//! What the MCP front door costs beside the gRPC API, for docs/PERFORMANCE.md: the whole stack
//! in this process (the Sandbox) serving a copy of `--workspace` (default: this repository's
//! `services/`), with the official Rust SDK's client at `/mcp` (2026-07-28, stateless, and
//! 2025-11-25 with a session) against direct `ExecuteTool` calls through the gateway.
//!
//! 1. Latency, one client: `tools/list`, `read_file` of a 300-line file and
//!    `request_code_context`, p50/p99 over `--rounds` (200).
//! 2. Concurrency: `--clients` (32) clients each calling `read_file` `--rounds` times at once;
//!    calls per second, and the process's RSS before, at its peak and after.
//!
//! Not a test.
//!
//!   cargo bench -p ploke-e2e --bench mcp -- [--workspace DIR] [--rounds N] [--clients N]
//!       [--embed-model DIR]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ploke_e2e::Sandbox;
use ploke_e2e::bench::{arg, copy_of, number, pct};
use ploke_proto::tools::v1::{
    ExecuteToolRequest, ReadFileArgs, RequestCodeContextArgs, ToolCall, tool_call,
};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, RoleClient};

/// Resident memory of this process, MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[derive(Clone)]
struct Plain(Option<ProtocolVersion>);

impl ClientHandler for Plain {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        if let Some(v) = &self.0 {
            info.protocol_version = v.clone();
        }
        info
    }
}

async fn mcp(url: &str, legacy: bool) -> RunningService<RoleClient, Plain> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(ploke_e2e::TOKEN),
    );
    let (client, mode) = if legacy {
        (
            Plain(Some(ProtocolVersion::V_2025_11_25)),
            ClientLifecycleMode::Initialize,
        )
    } else {
        (
            Plain(None),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
    };
    client.serve_with_lifecycle(transport, mode).await.unwrap()
}

fn params(name: &'static str, v: serde_json::Value) -> CallToolRequestParams {
    let serde_json::Value::Object(o) = v else {
        unreachable!()
    };
    CallToolRequestParams::new(name).with_arguments(o)
}

fn grpc(args: tool_call::Args) -> ExecuteToolRequest {
    ExecuteToolRequest {
        call: Some(ToolCall { args: Some(args) }),
        ..Default::default()
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workspace = ploke_e2e::bench::workspace(&args);
    let rounds = number(&args, "--rounds", 200) as usize;
    let clients = number(&args, "--clients", 32) as usize;
    let model = arg(&args, "--embed-model").map(PathBuf::from);
    let served = copy_of(&workspace);
    let file = "bench_300_lines.rs";
    let text: String = (1..=300)
        .map(|i| format!("pub fn item_{i}(x: u64) -> u64 {{ x * {i} }}\n"))
        .collect();
    std::fs::write(served.path().join(file), text).unwrap();
    let root = served.path().to_owned();
    let sandbox = Sandbox::start_with(move |c| {
        c.workspaces = vec![root];
        c.rag_search.watch = false;
        c.rag_search.embed_model = model;
    })
    .await
    .unwrap();
    sandbox.index().await.unwrap();
    let url = sandbox.mcp_url().unwrap();
    println!(
        "mcp: serving {} ({}), {rounds} rounds",
        workspace.display(),
        if arg(&args, "--embed-model").is_some() {
            "with the embedding model"
        } else {
            "BM25 only"
        }
    );

    // 1. Latency of one client.
    let read = || params("read_file", serde_json::json!({"file": file}));
    let context = || {
        params(
            "request_code_context",
            serde_json::json!({"search_term": "index a workspace in the background"}),
        )
    };
    let mut gateway = sandbox.gateway();
    for (label, call) in [
        (
            "read_file",
            tool_call::Args::ReadFile(ReadFileArgs {
                file: file.into(),
                ..Default::default()
            }),
        ),
        (
            "request_code_context",
            tool_call::Args::RequestCodeContext(RequestCodeContextArgs {
                search_term: Some("index a workspace in the background".into()),
                token_budget: None,
                languages: vec![],
            }),
        ),
    ] {
        let mut took = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let started = Instant::now();
            let mut events = gateway
                .execute_tool(grpc(call.clone()))
                .await
                .unwrap()
                .into_inner();
            while events.message().await.unwrap().is_some() {}
            took.push(started.elapsed());
        }
        let (p50, p99) = pct(took);
        println!("  gRPC ExecuteTool {label:<22} p50 {p50:.2} ms  p99 {p99:.2} ms");
    }
    for legacy in [false, true] {
        let era = if legacy { "2025-11-25" } else { "2026-07-28" };
        let client = mcp(&url, legacy).await;
        let mut took = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let started = Instant::now();
            client.list_all_tools().await.unwrap();
            took.push(started.elapsed());
        }
        let (p50, p99) = pct(took);
        println!(
            "  MCP {era} tools/list{:<15} p50 {p50:.2} ms  p99 {p99:.2} ms",
            ""
        );
        for (label, make) in [
            ("read_file", &read as &dyn Fn() -> CallToolRequestParams),
            ("request_code_context", &context),
        ] {
            let mut took = Vec::with_capacity(rounds);
            for _ in 0..rounds {
                let started = Instant::now();
                let r = client.call_tool(make()).await.unwrap();
                assert_eq!(r.is_error, Some(false));
                took.push(started.elapsed());
            }
            let (p50, p99) = pct(took);
            println!("  MCP {era} {label:<24} p50 {p50:.2} ms  p99 {p99:.2} ms");
        }
        client.cancel().await.unwrap();
    }

    // 2. Many clients at once.
    let peak = Arc::new(AtomicU64::new(0));
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (Arc::clone(&peak), Arc::clone(&sampling));
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max((rss_mib() * 1024.0) as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    for kind in ["gRPC", "MCP 2026-07-28", "MCP 2025-11-25"] {
        let before = rss_mib();
        peak.store(0, Ordering::Relaxed);
        let mut tasks = Vec::with_capacity(clients);
        let started = Instant::now();
        for _ in 0..clients {
            let (url, mut gateway) = (url.clone(), sandbox.gateway());
            let read_args = tool_call::Args::ReadFile(ReadFileArgs {
                file: file.into(),
                ..Default::default()
            });
            tasks.push(tokio::spawn(async move {
                match kind {
                    "gRPC" => {
                        for _ in 0..rounds {
                            let mut e = gateway
                                .execute_tool(grpc(read_args.clone()))
                                .await
                                .unwrap()
                                .into_inner();
                            while e.message().await.unwrap().is_some() {}
                        }
                    }
                    _ => {
                        let client = mcp(&url, kind.ends_with("11-25")).await;
                        for _ in 0..rounds {
                            let r = client
                                .call_tool(params("read_file", serde_json::json!({"file": file})))
                                .await
                                .unwrap();
                            assert_eq!(r.is_error, Some(false));
                        }
                        client.cancel().await.unwrap();
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let secs = started.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_mib();
        println!(
            "  {clients} {kind} clients x {rounds} read_file: {:.0} calls/s; RSS {before:.0} -> peak {:.0} -> {after:.0} MiB",
            (clients * rounds) as f64 / secs,
            peak.load(Ordering::Relaxed) as f64 / 1024.0
        );
    }
    sampling.store(false, Ordering::Relaxed);
    sampler.join().unwrap();
    sandbox.stop().await.unwrap();
}
