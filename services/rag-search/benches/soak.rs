//! Memory and errors under sustained overload: the real `ploke-rag-search` binary in its own
//! process, `--concurrency` (200) Search calls in flight for `--seconds` (60) over loopback,
//! and its resident memory read from /proc before (idle, index loaded), at peak (VmHWM) and
//! after (once tokio's idle blocking threads have expired). Then SIGTERM, timed. Not a test:
//! results go to docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-rag-search --bench soak -- --workspace DIR --queries FILE
//!       (paths absolute: cargo runs benches in the package's directory)
//!       [--embed-model DIR] [--strategy bm25|hybrid] [--concurrency 200] [--seconds 60]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::{IndexWorkspaceRequest, SearchRequest, Strategy};
use tonic::transport::Channel;

mod common;

#[derive(Debug, Parser)]
struct Args {
    /// Workspace to index and query (10k items or more).
    #[arg(long)]
    workspace: PathBuf,
    /// Queries, one JSON object with a `query` field per line (../shared/eval/queries.jsonl).
    #[arg(long)]
    queries: PathBuf,
    /// Embedding model directory, for `--strategy hybrid`.
    #[arg(long)]
    embed_model: Option<PathBuf>,
    /// bm25 or hybrid.
    #[arg(long, default_value = "bm25")]
    strategy: String,
    /// Calls in flight.
    #[arg(long, default_value_t = 200)]
    concurrency: usize,
    /// How long the load lasts.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Where the index is kept between runs (a temporary dir when absent).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// cargo bench passes --bench.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Resident and peak resident memory of `pid`, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

fn read_queries(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("query")?.as_str().map(str::to_owned))
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let strategy = match args.strategy.as_str() {
        "bm25" => Strategy::Bm25,
        "hybrid" => Strategy::Hybrid,
        other => anyhow::bail!("--strategy bm25|hybrid, not {other}"),
    };
    let queries = Arc::new(read_queries(&args.queries));
    anyhow::ensure!(!queries.is_empty(), "no queries");
    let temp = tempfile::tempdir()?;
    let data = args.data_dir.clone().unwrap_or_else(|| temp.path().into());
    let workspace = std::fs::canonicalize(&args.workspace)?;
    let server = common::start_server(&workspace, &data, args.embed_model.as_deref(), &[])?;
    let pid = server.pid();
    let channel = Channel::from_shared(server.url())?.connect().await?;
    let mut progress = RagSearchClient::new(channel.clone())
        .index_workspace(IndexWorkspaceRequest::default())
        .await?
        .into_inner();
    let mut items = 0;
    while let Some(p) = progress.message().await? {
        items = p.summary.map_or(items, |s| s.items_total);
    }
    // A short warm-up at low concurrency, then the idle reading.
    for q in queries.iter().take(50) {
        RagSearchClient::new(channel.clone())
            .search(SearchRequest {
                query: q.clone(),
                strategy: strategy.into(),
                top_k: 10,
                ..Default::default()
            })
            .await?;
    }
    let (idle, _) = memory(pid);
    println!(
        "{} items, {} in flight for {} s, {:?}; idle RSS {idle:.0} MiB, {} threads",
        items,
        args.concurrency,
        args.seconds,
        strategy,
        threads(pid)
    );

    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let sampler = tokio::spawn(async move {
        let mut peak_threads = 0;
        while Instant::now() < deadline {
            peak_threads = peak_threads.max(threads(pid));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        peak_threads
    });
    let started = Instant::now();
    let workers: Vec<_> = (0..args.concurrency)
        .map(|w| {
            let mut client = RagSearchClient::new(channel.clone());
            let queries = queries.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut errors: BTreeMap<String, usize> = BTreeMap::new();
                let mut i = w;
                while Instant::now() < deadline {
                    let request = SearchRequest {
                        query: queries[i % queries.len()].clone(),
                        strategy: strategy.into(),
                        top_k: 10,
                        ..Default::default()
                    };
                    i += 7;
                    let t = Instant::now();
                    match client.search(request).await {
                        Ok(_) => latencies.push(t.elapsed()),
                        Err(s) => *errors.entry(format!("{:?}", s.code())).or_default() += 1,
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for w in workers {
        let (l, e) = w.await?;
        latencies.extend(l);
        for (code, n) in e {
            *errors.entry(code).or_default() += n;
        }
    }
    let wall = started.elapsed();
    let peak_threads = sampler.await?;
    let (_, peak) = memory(pid);
    latencies.sort();
    let n = latencies.len().max(1);
    let ms = |q: usize| latencies[(n * q / 100).min(n - 1)].as_secs_f64() * 1000.0;
    println!(
        "calls ok {}, errors {errors:?}, {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms",
        latencies.len(),
        latencies.len() as f64 / wall.as_secs_f64(),
        ms(50),
        ms(99)
    );
    // tokio lets an idle blocking thread go after 10 s.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let (after, _) = memory(pid);
    println!(
        "RSS idle {idle:.0} MiB, peak {peak:.0} MiB (limit 2 x idle + 200 = {:.0}), after {after:.0} MiB; threads at peak {peak_threads}, after {}",
        2.0 * idle + 200.0,
        threads(pid)
    );
    drop(channel);
    let t = Instant::now();
    let (status, _) = server.terminate()?;
    println!(
        "SIGTERM: exited {status} in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
