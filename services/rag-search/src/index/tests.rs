use super::*;
use crate::bm25::Filters;
use crate::rank::LengthPrior;

struct Fixture {
    ws: tempfile::TempDir,
    data: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let f = Self {
            ws: tempfile::tempdir().unwrap(),
            data: tempfile::tempdir().unwrap(),
        };
        f.write(
            "src/lib.rs",
            "pub mod config;\n\n/// Entry point.\npub fn start() {}\n",
        );
        f.write(
            "src/config.rs",
            "pub struct Config;\n\nimpl Config {\n    pub fn load_settings() -> Self { Config }\n}\n",
        );
        f.write("README.md", "# Demo\n\nHow to load settings.\n");
        f
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.ws.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn open(&self) -> WorkspaceIndex {
        self.open_with(None)
    }

    fn open_with(&self, dense: Option<DenseSpec<'_>>) -> WorkspaceIndex {
        WorkspaceIndex::open(
            self.ws.path(),
            self.data.path(),
            (Boosts::default(), LengthPrior::default()),
            dense,
        )
        .unwrap()
    }
}

fn top(index: &WorkspaceIndex, q: &str) -> Vec<String> {
    index
        .search_bm25(q, &Filters::default(), 5)
        .unwrap()
        .into_iter()
        .map(|h| h.record.item.canon_path.clone())
        .collect()
}

#[test]
fn full_run_then_incremental_runs_parse_only_what_changed() {
    let f = Fixture::new();
    let mut index = f.open();
    let mut phases = Vec::new();
    let s = index
        .index_all(false, None, &mut |p| phases.push(p.phase))
        .unwrap();
    assert_eq!(
        (
            s.files_indexed,
            s.files_unchanged,
            s.files_removed,
            s.items_total
        ),
        (3, 0, 0, 5)
    );
    assert_eq!(phases.first(), Some(&Phase::Scanning));
    assert_eq!(phases.last(), Some(&Phase::Done));
    assert_eq!(
        top(&index, "load settings")[0],
        "crate::config::Config::load_settings"
    );

    // Nothing changed: nothing parsed.
    let s = index.index_all(false, None, &mut |_| {}).unwrap();
    assert_eq!(
        (s.files_indexed, s.files_unchanged, s.items_added),
        (0, 3, 0)
    );

    // Edit one file: only it is parsed; the old item is gone, the new one found.
    f.write(
        "src/config.rs",
        "pub struct Config;\n\nimpl Config {\n    pub fn read_environment() -> Self { Config }\n}\n",
    );
    let s = index.index_all(false, None, &mut |_| {}).unwrap();
    assert_eq!((s.files_indexed, s.files_unchanged), (1, 2));
    assert!(
        !top(&index, "load_settings")
            .iter()
            .any(|p| p.contains("load_settings"))
    );
    assert_eq!(
        top(&index, "read environment")[0],
        "crate::config::Config::read_environment"
    );

    // force re-parses everything.
    let s = index.index_all(true, None, &mut |_| {}).unwrap();
    assert_eq!(s.files_indexed, 3);
}

#[test]
fn refresh_handles_edits_deletions_and_renames() {
    let f = Fixture::new();
    let mut index = f.open();
    index.index_all(false, None, &mut |_| {}).unwrap();

    std::fs::rename(
        f.ws.path().join("src/config.rs"),
        f.ws.path().join("src/settings.rs"),
    )
    .unwrap();
    let s = index
        .refresh(&["src/config.rs".into(), "src/settings.rs".into()], None)
        .unwrap();
    assert_eq!((s.files_removed, s.files_indexed), (1, 1));
    assert_eq!(
        index.lookup_name("load_settings", None)[0].item.canon_path,
        "crate::settings::Config::load_settings"
    );
    assert_eq!(index.items_of_file("src/config.rs"), 0);

    // An unchanged file costs a hash and nothing else.
    let s = index.refresh(&["src/lib.rs".into()], None).unwrap();
    assert_eq!(
        (s.files_unchanged, s.items_added, s.items_removed),
        (1, 0, 0)
    );

    // Paths that never existed are skipped, not errors.
    let s = index.refresh(&["nope.rs".into()], None).unwrap();
    assert_eq!(s.files_skipped, 1);
}

