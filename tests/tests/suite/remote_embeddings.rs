//! rag-search with an OpenAI-compatible `/v1/embeddings` endpoint instead of a local model: the
//! fake endpoint is a real HTTP server on 127.0.0.1:0 speaking OpenAI's exact format.

use ploke_e2e::Sandbox;
use ploke_e2e::fake_embeddings::{FakeEmbeddings, MODEL};
use ploke_proto::rag::v1::{
    IndexStatusRequest, IndexWorkspaceRequest, SearchRequest, SearchResponse, Strategy,
};
use ploke_runtime::config::EmbeddingConfig;
use tonic::Code;

/// The env var whose value stands for the API key (set by cargo for every test).
const KEY_ENV: &str = "CARGO_MANIFEST_DIR";

const FILES: [(&str, &str); 3] = [
    (
        "src/header.rs",
        "/// Parses one http header line.\npub fn parse_header_line(line: &str) -> usize {\n    line.len()\n}\n",
    ),
    (
        "src/retry.rs",
        "/// Waits before the next attempt.\npub fn backoff_delay(attempt: u32) -> u64 {\n    100u64 << attempt\n}\n",
    ),
    (
        "src/cache.rs",
        "/// Evicts the oldest cache entry.\npub fn evict_oldest(entries: &mut Vec<u32>) {\n    entries.pop();\n}\n",
    ),
];

fn endpoint(fake: &FakeEmbeddings) -> EmbeddingConfig {
    EmbeddingConfig {
        api_key_env: Some(KEY_ENV.into()),
        batch_size: 2,
        tries: 3,
        ..fake.config()
    }
}

async fn start(fake: &FakeEmbeddings) -> Sandbox {
    let config = endpoint(fake);
    // No watcher and no run at start: these tests count the endpoint's requests, and a run
    // racing the one they start would ask again for what the endpoint refused.
    Sandbox::start_with(move |c| {
        c.embedding = Some(config);
        c.rag_search.watch = false;
        c.rag_search.index_on_start = false;
    })
    .await
    .unwrap()
}

async fn search(
    sandbox: &Sandbox,
    query: &str,
    strategy: Strategy,
) -> Result<SearchResponse, tonic::Status> {
    sandbox
        .rag()
        .search(SearchRequest {
            query: query.into(),
            strategy: strategy as i32,
            top_k: 3,
            ..Default::default()
        })
        .await
        .map(tonic::Response::into_inner)
}

/// The call failed with `code` and a message that contains `needle`.
fn fails_with(result: Result<SearchResponse, tonic::Status>, code: Code, needle: &str) {
    let err = result.unwrap_err();
    assert_eq!(err.code(), code, "{}", err.message());
    assert!(err.message().contains(needle), "{}", err.message());
}

fn top_path(r: &SearchResponse) -> &str {
    r.hits
        .first()
        .and_then(|h| h.part.as_ref())
        .map_or("", |p| p.canon_path.as_str())
}

async fn status(sandbox: &Sandbox) -> ploke_proto::rag::v1::IndexStatusResponse {
    sandbox
        .rag()
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap()
        .into_inner()
}

async fn index(sandbox: &Sandbox) -> Result<ploke_proto::rag::v1::IndexSummary, tonic::Status> {
    let mut stream = sandbox
        .rag()
        .index_workspace(IndexWorkspaceRequest::default())
        .await?
        .into_inner();
    let mut summary = None;
    while let Some(p) = stream.message().await? {
        summary = p.summary.or(summary);
    }
    Ok(summary.unwrap_or_default())
}

