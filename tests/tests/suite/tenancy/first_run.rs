//! A developer who asks while a shared workspace is indexed for the first time: their changes
//! are a difference from the whole tree, so they wait (told where the run stands) until every
//! file is parsed, and go as soon as it is, while the run still embeds.

use std::collections::BTreeMap;

use ploke_client::overlay::{FirstRunReading, sync, sync_when_parsed};
use ploke_e2e::fake_embeddings::FakeEmbeddings;
use ploke_e2e::fake_provider::FakeProvider;
use ploke_e2e::{Sandbox, TOKEN};
use ploke_proto::rag::v1::{IndexPhase, IndexState, IndexStatusRequest};
use ploke_proto::session::v1::CreateSessionRequest;
use ploke_runtime::ServiceKind;

const SERVED: [(&str, &str); 2] = [
    ("src/lib.rs", "pub mod retry;\n"),
    (
        "src/retry.rs",
        "/// Waits before the next attempt.\npub fn backoff_delay(attempt: u32) -> u64 {\n    100u64 << attempt\n}\n",
    ),
];

#[tokio::test]
async fn changes_wait_for_the_first_run_to_read_the_tree_and_go_while_it_embeds() {
    let fake = FakeEmbeddings::start(64).await.unwrap();
    let model = FakeProvider::start().await.unwrap();
    let (embedding, provider) = (fake.config(), model.provider_config(Some(16_000)));
    // Nothing indexed at start, nor by the Sandbox: the first run is the one started below.
    let sandbox = Sandbox::start_with(move |c| {
        c.providers = BTreeMap::from([("fake".to_owned(), provider)]);
        c.embedding = Some(embedding);
        c.rag_search.index_on_start = false;
        c.rag_search.watch = false;
    })
    .await
    .unwrap();
    let served = sandbox.workspace_root().to_owned();
    let mine = tempfile::tempdir().unwrap();
    for (rel, text) in SERVED {
        for root in [served.as_path(), mine.path()] {
            std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
            std::fs::write(root.join(rel), text).unwrap();
        }
    }
    // The developer deleted a file: a change with nothing to embed while the model is held.
    std::fs::remove_file(mine.path().join("src/retry.rs")).unwrap();

    let url = sandbox.addrs().url(ServiceKind::Gateway);
    let mut client = ploke_client::gateway::connect(&url, Some(TOKEN.into()))
        .await
        .unwrap();
    let session = client
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner();

    // No run has read the tree: refused, saying so (not a word about overlays or IndexStatus).
    let refused = sync(&mut client, &session.session_id, mine.path())
        .await
        .unwrap_err();
    assert_eq!(
        refused
            .downcast_ref::<FirstRunReading>()
            .map(ToString::to_string),
        Some(format!(
            "the server is reading {} for the first time (not started); your changes can go once it has read every file: send again in a moment",
            session.workspace_root
        ))
    );

    // `ploke ask` waits instead, told where the run stands each time it looks.
    let (told_tx, told) = tokio::sync::oneshot::channel();
    let waiting = {
        let (mut client, root) = (client.clone(), mine.path().to_owned());
        let ids = (session.session_id.clone(), session.workspace_root.clone());
        tokio::spawn(async move {
            let mut told_tx = Some(told_tx);
            let mut seen = Vec::new();
            let synced = sync_when_parsed(&mut client, (&ids.0, &ids.1), &root, |status| {
                seen.push(status.state);
                if let Some(tx) = told_tx.take() {
                    let _ = tx.send(());
                }
            })
            .await;
            (synced, seen)
        })
    };
    told.await.unwrap();

    // The operator's run starts and stops at the model, with every file parsed: the changes
    // go now, before the run ends.
    fake.hold();
    let mut run = sandbox.index_run_held(&fake).await.unwrap();
    let (synced, seen) = waiting.await.unwrap();
    let synced = synced.unwrap();
    assert_eq!(
        (synced.changed, synced.deleted, synced.uploaded),
        (0, 1, 0),
        "{synced}"
    );
    // First told of a workspace no run has read yet.
    assert_eq!(seen.first(), Some(&(IndexState::NotIndexed as i32)));
    let status = sandbox
        .rag()
        .index_status(IndexStatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (status.state, status.progress.map(|p| p.phase)),
        (
            IndexState::Indexing as i32,
            Some(IndexPhase::Embedding as i32)
        )
    );

    fake.release();
    while run.message().await.unwrap().is_some() {}
    // Nothing changed since: nothing is sent again.
    let again = sync(&mut client, &session.session_id, mine.path())
        .await
        .unwrap();
    assert_eq!(
        (again.deleted, again.uploaded, again.version),
        (1, 0, synced.version),
        "{again}"
    );
    sandbox.stop().await.unwrap();
}
