//! `ploke-rag-eval`: the retrieval evaluation of `../shared/eval` through rag-search's real gRPC
//! API. Starts rag-search in-process on 127.0.0.1:0 over the crate sources, indexes each crate
//! with IndexWorkspace, asks every query with Search (top 10, restricted to the corpus files of
//! its crate) and writes one run file per strategy for the dataset's `score.py`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, bail};
use clap::Parser;
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::{IndexWorkspaceRequest, SearchFilters, SearchRequest, Strategy};
use ploke_runtime::config::PlokeConfig;
use ploke_runtime::shutdown::Shutdown;
use serde_json::{Value, json};
use tokio_stream::StreamExt as _;

/// mimalloc reuses freed memory: candle allocates a fresh tensor per operation, and the system
/// allocator returns large ones to the kernel each time (page faults and zeroing cost ~10 % of
/// embedding throughput; docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs the retrieval evaluation and writes run files.
#[derive(Debug, Parser)]
struct Args {
    /// The dataset folder (queries.jsonl, items/).
    #[arg(long, default_value = "../shared/eval")]
    eval: PathBuf,
    /// `paths.json` written by the dataset's get_sources.py (crate → source root).
    #[arg(long)]
    sources: PathBuf,
    /// Where the index is kept between runs.
    #[arg(long, default_value = "target/eval/index")]
    data_dir: PathBuf,
    /// Where run files go (`<out>/<strategy>.jsonl`).
    #[arg(long, default_value = "target/eval/runs")]
    out: PathBuf,
    /// Strategies to run: bm25, dense, hybrid (anything else is refused before indexing).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bm25",
        value_parser = clap::builder::PossibleValuesParser::new(["bm25", "dense", "hybrid"])
    )]
    strategies: Vec<String>,
    /// Local embedding model directory, for dense and hybrid.
    #[arg(long)]
    embed_model: Option<PathBuf>,
    /// Fusion `k,bm25_weight,dense_weight[,name_weight]` (tuning; default: the service's).
    #[arg(long, value_delimiter = ',')]
    rrf: Option<Vec<f32>>,
    /// How many of the lexical ranking's first hits HYBRID keeps first (default: the
    /// service's; 0 = plain RRF).
    #[arg(long)]
    lexical_top: Option<u32>,
    /// Skip HYBRID's dense side when the query names an item in code form (default: the
    /// service's).
    #[arg(long)]
    skip_dense_when_named: Option<bool>,
    /// Tokens of a query the local model embeds (default: the service's).
    #[arg(long)]
    query_max_tokens: Option<usize>,
    /// BM25 field boosts `name,path,signature,doc,body` (tuning; default: the service's).
    #[arg(long, value_delimiter = ',')]
    boosts: Option<Vec<f32>>,
    /// Length prior exponents `function,other` (tuning; default: the service's).
    #[arg(long, value_delimiter = ',')]
    prior: Option<Vec<f32>>,
    /// Hits asked per query (the scorer reads the first 10; deeper lists are for analysis).
    #[arg(long, default_value_t = 10)]
    top_k: u32,
}

fn read_jsonl(path: &std::path::Path) -> anyhow::Result<Vec<Value>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut out = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if !line.trim().is_empty() {
            out.push(serde_json::from_str(&line)?);
        }
    }
    Ok(out)
}