#[test]
fn a_reopened_index_has_everything_without_reindexing() {
    let f = Fixture::new();
    let mut index = f.open();
    index.index_all(false, None, &mut |_| {}).unwrap();
    let before = top(&index, "start entry point");
    let items = index.item_count();
    drop(index);

    let mut index = f.open();
    assert_eq!(index.item_count(), items);
    assert!(index.last_indexed_at().is_some());
    assert_eq!(top(&index, "start entry point"), before);
    let s = index.index_all(false, None, &mut |_| {}).unwrap();
    assert_eq!((s.files_indexed, s.files_unchanged), (0, 3));
}

#[test]
fn lookup_by_canonical_path_name_and_kind() {
    let f = Fixture::new();
    let mut index = f.open();
    index.index_all(false, None, &mut |_| {}).unwrap();
    let found = index.lookup_canon("crate::config::Config", None);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].item.kind, Kind::Struct);
    assert_eq!(index.lookup_name("Config", Some(Kind::Impl)).len(), 0);
    assert_eq!(index.lookup_name("impl Config", Some(Kind::Impl)).len(), 1);
    assert!(index.lookup_canon("crate::missing", None).is_empty());
}

#[test]
fn canonical_paths_follow_the_cargo_targets_and_are_unique_in_each_crate() {
    let f = Fixture::new();
    // ripgrep's shape: a [[bin]] outside src/, two functions named `generate`.
    let manifest = |bin: &str| {
        format!(
            "[package]\nname = \"demo-app\"\n[[bin]]\nname = \"{bin}\"\npath = \"crates/core/main.rs\"\n"
        )
    };
    f.write("Cargo.toml", &manifest("rg"));
    f.write("crates/core/main.rs", "mod flags;\nfn main() {}\n");
    f.write(
        "crates/core/flags/mod.rs",
        "pub mod hiargs;\npub fn generate() {}\n",
    );
    f.write(
        "crates/core/flags/hiargs.rs",
        "pub struct HiArgs;\nimpl HiArgs {\n    pub fn new() -> Self { HiArgs }\n}\n",
    );
    f.write(
        "crates/core/flags/complete/mod.rs",
        "pub fn generate() {}\n",
    );
    f.write("src/bin/tool.rs", "fn main() {}\n");
    f.write("examples/demo.rs", "fn main() {}\n");
    f.write("tests/it.rs", "#[test]\nfn works() {}\n");
    let mut index = f.open();
    index.index_all(false, None, &mut |_| {}).unwrap();
    let one = |index: &WorkspaceIndex, canon: &str| {
        let found = index.lookup_canon(canon, None);
        assert_eq!(found.len(), 1, "{canon}: {found:?}");
        (found[0].item.crate_name.clone(), found[0].file.clone())
    };
    assert_eq!(
        one(&index, "crate::flags::hiargs::HiArgs"),
        ("rg".into(), "crates/core/flags/hiargs.rs".into())
    );
    assert_eq!(one(&index, "rg::flags::hiargs::HiArgs::new").0, "rg");
    assert_eq!(
        one(&index, "crate::flags::generate").1,
        "crates/core/flags/mod.rs"
    );
    assert_eq!(
        one(&index, "crate::flags::complete::generate").1,
        "crates/core/flags/complete/mod.rs"
    );
    assert_eq!(one(&index, "crate::config::Config").0, "demo_app");
    assert_eq!(one(&index, "it::works").1, "tests/it.rs");
    // Three crates have a `crate::main`; each is found by its crate's name.
    assert_eq!(index.lookup_canon("crate::main", None).len(), 3);
    assert_eq!(one(&index, "tool::main").1, "src/bin/tool.rs");
    assert_eq!(one(&index, "demo::main").1, "examples/demo.rs");
    // No two items of a crate share a canonical path (impl blocks are not looked up by it).
    let mut seen = std::collections::HashSet::new();
    for r in index.items.values().filter(|r| r.item.kind != Kind::Impl) {
        let key = (r.item.crate_name.clone(), r.item.canon_path.clone());
        assert!(seen.insert(key.clone()), "{key:?} twice");
    }
    // A manifest changed by a refresh moves the files it concerns, unchanged as they are.
    f.write("Cargo.toml", &manifest("ripgrep"));
    let s = index.refresh(&["Cargo.toml".to_owned()], None).unwrap();
    assert_eq!(one(&index, "crate::flags::hiargs::HiArgs").0, "ripgrep");
    assert_eq!(
        s.files_indexed,
        1 + 4,
        "the manifest and the four files of the binary"
    );
}

