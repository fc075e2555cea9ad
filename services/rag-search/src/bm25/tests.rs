use super::*;
use rustc_hash::FxHashMap;
use tantivy::schema::{INDEXED, STORED, Schema};

fn doc<'a>(id: u64, file: &'a str, name: &'a str, body: &'a str, kind: Kind) -> Bm25Doc<'a> {
    Bm25Doc {
        id,
        order: crate::record::order_key(file, 0),
        file,
        kind,
        language: "rust",
        name,
        canon_path: name,
        signature: "",
        doc: "",
        body,
    }
}

#[test]
fn finds_by_identifier_parts_filters_and_removes() {
    let dir = tempfile::tempdir().unwrap();
    let mut bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    bm.add(&doc(
        1,
        "src/config.rs",
        "load_config",
        "fn load_config() { read_file() }",
        Kind::Function,
    ))
    .unwrap();
    bm.add(&doc(
        2,
        "src/net/http.rs",
        "HttpClient",
        "struct HttpClient { retries: u8 }",
        Kind::Struct,
    ))
    .unwrap();
    bm.add(&doc(
        3,
        "src/net/retry.rs",
        "backoff",
        "fn backoff(attempt: u32) -> Duration",
        Kind::Function,
    ))
    .unwrap();
    bm.commit().unwrap();
    assert_eq!(bm.num_docs(), 3);

    let ids = |c: Vec<Candidate>| c.iter().map(|h| h.id).collect::<Vec<_>>();
    let hits = bm.search("config", &Filters::default(), 10).unwrap();
    assert_eq!(ids(hits), vec![1]);
    assert_eq!(
        bm.texts(&[1]).unwrap()[&1],
        "fn load_config() { read_file() }"
    );
    assert_eq!(
        ids(bm.search("http client", &Filters::default(), 10).unwrap()),
        vec![2]
    );
    let net_only = Filters {
        path_prefixes: vec![normalize_prefix("./src/net/")],
        ..Filters::default()
    };
    let mut got = ids(bm.search("retries backoff config", &net_only, 10).unwrap());
    got.sort_unstable();
    assert_eq!(got, vec![2, 3]);
    let structs = Filters {
        kinds: vec![Kind::Struct],
        ..Filters::default()
    };
    assert_eq!(
        ids(bm.search("retries backoff", &structs, 10).unwrap()),
        vec![2]
    );

    bm.remove_file("src/net/http.rs");
    bm.commit().unwrap();
    assert!(ids(bm.search("HttpClient", &Filters::default(), 10).unwrap()).is_empty());
    assert!(ids(bm.search("", &Filters::default(), 10).unwrap()).is_empty());
    drop(bm);
    // Persisted: reopening sees the same documents.
    let bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    assert_eq!(bm.num_docs(), 2);
}

#[test]
fn an_index_of_another_schema_is_started_over() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Schema::builder();
    b.add_u64_field("id", INDEXED | STORED);
    let old = Index::create_in_dir(dir.path(), b.build()).unwrap();
    drop(old);
    let bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    assert_eq!(bm.num_docs(), 0);
    assert_eq!(bm.index().schema(), schema().0);
}

#[test]
fn an_index_with_larger_doc_store_blocks_is_started_over() {
    // Written before the doc store's blocks were made small: same schema, tantivy's default.
    let dir = tempfile::tempdir().unwrap();
    let old = Index::create_in_dir(dir.path(), schema().0).unwrap();
    assert_ne!(old.settings().docstore_blocksize, DOCSTORE_BLOCK_BYTES);
    drop(old);
    let bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    assert_eq!(
        bm.index().settings().docstore_blocksize,
        DOCSTORE_BLOCK_BYTES
    );
    drop(bm);
    // Reopened as it was written.
    let bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    assert_eq!(
        bm.index().settings().docstore_blocksize,
        DOCSTORE_BLOCK_BYTES
    );
}

