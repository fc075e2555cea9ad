//! ExecuteTool overhead over loopback gRPC: a trivial read-only tool (list_dir) against the
//! same work done in process, and request_code_context against rag-search's GetContext called
//! directly. Not a test: results go to docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-tool-executor --bench tools -- --workspace DIR [--iterations N]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use ploke_proto::common::v1::{Correlation, TokenBudget};
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::{GetContextRequest, IndexWorkspaceRequest};
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_proto::tools::v1::*;
use ploke_runtime::config::PlokeConfig;
use ploke_runtime::shutdown::Shutdown;

#[derive(Debug, Parser)]
struct Args {
    /// Workspace to index and query (a real repository).
    #[arg(long)]
    workspace: PathBuf,
    /// Calls per measurement.
    #[arg(long, default_value_t = 2000)]
    iterations: usize,
    /// Embedding model directory (HYBRID when given, BM25 only otherwise).
    #[arg(long, env = "PLOKE_EMBED_MODEL")]
    embed_model: Option<PathBuf>,
    /// Where rag-search keeps its index (kept between runs; a fresh temporary dir when absent).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// cargo bench passes --bench.
    #[arg(long, hide = true)]
    bench: bool,
}

const QUERIES: &[&str] = &[
    "spawn a task on the runtime",
    "parse the configuration file",
    "retry with exponential backoff",
    "graceful shutdown on signal",
    "read a file into a string",
    "tcp listener accept loop",
    "error type conversion from io error",
    "buffered writer flush",
    "timeout for a future",
    "channel send and receive",
];

fn summary(name: &str, mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p50 = ms(samples[samples.len() / 2]);
    let p99 = ms(samples[(samples.len() * 99 / 100).min(samples.len() - 1)]);
    println!(
        "{name:<52} p50 {p50:>8.3} ms   p99 {p99:>8.3} ms   (n = {})",
        samples.len()
    );
    (p50, p99)
}

fn call(args: tool_call::Args, i: usize, user_message: &str) -> ExecuteToolRequest {
    ExecuteToolRequest {
        correlation: Some(Correlation {
            session_id: "bench".into(),
            request_id: format!("req-{i}"),
            parent_id: "bench".into(),
            call_id: format!("call-{i}"),
        }),
        workspace_root: String::new(),
        call: Some(ToolCall { args: Some(args) }),
        user_message: user_message.into(),
        timeout_ms: 0,
    }
}

