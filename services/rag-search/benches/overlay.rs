//! What a session overlay costs: rag-search in process on a workspace (indexed first), then a
//! developer's checkout that differs in `--changed` Rust files (each edited: one function
//! added, one line changed). Times the first SyncOverlay (manifest of every file; the changed
//! ones needed), the PutOverlayFiles of their contents (stored, parsed, BM25 and vectors for
//! those files only), a search that finds an added function through the session, a second
//! sync with nothing changed, and one more edit of one file (a tool's compare-and-set put).
//! Not a test: results go to the final report / docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-rag-search --bench overlay -- --workspace DIR [--embed-model DIR]
//!       [--changed 10] [--data-dir DIR]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::*;
use ploke_runtime::config::PlokeConfig;
use ploke_runtime::principal::{Principal, Role};
use ploke_runtime::shutdown::Shutdown;
use tokio_stream::StreamExt as _;

#[derive(Debug, Parser)]
struct Args {
    /// The workspace (its base is indexed first).
    #[arg(long)]
    workspace: PathBuf,
    /// Embedding model directory.
    #[arg(long)]
    embed_model: Option<PathBuf>,
    /// Rust files the developer changed.
    #[arg(long, default_value_t = 10)]
    changed: usize,
    /// Keep the index here (a temporary dir when absent).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// cargo bench passes --bench.
    #[arg(long, hide = true)]
    bench: bool,
}

fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The developer's version of a file: one function added, the first `fn ` line's name kept
/// but a comment changed above it.
fn edited(text: &str, i: usize) -> String {
    let mut out = text.replacen("fn ", &format!("/* edited {i} */ fn "), 1);
    out.push_str(&format!(
        "\n/// Recalibrates the overlay probe number {i} after a developer's change.\npub fn overlay_probe_recalibrate_{i}(level: u32) -> u32 {{\n    level.wrapping_mul({i}).rotate_left(3)\n}}\n"
    ));
    out
}

fn request<T>(who: &Principal, message: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    who.write_headers(r.metadata_mut().as_mut());
    r
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // rag-search's own log says what each overlay update parsed, embedded and reused.
    let _telemetry = ploke_runtime::telemetry::init(
        "overlay-bench",
        &ploke_runtime::config::TelemetryConfig::default(),
    )?;
    let workspace = std::fs::canonicalize(&args.workspace)?;
    let temp = tempfile::tempdir()?;
    let data = args.data_dir.clone().unwrap_or_else(|| temp.path().into());
    let mut config = PlokeConfig {
        workspaces: vec![workspace.clone()],
        data_dir: data,
        ..PlokeConfig::default()
    };
    config.rag_search.embed_model = args.embed_model.clone();
    config.rag_search.watch = false;
    config.rag_search.index_on_start = false;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let shutdown = Shutdown::new();
    let server = tokio::spawn(ploke_rag_search::serve(
        ploke_rag_search::Config::from(&config),
        listener,
        shutdown.wait(),
    ));
    let mut client = RagSearchClient::connect(url).await?;

    let started = Instant::now();
    let mut stream = client
        .index_workspace(IndexWorkspaceRequest::default())
        .await?
        .into_inner();
    let mut summary = None;
    while let Some(p) = stream.next().await {
        summary = p?.summary.or(summary);
    }
    let summary = summary.expect("a summary");
    println!(
        "base: {} items, {} embedded ({} reused), indexed in {:.1} s",
        summary.items_total,
        summary.items_embedded,
        summary.embeddings_reused,
        started.elapsed().as_secs_f64()
    );

    // The developer's checkout: every indexable file, `--changed` Rust files edited.
    let (files, _) = ploke_rag_search::scan::scan(&workspace);
    let rust: Vec<usize> = (0..files.len())
        .filter(|i| files[*i].language == "rust")
        .collect();
    let step = (rust.len() / args.changed.max(1)).max(1);
    let chosen: Vec<usize> = rust
        .iter()
        .step_by(step)
        .take(args.changed)
        .copied()
        .collect();
    let mut manifest = Vec::with_capacity(files.len());
    let mut contents = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let text = std::fs::read_to_string(&f.abs).unwrap_or_default();
        let text = match chosen.iter().position(|c| *c == i) {
            Some(n) => {
                let t = edited(&text, n);
                contents.push((f.rel.clone(), t.clone()));
                t
            }
            None => text,
        };
        manifest.push(ManifestEntry {
            path: f.rel.clone(),
            hash: hash(text.as_bytes()),
        });
    }
    let dev = Principal::everywhere("dev", Role::User);
    let sync = SyncOverlayRequest {
        session_id: "bench".into(),
        workspace_root: String::new(),
        files: manifest,
    };

    let t = Instant::now();
    let synced = client
        .sync_overlay(request(&dev, sync.clone()))
        .await?
        .into_inner();
    let sync_time = t.elapsed();
    let put = PutOverlayFilesRequest {
        session_id: "bench".into(),
        workspace_root: String::new(),
        files: contents
            .iter()
            .map(|(path, text)| OverlayFile {
                path: path.clone(),
                content: text.clone().into_bytes(),
                expected_hash: String::new(),
            })
            .collect(),
    };
    let t = Instant::now();
    let put_done = client
        .put_overlay_files(request(&dev, put))
        .await?
        .into_inner();
    let put_time = t.elapsed();
    let strategy = if args.embed_model.is_some() {
        Strategy::Hybrid
    } else {
        Strategy::Bm25
    };
    let t = Instant::now();
    let found = client
        .search(request(
            &dev,
            SearchRequest {
                query: "recalibrate the overlay probe number 3".into(),
                strategy: strategy as i32,
                top_k: 10,
                session_id: "bench".into(),
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    let search_time = t.elapsed();
    let t = Instant::now();
    let again = client.sync_overlay(request(&dev, sync)).await?.into_inner();
    let again_time = t.elapsed();
    // One more edit of one changed file, as a tool applies it (compare-and-set).
    let (path, text) = &contents[0];
    let next = text.replacen("rotate_left(3)", "rotate_left(5)", 1);
    let t = Instant::now();
    let edit = client
        .put_overlay_files(request(
            &dev,
            PutOverlayFilesRequest {
                session_id: "bench".into(),
                workspace_root: String::new(),
                files: vec![OverlayFile {
                    path: path.clone(),
                    content: next.into_bytes(),
                    expected_hash: hash(text.as_bytes()),
                }],
            },
        ))
        .await?
        .into_inner();
    let edit_time = t.elapsed();

    println!(
        "manifest: {} files; changed {}, need {}",
        files.len(),
        synced.changed,
        synced.need.len()
    );
    println!("sync (first)        {:>8.1} ms", ms(sync_time));
    println!(
        "put {} files        {:>8.1} ms  ({} overlay items, version {})",
        contents.len(),
        ms(put_time),
        put_done.items,
        put_done.version
    );
    println!("sync+put            {:>8.1} ms", ms(sync_time + put_time));
    println!(
        "search via session  {:>8.1} ms  (top: {})",
        ms(search_time),
        found
            .hits
            .first()
            .and_then(|h| h.part.as_ref())
            .map(|p| p.canon_path.as_str())
            .unwrap_or("-")
    );
    println!(
        "sync (unchanged)    {:>8.1} ms  (need {}, version {})",
        ms(again_time),
        again.need.len(),
        again.version
    );
    println!(
        "edit put (1 file)   {:>8.1} ms  (version {})",
        ms(edit_time),
        edit.version
    );
    drop(client);
    shutdown.trigger();
    server.await??;
    Ok(())
}