#[test]
fn merging_segments_keeps_every_answer_and_leaves_one_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    let bodies = [
        "fn spawn_task() { schedule() }",
        "fn abort_all() { for t in tasks { t.abort() } }",
        "struct JoinSet { tasks: Vec<Task> }",
    ];
    // One commit per document: three segments, one of them with a deleted document.
    for (i, body) in bodies.iter().enumerate() {
        let file = format!("src/f{i}.rs");
        bm.add(&doc(i as u64 + 1, &file, "item", body, Kind::Function))
            .unwrap();
        bm.commit().unwrap();
    }
    bm.remove_file("src/f0.rs");
    bm.commit().unwrap();
    let segments = |bm: &Bm25| bm.index().searchable_segment_ids().unwrap().len();
    assert_eq!(segments(&bm), 2);
    let answers = |bm: &Bm25| {
        ["tasks abort", "spawn", "join set tasks"]
            .map(|q| bm.search(q, &Filters::default(), 10).unwrap())
    };
    let before = answers(&bm);

    assert_eq!(bm.merge_segments().unwrap().unwrap().wait().unwrap(), 2);
    bm.reload().unwrap();

    assert_eq!(segments(&bm), 1);
    assert_eq!(answers(&bm), before);
    assert_eq!(bm.num_docs(), 2);
    assert_eq!(bm.texts(&[3]).unwrap()[&3], bodies[2]);
    // Already one segment: nothing to do.
    assert!(bm.merge_segments().unwrap().is_none());
    // Closed (the service stopping): no merge starts.
    bm.add(&doc(
        9,
        "src/f9.rs",
        "item",
        "fn later() {}",
        Kind::Function,
    ))
    .unwrap();
    bm.commit().unwrap();
    bm.close();
    assert!(matches!(bm.merge_segments(), Err(Bm25Error::Closed)));
}

/// The ids of the first ten hits for `query`, best first.
fn ids_for(bm: &Bm25, query: &str) -> Vec<u64> {
    bm.search(query, &Filters::default(), 10)
        .unwrap()
        .iter()
        .map(|h| h.id)
        .collect()
}

#[test]
fn words_a_query_writes_out_find_the_abbreviations_code_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    bm.add(&doc(
        1,
        "src/counts.rs",
        "close_all_streams",
        "fn close_all_streams(&mut self) { self.streams.clear() }",
        Kind::Method,
    ))
    .unwrap();
    bm.add(&doc(
        2,
        "src/counts.rs",
        "inc_num_recv_streams",
        "fn inc_num_recv_streams(&mut self) { self.num_recv_streams += 1 }",
        Kind::Method,
    ))
    .unwrap();
    bm.commit().unwrap();
    // "Increments", "number" and "receive" find `inc`, `num` and `recv`; "streams" alone
    // would rank the two alike.
    assert_eq!(
        ids_for(&bm, "Increments the number of concurrent receive streams."),
        [2, 1]
    );
    // An abbreviation weighs less than the word written: `len` does not beat "length".
    bm.add(&doc(
        3,
        "src/a.rs",
        "len",
        "fn len(&self) -> usize",
        Kind::Method,
    ))
    .unwrap();
    bm.add(&doc(
        4,
        "src/b.rs",
        "length",
        "fn length(&self) -> usize",
        Kind::Method,
    ))
    .unwrap();
    bm.commit().unwrap();
    assert_eq!(ids_for(&bm, "length"), [4, 3]);
}

#[test]
fn quoted_text_finds_the_items_holding_it_as_written_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    let bodies = [
        (
            1,
            "fn fmt() { f.write_str(\"error decoding response body\") }",
        ),
        // The same words, more often and out of order.
        (
            2,
            "fn text() { // decoding: a response body error is a body error of the response \
             decoding; the response body decoding error }",
        ),
        (3, "fn other() { error() }"),
    ];
    for (id, body) in bodies {
        bm.add(&doc(id, "src/lib.rs", "f", body, Kind::Function))
            .unwrap();
    }
    bm.commit().unwrap();
    let ids = |q: &str| ids_for(&bm, q);
    assert_eq!(ids("error decoding response body")[0], 2);
    assert_eq!(
        ids("where is \"Error decoding response body\" raised")[..2],
        [1, 2]
    );
    // Quoted words that no item holds as written leave the first hit as it was.
    assert_eq!(
        ids("\"body response decoding error\"")[0],
        ids("body response decoding error")[0]
    );
}

