//! Indexes that keep themselves ready: a configured workspace is indexed at start with no RPC,
//! and nothing a user waits on (Search, GetContext, IndexStatus, tools) waits for a run: they
//! answer from its last commit and say so. The embedding endpoint (a real HTTP fake) is held
//! mid-run to keep a run going for as long as the test needs, without sleeps.

use ploke_e2e::Sandbox;
use ploke_e2e::fake_embeddings::FakeEmbeddings;
use ploke_proto::rag::v1::{
    GetContextRequest, IndexPhase, IndexState, IndexStatusRequest, SearchRequest, SearchResponse,
    Strategy,
};
use ploke_proto::tools::v1::{GetFileMetadataArgs, RequestCodeContextArgs, tool_call, tool_result};

use crate::suite::faults::tool;

const FILES: [(&str, &str); 2] = [
    (
        "src/retry.rs",
        "/// Waits before the next attempt.\npub fn backoff_delay(attempt: u32) -> u64 {\n    100u64 << attempt\n}\n",
    ),
    (
        "src/cache.rs",
        "/// Evicts the oldest cache entry.\npub fn evict_oldest(entries: &mut Vec<u32>) {\n    entries.pop();\n}\n",
    ),
];

async fn search(sandbox: &Sandbox, query: &str, strategy: Strategy) -> SearchResponse {
    sandbox
        .rag()
        .search(SearchRequest {
            query: query.into(),
            strategy: strategy as i32,
            top_k: 3,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

fn top(r: &SearchResponse) -> &str {
    r.hits
        .first()
        .and_then(|h| h.part.as_ref())
        .map_or("", |p| p.canon_path.as_str())
}

#[tokio::test]
async fn searches_and_tools_answer_from_the_last_commit_while_a_run_embeds() {
    let fake = FakeEmbeddings::start(64).await.unwrap();
    let config = fake.config();
    // The workspace has files before the services start: they index it on their own.
    let sandbox = Sandbox::start_with(move |c| {
        c.embedding = Some(config);
        c.rag_search.watch = false;
    })
    .await
    .unwrap();
    let ws = sandbox.workspace_root().to_owned();
    fake.hold();
    for (rel, text) in FILES {
        std::fs::create_dir_all(ws.join(rel).parent().unwrap()).unwrap();
        std::fs::write(ws.join(rel), text).unwrap();
    }
    // A run starts (as the watcher or a client would start one) and stops at the model.
    let mut run = sandbox.index_run_held(&fake).await.unwrap();

    // Every file is parsed: BM25 answers for the whole tree, READY though the run embeds (a
    // one-shot `ploke search` exits before embedding ends, and was told "still being built"
    // every time).
    let bm25 = search(&sandbox, "backoff delay", Strategy::Bm25).await;
    assert_eq!(
        (top(&bm25), bm25.index_state),
        ("crate::retry::backoff_delay", IndexState::Ready as i32)
    );
    // HYBRID answers with BM25 alone while no item has a vector, and says why.
    let hybrid = search(&sandbox, "evict oldest", Strategy::Hybrid).await;
    assert_eq!(
        (
            top(&hybrid),
            hybrid.strategy,
            hybrid.dense_used,
            hybrid.index_state
        ),
        (
            "crate::cache::evict_oldest",
            Strategy::Bm25 as i32,
            false,
            IndexState::Ready as i32
        )
    );
    assert!(
        hybrid
            .dense_unavailable_reason
            .starts_with("no item has a vector yet: the index run is at embedding"),
        "{}",
        hybrid.dense_unavailable_reason
    );
    let context = sandbox
        .rag()
        .get_context(GetContextRequest {
            query: "backoff delay".into(),
            strategy: Strategy::Bm25 as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(context.stats.unwrap().index_state, "ready");
    let status = sandbox
        .rag()
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    let progress = status.progress.unwrap();
    assert_eq!(
        (
            status.state,
            status.items,
            progress.phase,
            progress.embed_total
        ),
        (
            IndexState::Indexing as i32,
            2,
            IndexPhase::Embedding as i32,
            2
        )
    );
    assert!(progress.elapsed.is_some());
    // Tools answer too; the model is not told of an incomplete index: every file is in it.
    let meta = tool(
        &sandbox,
        tool_call::Args::GetFileMetadata(GetFileMetadataArgs {
            file_path: "src/retry.rs".into(),
        }),
    )
    .await
    .unwrap();
    let Some(tool_result::Result::GetFileMetadata(meta)) = meta.result else {
        panic!("{meta:?}")
    };
    assert_eq!((meta.exists, meta.indexed_items), (true, 1));
    let context = tool(
        &sandbox,
        tool_call::Args::RequestCodeContext(RequestCodeContextArgs {
            search_term: Some("backoff delay".into()),
            token_budget: None,
            languages: vec![],
        }),
    )
    .await
    .unwrap();
    let Some(tool_result::Result::RequestCodeContext(context)) = context.result else {
        panic!("{context:?}")
    };
    assert_eq!(context.index_note, "", "{context:?}");
    assert_eq!(context.parts[0].canon_path, "crate::retry::backoff_delay");

    // The model answers: the run ends, and dense retrieval joins in.
    fake.release();
    let mut last = None;
    while let Some(p) = run.message().await.unwrap() {
        last = Some(p);
    }
    let last = last.unwrap();
    assert_eq!(last.phase, IndexPhase::Done as i32);
    assert_eq!(last.summary.unwrap().items_total, 2);
    let hybrid = search(&sandbox, "evict oldest", Strategy::Hybrid).await;
    assert_eq!(
        (hybrid.strategy, hybrid.dense_used, hybrid.index_state),
        (Strategy::Hybrid as i32, true, IndexState::Ready as i32)
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_configured_workspace_is_indexed_at_start_with_no_rpc() {
    let sandbox = Sandbox::start_with(|c| c.rag_search.watch = false)
        .await
        .unwrap();
    let ws = sandbox.workspace_root().to_owned();
    for (rel, text) in FILES {
        std::fs::create_dir_all(ws.join(rel).parent().unwrap()).unwrap();
        std::fs::write(ws.join(rel), text).unwrap();
    }
    // A restart on the same data dir and workspace: no IndexWorkspace is ever called.
    let sandbox = sandbox.restart().await.unwrap();
    ploke_e2e::wait::eventually("the start-up run indexed both files", || async {
        search(&sandbox, "backoff delay", Strategy::Bm25)
            .await
            .hits
            .len()
            == 1
    })
    .await;
    ploke_e2e::wait::eventually("the start-up run finished", || async {
        let s = sandbox
            .rag()
            .index_status(IndexStatusRequest::default())
            .await
            .unwrap()
            .into_inner();
        s.state == IndexState::Ready as i32 && s.items == 2
    })
    .await;
    sandbox.stop().await.unwrap();
}
