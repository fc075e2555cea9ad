//! The file watcher refreshes an indexed workspace by itself: new, edited, deleted and moved
//! files (and whole directories), ignoring what .gitignore ignores.

use std::path::Path;
use std::time::Duration;

use ploke_rag_search::bm25::Filters;
use ploke_rag_search::service::{RagService, Refreshed, Retrieval, SearchQuery, Strategy};
use ploke_rag_search::watch;
use ploke_runtime::workspaces::Workspaces;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

async fn top(service: &RagService, query: &str) -> Vec<String> {
    service
        .search(SearchQuery {
            workspace_root: String::new(),
            query: query.into(),
            strategy: Strategy::Bm25,
            top_k: 5,
            filters: Filters::default(),
            session_id: String::new(),
        })
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.record.item.canon_path)
        .collect()
}

/// Waits until `done` holds, re-checking after each refresh the watcher reports (the events
/// are the synchronisation; the deadline only turns a hang into a failure).
async fn until<F, Fut>(
    rx: &mut tokio::sync::broadcast::Receiver<Refreshed>,
    done: F,
) -> Vec<Refreshed>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while !done().await {
            let e = rx.recv().await.unwrap();
            seen.push(e);
        }
    })
    .await
    .expect("the watcher refreshed in time");
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_keeps_the_index_fresh() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    write(&root, ".gitignore", "scratch/\n");
    write(&root, "src/lib.rs", "pub fn original_entry() {}\n");
    let service = RagService::open(
        Workspaces::new(std::slice::from_ref(&root)),
        data.path(),
        None,
        Retrieval::default(),
    )
    .unwrap();
    let (ptx, _prx) = tokio::sync::mpsc::channel(16);
    service.index("", false, ptx).await.unwrap();
    let _watcher =
        watch::spawn(service.clone(), service.roots(), Duration::from_millis(100)).unwrap();
    let mut rx = service.subscribe_refreshes();

    // A new file is indexed.
    write(&root, "src/fresh.rs", "pub fn brand_new_function() {}\n");
    until(&mut rx, || async {
        top(&service, "brand new function")
            .await
            .first()
            .map(String::as_str)
            == Some("crate::fresh::brand_new_function")
    })
    .await;

    // An edit replaces the old item.
    write(&root, "src/lib.rs", "pub fn renamed_entry() {}\n");
    until(&mut rx, || async {
        top(&service, "original").await.is_empty()
    })
    .await;
    assert_eq!(
        top(&service, "renamed entry").await[0],
        "crate::renamed_entry"
    );

    // A moved directory: old paths gone, new paths found.
    write(&root, "src/net/client.rs", "pub fn connect_socket() {}\n");
    until(&mut rx, || async {
        !top(&service, "connect socket").await.is_empty()
    })
    .await;
    std::fs::rename(root.join("src/net"), root.join("src/transport")).unwrap();
    until(&mut rx, || async {
        top(&service, "connect socket").await
            == vec!["crate::transport::client::connect_socket".to_owned()]
    })
    .await;

    // A deleted file disappears.
    std::fs::remove_file(root.join("src/fresh.rs")).unwrap();
    until(&mut rx, || async {
        top(&service, "brand").await.is_empty()
    })
    .await;

    // Ignored files stay out: the refresh that saw the file indexed nothing.
    write(
        &root,
        "scratch/tmp.rs",
        "pub fn ignored_scratch_work() {}\n",
    );
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let e = rx.recv().await.unwrap();
            if e.paths
                .iter()
                .any(|p| p == "scratch" || p == "scratch/tmp.rs")
            {
                assert_eq!(e.summary.files_indexed, 0, "{e:?}");
                break;
            }
        }
    })
    .await
    .expect("the watcher saw the ignored file");
    assert!(top(&service, "ignored scratch work").await.is_empty());

    // The ignore rules change: the workspace is walked again. A directory newly ignored
    // leaves the index, one no longer ignored joins it.
    write(
        &root,
        "src/generated/out.rs",
        "pub fn generated_table() {}\n",
    );
    until(&mut rx, || async {
        !top(&service, "generated table").await.is_empty()
    })
    .await;
    write(&root, ".gitignore", "src/generated/\n");
    until(&mut rx, || async {
        top(&service, "generated table").await.is_empty()
            && !top(&service, "ignored scratch work").await.is_empty()
    })
    .await;
}
