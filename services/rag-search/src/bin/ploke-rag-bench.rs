//! `ploke-rag-bench`: indexing throughput, embedding throughput and search / context latency
//! of rag-search's domain on real corpora. Not a test: results go to docs/PERFORMANCE.md.
//!
//!   ploke-rag-bench --large DIR [--small DIR] --queries QUERIES.jsonl [--embed-model DIR]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use ploke_rag_search::bm25::{Boosts, Filters};
use ploke_rag_search::context::{self, Budget, Candidate};
use ploke_rag_search::embed::{EmbedError, Embedder};
use ploke_rag_search::fusion::Rrf;
use ploke_rag_search::index::{
    DENSE_FUSION_DEPTH, DenseSpec, FUSION_DEPTH, Hybrid, Query, WorkspaceIndex,
};
use ploke_rag_search::rank::LengthPrior;

/// mimalloc reuses freed memory: candle allocates a fresh tensor per operation, and the system
/// allocator returns large ones to the kernel each time (page faults and zeroing cost ~10 % of
/// embedding throughput; docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
struct Args {
    /// Large corpus (e.g. every crate under ~/.cargo/registry/src/*/).
    #[arg(long)]
    large: PathBuf,
    /// Small corpus of about 10k items, indexed with real embeddings (skipped when absent).
    #[arg(long)]
    small: Option<PathBuf>,
    /// JSONL with a `query` field per line (../shared/eval/queries.jsonl).
    #[arg(long)]
    queries: PathBuf,
    /// Embedding model directory.
    #[arg(long)]
    embed_model: Option<PathBuf>,
    /// Where indexes are built (emptied first).
    #[arg(long, default_value = "target/bench")]
    work: PathBuf,
    /// Cap on vectors in the large-index dense latency run.
    #[arg(long, default_value_t = 100_000)]
    max_vectors: usize,
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in ignore::WalkBuilder::new(dir)
        .hidden(false)
        .git_ignore(false)
        .build()
        .flatten()
    {
        if let Ok(m) = entry.metadata()
            && m.is_file()
        {
            total += m.len();
        }
    }
    total
}

fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort_unstable();
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0;
    (at(0.5), at(0.99))
}

fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let out = f();
    (out, t.elapsed())
}

/// How long `f` took, or its error; its result is dropped after the clock stops.
fn timed<T, E: Into<anyhow::Error>>(f: impl FnOnce() -> Result<T, E>) -> anyhow::Result<Duration> {
    let (out, t) = time(f);
    out.map_err(Into::into)?;
    Ok(t)
}

