//! Reads through an overlay: the developer's new code is found by their session only, and a
//! file they changed, deleted or have not uploaded yet never comes back in its base version.

use ploke_proto::common::v1::{CodeSpan, ItemKind, TokenBudget};
use ploke_proto::rag::v1::*;

use super::*;

async fn synced(model: bool) -> (tempfile::TempDir, tempfile::TempDir, Server) {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    fixture(ws.path());
    let mut s = start(
        ws.path(),
        data.path(),
        Options {
            model,
            ..Options::default()
        },
    )
    .await;
    s.index().await;
    let alice = user("alice");
    let synced = s.sync(&alice, "s-alice", &dev_manifest()).await.unwrap();
    assert_eq!(
        synced,
        SyncOverlayResponse {
            need: vec![
                "src/config.rs".into(),
                "src/extra.rs".into(),
                "src/pending.rs".into()
            ],
            changed: 3,
            added: 1,
            deleted: 1,
            unchanged: 2,
            version: 1,
            bytes: 0,
            max_bytes: 64 * 1024 * 1024,
        }
    );
    let put = s
        .put(
            &alice,
            "s-alice",
            &[
                ("src/config.rs", CONFIG_RS_DEV, ""),
                ("src/extra.rs", EXTRA_RS, ""),
            ],
        )
        .await
        .unwrap();
    // config.rs: the struct, its impl and the new method; extra.rs: one function.
    assert_eq!(
        put,
        PutOverlayFilesResponse {
            version: 2,
            pending: 1,
            items: 4
        }
    );
    (ws, data, s)
}

#[tokio::test]
async fn a_change_is_found_through_its_session_only() {
    let (_ws, _data, mut s) = synced(true).await;
    let (alice, bob) = (user("alice"), user("bob"));
    let new_fn = "crate::config::Settings::frobnicate_widget_cache";
    // Bob has the same change in his own session: naming it is no way for Alice to see it.
    s.sync(&bob, "s-bob", &dev_manifest()).await.unwrap();
    s.put(&bob, "s-bob", &[("src/config.rs", CONFIG_RS_DEV, "")])
        .await
        .unwrap();
    let r = s
        .search(&bob, "s-bob", "frobnicate widget cache", Strategy::Bm25)
        .await;
    assert_eq!(names(&r)[0], new_fn);

    for strategy in [Strategy::Bm25, Strategy::Hybrid] {
        let r = s
            .search(&alice, "s-alice", "frobnicate widget cache", strategy)
            .await;
        assert_eq!(r.strategy, strategy as i32);
        assert_eq!(names(&r)[0], new_fn, "{strategy:?}");
        let part = r.hits[0].part.clone().unwrap();
        assert_eq!(part.file_path, "src/config.rs");
        assert_eq!(part.span.unwrap().path, "src/config.rs");
        assert_eq!(part.file_hash, hash(CONFIG_RS_DEV));
        assert_eq!(r.hits[0].bm25_rank, 1);
        // Not without the session, not through another principal's session, not by another
        // principal naming this one.
        for (who, session) in [(&alice, ""), (&alice, "s-bob"), (&bob, "s-alice")] {
            let r = s
                .search(who, session, "frobnicate widget cache", strategy)
                .await;
            assert!(!names(&r).contains(&new_fn.to_owned()), "{session}");
        }
    }
    // By meaning and by words, the new file's function ranks first among base items.
    let r = s
        .search(
            &alice,
            "s-alice",
            "charge the quantum flux capacitor",
            Strategy::Hybrid,
        )
        .await;
    assert!(r.dense_used);
    assert_eq!(names(&r)[0], "crate::extra::charge_quantum_flux_capacitor");
    assert_eq!((r.hits[0].bm25_rank, r.hits[0].dense_rank), (1, 1));
    let r = s
        .search(
            &alice,
            "s-alice",
            "warm up the cache before serving requests",
            Strategy::Dense,
        )
        .await;
    assert_eq!(names(&r)[0], new_fn);

    // Context: the developer's code, rendered with its workspace path.
    let context = |who: &Principal, session: &str| {
        as_(
            who,
            GetContextRequest {
                query: "frobnicate widget cache".into(),
                budget: Some(TokenBudget {
                    max_total: 2000,
                    ..Default::default()
                }),
                strategy: Strategy::Hybrid as i32,
                session_id: session.into(),
                ..Default::default()
            },
        )
    };
    let got = s
        .client
        .get_context(context(&alice, "s-alice"))
        .await
        .unwrap()
        .into_inner();
    let part = got.parts.iter().find(|p| p.canon_path == new_fn).unwrap();
    assert_eq!(part.file_hash, hash(CONFIG_RS_DEV));
    assert!(
        part.snippet.contains("self.retries * 2"),
        "{}",
        part.snippet
    );
    let tag = format!("<code=\"{}/src/config.rs\" #", s.root.display());
    assert!(got.rendered.contains(&tag), "{}", got.rendered);
    assert!(!got.rendered.contains("overlays"), "{}", got.rendered);
    assert!(!got.rendered.contains("load_from_file"), "{}", got.rendered);
    for (who, session) in [(&alice, ""), (&bob, "s-alice")] {
        let got = s
            .client
            .get_context(context(who, session))
            .await
            .unwrap()
            .into_inner();
        assert!(got.parts.iter().all(|p| p.canon_path != new_fn));
    }
    s.stop().await;
}

fn snippet(path: &str, end: u64) -> SnippetRequest {
    SnippetRequest {
        span: Some(CodeSpan {
            path: path.into(),
            byte_start: 0,
            byte_end: end,
            ..Default::default()
        }),
        expected_file_hash: String::new(),
    }
}

