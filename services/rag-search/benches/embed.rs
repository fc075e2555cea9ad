//! The local model's cost: one query's embedding (CPU and wall time, as a HYBRID Search pays
//! it, on a query lane) and batch throughput at 128 tokens (as indexing pays it, one and two
//! workers), with the process's RSS once the model is loaded. Not a test:
//! results go to docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-rag-search --bench embed -- --embed-model DIR --queries FILE
//!       [--rounds 3] [--query-tokens 16]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use ploke_rag_search::embed::Embedder;

/// As the services run: candle allocates a tensor per operation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
struct Args {
    /// Embedding model directory.
    #[arg(long)]
    embed_model: PathBuf,
    /// Queries, one JSON object with a `query` field per line (../shared/eval/queries.jsonl).
    #[arg(long)]
    queries: PathBuf,
    /// Passes over the queries.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Tokens of a query embedded (the service's `query_max_tokens`).
    #[arg(long, default_value_t = 16)]
    query_tokens: usize,
    /// cargo bench passes --bench.
    #[arg(long, hide = true)]
    bench: bool,
}

/// This process's CPU time (user + system), ms.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks * 1000.0 / 100.0
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap();
    kb / 1024.0
}

fn main() {
    let args = Args::parse();
    let model = Embedder::load(&args.embed_model)
        .unwrap()
        .with_query_tokens(args.query_tokens);
    let queries: Vec<String> = std::fs::read_to_string(&args.queries)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["query"].as_str().unwrap().to_owned()
        })
        .collect();
    println!("model loaded: RSS {:.0} MB\n", rss_mb());
    println!("| measure | value |\n|---|---|");
    let texts: Vec<String> = (0..256)
        .map(|i| {
            let body = "let value = compute(input, factor); ".repeat(20);
            format!("fn item_{i}() {{ {body} }}")
        })
        .collect();
    let tokens = model.token_count(&texts[0]).unwrap_or(0);
    for workers in [1, 2] {
        let t = Instant::now();
        model.embed_all(&texts, workers, &|_| {}).unwrap();
        let rate = texts.len() as f64 / t.elapsed().as_secs_f64();
        println!(
            "| batch: 256 texts of {tokens} tokens, {workers} worker(s) | {rate:.1} items/s |"
        );
    }
    for q in queries.iter().take(20) {
        model.embed_query(q).unwrap();
    }
    let mut wall = Vec::new();
    let cpu = cpu_ms();
    for _ in 0..args.rounds {
        for q in &queries {
            let t = Instant::now();
            model.embed_query(q).unwrap();
            wall.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    let cpu = (cpu_ms() - cpu) / wall.len() as f64;
    wall.sort_by(f64::total_cmp);
    let at = |p: usize| wall[(wall.len() * p / 100).min(wall.len() - 1)];
    let n = wall.len();
    let tokens = args.query_tokens;
    println!("| query ({n} embedded, at most {tokens} tokens): CPU per query | {cpu:.2} ms |");
    println!(
        "| query: wall p50 / p90 / p99 | {:.2} / {:.2} / {:.2} ms |",
        at(50),
        at(90),
        at(99)
    );
    println!("\nRSS at the end: {:.0} MB", rss_mb());
}