fn source_bytes(index_root: &Path) -> u64 {
    let (files, _) = ploke_rag_search::scan::scan(index_root);
    files
        .iter()
        .filter_map(|f| std::fs::metadata(&f.abs).ok())
        .map(|m| m.len())
        .sum()
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
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
    let _ = std::fs::remove_dir_all(&args.work);
    println!("## rag-search benchmark\n");
    println!(
        "machine: {} cores, {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        std::env::consts::ARCH
    );
    println!(
        "queries: {} (../shared/eval commit messages)\n",
        queries.len()
    );

    // ---------------------------------------------------------------- large: parse + BM25
    let model = match &args.embed_model {
        Some(dir) => Some(Embedder::load(dir)?),
        None => None,
    };
    let root = std::fs::canonicalize(&args.large)?;
    let bytes = source_bytes(&root);
    // The large index has a dense side filled with random unit vectors after parsing (embedding
    // 100k+ items would take an hour here); query vectors are real embeddings, and HNSW latency
    // does not depend on the values.
    let random = model.as_ref().map(|m| DenseSpec {
        model: "random",
        dims: m.dims(),
    });
    let mut large = WorkspaceIndex::open(
        &root,
        &args.work.join("large"),
        (Boosts::default(), LengthPrior::default()),
        random,
    )?;
    let (summary, took) = time(|| large.index_all(true, None, &mut |_| {}));
    let summary = summary?;
    let secs = took.as_secs_f64();
    println!(
        "### Indexing (parse + BM25, no embeddings), {}\n",
        root.display()
    );
    println!(
        "| files | items | source MB | seconds | files/s | items/s | MB/s | index MB on disk | peak RSS MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {:.2} | {:.1} | {:.0} |\n",
        summary.files_indexed,
        summary.items_total,
        bytes as f64 / 1e6,
        secs,
        summary.files_indexed as f64 / secs,
        summary.items_total as f64 / secs,
        bytes as f64 / 1e6 / secs,
        dir_bytes(&args.work.join("large")) as f64 / 1e6,
        peak_rss_mb()
    );
    let (_, again) = time(|| large.index_all(false, None, &mut |_| {}));
    println!(
        "re-index with nothing changed: {:.2} s (hashing only)\n",
        again.as_secs_f64()
    );
    let Some(model) = model else {
        // Searches run on a settled index: background segment merges finished.
        large.close();
        latency_table(&large, &root, &queries, None)?;
        return Ok(());
    };
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    let ids = large.item_ids();
    let n = ids.len().min(args.max_vectors);
    let (filled, build) = time(|| -> anyhow::Result<()> {
        for id in &ids[..n] {
            let v: Vec<f32> = (0..model.dims()).map(|_| next()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            large.set_vector(*id, v.into_iter().map(|x| x / norm).collect())?;
        }
        Ok(())
    });
    filled?;
    large.close();
    println!(
        "usearch build of {n} random vectors: {:.1} s\n",
        build.as_secs_f64()
    );
    latency_table(&large, &root, &queries, Some(&model))?;
    drop(large);

    // ---------------------------------------------------------------- small: real embeddings
    let Some(small_dir) = &args.small else {
        return Ok(());
    };
    let root = std::fs::canonicalize(small_dir)?;
    let spec = DenseSpec {
        model: model.name(),
        dims: model.dims(),
    };
    let mut small = WorkspaceIndex::open(
        &root,
        &args.work.join("small"),
        (Boosts::default(), LengthPrior::default()),
        Some(spec),
    )?;
    let (summary, took) = time(|| small.index_all(true, Some(&model), &mut |_| {}));
    let summary = summary?;
    println!(
        "### {} items with real embeddings ({})\n",
        summary.items_total,
        root.display()
    );
    println!(
        "index with embeddings: {:.1} s; {} items embedded: {:.1} items/s overall (2 threads, texts truncated at 128 tokens)\n",
        took.as_secs_f64(),
        summary.items_embedded,
        summary.items_embedded as f64 / took.as_secs_f64()
    );
    // Embedding throughput at exactly 128 tokens, 1 vs 2 threads.
    let long: Vec<String> = (0..256)
        .map(|i| {
            format!(
                "fn item_{i}() {{ {} }}",
                "let value = compute(input, factor); ".repeat(20)
            )
        })
        .collect();
    let tokens = model.token_count(&long[0]).unwrap_or(0);
    for threads in [1, 2] {
        let (_, t) = time(|| model.embed_all(&long, threads, &|_| {}));
        println!(
            "embedding 256 texts of {tokens} tokens on {threads} thread(s): {:.1} items/s",
            256.0 / t.as_secs_f64()
        );
    }
    println!();
    small.close();
    latency_table(&small, &root, &queries, Some(&model))?;
    println!("\npeak RSS: {:.0} MB", peak_rss_mb());
    Ok(())
}

/// Search and context latency through the code path of the Search and GetContext RPCs
/// ([`WorkspaceIndex::search`], [`WorkspaceIndex::search_hybrid`], [`context::assemble`]), one
/// loop over every query per row, as a load test of one RPC sends them; DENSE and HYBRID
/// include embedding the query. One more HYBRID row runs each query right after other work (a
/// BM25 search and a context assembly), which evicts the model's weights from the CPU caches.
fn latency_table(
    index: &WorkspaceIndex,
    root: &Path,
    queries: &[String],
    model: Option<&Embedder>,
) -> anyhow::Result<()> {
    let f = Filters::default();
    let each = |run: &mut dyn FnMut(&str) -> anyhow::Result<Duration>| {
        queries
            .iter()
            .map(|q| run(q))
            .collect::<anyhow::Result<Vec<Duration>>>()
    };
    let assemble = |found: Vec<ploke_rag_search::index::Found<'_>>| {
        let candidates: Vec<Candidate> = found
            .into_iter()
            .map(|found| Candidate::of(found.hit.record, found.hit.text, found.hit.score))
            .collect();
        context::assemble(
            root,
            candidates,
            Budget::with_defaults(0, 0, 0),
            &mut |file, _| std::fs::read_to_string(root.join(file)).ok(),
        )
    };
    let mut rows: Vec<(&str, Vec<Duration>)> = vec![(
        "BM25",
        each(&mut |q| {
            timed(|| {
                index.search(
                    Query::Bm25 {
                        text: q,
                        rrf: Rrf::default(),
                    },
                    &f,
                    10,
                )
            })
        })?,
    )];
    if let Some(model) = model {
        let embed = |q: &str| -> Result<Vec<f32>, EmbedError> { model.embed_query(q) };
        let hybrid = |q: &str, top_k: usize| -> anyhow::Result<Vec<_>> {
            match index.search_hybrid(q, || embed(q), &f, top_k, Rrf::default())? {
                Hybrid::Fused(found) => Ok(found),
                Hybrid::Bm25Only(_, e) => Err(e.into()),
            }
        };
        rows.push(("query embedding alone", each(&mut |q| timed(|| embed(q)))?));
        rows.push((
            "DENSE (incl. query embedding)",
            each(&mut |q| {
                timed(|| -> anyhow::Result<()> {
                    index.search(Query::Dense(&embed(q)?), &f, 10)?;
                    Ok(())
                })
            })?,
        ));
        rows.push((
            "HYBRID (query embedded while BM25 ranks, then dense + RRF)",
            each(&mut |q| timed(|| hybrid(q, 10)))?,
        ));
        rows.push((
            "GetContext: HYBRID 30 → 4000-token budget (incl. embedding)",
            each(&mut |q| {
                timed(|| -> anyhow::Result<()> {
                    assemble(hybrid(q, 30)?);
                    Ok(())
                })
            })?,
        ));
        rows.push((
            "HYBRID right after other work (model weights out of the caches)",
            each(&mut |q| {
                assemble(index.search(
                    Query::Bm25 {
                        text: q,
                        rrf: Rrf::default(),
                    },
                    &f,
                    30,
                )?);
                timed(|| hybrid(q, 10))
            })?,
        ));
        let vectors = queries
            .iter()
            .map(|q| embed(q))
            .collect::<Result<Vec<_>, _>>()?;
        rows.push((
            "hybrid's BM25 list alone (top 100, no texts)",
            each(&mut |q| timed(|| index.rank_bm25(q, &f, FUSION_DEPTH)))?,
        ));
        let mut next = vectors.iter();
        rows.push((
            "hybrid's dense list alone (top 20 of 100 nearest, no texts)",
            each(&mut |_| {
                let v = next.next().context("one vector per query")?;
                timed(|| index.rank_dense(v, &f, DENSE_FUSION_DEPTH, false))
            })?,
        ));
    }
    println!(
        "### Latency at {} items ({} with vectors; in-process, top 10)\n",
        index.item_count(),
        index.embedded_count()
    );
    println!("| measure | p50 ms | p99 ms |\n|---|---|---|");
    for (name, l) in rows {
        let (a, b) = percentiles(l);
        println!("| {name} | {a:.2} | {b:.2} |");
    }
    println!();
    Ok(())
}
