use super::*;
use crate::bm25::Filters;

fn slot() -> (tempfile::TempDir, tempfile::TempDir, Slot) {
    let (ws, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir_all(ws.path().join("src")).unwrap();
    std::fs::write(
        ws.path().join("src/lib.rs"),
        "/// Loads the settings.\npub fn load_settings() {}\n\npub fn start() {}\n",
    )
    .unwrap();
    let mut index = WorkspaceIndex::open_plain(ws.path(), data.path());
    index.index_all(false, None, &mut |_| {}).unwrap();
    (ws, data, Slot::new(index, IndexState::Ready))
}

fn query(text: &str) -> SearchQuery {
    SearchQuery {
        workspace_root: String::new(),
        query: text.to_owned(),
        strategy: Strategy::Bm25,
        top_k: 5,
        filters: Filters::default(),
        session_id: String::new(),
    }
}

#[test]
fn a_bm25_search_runs_in_place_only_when_the_index_lock_is_free() {
    let (_ws, _data, slot) = slot();
    let q = query("load settings");
    let answered = bm25_in_place(&slot, &q, "", &IndexState::Ready, Rrf::default())
        .expect("the lock is free")
        .unwrap();
    let names: Vec<&str> = answered
        .hits
        .iter()
        .map(|h| h.record.item.canon_path.as_str())
        .collect();
    assert_eq!(names[0], "crate::load_settings");
    assert_eq!(
        (answered.strategy, answered.dense_used),
        (Strategy::Bm25, false)
    );

    // A writer (an index run's step, a refresh) holds the lock: the search does not wait on it
    // in place (it would block the async worker; holding the lock on this very thread, waiting
    // would never end) but leaves it to the pool.
    let writing = slot.index.write().unwrap();
    assert!(bm25_in_place(&slot, &q, "", &IndexState::Ready, Rrf::default()).is_none());
    drop(writing);
    assert!(bm25_in_place(&slot, &q, "", &IndexState::Ready, Rrf::default()).is_some());
    // A search asking for many hits goes to the pool.
    let many = SearchQuery {
        top_k: IN_PLACE_MAX_TOP_K + 1,
        ..query("load settings")
    };
    assert!(bm25_in_place(&slot, &many, "", &IndexState::Ready, Rrf::default()).is_none());
}

#[test]
fn only_a_small_index_a_short_query_and_few_hits_search_in_place() {
    let q = query("load settings");
    assert!(cheap_enough(IN_PLACE_MAX_ITEMS, &q));
    assert!(!cheap_enough(IN_PLACE_MAX_ITEMS + 1, &q));
    let long = query(&"settings ".repeat(IN_PLACE_MAX_QUERY_BYTES / 9 + 1));
    assert!(long.query.len() > IN_PLACE_MAX_QUERY_BYTES);
    assert!(!cheap_enough(10, &long));
    let many = SearchQuery {
        top_k: IN_PLACE_MAX_TOP_K + 1,
        ..query("load settings")
    };
    assert!(!cheap_enough(10, &many));
    // Quoted text reads every candidate's stored text: the pool's work.
    assert!(!cheap_enough(10, &query("where is \"settings loaded\"")));
    assert!(cheap_enough(
        10,
        &SearchQuery {
            top_k: IN_PLACE_MAX_TOP_K,
            ..query("load settings")
        }
    ));
}