#[test]
fn dense_vectors_are_cached_by_content_and_survive_a_restart() {
    let model = crate::embed::tests::model();
    let spec = || DenseSpec {
        model: model.name(),
        dims: model.dims(),
    };
    let f = Fixture::new();
    let mut index = f.open_with(Some(spec()));
    let s = index.index_all(false, Some(model), &mut |_| {}).unwrap();
    assert_eq!((s.items_embedded, s.embeddings_reused), (5, 0));
    assert_eq!(index.embedded_count(), 5);

    // Change one method of a file with three items: the method and its impl (whose head
    // changed) are embedded again; the struct's vector is reused from the cache.
    f.write(
        "src/config.rs",
        "pub struct Config;\n\nimpl Config {\n    pub fn read_environment() -> Self { Config }\n}\n",
    );
    let s = index.index_all(false, Some(model), &mut |_| {}).unwrap();
    assert_eq!(s.files_indexed, 1);
    assert_eq!(s.items_embedded, 2);
    assert_eq!(s.embeddings_reused, 1);

    // Dense search finds by meaning, not words.
    let q = model
        .embed_batch(&["get configuration values from environment variables"])
        .unwrap()
        .remove(0);
    let hits = index.search_dense(&q, &Filters::default(), 6).unwrap();
    let ranked: Vec<&str> = hits
        .iter()
        .map(|h| h.record.item.canon_path.as_str())
        .collect();
    let at = |p: &str| ranked.iter().position(|r| *r == p).unwrap();
    // The method (and its impl) and the README's "how to load settings" come before the
    // unrelated entry point.
    assert!(
        at("crate::config::Config::read_environment") < at("crate::start"),
        "{ranked:?}"
    );
    assert!(
        at("crate::config::impl Config") < at("crate::start"),
        "{ranked:?}"
    );
    assert!(at("README.md#L1-3") < at("crate::start"), "{ranked:?}");
    assert_eq!((hits[0].rank, hits[1].rank), (1, 2));
    // Filters apply to dense hits too.
    let methods = Filters {
        kinds: vec![Kind::Method],
        ..Filters::default()
    };
    let hits = index.search_dense(&q, &methods, 3).unwrap();
    assert_eq!(
        hits[0].record.item.canon_path,
        "crate::config::Config::read_environment"
    );
    drop(index);

    // Restart: every vector is there, nothing is embedded again.
    let mut index = f.open_with(Some(spec()));
    assert_eq!(index.embedded_count(), 5);
    let s = index.index_all(false, Some(model), &mut |_| {}).unwrap();
    assert_eq!(
        (s.files_indexed, s.items_embedded, s.embeddings_reused),
        (0, 0, 0)
    );
}