#[test]
fn quoted_text_ranks_the_innermost_holder_before_the_items_around_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    let method = "fn call(&self) { raise(\"auth hooks must be callable\") }";
    let around =
        format!("impl Auth {{ {method} fn hooks() {{ /* auth hooks, callable hooks */ }} }}");
    let copy = format!("mod copy {{ {method} /* auth hooks */ }}");
    bm.add(&doc(1, "src/auth.rs", "Auth", &around, Kind::Impl))
        .unwrap();
    bm.add(&doc(2, "src/auth.rs", "call", method, Kind::Method))
        .unwrap();
    // The same text in another file holds it on its own account.
    bm.add(&doc(3, "src/copy.rs", "copy", &copy, Kind::Module))
        .unwrap();
    // An impl that writes the text itself, besides its method, holds it on its own account too.
    let own = format!("impl Own {{ const MSG: &str = \"Auth hooks must be callable\"; {method} }}");
    bm.add(&doc(4, "src/own.rs", "Own", &own, Kind::Impl))
        .unwrap();
    bm.add(&doc(5, "src/own.rs", "call", method, Kind::Method))
        .unwrap();
    bm.commit().unwrap();
    let ids = |q: &str| ids_for(&bm, q);
    // Unquoted, the impl's words count more than its method's.
    let plain = ids("auth hooks must be callable");
    let at = |id: u64| plain.iter().position(|i| *i == id).unwrap();
    assert!(at(1) < at(2), "{plain:?}");
    // Quoted, the method that writes the message comes before the impl around it; the others
    // are raised alike and keep BM25's order among them.
    let quoted = ids("\"auth hooks must be callable\"");
    assert_eq!(quoted.last(), Some(&1), "{quoted:?}");
    let mut raised = quoted[..4].to_vec();
    raised.sort_unstable();
    assert_eq!(raised, [2, 3, 4, 5]);
}

#[test]
fn the_verb_a_change_is_told_with_finds_no_item_by_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    bm.add(&doc(
        1,
        "src/map.rs",
        "crate::map::Map::remove",
        "pub fn remove(&mut self, key: &str) -> Option<Value> { self.map.remove(key) }",
        Kind::Method,
    ))
    .unwrap();
    bm.add(&doc(
        2,
        "src/value/mod.rs",
        "crate::value::Value::pointer",
        "pub fn pointer<'a>(&'a self, path: &str) -> Option<&'a Value> { self.get(path) }",
        Kind::Method,
    ))
    .unwrap();
    bm.commit().unwrap();
    let ids = |query: &str| -> Vec<u64> {
        let hits = bm.search(query, &Filters::default(), 10).unwrap();
        hits.iter().map(|h| h.id).collect()
    };
    // "Remove" says what was done to the pointer signatures; `Map::remove` is not meant.
    assert_eq!(ids("Remove unneeded lifetimes from pointer"), vec![2, 1]);
    // A doc sentence's "Removes", and the verb written elsewhere, count in full.
    assert_eq!(ids("Removes unneeded lifetimes from pointer"), vec![1, 2]);
    assert_eq!(ids("unneeded lifetimes: remove from pointer"), vec![1, 2]);
}

#[test]
fn an_index_with_a_compressed_doc_store_is_started_over() {
    // Written before the doc store was left uncompressed: same schema and blocks, lz4.
    let dir = tempfile::tempdir().unwrap();
    let compressed = tantivy::IndexSettings {
        docstore_compression: tantivy::store::Compressor::default(),
        ..schema::settings()
    };
    assert_ne!(
        compressed.docstore_compression,
        schema::DOCSTORE_COMPRESSION
    );
    let old = Index::builder()
        .schema(schema().0)
        .settings(compressed)
        .create_in_dir(dir.path())
        .unwrap();
    drop(old);
    let mut bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    assert_eq!(
        bm.index().settings().docstore_compression,
        schema::DOCSTORE_COMPRESSION
    );
    bm.add(&doc(1, "src/a.rs", "a", "fn a() {}", Kind::Function))
        .unwrap();
    bm.commit().unwrap();
    drop(bm);
    // Reopened as it was written, its documents kept.
    let bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    assert_eq!(bm.num_docs(), 1);
    assert_eq!(bm.texts(&[1]).unwrap()[&1], "fn a() {}");
}

#[test]
fn texts_are_read_by_id_from_live_documents_of_every_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    // Three segments: the first item's document is deleted and its id written again later
    // (the file changed), the second's is deleted for good.
    bm.add(&doc(1, "src/a.rs", "a", "fn a() { old() }", Kind::Function))
        .unwrap();
    bm.add(&doc(2, "src/b.rs", "b", "fn b() {}", Kind::Function))
        .unwrap();
    bm.commit().unwrap();
    bm.add(&doc(
        3,
        "src/c.rs",
        "c",
        "fn c() { ünïcode() }",
        Kind::Function,
    ))
    .unwrap();
    bm.commit().unwrap();
    bm.remove_file("src/a.rs");
    bm.remove_file("src/b.rs");
    bm.add(&doc(1, "src/a.rs", "a", "fn a() { new() }", Kind::Function))
        .unwrap();
    bm.commit().unwrap();
    bm.reload().unwrap();

    let texts = bm.texts(&[3, 1, 2, 99, 1]).unwrap();
    let expected: FxHashMap<u64, String> = [
        (1, "fn a() { new() }".to_owned()),
        (3, "fn c() { ünïcode() }".to_owned()),
    ]
    .into_iter()
    .collect();
    assert_eq!(texts, expected);
    assert!(bm.texts(&[]).unwrap().is_empty());
}

