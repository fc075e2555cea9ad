//! Indexing and retrieval through the real gRPC API: progress stream, status, BM25 search with
//! filters, context under budgets, exact snippets, lookups, incremental refresh, and a restart
//! that serves the persisted index without re-indexing.

use std::path::Path;

use ploke_proto::common::v1::{ItemKind, TokenBudget};
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::*;
use ploke_runtime::config::PlokeConfig;
use ploke_runtime::shutdown::Shutdown;
use tokio_stream::StreamExt as _;
use tonic::Code;
use tonic::transport::Channel;

struct Server {
    client: RagSearchClient<Channel>,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<Result<(), ploke_rag_search::StartError>>,
}

async fn start(workspace: &Path, data: &Path) -> Server {
    start_with(workspace, data, None).await
}

async fn start_with(workspace: &Path, data: &Path, model: Option<&Path>) -> Server {
    let mut config = PlokeConfig {
        workspaces: vec![workspace.to_owned()],
        data_dir: data.to_owned(),
        ..PlokeConfig::default()
    };
    config.rag_search.embed_model = model.map(Path::to_owned);
    config.rag_search.watch = false;
    // These tests drive every run themselves (tests/ covers the run started with the service).
    config.rag_search.index_on_start = false;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = Shutdown::new();
    let task = tokio::spawn(ploke_rag_search::serve(
        ploke_rag_search::Config::from(&config),
        listener,
        shutdown.wait(),
    ));
    Server {
        client: RagSearchClient::connect(url).await.unwrap(),
        shutdown,
        task,
    }
}

impl Server {
    async fn stop(self) {
        drop(self.client);
        self.shutdown.trigger();
        self.task.await.unwrap().unwrap();
    }

    async fn index(&mut self, force: bool) -> Vec<IndexProgress> {
        let mut stream = self
            .client
            .index_workspace(IndexWorkspaceRequest {
                workspace_root: String::new(),
                force,
            })
            .await
            .unwrap()
            .into_inner();
        let mut all = Vec::new();
        while let Some(p) = stream.next().await {
            all.push(p.unwrap());
        }
        all
    }