async fn execute(
    client: &mut ToolExecutorClient<tonic::transport::Channel>,
    request: ExecuteToolRequest,
) {
    let mut stream = client.execute_tool(request).await.unwrap().into_inner();
    let mut finished = false;
    while let Some(e) = stream.message().await.unwrap() {
        match e.event {
            Some(execute_tool_event::Event::Result(_)) => finished = true,
            Some(execute_tool_event::Event::Error(e)) => panic!("tool failed: {e:?}"),
            _ => {}
        }
    }
    assert!(finished);
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = std::fs::canonicalize(&args.workspace)?;
    let temp = tempfile::tempdir()?;
    let data = args
        .data_dir
        .clone()
        .unwrap_or_else(|| temp.path().to_owned());
    let tools_data = tempfile::tempdir()?;
    let mut config = PlokeConfig {
        workspaces: vec![root.clone()],
        data_dir: data.join("rag"),
        ..PlokeConfig::default()
    };
    config.rag_search.embed_model = args.embed_model.clone();
    config.rag_search.watch = false;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let rag_url = format!("http://{}", listener.local_addr()?);
    let stop = Shutdown::new();
    tokio::spawn(ploke_rag_search::serve(
        ploke_rag_search::Config::from(&config),
        listener,
        stop.wait(),
    ));
    let mut rag = RagSearchClient::connect(rag_url.clone()).await?;
    let started = Instant::now();
    let mut progress = rag
        .index_workspace(IndexWorkspaceRequest {
            workspace_root: String::new(),
            force: false,
        })
        .await?
        .into_inner();
    let mut last = None;
    while let Some(p) = progress.message().await? {
        last = Some(p);
    }
    println!(
        "indexed {} in {:.1} s: {:?}",
        root.display(),
        started.elapsed().as_secs_f64(),
        last.and_then(|p| p.summary)
    );

    config.upstreams.rag_search_url = rag_url;
    config.data_dir = tools_data.path().to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let tools_url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(ploke_tool_executor::serve(
        ploke_tool_executor::Config::from(&config),
        listener,
        stop.wait(),
    ));
    let mut tools = ToolExecutorClient::connect(tools_url).await?;

    let n = args.iterations;
    let list = ListDirArgs {
        path: Some(String::new()),
        include_hidden: None,
        max_entries: None,
    };
    // Warm up connections and caches.
    for i in 0..50 {
        execute(
            &mut tools,
            call(tool_call::Args::ListDir(list.clone()), i, ""),
        )
        .await;
    }

    let mut in_process = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = ploke_tool_executor::tools::files::list_dir(&root, &list, None);
        in_process.push(t.elapsed());
        assert!(r.is_ok());
    }
    let mut list_tools = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        tools.list_tools(ListToolsRequest {}).await?;
        list_tools.push(t.elapsed());
    }
    let mut over_grpc = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        execute(
            &mut tools,
            call(tool_call::Args::ListDir(list.clone()), i, ""),
        )
        .await;
        over_grpc.push(t.elapsed());
    }

    let budget = 4000;
    let m = (n / 4).max(QUERIES.len());
    let mut direct = Vec::with_capacity(m);
    let mut via_tool = Vec::with_capacity(m);
    for i in 0..m {
        let q = QUERIES[i % QUERIES.len()];
        // Alternate the order so that neither side always runs on a warmer cache.
        let run_direct = |rag: &mut RagSearchClient<_>| {
            let request = GetContextRequest {
                query: q.into(),
                budget: Some(TokenBudget {
                    max_total: budget,
                    per_file_max: 0,
                    per_part_max: 0,
                }),
                ..Default::default()
            };
            let mut rag = rag.clone();
            async move {
                let t = Instant::now();
                rag.get_context(request).await.unwrap();
                t.elapsed()
            }
        };
        let args = tool_call::Args::RequestCodeContext(RequestCodeContextArgs {
            search_term: Some(q.into()),
            token_budget: Some(budget),
            languages: vec![],
        });
        if i % 2 == 0 {
            direct.push(run_direct(&mut rag).await);
            let t = Instant::now();
            execute(&mut tools, call(args, n + i, q)).await;
            via_tool.push(t.elapsed());
        } else {
            let t = Instant::now();
            execute(&mut tools, call(args, n + i, q)).await;
            via_tool.push(t.elapsed());
            direct.push(run_direct(&mut rag).await);
        }
    }

    println!();
    summary("list_dir in process (the tool's own work)", in_process);
    summary("ListTools unary over loopback gRPC", list_tools);
    let (grpc50, _) = summary("ExecuteTool(list_dir) over loopback gRPC", over_grpc);
    let added: Vec<f64> = direct
        .iter()
        .zip(&via_tool)
        .map(|(d, t)| (t.as_secs_f64() - d.as_secs_f64()) * 1000.0)
        .collect();
    let (d50, d99) = summary("rag-search GetContext, direct", direct);
    let (t50, t99) = summary("ExecuteTool(request_code_context)", via_tool);
    let mut sorted = added;
    sorted.sort_by(f64::total_cmp);
    let paired = sorted[sorted.len() / 2];
    println!();
    println!("ExecuteTool(list_dir) p50: {grpc50:.3} ms");
    println!(
        "request_code_context minus GetContext: p50 {:.3} ms, p99 {:.3} ms; median of paired differences {paired:.3} ms",
        t50 - d50,
        t99 - d99
    );
    stop.trigger();
    Ok(())
}
