//! Items of equal score come back in the same order from every index of the same tree, however
//! each was built: fresh, refreshed file by file, or on another replica.

use super::*;
use crate::bm25::Filters;
use crate::fusion::Rrf;
use crate::rank::LengthPrior;

/// Twelve modules, each with a function of the same text: every query scores them alike.
const MODULES: usize = 12;

fn write(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn tree(root: &std::path::Path) {
    let mods: String = (0..MODULES).map(|i| format!("pub mod m{i};\n")).collect();
    write(root, "src/lib.rs", &mods);
    for i in 0..MODULES {
        write(
            root,
            &format!("src/m{i}.rs"),
            "pub fn shared_helper() -> u32 {\n    parse_token_value()\n}\n",
        );
    }
}

fn open(ws: &std::path::Path, data: &std::path::Path) -> WorkspaceIndex {
    WorkspaceIndex::open(ws, data, (Boosts::default(), LengthPrior::default()), None).unwrap()
}

fn bm25(index: &WorkspaceIndex, q: &str, k: usize) -> Vec<String> {
    index
        .search_bm25(q, &Filters::default(), k)
        .unwrap()
        .into_iter()
        .map(|h| h.record.item.canon_path.clone())
        .collect()
}

fn fused(index: &WorkspaceIndex, q: &str, k: usize) -> Vec<String> {
    let query = Query::Bm25 {
        text: q,
        rrf: Rrf::default(),
    };
    index
        .search(query, &Filters::default(), k)
        .unwrap()
        .into_iter()
        .map(|f| f.hit.record.item.canon_path.clone())
        .collect()
}

#[test]
fn ties_come_back_in_one_order_from_a_fresh_and_a_refreshed_index() {
    // Replica A indexes the tree as it is now.
    let (ws, fresh_data, old_data) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    tree(ws.path());
    // Replica B indexed it before two files changed (a comment added below the function),
    // then refreshed them: their items were dropped and added again, after every other.
    let mut old = open(ws.path(), old_data.path());
    old.index_all(false, None, &mut |_| {}).unwrap();
    let before = bm25(&old, "parse token value", 5);
    for rel in ["src/m0.rs", "src/m1.rs"] {
        let p = ws.path().join(rel);
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, format!("{text}// touched\n")).unwrap();
    }
    old.refresh(&["src/m0.rs".into(), "src/m1.rs".into()], None)
        .unwrap();
    let mut fresh = open(ws.path(), fresh_data.path());
    fresh.index_all(false, None, &mut |_| {}).unwrap();

    // The premise: all twelve score alike.
    let scores: Vec<f32> = fresh
        .search_bm25("parse token value", &Filters::default(), MODULES)
        .unwrap()
        .iter()
        .map(|h| h.score)
        .collect();
    assert_eq!(scores, vec![scores[0]; MODULES]);
    for (q, k) in [("parse token value", 5), ("parse token value", 12)] {
        let (a, b) = (bm25(&fresh, q, k), bm25(&old, q, k));
        assert_eq!(a.len(), k);
        assert_eq!(a, b, "BM25 {q:?} top {k}");
    }
    // The refresh changed no item's place, so nothing moved.
    assert_eq!(bm25(&old, "parse token value", 5), before);
    // Fused with the names (`shared_helper` names all twelve alike).
    for k in [3, 12] {
        let (a, b) = (
            fused(&fresh, "`shared_helper` parse", k),
            fused(&old, "`shared_helper` parse", k),
        );
        assert_eq!(a.len(), k);
        assert_eq!(a, b, "fused top {k}");
    }
}
