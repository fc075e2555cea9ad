//! Searches while rag-search indexes on its own: the real `ploke-rag-search` binary started on
//! a workspace with an empty data dir (or a kept one), nobody calls IndexWorkspace; from the
//! moment health is SERVING, `--concurrency` (4) clients send BM25 Search calls without pause
//! while IndexStatus is read every 500 ms, until the start-up run is READY. Reports how soon
//! the first hits came, Search latency during the run, and how the ETA compared with the real
//! end. Not a test: results go to docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-rag-search --bench warmup -- --workspace DIR --queries FILE
//!       (paths absolute) [--embed-model DIR] [--concurrency 4] [--data-dir DIR]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::{IndexPhase, IndexState, IndexStatusRequest, SearchRequest, Strategy};
use tokio::sync::watch;
use tonic::transport::Channel;

mod common;

#[derive(Debug, Parser)]
struct Args {
    /// Workspace the service is started with.
    #[arg(long)]
    workspace: PathBuf,
    /// Queries, one JSON object with a `query` field per line (../shared/eval/queries.jsonl).
    #[arg(long)]
    queries: PathBuf,
    /// Embedding model directory (the run then embeds too).
    #[arg(long)]
    embed_model: Option<PathBuf>,
    /// Search calls in flight.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Keep the index here (a temporary dir, so a full first index, when absent).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// cargo bench passes --bench.
    #[arg(long, hide = true)]
    bench: bool,
}

fn read_queries(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("query")?.as_str().map(str::to_owned))
        .collect()
}

/// One Search call: when it started (since SERVING), how long it took, hits, the state.
struct Call {
    at: Duration,
    took: Duration,
    hits: usize,
    state: i32,
}

fn percentile(sorted: &[Duration], q: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(sorted.len() * q / 100).min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let queries = Arc::new(read_queries(&args.queries));
    anyhow::ensure!(!queries.is_empty(), "no queries");
    let temp = tempfile::tempdir()?;
    let data = args.data_dir.clone().unwrap_or_else(|| temp.path().into());
    let workspace = std::fs::canonicalize(&args.workspace)?;
    let launched = Instant::now();
    let server = common::start_server(&workspace, &data, args.embed_model.as_deref(), &[])?;
    let serving = Instant::now();
    println!(
        "SERVING {:.2} s after launch (nothing waited for indexing)",
        (serving - launched).as_secs_f64()
    );
    let channel = Channel::from_shared(server.url())?.connect().await?;
    let (done_tx, done) = watch::channel(false);
    let workers: Vec<_> = (0..args.concurrency)
        .map(|w| {
            let mut client = RagSearchClient::new(channel.clone());
            let queries = queries.clone();
            let done = done.clone();
            tokio::spawn(async move {
                let mut calls = Vec::new();
                let mut errors = 0usize;
                let mut i = w;
                while !*done.borrow() {
                    let request = SearchRequest {
                        query: queries[i % queries.len()].clone(),
                        strategy: Strategy::Bm25.into(),
                        top_k: 10,
                        ..Default::default()
                    };
                    i += 7;
                    let t = Instant::now();
                    match client.search(request).await {
                        Ok(r) => {
                            let r = r.into_inner();
                            calls.push(Call {
                                at: t - serving,
                                took: t.elapsed(),
                                hits: r.hits.len(),
                                state: r.index_state,
                            });
                        }
                        Err(_) => errors += 1,
                    }
                }
                (calls, errors)
            })
        })
        .collect();
    // (seconds since SERVING, phase, eta) at every status reading, until READY.
    let mut status_client = RagSearchClient::new(channel.clone());
    let mut readings: Vec<(f64, i32, Option<f64>, u64, u64)> = Vec::new();
    let ready_at = loop {
        let s = status_client
            .index_status(IndexStatusRequest::default())
            .await?
            .into_inner();
        let at = serving.elapsed();
        if s.state == IndexState::Ready as i32 {
            break at;
        }
        if let Some(p) = &s.progress {
            let eta = p
                .eta
                .as_ref()
                .map(|d| d.seconds as f64 + f64::from(d.nanos) / 1e9);
            readings.push((at.as_secs_f64(), p.phase, eta, p.embed_done, p.embed_total));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let _ = done_tx.send(true);
    let mut calls = Vec::new();
    let mut errors = 0;
    for w in workers {
        let (c, e) = w.await?;
        calls.extend(c);
        errors += e;
    }
    let status = status_client
        .index_status(IndexStatusRequest::default())
        .await?
        .into_inner();
    println!(
        "start-up run READY {:.1} s after SERVING: {} files, {} items, {} embedded",
        ready_at.as_secs_f64(),
        status.files,
        status.items,
        status.embedded_items
    );
    let first_hit = calls
        .iter()
        .filter(|c| c.hits > 0)
        .map(|c| c.at)
        .min()
        .unwrap_or_default();
    let mut during: Vec<Duration> = calls
        .iter()
        .filter(|c| c.state == IndexState::Indexing as i32)
        .map(|c| c.took)
        .collect();
    during.sort();
    println!(
        "Search during the run: {} calls, {errors} errors, first hits {:.2} s after SERVING; \
         p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        during.len(),
        first_hit.as_secs_f64(),
        percentile(&during, 50),
        percentile(&during, 99),
        during.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
    );
    // How the embedding ETA compared with the real end, at a quarter, half and three quarters.
    let embedding: Vec<_> = readings
        .iter()
        .filter(|r| r.1 == IndexPhase::Embedding as i32 && r.2.is_some() && r.4 > 0)
        .collect();
    for quarter in [25u64, 50, 75] {
        if let Some(r) = embedding.iter().find(|r| r.3 * 100 >= r.4 * quarter) {
            let predicted = r.0 + r.2.unwrap_or_default();
            println!(
                "ETA at {quarter}% embedded ({:.0} s): end predicted at {:.0} s, was {:.0} s ({:+.0}%)",
                r.0,
                predicted,
                ready_at.as_secs_f64(),
                (predicted / ready_at.as_secs_f64() - 1.0) * 100.0
            );
        }
    }
    drop(channel);
    let (status, _) = server.terminate()?;
    println!("SIGTERM: exited {status}");
    Ok(())
}