#[tokio::test]
async fn changed_deleted_and_pending_files_never_come_back_from_the_base() {
    let (_ws, _data, mut s) = synced(false).await;
    let (alice, bob) = (user("alice"), user("bob"));
    // Bob's session has no change: it sees the base.
    let base_manifest = [
        ("src/lib.rs", LIB_RS),
        ("src/config.rs", CONFIG_RS),
        ("src/net.rs", NET_RS),
        ("src/old.rs", OLD_RS),
        ("src/pending.rs", PENDING_RS),
    ];
    let bobs = s.sync(&bob, "s-bob", &base_manifest).await.unwrap();
    assert_eq!((bobs.need.len(), bobs.unchanged, bobs.version), (0, 5, 1));

    for (query, file) in [
        ("legacy tokenizer shim", "src/old.rs"),
        ("checksum parity", "src/pending.rs"),
        ("load_from_file toml", "src/config.rs"),
    ] {
        // Hits of the file, if any, are the developer's version (config.rs only).
        let r = s.search(&alice, "s-alice", query, Strategy::Bm25).await;
        assert!(r.hits.iter().all(|h| {
            let p = h.part.as_ref().unwrap();
            p.file_path != file || p.file_hash == hash(CONFIG_RS_DEV)
        }));
        for session in ["", "s-bob"] {
            let who = if session.is_empty() { &alice } else { &bob };
            let r = s.search(who, session, query, Strategy::Bm25).await;
            assert_eq!(files(&r)[0], file, "{query} {session}");
        }
    }

    let lookup = |session: &str, target: lookup_item_request::Target, kind: ItemKind| {
        as_(
            &alice,
            LookupItemRequest {
                target: Some(target),
                kind: kind as i32,
                session_id: session.into(),
                ..Default::default()
            },
        )
    };
    use lookup_item_request::Target;
    let cases = [
        (
            Target::Name("legacy_tokenizer_shim".into()),
            ItemKind::Unspecified,
            0,
            1,
        ),
        (
            Target::FilePath("src/pending.rs".into()),
            ItemKind::Unspecified,
            0,
            1,
        ),
        (
            Target::FilePath("src/old.rs".into()),
            ItemKind::Unspecified,
            0,
            1,
        ),
        (
            Target::CanonPath("crate::config::Settings::load_from_file".into()),
            ItemKind::Unspecified,
            0,
            1,
        ),
        (
            Target::CanonPath("crate::config::Settings::frobnicate_widget_cache".into()),
            ItemKind::Unspecified,
            1,
            0,
        ),
        (Target::Name("Settings".into()), ItemKind::Struct, 1, 1),
    ];
    for (target, kind, with, without) in cases {
        let got = s
            .client
            .lookup_item(lookup("s-alice", target.clone(), kind))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.total, with, "{target:?}");
        assert!(got.items.iter().all(|i| i.file_hash != hash(OLD_RS)));
        if let Some(i) = got
            .items
            .iter()
            .find(|i| i.span.as_ref().unwrap().path == "src/config.rs")
        {
            assert_eq!(i.file_hash, hash(CONFIG_RS_DEV));
        }
        let got = s
            .client
            .lookup_item(lookup("", target.clone(), kind))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.total, without, "{target:?}");
    }

    let snippets = |who: &Principal, session: &str| {
        as_(
            who,
            GetSnippetsRequest {
                spans: vec![
                    snippet("src/old.rs", 10),
                    snippet("src/pending.rs", 10),
                    snippet("src/config.rs", 18),
                ],
                session_id: session.into(),
                ..Default::default()
            },
        )
    };
    let got = s
        .client
        .get_snippets(snippets(&alice, "s-alice"))
        .await
        .unwrap()
        .into_inner()
        .snippets;
    let seen: Vec<(i32, &str, &str)> = got
        .iter()
        .map(|g| (g.status, g.text.as_str(), g.file_hash.as_str()))
        .collect();
    let dev_hash = hash(CONFIG_RS_DEV);
    assert_eq!(
        seen,
        vec![
            (SnippetStatus::Missing as i32, "", ""),
            (SnippetStatus::Missing as i32, "", ""),
            (
                SnippetStatus::Ok as i32,
                &CONFIG_RS_DEV[..18],
                dev_hash.as_str()
            ),
        ]
    );
    let got = s
        .client
        .get_snippets(snippets(&bob, "s-bob"))
        .await
        .unwrap()
        .into_inner()
        .snippets;
    assert!(got.iter().all(|g| g.status == SnippetStatus::Ok as i32));
    assert_eq!(got[0].text, &OLD_RS[..10]);

    let got = s
        .client
        .get_context(as_(
            &alice,
            GetContextRequest {
                query: "legacy tokenizer shim checksum parity".into(),
                session_id: "s-alice".into(),
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(
        got.parts
            .iter()
            .all(|p| p.file_path != "src/old.rs" && p.file_path != "src/pending.rs"),
        "{:?}",
        got.parts
    );

    // Once the pending content arrives it answers, with its own hash.
    let put = s
        .put(&alice, "s-alice", &[("src/pending.rs", PENDING_RS_DEV, "")])
        .await
        .unwrap();
    assert_eq!((put.version, put.pending), (3, 0));
    let r = s
        .search(&alice, "s-alice", "checksum parity quickly", Strategy::Bm25)
        .await;
    let part = r.hits[0].part.clone().unwrap();
    assert_eq!(
        (part.file_path.as_str(), part.file_hash),
        ("src/pending.rs", hash(PENDING_RS_DEV))
    );
    s.stop().await;
}
