//! Search under concurrent load over loopback gRPC, as ghz would run
//! `deploy/loadtest/rag-search-*.json`: one HTTP/2 connection, `c` requests in flight, a fixed
//! number of calls; throughput, latency percentiles and the process's CPU time per call (server
//! and client: they share this process) per strategy and concurrency, with the gRPC health
//! Check as the floor. Not a test: results go to docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-rag-search --bench load -- --workspace DIR --queries FILE
//!       (paths absolute: cargo runs benches in the package's directory)
//!       [--embed-model DIR] [--data-dir DIR] [--calls N] [--concurrency 1,2,4,8]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::{IndexWorkspaceRequest, SearchRequest, Strategy};
use ploke_runtime::config::PlokeConfig;
use ploke_runtime::shutdown::Shutdown;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

#[derive(Debug, Parser)]
struct Args {
    /// Workspace to index and query (a real repository).
    #[arg(long)]
    workspace: PathBuf,
    /// Queries, one JSON object with a `query` field per line (../shared/eval/queries.jsonl).
    #[arg(long)]
    queries: PathBuf,
    /// Embedding model directory (HYBRID is measured only with one).
    #[arg(long, env = "PLOKE_EMBED_MODEL")]
    embed_model: Option<PathBuf>,
    /// Where rag-search keeps its index (kept between runs; a fresh temporary dir when absent).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Calls per row.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Requests in flight, one row each.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    concurrency: Vec<usize>,
    /// cargo bench passes --bench.
    #[arg(long, hide = true)]
    bench: bool,
}

/// One row: every call's latency, the wall time and the CPU time of the whole run, and how
/// many HYBRID calls ran without their dense side (the query named an item).
struct Run {
    latencies: Vec<Duration>,
    wall: Duration,
    cpu: Duration,
    without_dense: usize,
}

/// What a row calls: the health Check (the floor) or Search with a strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Health,
    Search(Strategy),
}

/// CPU time this process has used (user + system; USER_HZ is 100 on Linux).
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<u64> = after_name
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// `calls` requests, `concurrency` in flight on one connection, queries in turn.
async fn run(
    channel: &Channel,
    queries: &Arc<Vec<String>>,
    call: Call,
    calls: usize,
    concurrency: usize,
) -> Run {
    let next = Arc::new(AtomicUsize::new(0));
    let without_dense = Arc::new(AtomicUsize::new(0));
    let cpu_before = cpu();
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let mut client = RagSearchClient::new(channel.clone());
            let mut health = HealthClient::new(channel.clone());
            let (next, queries) = (next.clone(), queries.clone());
            let without_dense = without_dense.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= calls {
                        return latencies;
                    }
                    let t = Instant::now();
                    let Call::Search(strategy) = call else {
                        health.check(HealthCheckRequest::default()).await.unwrap();
                        latencies.push(t.elapsed());
                        continue;
                    };
                    let request = SearchRequest {
                        workspace_root: String::new(),
                        query: queries[i % queries.len()].clone(),
                        strategy: strategy.into(),
                        top_k: 10,
                        filters: None,
                        session_id: String::new(),
                    };
                    let response = client.search(request).await.unwrap().into_inner();
                    latencies.push(t.elapsed());
                    assert!(!response.hits.is_empty());
                    if strategy == Strategy::Hybrid && !response.dense_used {
                        without_dense.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(calls);
    for w in workers {
        latencies.extend(w.await.unwrap());
    }
    Run {
        latencies,
        wall: started.elapsed(),
        cpu: cpu() - cpu_before,
        without_dense: without_dense.load(Ordering::Relaxed),
    }
}

fn row(name: &str, concurrency: usize, mut r: Run) {
    r.latencies.sort();
    let n = r.latencies.len();
    let ms = |q: usize| r.latencies[(n * q / 100).min(n - 1)].as_secs_f64() * 1000.0;
    let name = if r.without_dense > 0 {
        format!(
            "{name} ({} % without dense)",
            r.without_dense * 100 / n.max(1)
        )
    } else {
        name.to_owned()
    };
    println!(
        "| {name} | {concurrency} | {n} | {:.0} | {:.3} | {:.2} | {:.2} | {:.2} |",
        n as f64 / r.wall.as_secs_f64(),
        r.cpu.as_secs_f64() * 1000.0 / n.max(1) as f64,
        ms(50),
        ms(90),
        ms(99)
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = std::fs::canonicalize(&args.workspace)?;
    let queries: Vec<String> = std::fs::read_to_string(&args.queries)?
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("query")?.as_str().map(str::to_owned))
        .collect();
    anyhow::ensure!(
        !queries.is_empty(),
        "no queries in {}",
        args.queries.display()
    );
    let queries = Arc::new(queries);
    let temp = tempfile::tempdir()?;
    let data = args
        .data_dir
        .clone()
        .unwrap_or_else(|| temp.path().to_owned());
    let mut config = PlokeConfig {
        workspaces: vec![root.clone()],
        data_dir: data.join("rag"),
        ..PlokeConfig::default()
    };
    config.rag_search.embed_model = args.embed_model.clone();
    config.rag_search.watch = false;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let stop = Shutdown::new();
    tokio::spawn(ploke_rag_search::serve(
        ploke_rag_search::Config::from(&config),
        listener,
        stop.wait(),
    ));
    let channel = Channel::from_shared(url)?.connect().await?;
    let started = Instant::now();
    let mut progress = RagSearchClient::new(channel.clone())
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
    let summary = last.and_then(|p| p.summary).unwrap_or_default();
    println!(
        "indexed {} in {:.1} s: {} items ({} files unchanged since the last run), dense {}\n",
        root.display(),
        started.elapsed().as_secs_f64(),
        summary.items_total,
        summary.files_unchanged,
        if summary.dense_available { "on" } else { "off" },
    );

    let mut calls = vec![
        ("health Check (floor)", Call::Health),
        ("BM25", Call::Search(Strategy::Bm25)),
    ];
    if args.embed_model.is_some() {
        calls.push(("HYBRID", Call::Search(Strategy::Hybrid)));
    }
    println!("| call | concurrency | calls | req/s | CPU ms/call | p50 ms | p90 ms | p99 ms |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, call) in calls {
        // Warm up the connection, the index and the model.
        run(&channel, &queries, call, 50, 1).await;
        for &c in &args.concurrency {
            let r = run(&channel, &queries, call, args.calls, c.max(1)).await;
            row(name, c.max(1), r);
        }
    }
    stop.trigger();
    Ok(())
}