#[test]
fn refreshing_a_directory_covers_the_files_in_it_and_those_that_left() {
    let f = Fixture::new();
    let mut index = f.open();
    index.index_all(false, None, &mut |_| {}).unwrap();
    f.write("src/net/client.rs", "pub fn connect_socket() {}\n");
    let s = index.refresh(&["src/net".into()], None).unwrap();
    assert_eq!((s.files_indexed, s.items_added), (1, 1));
    std::fs::rename(
        f.ws.path().join("src/net"),
        f.ws.path().join("src/transport"),
    )
    .unwrap();
    let s = index
        .refresh(&["src/net".into(), "src/transport".into()], None)
        .unwrap();
    assert_eq!((s.files_removed, s.files_indexed), (1, 1));
    assert_eq!(
        index.lookup_name("connect_socket", None)[0].item.canon_path,
        "crate::transport::client::connect_socket"
    );
}

#[test]
fn test_code_ranks_below_the_code_it_tests() {
    let f = Fixture::new();
    f.write(
        "src/parser.rs",
        "pub fn parse_header_line(line: &str) -> usize { line.len() }\n\n#[cfg(test)]\nmod tests {\n    fn parse_header_line_parses_header_line() { let _ = super::parse_header_line(\"parse header line\"); }\n}\n",
    );
    let mut index = f.open();
    index.index_all(false, None, &mut |_| {}).unwrap();
    let hits = index
        .search_bm25("parse header line", &Filters::default(), 5)
        .unwrap();
    let names: Vec<&str> = hits
        .iter()
        .map(|h| h.record.item.canon_path.as_str())
        .collect();
    let code = names
        .iter()
        .position(|n| *n == "crate::parser::parse_header_line")
        .unwrap();
    let test = names
        .iter()
        .position(|n| *n == "crate::parser::tests::parse_header_line_parses_header_line")
        .unwrap();
    assert!(code < test, "{names:?}");
    assert!(crate::rank::is_test_code(hits[test].record));
    assert!(!crate::rank::is_test_code(hits[code].record));
}

#[test]
fn vectors_set_from_outside_are_searched_and_fused() {
    let f = Fixture::new();
    let mut index = f.open_with(Some(DenseSpec {
        model: "imported",
        dims: 2,
    }));
    index.index_all(false, None, &mut |_| {}).unwrap();
    assert_eq!(index.embedded_count(), 0);
    let id_of = |index: &WorkspaceIndex, canon: &str| index.lookup_canon(canon, None)[0].id;
    let start = id_of(&index, "crate::start");
    let load = id_of(&index, "crate::config::Config::load_settings");
    assert!(index.set_vector(start, vec![1.0, 0.0]).unwrap());
    assert!(index.set_vector(load, vec![0.0, 1.0]).unwrap());
    assert!(!index.set_vector(u64::MAX, vec![1.0, 0.0]).unwrap());
    assert_eq!(index.embedded_count(), 2);

    let paths = |found: Vec<Found<'_>>| -> Vec<(String, u32, u32)> {
        found
            .into_iter()
            .map(|f| {
                (
                    f.hit.record.item.canon_path.clone(),
                    f.bm25_rank,
                    f.dense_rank,
                )
            })
            .collect()
    };
    let none = Filters::default();
    let dense = index.search(Query::Dense(&[0.0, 1.0]), &none, 1).unwrap();
    assert_eq!(
        paths(dense),
        vec![("crate::config::Config::load_settings".to_owned(), 0, 1)]
    );
    // "start" by words, the other by vector: both come back, each with the rank it earned.
    let hybrid = Query::Hybrid {
        text: "start",
        vector: &[0.0, 1.0],
        rrf: crate::fusion::Rrf::default(),
    };
    let mut got = paths(index.search(hybrid, &none, 2).unwrap());
    got.sort();
    assert_eq!(
        got,
        vec![
            ("crate::config::Config::load_settings".to_owned(), 0, 1),
            ("crate::start".to_owned(), 1, 2),
        ]
    );
}

