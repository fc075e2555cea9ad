//! Search under concurrent load over loopback gRPC, as ghz would run
//! `deploy/loadtest/rag-search-*.json` against the real `ploke-rag-search` binary in its own
//! process: one HTTP/2 connection, `c` requests in flight, a fixed number of calls; throughput,
//! latency percentiles and the CPU time per call of the server process (read from /proc) and of
//! this client, per strategy and concurrency, with the gRPC health Check as the floor. Not a
//! test: results go to docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-rag-search --bench load -- --workspace DIR --queries FILE
//!       (paths absolute: cargo runs benches in the package's directory)
//!       [--embed-model DIR] [--data-dir DIR] [--calls N] [--concurrency 1,2,4,8]
//!       [--strategies bm25,dense,hybrid] [--server BINARY]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::{IndexWorkspaceRequest, SearchRequest, Strategy};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

mod common;

#[derive(Debug, Parser)]
struct Args {
    /// Workspace to index and query (a real repository).
    #[arg(long)]
    workspace: PathBuf,
    /// Queries, one JSON object with a `query` field per line (../shared/eval/queries.jsonl).
    #[arg(long)]
    queries: PathBuf,
    /// Embedding model directory (DENSE and HYBRID need one).
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
    /// Server binary to run instead of this build's (another commit's, to compare in one
    /// run; a script running it under valgrind: `scripts/bench-instructions`).
    #[arg(long)]
    server: Option<PathBuf>,
    /// Strategies measured after the health Check (dense and hybrid need a model) [default:
    /// bm25, and hybrid with a model].
    #[arg(long, value_enum, value_delimiter = ',')]
    strategies: Option<Vec<Measured>>,
    /// cargo bench passes --bench.
    #[arg(long, hide = true)]
    bench: bool,
}

/// One row: every call's latency, the wall time, the CPU time of the server process and of
/// this client over the run, and how many HYBRID calls ran without their dense side (the query
/// named an item).
struct Run {
    latencies: Vec<Duration>,
    wall: Duration,
    server_cpu: Duration,
    client_cpu: Duration,
    without_dense: usize,
}

/// A strategy the bench can measure; anything else on the command line is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Measured {
    Bm25,
    Dense,
    Hybrid,
}

/// What a row calls: the health Check (the floor) or Search with a strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Health,
    Search(Strategy),
}

/// CPU time a process has used (user + system, its ended threads included; USER_HZ is 100 on
/// Linux): `self` or a pid.
fn cpu(process: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{process}/stat")).unwrap_or_default();
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
    server: &str,
    channel: &Channel,
    queries: &Arc<Vec<String>>,
    call: Call,
    calls: usize,
    concurrency: usize,
) -> Run {
    let next = Arc::new(AtomicUsize::new(0));
    let without_dense = Arc::new(AtomicUsize::new(0));
    let (server_before, client_before) = (cpu(server), cpu("self"));
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
        server_cpu: cpu(server).saturating_sub(server_before),
        client_cpu: cpu("self").saturating_sub(client_before),
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
    let per_call = |cpu: Duration| cpu.as_secs_f64() * 1000.0 / n.max(1) as f64;
    println!(
        "| {name} | {concurrency} | {n} | {:.0} | {:.3} | {:.3} | {:.2} | {:.2} | {:.2} |",
        n as f64 / r.wall.as_secs_f64(),
        per_call(r.server_cpu),
        per_call(r.client_cpu),
        ms(50),
        ms(90),
        ms(99)
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let strategies = match (&args.strategies, &args.embed_model) {
        (Some(asked), _) => asked.clone(),
        (None, Some(_)) => vec![Measured::Bm25, Measured::Hybrid],
        (None, None) => vec![Measured::Bm25],
    };
    anyhow::ensure!(
        args.embed_model.is_some() || strategies.iter().all(|s| *s == Measured::Bm25),
        "dense and hybrid need --embed-model (or PLOKE_EMBED_MODEL)"
    );
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
    // The server as an operator runs it, without the watcher (nothing changes under it here).
    let config = temp.path().join("ploke.toml");
    std::fs::write(&config, "[rag_search]\nwatch = false\n")?;
    let config = config.display().to_string();
    let (rag, model, flags) = (
        data.join("rag"),
        args.embed_model.as_deref(),
        ["--config", config.as_str()],
    );
    let server = match &args.server {
        Some(binary) => common::start_server_binary(binary, &root, &rag, model, &flags)?,
        None => common::start_server(&root, &rag, model, &flags)?,
    };
    let pid = server.pid().to_string();
    let channel = Channel::from_shared(server.url())?.connect().await?;
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

    let mut calls = vec![("health Check (floor)", Call::Health)];
    for measured in &strategies {
        calls.push(match measured {
            Measured::Bm25 => ("BM25", Call::Search(Strategy::Bm25)),
            Measured::Dense => ("DENSE", Call::Search(Strategy::Dense)),
            Measured::Hybrid => ("HYBRID", Call::Search(Strategy::Hybrid)),
        });
    }
    println!(
        "| call | concurrency | calls | req/s | server CPU ms/call | client CPU ms/call | p50 ms | p90 ms | p99 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, call) in calls {
        // Warm up the connection, the index and the model.
        run(&pid, &channel, &queries, call, 50, 1).await;
        for &c in &args.concurrency {
            let r = run(&pid, &channel, &queries, call, args.calls, c.max(1)).await;
            row(name, c.max(1), r);
        }
    }
    server.terminate()?;
    Ok(())
}