#[tokio::test]
async fn items_are_embedded_through_the_endpoint_in_batches_with_the_key_and_once_only() {
    let fake = FakeEmbeddings::start(64).await.unwrap();
    let sandbox = start(&fake).await;
    sandbox.index_files(&FILES).await.unwrap();

    let status = status(&sandbox).await;
    assert_eq!(
        (
            status.items,
            status.embedded_items,
            status.dense_available,
            status.embed_model.as_str()
        ),
        (3, 3, true, MODEL)
    );
    let dense = search(&sandbox, "http header line parsing", Strategy::Dense)
        .await
        .unwrap();
    assert!(dense.dense_used);
    assert_eq!(top_path(&dense), "crate::header::parse_header_line");
    assert!(dense.hits[0].dense_rank == 1 && dense.hits[0].bm25_rank == 0);
    let hybrid = search(&sandbox, "evict the oldest entry", Strategy::Hybrid)
        .await
        .unwrap();
    assert_eq!(
        (hybrid.strategy, hybrid.dense_used, top_path(&hybrid)),
        (Strategy::Hybrid as i32, true, "crate::cache::evict_oldest")
    );
    assert!(hybrid.hits[0].bm25_rank > 0 && hybrid.hits[0].dense_rank > 0);

    // A probe at start, the three items in batches of two, then one text per query.
    let key = format!("Bearer {}", std::env::var(KEY_ENV).unwrap());
    let received = fake.received();
    let mut sizes: Vec<usize> = received.iter().map(|r| r.input.len()).collect();
    sizes[1..3].sort_unstable(); // the two batches are in flight at once
    assert_eq!(sizes, vec![1, 1, 2, 1, 1]);
    assert!(
        received
            .iter()
            .all(|r| r.model == MODEL && r.authorization.as_deref() == Some(key.as_str()))
    );
    assert_eq!(received[4].input, vec!["evict the oldest entry".to_owned()]);
    // Items are embedded from their path, doc, signature and the head of their body.
    let item_texts: Vec<&String> = received[1..3].iter().flat_map(|r| &r.input).collect();
    assert!(
        item_texts
            .iter()
            .any(|t| t.starts_with("crate header parse_header_line\n")
                && t.contains("Parses one http header line.")
                && t.contains("pub fn parse_header_line(line: &str) -> usize")
                && t.contains("line.len()")),
        "{item_texts:?}"
    );

    // Restart: the persisted vectors are loaded, nothing is embedded again but the probe.
    let sandbox = sandbox.restart().await.unwrap();
    let summary = index(&sandbox).await.unwrap();
    assert_eq!((summary.items_total, summary.items_embedded), (3, 0));
    assert_eq!(fake.texts_embedded(), 1 + 3 + 2 + 1);
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_busy_endpoint_is_retried_a_refusal_reported_and_a_dead_one_degrades_hybrid() {
    let fake = FakeEmbeddings::start(32).await.unwrap();
    let sandbox = start(&fake).await;
    // 429 with Retry-After and a 500 while indexing: retried, the run succeeds.
    fake.fail_next([
        (
            429,
            vec![("retry-after".to_owned(), "0".to_owned())],
            r#"{"error":{"message":"slow down"}}"#.to_owned(),
        ),
        (
            500,
            vec![("retry-after".to_owned(), "0".to_owned())],
            "oops".to_owned(),
        ),
    ]);
    sandbox.index_files(&FILES[..1]).await.unwrap();
    let after_index = fake.received().len();
    assert_eq!(after_index, 1 + 3, "probe, 429, 500, success");

    // A refusal is not retried: DENSE fails FAILED_PRECONDITION naming the status; HYBRID
    // answers from BM25 and says why.
    fake.fail_next([(
        401,
        Vec::new(),
        r#"{"error":{"message":"bad key"}}"#.to_owned(),
    )]);
    fails_with(
        search(&sandbox, "header line", Strategy::Dense).await,
        Code::FailedPrecondition,
        "401 Unauthorized",
    );
    fake.fail_next([(403, Vec::new(), "forbidden".to_owned())]);
    let hybrid = search(&sandbox, "header line", Strategy::Hybrid)
        .await
        .unwrap();
    assert_eq!(
        (hybrid.strategy, hybrid.dense_used, top_path(&hybrid)),
        (
            Strategy::Bm25 as i32,
            false,
            "crate::header::parse_header_line"
        )
    );
    assert!(
        hybrid.dense_unavailable_reason.contains("403 Forbidden"),
        "{}",
        hybrid.dense_unavailable_reason
    );
    assert_eq!(fake.received().len(), after_index + 2);

    // Down for good: DENSE is UNAVAILABLE after its two tries (queries get fewer than indexing); indexing a new file keeps the
    // parsed item (BM25 finds it) and fails UNAVAILABLE; once the endpoint is back, the next
    // run embeds only that item.
    fake.set_down(true);
    fails_with(
        search(&sandbox, "header line", Strategy::Dense).await,
        Code::Unavailable,
        "after 2 tries: 503",
    );
    let err = sandbox.index_files(&FILES[1..2]).await.unwrap_err();
    assert!(
        err.to_string().contains("embedding endpoint unavailable"),
        "{err}"
    );
    let bm25 = search(&sandbox, "backoff delay", Strategy::Bm25)
        .await
        .unwrap();
    assert_eq!(top_path(&bm25), "crate::retry::backoff_delay");
    let status = status(&sandbox).await;
    assert_eq!((status.items, status.embedded_items), (2, 1));
    fake.set_down(false);
    let summary = index(&sandbox).await.unwrap();
    assert_eq!(
        (
            summary.items_total,
            summary.items_embedded,
            summary.embeddings_reused
        ),
        (2, 1, 0)
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn an_input_the_endpoint_refuses_leaves_only_that_item_without_a_vector() {
    let fake = FakeEmbeddings::start(32).await.unwrap();
    let sandbox = start(&fake).await;
    fake.refuse_inputs_containing("evict_oldest");
    // Three items in batches of two: the batch holding the refused one is resent one text at
    // a time, and only that text is left without a vector.
    sandbox.index_files(&FILES).await.unwrap();
    let after = status(&sandbox).await;
    assert_eq!((after.items, after.embedded_items), (3, 2));
    let sizes: Vec<usize> = fake.received().iter().map(|r| r.input.len()).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 1 + 3 + 2, "{sizes:?}");
    // The item is still found by its words; the others by their vectors.
    let bm25 = search(&sandbox, "evict oldest", Strategy::Bm25)
        .await
        .unwrap();
    assert_eq!(top_path(&bm25), "crate::cache::evict_oldest");
    let dense = search(&sandbox, "http header line parsing", Strategy::Dense)
        .await
        .unwrap();
    assert_eq!(top_path(&dense), "crate::header::parse_header_line");
    // Once the endpoint accepts it, the next run embeds just that item.
    fake.refuse_inputs_containing("no input contains this");
    let summary = index(&sandbox).await.unwrap();
    assert_eq!((summary.items_embedded, summary.embeddings_reused), (1, 0));
    assert_eq!(status(&sandbox).await.embedded_items, 3);
    sandbox.stop().await.unwrap();
}