#[test]
fn a_failed_run_keeps_serving_the_last_committed_index() {
    let f = Fixture::new();
    let mut index = f.open();
    index.index_all(false, None, &mut |_| {}).unwrap();
    let before = top(&index, "load settings");
    assert_eq!(before[0], "crate::config::Config::load_settings");
    let (files, items) = (index.file_count(), index.item_count());
    // The index directory vanishes under the running service: nothing can be committed.
    std::fs::remove_dir_all(f.data.path()).unwrap();
    f.write("src/config.rs", "pub fn replaced() {}\n");
    assert!(index.index_all(true, None, &mut |_| {}).is_err());
    assert_eq!(top(&index, "load settings"), before);
    assert_eq!((index.file_count(), index.item_count()), (files, items));
    assert!(index.refresh(&["src/config.rs".to_owned()], None).is_err());
    assert_eq!(top(&index, "load settings"), before);
    assert!(top(&index, "replaced").is_empty());
}

#[cfg(unix)]
#[test]
fn refreshes_never_follow_a_symlink_in_or_out_of_the_root() {
    let f = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.rs"),
        "pub fn exfiltrated_secret() {}\n",
    )
    .unwrap();
    std::fs::write(
        outside.path().join("notes.md"),
        "exfiltrated_secret notes\n",
    )
    .unwrap();
    let ws = f.ws.path();
    std::os::unix::fs::symlink(outside.path(), ws.join("linkdir")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("notes.md"), ws.join("notes.md")).unwrap();
    std::os::unix::fs::symlink(ws.join("src/lib.rs"), ws.join("alias.rs")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(ws.join("src/pipe.rs"))
        .arg(ws.join("src/.gitignore"))
        .status()
        .unwrap();
    assert!(made.success());
    let mut index = f.open();
    // A FIFO named .gitignore is never opened: the scan does not block on it.
    index.index_all(false, None, &mut |_| {}).unwrap();
    let files = index.file_count();
    let rels: Vec<String> = [
        "linkdir",
        "linkdir/secret.rs",
        "notes.md",
        "alias.rs",
        "src/pipe.rs",
    ]
    .map(String::from)
    .to_vec();
    let s = index.refresh(&rels, None).unwrap();
    assert_eq!((s.files_indexed, s.files_removed), (0, 0));
    assert_eq!(index.file_count(), files);
    assert!(top(&index, "exfiltrated_secret").is_empty());
}

/// A file of `n` small distinct functions.
fn many_functions(n: usize) -> String {
    (0..n)
        .map(|i| format!("/// Step number {i} of the pipeline.\npub fn step_{i}(x: u32) -> u32 {{\n    x + {i}\n}}\n\n"))
        .collect()
}

#[test]
fn a_run_holds_the_index_only_in_short_steps_and_bm25_answers_while_it_embeds() {
    let model = crate::embed::tests::model();
    let f = Fixture::new();
    let lock = std::sync::RwLock::new(f.open_with(Some(DenseSpec {
        model: model.name(),
        dims: model.dims(),
    })));
    let mut phases = Vec::new();
    let mut answered_while_embedding = 0;
    let summary = build(&lock, false, Some(model), &mut |p| {
        // Progress is reported with no lock held: a writer could get in right now.
        let index = lock
            .try_write()
            .expect("the run holds the index between steps");
        if p.phase == Phase::Embedding {
            assert_eq!(
                top(&index, "load settings")[0],
                "crate::config::Config::load_settings"
            );
            answered_while_embedding += 1;
        }
        phases.push(p.phase);
    })
    .unwrap();
    assert_eq!(summary.items_embedded, 5);
    assert!(answered_while_embedding > 0, "{phases:?}");
    assert_eq!(phases.last(), Some(&Phase::Done));
}

