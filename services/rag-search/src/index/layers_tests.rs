use std::collections::HashMap;

use super::*;
use crate::bm25::Boosts;
use crate::index::{Contents, DenseSpec};
use crate::rank::LengthPrior;
use crate::vectors::TextHash;

const LIB_RS: &str = "pub mod config;\n\n/// Entry point.\npub fn start() {}\n";
const CONFIG_RS: &str =
    "pub struct Config;\n\nimpl Config {\n    pub fn load_settings() -> Self { Config }\n}\n";
const CHANGED_CONFIG_RS: &str =
    "pub struct Config;\n\nimpl Config {\n    pub fn read_environment() -> Self { Config }\n}\n";

struct Stack {
    _dirs: [tempfile::TempDir; 3],
    base: WorkspaceIndex,
    overlay: WorkspaceIndex,
}

/// A base indexed from a workspace, and an overlay index fed contents.
fn stack(dense: Option<DenseSpec<'_>>, overlay_files: &[(&str, &str)]) -> Stack {
    stack_on(
        &[("src/lib.rs", LIB_RS), ("src/config.rs", CONFIG_RS)],
        dense,
        overlay_files,
    )
}

/// [`stack`] over a workspace of `base_files`.
fn stack_on(
    base_files: &[(&str, &str)],
    dense: Option<DenseSpec<'_>>,
    overlay_files: &[(&str, &str)],
) -> Stack {
    let ws = tempfile::tempdir().unwrap();
    let (base_dir, overlay_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for &(rel, text) in base_files {
        let p = ws.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let open = |dir: &tempfile::TempDir| {
        WorkspaceIndex::open(
            ws.path(),
            dir.path(),
            (Boosts::default(), LengthPrior::default()),
            dense,
        )
        .unwrap()
    };
    let mut base = open(&base_dir);
    base.index_all(false, None, &mut |_| {}).unwrap();
    let mut overlay = open(&overlay_dir);
    let contents = Contents::parse(
        overlay_files
            .iter()
            .map(|(p, t)| ((*p).to_owned(), t.as_bytes().to_vec()))
            .collect(),
        &crate::parse::Layout::default(),
    );
    overlay
        .apply_contents(contents, &[], &HashMap::new())
        .unwrap();
    Stack {
        _dirs: [ws, base_dir, overlay_dir],
        base,
        overlay,
    }
}

impl Stack {
    /// The base with `base_hidden` shadowed, under the overlay with `overlay_hidden`.
    fn layers<'a>(
        &'a self,
        base_hidden: &'a HashSet<&'a str>,
        overlay_hidden: &'a HashSet<&'a str>,
    ) -> [Layer<'a>; 2] {
        [
            Layer {
                index: &self.base,
                hidden: base_hidden,
            },
            Layer {
                index: &self.overlay,
                hidden: overlay_hidden,
            },
        ]
    }
}

fn names(found: &[LayeredFound<'_>]) -> Vec<(usize, String)> {
    found
        .iter()
        .map(|f| (f.layer, f.found.hit.record.item.canon_path.clone()))
        .collect()
}

#[test]
fn shadowed_files_never_answer_and_overlay_items_do() {
    let s = stack(
        None,
        &[
            ("src/config.rs", CHANGED_CONFIG_RS),
            (
                "src/extra.rs",
                "/// Brand new.\npub fn brand_new_helper() {}\n",
            ),
        ],
    );
    let hidden = HashSet::from(["src/config.rs"]);
    let nothing = HashSet::new();
    let layers = s.layers(&hidden, &nothing);
    let none = Filters::default();
    let search = |q: &str| {
        search_layers(
            &layers,
            Query::Bm25 {
                text: q,
                rrf: Rrf::default(),
            },
            &none,
            10,
        )
        .unwrap()
    };
    assert!(search("load_settings").is_empty());
    // The method and the impl around it, both the developer's.
    assert_eq!(
        names(&search("read_environment")),
        vec![
            (1, "crate::config::Config::read_environment".to_owned()),
            (1, "crate::config::impl Config".to_owned())
        ]
    );
    let found = search("brand new helper");
    assert_eq!(
        names(&found)[0],
        (1, "crate::extra::brand_new_helper".to_owned())
    );
    assert_eq!(
        found[0].found.hit.text,
        "/// Brand new.\npub fn brand_new_helper() {}"
    );
    assert_eq!(
        (found[0].found.bm25_rank, found[0].found.dense_rank),
        (1, 0)
    );
    // The base's other files still answer.
    assert_eq!(
        names(&search("start")),
        vec![(0, "crate::start".to_owned())]
    );
}

#[test]
fn the_same_item_scores_the_same_in_either_layer() {
    // The overlay holds a copy of a base file, not shadowed: both copies come back with the
    // same BM25 score, because both are scored with one set of corpus statistics (names
    // weigh nothing here, so the scores are BM25's).
    let s = stack(None, &[("src/lib.rs", LIB_RS)]);
    let nothing = HashSet::new();
    let layers = s.layers(&nothing, &nothing);
    let found = search_layers(
        &layers,
        Query::Bm25 {
            text: "entry point start",
            rrf: Rrf {
                name_weight: 0.0,
                ..Rrf::default()
            },
        },
        &Filters::default(),
        2,
    )
    .unwrap();
    assert_eq!(
        names(&found),
        vec![
            (1, "crate::start".to_owned()),
            (0, "crate::start".to_owned())
        ]
    );
    assert_eq!(found[0].found.hit.score, found[1].found.hit.score);
    assert_eq!((found[0].found.hit.rank, found[1].found.hit.rank), (1, 2));
    // Scored alone, the overlay (one small file) would weigh the words differently.
    let alone = s
        .overlay
        .search_bm25("entry point start", &Filters::default(), 1)
        .unwrap();
    assert_ne!(alone[0].score, found[0].found.hit.score);
}

#[test]
fn a_session_without_changes_ranks_names_as_the_base_does() {
    // Named items of different lengths: the length prior weighs in the names list, alike for
    // the base searched alone and for the base under an empty session overlay.
    let lib = "/// Reads the settings.\npub fn load_settings() {\n    let a = 1;\n    let b = 2;\n    let c = a + b;\n    drop(c);\n}\n\n/// Reads the settings file.\npub fn load_settings_file() {}\n\npub struct Settings;\n";
    let s = stack_on(&[("src/lib.rs", lib)], None, &[]);
    let nothing = HashSet::new();
    let layers = s.layers(&nothing, &nothing);
    let query = Query::Bm25 {
        text: "`load_settings` and `load_settings_file` read `Settings`",
        rrf: Rrf::default(),
    };
    let through_layers = search_layers(&layers, query, &Filters::default(), 3).unwrap();
    let alone = s.base.search(query, &Filters::default(), 3).unwrap();
    let through_layers: Vec<(String, f32)> = through_layers
        .iter()
        .map(|f| {
            (
                f.found.hit.record.item.canon_path.clone(),
                f.found.hit.score,
            )
        })
        .collect();
    let alone: Vec<(String, f32)> = alone
        .iter()
        .map(|f| (f.hit.record.item.canon_path.clone(), f.hit.score))
        .collect();
    assert_eq!(through_layers, alone);
    assert_eq!(
        alone[0].0, "crate::load_settings",
        "the longer function first"
    );
}

#[test]
fn a_session_that_changed_the_root_s_item_ranks_its_rivals_as_the_base_does() {
    // The root binds `fast::Body`; `slow::Body::as_bytes` is its rival. A session changes
    // `fast.rs` (here: the same text), so the root's item is the overlay's alone (numbered
    // from 1 as the base's are) and its rival the base's: the rival is still set aside.
    let body = "pub struct Body;\n\nimpl Body {\n    pub fn as_bytes(&self) -> usize {\n        1\n    }\n}\n";
    let files = [
        (
            "src/lib.rs",
            "pub mod fast;\npub mod slow;\npub use self::fast::Body;\n",
        ),
        ("src/fast.rs", body),
        ("src/slow.rs", body),
    ];
    let s = stack_on(&files, None, &[("src/fast.rs", body)]);
    let hidden = HashSet::from(["src/fast.rs"]);
    let nothing = HashSet::new();
    // The names list (BM25's statistics differ between layers; names do not).
    let sorted = |mut found: Vec<(String, f32)>| {
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    };
    let none = Filters::default();
    let alone = sorted(
        s.base
            .rank_names("`as_bytes`", &none, Rrf::default())
            .iter()
            .map(|r| (r.record.item.canon_path.clone(), r.score))
            .collect(),
    );
    let through_layers = sorted(
        rank_names_layers(
            &s.layers(&hidden, &nothing),
            "`as_bytes`",
            &none,
            Rrf::default(),
        )
        .iter()
        .map(|(_, r)| (r.record.item.canon_path.clone(), r.score))
        .collect(),
    );
    assert_eq!(through_layers, alone);
    let score = |path: &str| alone.iter().find(|(p, _)| p == path).map(|(_, s)| *s);
    assert_eq!(
        score("crate::slow::Body::as_bytes"),
        score("crate::fast::Body::as_bytes").map(|s| s * crate::names::NOT_AT_ROOT),
        "{alone:?}"
    );
}

#[test]
fn a_name_matches_every_layer_the_way_the_best_of_them_can() {
    // The session adds `headers`: "`headers`" now names it, and the base's `header` is no
    // longer found as its singular, as in one index holding both.
    let s = stack_on(
        &[("src/lib.rs", "pub mod extra;\npub fn header() {}\n")],
        None,
        &[("src/extra.rs", "pub fn headers() {}\n")],
    );
    let nothing = HashSet::new();
    let named = |layers: &[Layer<'_>]| -> Vec<String> {
        rank_names_layers(layers, "`headers`", &Filters::default(), Rrf::default())
            .iter()
            .map(|(_, r)| r.record.item.canon_path.clone())
            .collect()
    };
    assert_eq!(
        named(&s.layers(&nothing, &nothing)),
        ["crate::extra::headers"]
    );
    // Without the overlay's, the singular is found.
    assert_eq!(named(&s.layers(&nothing, &nothing)[..1]), ["crate::header"]);
}

#[test]
fn dense_and_hybrid_merge_both_layers_and_leave_shadowed_items_out() {
    let dense = Some(DenseSpec {
        model: "imported",
        dims: 2,
    });
    let mut s = stack(dense, &[]);
    let id = |index: &WorkspaceIndex, canon: &str| index.lookup_canon(canon, None)[0].id;
    let start = id(&s.base, "crate::start");
    let load = id(&s.base, "crate::config::Config::load_settings");
    s.base.set_vector(start, vec![1.0, 0.0]).unwrap();
    s.base.set_vector(load, vec![0.0, 1.0]).unwrap();
    // The developer's version of config.rs: its method's vector points the same way.
    let contents = Contents::parse(
        vec![(
            "src/config.rs".to_owned(),
            CHANGED_CONFIG_RS.as_bytes().to_vec(),
        )],
        &crate::parse::Layout::default(),
    );
    let vectors: HashMap<TextHash, Vec<f32>> = contents
        .embed_hashes()
        .into_iter()
        .map(|h| (h, vec![0.1, 1.0]))
        .collect();
    let summary = s.overlay.apply_contents(contents, &[], &vectors).unwrap();
    assert_eq!((summary.files_indexed, summary.items_total), (1, 3));
    assert_eq!(s.overlay.embedded_count(), 3);
    let hidden = HashSet::from(["src/config.rs"]);
    let nothing = HashSet::new();
    let layers = s.layers(&hidden, &nothing);
    let none = Filters::default();
    let found = search_layers(&layers, Query::Dense(&[0.0, 1.0]), &none, 10).unwrap();
    assert!(
        found
            .iter()
            .all(|f| f.layer == 1 || f.found.hit.record.file != "src/config.rs"),
        "{:?}",
        names(&found)
    );
    assert_eq!(found[0].layer, 1);
    assert_eq!(names(&found).last(), Some(&(0, "crate::start".to_owned())));
    let hybrid = Query::Hybrid {
        text: "read_environment",
        vector: &[0.0, 1.0],
        rrf: Rrf::default(),
    };
    let found = search_layers(&layers, hybrid, &none, 1).unwrap();
    assert_eq!(
        names(&found),
        vec![(1, "crate::config::Config::read_environment".to_owned())]
    );
    assert_eq!(found[0].found.bm25_rank, 1);
    assert!(found[0].found.dense_rank >= 1);
}