    async fn search(
        &mut self,
        query: &str,
        strategy: Strategy,
        filters: Option<SearchFilters>,
    ) -> SearchResponse {
        self.client
            .search(SearchRequest {
                query: query.into(),
                strategy: strategy as i32,
                top_k: 5,
                filters,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
    }
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

const CONFIG_RS: &str = "//! Settings.\n\n/// Loaded settings.\npub struct Settings {\n    pub retries: u32,\n}\n\nimpl Settings {\n    /// Reads settings from a TOML file.\n    pub fn load_from_file(path: &str) -> Settings {\n        let _ = path;\n        Settings { retries: 3 }\n    }\n\n    /// Number of retries, at least one.\n    pub fn retry_count(&self) -> u32 {\n        self.retries.max(1)\n    }\n}\n";

fn fixture(root: &Path) {
    write(root, "Cargo.toml", "[package]\nname = \"demo\"\n");
    write(
        root,
        "src/lib.rs",
        "pub mod config;\npub mod net;\n\n/// Starts the demo.\npub fn start() {}\n",
    );
    write(root, "src/config.rs", CONFIG_RS);
    write(
        root,
        "src/net/mod.rs",
        "/// Exponential backoff between retries.\npub fn backoff(attempt: u32) -> u64 {\n    100u64 << attempt.min(10)\n}\n",
    );
    write(
        root,
        "docs/guide.md",
        "# Guide\n\nLoad settings from a file before starting.\n",
    );
}

fn names(r: &SearchResponse) -> Vec<String> {
    r.hits
        .iter()
        .map(|h| h.part.as_ref().unwrap().canon_path.clone())
        .collect()
}

#[tokio::test]
async fn index_search_context_snippets_lookup_refresh_and_restart() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    fixture(ws.path());
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let mut s = start(ws.path(), data.path()).await;

    // Progress stream: phases in order, ends with DONE and a summary.
    let progress = s.index(false).await;
    let phases: Vec<i32> = progress.iter().map(|p| p.phase).collect();
    assert_eq!(phases.first(), Some(&(IndexPhase::Scanning as i32)));
    assert_eq!(phases.last(), Some(&(IndexPhase::Done as i32)));
    let summary = progress.last().unwrap().summary.unwrap();
    assert_eq!(
        (
            summary.files_indexed,
            summary.files_unchanged,
            summary.items_total
        ),
        (5, 0, 8)
    );

    let status = s
        .client
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.state, IndexState::Ready as i32);
    assert_eq!((status.files, status.items), (5, 8));
    assert_eq!(status.workspace_root, root.display().to_string());
    assert!(status.last_indexed_at.is_some());
    assert!(status.index_bytes > 0);

    // BM25 search: identifier parts match; ranks and strategy reported.
    let r = s
        .search("load settings from file", Strategy::Bm25, None)
        .await;
    assert_eq!(names(&r)[0], "crate::config::Settings::load_from_file");
    let top = &r.hits[0];
    assert_eq!(top.bm25_rank, 1);
    assert_eq!(top.dense_rank, 0);
    let part = top.part.as_ref().unwrap();
    assert_eq!(part.file_path, "src/config.rs");
    assert_eq!(part.kind, ItemKind::Method as i32);
    let span = part.span.as_ref().unwrap();
    assert_eq!(
        &CONFIG_RS[span.byte_start as usize..span.byte_end as usize],
        part.snippet
    );
    assert_eq!((span.line_start, span.line_end), (9, 13));
    assert_eq!(r.strategy, Strategy::Bm25 as i32);
    assert!(!r.dense_used);

    // Hybrid without a model falls back to BM25 and says why; dense alone is refused.
    let r = s.search("backoff retries", Strategy::Hybrid, None).await;
    assert_eq!(names(&r)[0], "crate::net::backoff");
    assert!(!r.dense_used);
    assert_eq!(
        r.dense_unavailable_reason,
        "no embedding model is configured (--embed-model DIR, or an [embedding] endpoint)"
    );
    let err = s
        .client
        .search(SearchRequest {
            query: "x".into(),
            strategy: Strategy::Dense as i32,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);

    // Filters: path prefix, kind, language.
    let only_net = SearchFilters {
        path_prefixes: vec!["src/net/".into()],
        ..Default::default()
    };
    let r = s
        .search("retries settings backoff", Strategy::Bm25, Some(only_net))
        .await;
    assert_eq!(names(&r), vec!["crate::net::backoff"]);
    let only_structs = SearchFilters {
        kinds: vec![ItemKind::Struct as i32],
        ..Default::default()
    };
    let r = s
        .search("settings retries", Strategy::Bm25, Some(only_structs))
        .await;
    assert_eq!(names(&r), vec!["crate::config::Settings"]);
    let only_md = SearchFilters {
        languages: vec!["markdown".into()],
        ..Default::default()
    };
    let r = s
        .search("load settings", Strategy::Bm25, Some(only_md))
        .await;
    assert_eq!(names(&r), vec!["docs/guide.md#L1-3"]);

    // Context: rendered parts, cumulative budget respected, stats filled.
    let ctx = s
        .client
        .get_context(GetContextRequest {
            query: "settings retries load".into(),
            budget: Some(TokenBudget {
                max_total: 200,
                per_file_max: 0,
                per_part_max: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let stats = ctx.stats.unwrap();
    assert!(stats.total_tokens <= 200, "{}", stats.total_tokens);
    assert_eq!(
        stats.total_tokens,
        ctx.parts.iter().map(|p| p.tokens).sum::<u32>()
    );
    assert_eq!(stats.tokenizer, "cl100k_base");
    assert_eq!(stats.parts_included as usize, ctx.parts.len());
    assert!(!ctx.parts.is_empty());
    let first = &ctx.parts[0];
    let sp = first.span.as_ref().unwrap();
    let header = format!(
        "<code=\"{}\" #{}:{}>\n",
        root.join(&first.file_path).display(),
        sp.byte_start,
        sp.byte_end
    );
    assert!(ctx.rendered.starts_with(&header), "{}", ctx.rendered);

    // Snippets: exact bytes, stale detection, missing file, out of range.
    let hash = blake3::hash(CONFIG_RS.as_bytes()).to_hex().to_string();
    let snip = |path: &str, a: u64, b: u64, h: &str| SnippetRequest {
        span: Some(ploke_proto::common::v1::CodeSpan {
            path: path.into(),
            byte_start: a,
            byte_end: b,
            ..Default::default()
        }),
        expected_file_hash: h.into(),
    };
    let got = s
        .client
        .get_snippets(GetSnippetsRequest {
            workspace_root: String::new(),
            session_id: String::new(),
            spans: vec![
                snip("src/config.rs", 15, 36, &hash),
                snip("src/config.rs", 15, 36, "0000"),
                snip("src/gone.rs", 0, 1, ""),
                snip("src/config.rs", 0, 100_000, ""),
            ],
        })
        .await
        .unwrap()
        .into_inner()
        .snippets;
    let summary: Vec<(i32, &str)> = got.iter().map(|s| (s.status, s.text.as_str())).collect();
    assert_eq!(
        summary,
        vec![
            (SnippetStatus::Ok as i32, "/// Loaded settings.\n"),
            (SnippetStatus::Stale as i32, "/// Loaded settings.\n"),
            (SnippetStatus::Missing as i32, ""),
            (SnippetStatus::OutOfRange as i32, ""),
        ]
    );
    assert_eq!(got[0].file_hash, hash);
    let err = s
        .client
        .get_snippets(GetSnippetsRequest {
            workspace_root: String::new(),
            session_id: String::new(),
            spans: vec![snip("../etc/passwd", 0, 1, "")],
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "spans[0].span.path: `../etc/passwd` must not contain `..`"
    );

    // Lookup by canonical path and by name (+ kind); no match is an empty answer.
    let found = s
        .client
        .lookup_item(LookupItemRequest {
            target: Some(lookup_item_request::Target::CanonPath(
                "crate::config::Settings::retry_count".into(),
            )),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].signature, "pub fn retry_count(&self) -> u32");
    let found_file = found[0].span.as_ref().unwrap().path.clone();
    assert_eq!(found[0].doc, "Number of retries, at least one.");
    let found = s
        .client
        .lookup_item(LookupItemRequest {
            target: Some(lookup_item_request::Target::Name("Settings".into())),
            kind: ItemKind::Struct as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    assert_eq!(found.len(), 1);
    let none = s
        .client
        .lookup_item(LookupItemRequest {
            target: Some(lookup_item_request::Target::Name("nothing_here".into())),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    assert!(none.is_empty());
    let in_file = s
        .client
        .lookup_item(LookupItemRequest {
            target: Some(lookup_item_request::Target::FilePath(found_file.clone())),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(in_file.items.len(), 1);
    assert!(in_file.total > 1, "{in_file:?}");
    assert_eq!(in_file.items[0].span.as_ref().unwrap().path, found_file);

    // Refresh: edit a file; the old item is gone, the new one found; others untouched.
    write(
        ws.path(),
        "src/net/mod.rs",
        "/// Jittered delay between attempts.\npub fn jittered_delay(attempt: u32) -> u64 {\n    attempt as u64 * 7\n}\n",
    );
    let refreshed = s
        .client
        .refresh_files(RefreshFilesRequest {
            workspace_root: String::new(),
            paths: vec!["src/net/mod.rs".into(), "src/lib.rs".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            refreshed.files_updated,
            refreshed.files_unchanged,
            refreshed.items_added,
            refreshed.items_removed
        ),
        (1, 1, 1, 1)
    );
    let r = s.search("backoff", Strategy::Bm25, None).await;
    assert!(!names(&r).contains(&"crate::net::backoff".to_owned()));
    let r = s.search("jittered delay", Strategy::Bm25, None).await;
    assert_eq!(names(&r)[0], "crate::net::jittered_delay");
    s.stop().await;

    // Restart on the same data dir: ready at once, same answers, nothing to re-index.
    let mut s = start(ws.path(), data.path()).await;
    let status = s
        .client
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.state, IndexState::Ready as i32);
    assert_eq!(status.items, 8);
    let r = s.search("jittered delay", Strategy::Bm25, None).await;
    assert_eq!(names(&r)[0], "crate::net::jittered_delay");
    let again = s.index(false).await.last().unwrap().summary.unwrap();
    assert_eq!((again.files_indexed, again.files_unchanged), (0, 5));
    s.stop().await;
}

/// The real model (scripts/test fetches it and sets PLOKE_EMBED_MODEL).
fn model_dir() -> std::path::PathBuf {
    std::env::var("PLOKE_EMBED_MODEL")
        .expect("PLOKE_EMBED_MODEL must name the model directory: run ./scripts/test")
        .into()
}

#[tokio::test]
async fn dense_and_hybrid_with_the_real_model() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    fixture(ws.path());
    let mut s = start_with(ws.path(), data.path(), Some(&model_dir())).await;
    let summary = s.index(false).await.last().unwrap().summary.unwrap();
    assert_eq!((summary.items_total, summary.items_embedded), (8, 8));
    assert!(summary.dense_available);

    let status = s
        .client
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.embedded_items, 8);
    assert!(status.dense_available);
    assert_eq!(status.embed_model, "all-MiniLM-L6-v2");
    assert_eq!(status.dense_unavailable_reason, "");

    // Dense: nearest by meaning.
    let r = s
        .search(
            "exponentially growing pause between retries",
            Strategy::Dense,
            None,
        )
        .await;
    assert!(r.dense_used);
    assert_eq!(r.strategy, Strategy::Dense as i32);
    assert_eq!(names(&r)[0], "crate::net::backoff");
    assert_eq!((r.hits[0].bm25_rank, r.hits[0].dense_rank), (0, 1));

    // Hybrid (also the default): both ranks reported, fused score = RRF (a query whose words
    // spell no name, whole or in part: `from file` would be part of `load_from_file`).
    let r = s
        .search(
            "read settings stored in a toml document",
            Strategy::Unspecified,
            None,
        )
        .await;
    assert_eq!(r.strategy, Strategy::Hybrid as i32);
    assert!(r.dense_used);
    let top = &r.hits[0];
    assert_eq!(names(&r)[0], "crate::config::Settings::load_from_file");
    assert!(top.bm25_rank == 1 && top.dense_rank >= 1);
    // Default fusion: k = 10, dense weighted 0.2, and the lexical ranking's first hit (BM25's
    // here, nothing being named) gains the most a dense rank gives, 0.2 / 11, to stay first
    // (docs/RETRIEVAL.md).
    let expected = 1.0 / 11.0 + 0.2 / (10.0 + top.dense_rank as f32) + 0.2 / 11.0;
    assert!((top.score - expected).abs() < 1e-6, "{top:?}");
    let second = &r.hits[1];
    let plain = |h: &SearchHit| {
        let part = |w: f32, rank: u32| {
            if rank == 0 {
                0.0
            } else {
                w / (10.0 + rank as f32)
            }
        };
        part(1.0, h.bm25_rank) + part(0.2, h.dense_rank)
    };
    assert!((second.score - plain(second)).abs() < 1e-6, "{second:?}");
    // A query that names an item in code form: BM25 and the names decide; the query is not
    // embedded, and the answer says so.
    let r = s
        .search("why does `load_from_file` fail", Strategy::Hybrid, None)
        .await;
    assert_eq!(
        (
            r.strategy,
            r.dense_used,
            r.dense_unavailable_reason.as_str()
        ),
        (
            Strategy::Bm25 as i32,
            false,
            "the query names an item: BM25 and names decide, the dense side was skipped"
        )
    );
    assert_eq!(names(&r)[0], "crate::config::Settings::load_from_file");
    // Quoted text is asked for as written: the guide's sentence holds it, the method's doc
    // ("Reads settings from a TOML file") does not; the query is not embedded.
    let r = s
        .search(
            "where does it say \"Settings from a  file\"",
            Strategy::Hybrid,
            None,
        )
        .await;
    assert_eq!(
        (
            r.strategy,
            r.dense_used,
            r.dense_unavailable_reason.as_str(),
            r.hits[0].part.as_ref().unwrap().file_path.as_str()
        ),
        (
            Strategy::Bm25 as i32,
            false,
            "the query quotes text: BM25 finds it as written, the dense side was skipped",
            "docs/guide.md"
        )
    );
    s.stop().await;

    // A restart embeds nothing again.
    let mut s = start_with(ws.path(), data.path(), Some(&model_dir())).await;
    let again = s.index(false).await.last().unwrap().summary.unwrap();
    assert_eq!((again.items_embedded, again.files_unchanged), (0, 5));
    s.stop().await;
}

#[tokio::test]
async fn a_word_inside_a_run_of_chinese_is_found_plain_and_quoted() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    write(ws.path(), "Cargo.toml", "[package]\nname = \"demo\"\n");
    write(
        ws.path(),
        "src/lib.rs",
        "/// 用中文问候用户，例如欢迎使用本系统。\npub fn greet() {}\n\n\
         /// 发射火箭之前检查燃料是否足够并且确认所有系统都已经准备就绪\npub fn launch() {}\n\n\
         /// 校验数据的完整性。\npub fn verify() {}\n",
    );
    let mut s = start(ws.path(), data.path()).await;
    s.index(false).await;
    for query in ["问候用户", "\"问候用户\"", "检查燃料", "确认所有系统"] {
        let found = s.search(query, Strategy::Bm25, None).await;
        assert_eq!(
            names(&found).first().map(String::as_str),
            Some(if query.contains("问候") {
                "crate::greet"
            } else {
                "crate::launch"
            }),
            "{query}: {:?}",
            names(&found)
        );
    }
    s.stop().await;
}