#[test]
fn a_refresh_embeds_a_few_items_under_its_lock_and_leaves_many_to_the_background() {
    let model = crate::embed::tests::model();
    let f = Fixture::new();
    let lock = std::sync::RwLock::new(f.open_with(Some(DenseSpec {
        model: model.name(),
        dims: model.dims(),
    })));
    build(&lock, false, Some(model), &mut |_| {}).unwrap();
    let embedded = |lock: &std::sync::RwLock<WorkspaceIndex>| lock.read().unwrap().embedded_count();
    let before = embedded(&lock);
    // An edit's few items: embedded by the refresh itself.
    f.write("src/few.rs", &many_functions(3));
    let s = lock
        .write()
        .unwrap()
        .refresh(&["src/few.rs".into()], Some(model))
        .unwrap();
    assert_eq!((s.items_embedded, s.embed_deferred), (3, 0));
    assert_eq!(embedded(&lock), before + 3);
    // A generated file's many: searchable by BM25 at once, embedded later with no lock held
    // while the model runs.
    let many = dense::EMBED_UNDER_LOCK_MAX + 24;
    f.write("src/many.rs", &many_functions(many));
    let s = lock
        .write()
        .unwrap()
        .refresh(&["src/many.rs".into()], Some(model))
        .unwrap();
    assert_eq!((s.items_embedded, s.embed_deferred), (0, many as u64));
    assert_eq!(embedded(&lock), before + 3);
    assert_eq!(
        top(&lock.read().unwrap(), "step_30")[0],
        "crate::many::step_30"
    );
    let mut answered_while_embedding = 0;
    let s = embed_pending(&lock, Some(model), &mut |p| {
        let index = lock.try_write().expect("the model runs with no lock held");
        if p.phase == Phase::Embedding {
            answered_while_embedding += usize::from(!top(&index, "step_30").is_empty());
        }
    })
    .unwrap();
    assert_eq!(s.items_embedded, many as u64);
    assert!(answered_while_embedding > 0);
    assert_eq!(embedded(&lock), before + 3 + many as u64);
}

#[test]
fn an_interrupted_run_keeps_every_embedding_it_made() {
    let model = crate::embed::tests::model();
    let spec = || DenseSpec {
        model: model.name(),
        dims: model.dims(),
    };
    let f = Fixture::new();
    f.write("src/steps.rs", &many_functions(100));
    let lock = std::sync::RwLock::new(f.open_with(Some(spec())));
    // Stop the service (close the index) once the second chunk of items is being embedded.
    let mut last = Progress::default();
    let outcome = build(&lock, false, Some(model), &mut |p| {
        if p.phase == Phase::Embedding {
            if p.embed_done > build::EMBED_CHUNK as u64 {
                lock.write().unwrap().close();
            }
            last = p;
        }
    });
    assert!(matches!(outcome, Err(IndexError::Closed)), "{outcome:?}");
    assert_eq!(last.embed_total, 105);
    assert!(last.eta.is_some(), "{last:?}");
    drop(lock);

    // Restart: the items of the first chunk come from the kept cache, not the model.
    let mut index = f.open_with(Some(spec()));
    let s = index.index_all(false, Some(model), &mut |_| {}).unwrap();
    assert_eq!((s.embeddings_reused, s.items_embedded), (64, 41));
    assert_eq!(index.embedded_count(), 105);
}

#[test]
fn dense_alone_ranks_the_nearest_first_and_hybrid_s_dense_list_keeps_the_full_length_prior() {
    let f = Fixture::new();
    let long_body: String = (0..30).map(|i| format!("    let _v{i} = {i};\n")).collect();
    f.write(
        "src/extra.rs",
        &format!("pub fn near() {{}}\n\npub fn far() {{\n{long_body}}}\n"),
    );
    let mut index = f.open_with(Some(DenseSpec {
        model: "imported",
        dims: 2,
    }));
    index.index_all(false, None, &mut |_| {}).unwrap();
    let id_of = |canon: &str| index.lookup_canon(canon, None)[0].id;
    let (near, far) = (id_of("crate::extra::near"), id_of("crate::extra::far"));
    // `near` is nearer (cosine 1 against 0.6), `far` 32 lines long: (1 + cos) / 2 = 1.0 and
    // 0.8; with the full prior 1.0 and 0.8 × 32^0.2 = 1.6, with a quarter of it 0.8 × 32^0.05
    // = 0.95.
    assert!(index.set_vector(near, vec![1.0, 0.0]).unwrap());
    assert!(index.set_vector(far, vec![0.6, 0.8]).unwrap());
    let none = Filters::default();
    let order = |found: Vec<Found<'_>>| -> Vec<(String, u32)> {
        found
            .into_iter()
            .map(|f| (f.hit.record.item.name.clone(), f.dense_rank))
            .collect()
    };
    let dense = index.search(Query::Dense(&[1.0, 0.0]), &none, 2).unwrap();
    assert_eq!(order(dense), vec![("near".into(), 1), ("far".into(), 2)]);
    let fused = index.rank_dense(&[1.0, 0.0], &none, 2, false).unwrap();
    let names: Vec<&str> = fused.iter().map(|r| r.record.item.name.as_str()).collect();
    assert_eq!(names, vec!["far", "near"]);
}