#[test]
fn a_cut_between_equal_scores_keeps_the_same_documents_in_every_index() {
    // Documents alike but for their file, written in one order to one index and in the other
    // order (over two commits) to another: tantivy places them differently. Twelve: the run of
    // equal scores is seen whole past the cut; forty: longer than the slack, searched again.
    for n in [12, 40] {
        let files: Vec<String> = (0..n).map(|i| format!("src/m{i}.rs")).collect();
        let body = "fn shared_helper() -> u32 { parse_token_value() }";
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut a = Bm25::open(a_dir.path(), Boosts::default()).unwrap();
        let mut b = Bm25::open(b_dir.path(), Boosts::default()).unwrap();
        let add = |bm: &mut Bm25, i: usize| {
            let id = i as u64 + 1;
            bm.add(&doc(id, &files[i], "shared_helper", body, Kind::Function))
                .unwrap();
        };
        for i in 0..n {
            add(&mut a, i);
        }
        a.commit().unwrap();
        for i in (0..n).rev() {
            add(&mut b, i);
            if i == n / 2 {
                b.commit().unwrap();
            }
        }
        b.commit().unwrap();

        // The three kept are those of the smallest order keys, in that order, in both.
        let mut by_key: Vec<(u64, u64)> = files
            .iter()
            .enumerate()
            .map(|(i, f)| (crate::record::order_key(f, 0), i as u64 + 1))
            .collect();
        by_key.sort_unstable();
        let expected: Vec<u64> = by_key.iter().take(3).map(|(_, id)| *id).collect();
        let search = |bm: &Bm25| -> Vec<(u64, f32)> {
            bm.search("parse token value", &Filters::default(), 3)
                .unwrap()
                .into_iter()
                .map(|c| (c.id, c.score))
                .collect()
        };
        let (from_a, from_b) = (search(&a), search(&b));
        let ids: Vec<u64> = from_a.iter().map(|c| c.0).collect();
        assert_eq!(ids, expected, "{n} documents");
        assert_eq!(from_a, from_b, "{n} documents");
    }
}

#[test]
fn a_second_opener_of_one_index_is_told_it_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Bm25::open(dir.path(), Boosts::default()).unwrap();
    let Err(e) = Bm25::open(dir.path(), Boosts::default()) else {
        panic!("a second writer opened the index")
    };
    assert_eq!(
        e.to_string(),
        format!(
            "bm25 index {} is locked by another process; each rag-search needs a data dir of its own",
            dir.path().display()
        )
    );
}

/// Writes the pending documents' segment to disk without committing it (as a run that failed
/// before its commit leaves it).
fn write_segment_uncommitted(bm: &mut Bm25) {
    let writer = bm.writer.get_mut().unwrap().as_mut().unwrap();
    drop(writer.prepare_commit().unwrap());
}

#[test]
fn a_rollback_deletes_the_segment_files_of_what_it_drops() {
    let dir = tempfile::tempdir().unwrap();
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        names
    };
    let mut bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    bm.add(&doc(
        1,
        "src/a.rs",
        "alpha",
        "fn alpha() {}",
        Kind::Function,
    ))
    .unwrap();
    bm.commit().unwrap();
    let committed = files();
    // A run that wrote its segment and then failed before its commit (as on a full disk).
    bm.add(&doc(2, "src/b.rs", "beta", "fn beta() {}", Kind::Function))
        .unwrap();
    write_segment_uncommitted(&mut bm);
    assert!(files().len() > committed.len(), "{:?}", files());
    bm.rollback().unwrap();
    assert_eq!(files(), committed);
    assert_eq!(bm.num_docs(), 1);
    // Opened again on files a crash left: deleted too.
    bm.add(&doc(
        3,
        "src/c.rs",
        "gamma",
        "fn gamma() {}",
        Kind::Function,
    ))
    .unwrap();
    write_segment_uncommitted(&mut bm);
    bm.close();
    drop(bm);
    assert!(files().len() > committed.len(), "{:?}", files());
    let bm = Bm25::open(dir.path(), Boosts::default()).unwrap();
    assert_eq!(files(), committed);
    assert_eq!(bm.num_docs(), 1);
}