fn str_of<'a>(v: &'a Value, key: &str) -> anyhow::Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("missing string `{key}`"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let paths: BTreeMap<String, PathBuf> = serde_json::from_reader(
        std::fs::File::open(&args.sources)
            .with_context(|| format!("opening {}", args.sources.display()))?,
    )?;
    let queries = read_jsonl(&args.eval.join("queries.jsonl"))?;

    // The corpus files of each crate: the distinct files of items/<crate>.jsonl.
    let mut corpus: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for krate in paths.keys() {
        let items = read_jsonl(&args.eval.join("items").join(format!("{krate}.jsonl")))?;
        let files = items
            .iter()
            .map(|i| str_of(i, "file").map(str::to_owned))
            .collect::<anyhow::Result<BTreeSet<String>>>()?;
        corpus.insert(krate.clone(), files);
    }

    let roots: BTreeMap<String, PathBuf> = paths
        .iter()
        .map(|(k, p)| Ok((k.clone(), std::fs::canonicalize(p)?)))
        .collect::<std::io::Result<_>>()?;
    let mut config = PlokeConfig {
        workspaces: roots.values().cloned().collect(),
        data_dir: args.data_dir.clone(),
        ..PlokeConfig::default()
    };
    config.rag_search.embed_model = args.embed_model.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let shutdown = Shutdown::new();
    let mut rag_config = ploke_rag_search::Config::from(&config);
    if let Some(b) = &args.boosts {
        if b.len() != 5 {
            bail!("--boosts takes 5 numbers: name,path,signature,doc,body");
        }
        rag_config.retrieval.boosts = ploke_rag_search::bm25::Boosts {
            name: b[0],
            path: b[1],
            signature: b[2],
            doc: b[3],
            body: b[4],
        };
    }
    if let Some(p) = &args.prior {
        if p.len() != 2 {
            bail!("--prior takes 2 numbers: function,other");
        }
        rag_config.retrieval.prior = ploke_rag_search::rank::LengthPrior {
            function: p[0],
            other: p[1],
        };
    }
    if let Some(r) = &args.rrf {
        if !(3..=4).contains(&r.len()) {
            bail!("--rrf takes 3 or 4 numbers: k,bm25_weight,dense_weight[,name_weight]");
        }
        rag_config.retrieval.rrf = ploke_rag_search::fusion::Rrf {
            k: r[0],
            bm25_weight: r[1],
            dense_weight: r[2],
            name_weight: r
                .get(3)
                .copied()
                .unwrap_or(ploke_rag_search::fusion::NAME_WEIGHT),
            ..rag_config.retrieval.rrf
        };
    }
    if let Some(top) = args.lexical_top {
        rag_config.retrieval.rrf.lexical_top = top;
    }
    if let Some(tokens) = args.query_max_tokens {
        rag_config.query_max_tokens = tokens;
    }
    if let Some(skip) = args.skip_dense_when_named {
        rag_config.retrieval.skip_dense_when_named = skip;
    }
    let server = tokio::spawn(ploke_rag_search::serve(
        rag_config,
        listener,
        shutdown.wait(),
    ));
    let mut client = RagSearchClient::connect(url).await?;

    for (krate, root) in &roots {
        let started = Instant::now();
        let mut stream = client
            .index_workspace(IndexWorkspaceRequest {
                workspace_root: root.display().to_string(),
                force: false,
            })
            .await?
            .into_inner();
        let mut last = None;
        while let Some(p) = stream.next().await {
            last = Some(p?);
        }
        let summary = last
            .and_then(|p| p.summary)
            .context("indexing ended without a summary")?;
        eprintln!(
            "indexed {krate}: {} files ({} unchanged), {} items in {:.1} s",
            summary.files_indexed,
            summary.files_unchanged,
            summary.items_total,
            started.elapsed().as_secs_f64()
        );
    }

    std::fs::create_dir_all(&args.out)?;
    for name in &args.strategies {
        let strategy = match name.as_str() {
            "bm25" => Strategy::Bm25,
            "dense" => Strategy::Dense,
            "hybrid" => Strategy::Hybrid,
            other => bail!("unknown strategy `{other}`"),
        };
        let path = args.out.join(format!("{name}.jsonl"));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let started = Instant::now();
        let mut without_dense = 0;
        for q in &queries {
            let krate = str_of(q, "repo")?;
            let (Some(root), Some(files)) = (roots.get(krate), corpus.get(krate)) else {
                continue;
            };
            let response = client
                .search(SearchRequest {
                    workspace_root: root.display().to_string(),
                    query: str_of(q, "query")?.to_owned(),
                    strategy: strategy as i32,
                    top_k: args.top_k,
                    filters: Some(SearchFilters {
                        path_prefixes: files.iter().cloned().collect(),
                        ..Default::default()
                    }),
                    session_id: String::new(),
                })
                .await?
                .into_inner();
            without_dense += usize::from(strategy == Strategy::Hybrid && !response.dense_used);
            let ranked: Vec<Value> = response
                .hits
                .iter()
                .filter_map(|h| {
                    let p = h.part.as_ref()?;
                    let s = p.span.as_ref()?;
                    Some(json!({
                        "file": p.file_path,
                        "start_line": s.line_start,
                        "end_line": s.line_end,
                        "canon_path": p.canon_path,
                        "kind": p.kind,
                        "score": h.score,
                        "bm25_rank": h.bm25_rank,
                        "dense_rank": h.dense_rank,
                    }))
                })
                .collect();
            writeln!(out, "{}", json!({"id": str_of(q, "id")?, "ranked": ranked}))?;
        }
        out.flush()?;
        eprintln!(
            "{name}: {} queries in {:.1} s ({without_dense} without the dense side) -> {}",
            queries.len(),
            started.elapsed().as_secs_f64(),
            path.display()
        );
    }
    drop(client);
    shutdown.trigger();
    server.await??;
    Ok(())
}