#[test]
fn a_file_that_became_a_directory_is_dropped_and_its_files_read() {
    let f = Fixture::new();
    let mut index = f.open();
    index.index_all(false, None, &mut |_| {}).unwrap();
    assert!(index.items_of_file("src/config.rs") > 0);
    std::fs::remove_file(f.ws.path().join("src/config.rs")).unwrap();
    f.write(
        "src/config.rs/inner.rs",
        "pub fn nested_settings_reader() {}\n",
    );
    let s = index.refresh(&["src/config.rs".into()], None).unwrap();
    assert_eq!((s.files_removed, s.files_indexed), (1, 1));
    assert_eq!(index.items_of_file("src/config.rs"), 0);
    assert!(index.items_of_file("src/config.rs/inner.rs") > 0);
}

#[test]
fn a_workspace_key_fits_in_a_directory_name_however_long_the_root_name() {
    let long = |c: char| PathBuf::from("/repos").join(c.to_string().repeat(255));
    let (a, b) = (workspace_key(&long('a')), workspace_key(&long('b')));
    assert_eq!((a.len(), b.len()), (64 + 13, 64 + 13));
    assert_ne!(a, b);
    assert!(a.starts_with(&"a".repeat(64)), "{a}");
    // Short names are kept whole.
    assert!(workspace_key(Path::new("/src/api")).starts_with("api-"));
}

#[test]
fn disk_bytes_count_every_file_of_the_index_vectors_included() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("bm25")).unwrap();
    std::fs::create_dir_all(dir.path().join("dense")).unwrap();
    std::fs::write(dir.path().join("meta.json"), [0u8; 10]).unwrap();
    std::fs::write(dir.path().join("bm25/a.store"), [0u8; 100]).unwrap();
    std::fs::write(dir.path().join("dense/index.usearch"), [0u8; 1000]).unwrap();
    // A link is not followed (it may lead anywhere).
    std::os::unix::fs::symlink("/usr", dir.path().join("dense/elsewhere")).unwrap();
    assert_eq!(super::dir_bytes(dir.path()), 1110);
}

#[test]
fn damaged_index_files_are_moved_aside_and_the_workspace_indexed_again() {
    let f = Fixture::new();
    let dir = f.data.path().join("idx");
    let open = || {
        WorkspaceIndex::open(
            f.ws.path(),
            &dir,
            (Boosts::default(), LengthPrior::default()),
            None,
        )
    };
    for damaged in [META_FILE, "bm25/meta.json"] {
        let mut index = open().unwrap();
        index.index_all(false, None, &mut |_| {}).unwrap();
        assert_eq!(index.item_count(), 5);
        drop(index);
        // Cut short, as a crash or a full disk leaves it.
        let file = dir.join(damaged);
        let len = std::fs::metadata(&file).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
        let mut index = open().unwrap_or_else(|e| panic!("{damaged}: {e}"));
        assert_eq!(index.item_count(), 0, "{damaged}");
        assert!(f.data.path().join("idx.damaged").join(damaged).exists());
        index.index_all(false, None, &mut |_| {}).unwrap();
        assert_eq!(
            top(&index, "load settings")[0],
            "crate::config::Config::load_settings"
        );
    }
}
