//! Writing overlays: what a sync needs, reverts and renames, compare-and-set puts, bounds,
//! field-level validation, a restart, and expiry.

use std::time::{Duration, SystemTime};

use ploke_proto::rag::v1::*;
use ploke_proto::status::field_violations;
use ploke_rag_search::service::{OverlayLimits, RagService, Retrieval};
use ploke_runtime::workspaces::Workspaces;
use tonic::Code;

use super::*;

fn changed(path: &str, text: &str) -> OverlayEntry {
    OverlayEntry {
        path: path.into(),
        state: OverlayEntryState::Changed as i32,
        hash: hash(text),
        size: text.len() as u64,
        content: text.as_bytes().to_vec(),
    }
}

fn deleted(path: &str) -> OverlayEntry {
    OverlayEntry {
        path: path.into(),
        state: OverlayEntryState::Deleted as i32,
        ..Default::default()
    }
}

fn pending(path: &str, text: &str) -> OverlayEntry {
    OverlayEntry {
        path: path.into(),
        state: OverlayEntryState::Pending as i32,
        hash: hash(text),
        ..Default::default()
    }
}

fn overlay(s: &Server, version: u64, entries: Vec<OverlayEntry>) -> Overlay {
    Overlay {
        session_id: "s-alice".into(),
        workspace_root: s.root.display().to_string(),
        version,
        entries,
        owner: "alice".into(),
    }
}

#[tokio::test]
async fn a_sync_needs_only_what_is_missing_and_follows_reverts_and_renames() {
    let (_ws, _data, mut s) = base(Options::default()).await;
    let alice = user("alice");
    s.sync(&alice, "s-alice", &dev_manifest()).await.unwrap();
    let put = s
        .put(
            &alice,
            "s-alice",
            &[
                ("src/config.rs", CONFIG_RS_DEV, ""),
                ("src/extra.rs", EXTRA_RS, ""),
                ("src/pending.rs", PENDING_RS_DEV, ""),
            ],
        )
        .await
        .unwrap();
    assert_eq!((put.version, put.pending), (2, 0));
    // Nothing changed: nothing needed, the same version.
    let again = s.sync(&alice, "s-alice", &dev_manifest()).await.unwrap();
    assert_eq!(
        again,
        SyncOverlayResponse {
            need: vec![],
            changed: 3,
            added: 1,
            deleted: 1,
            unchanged: 2,
            version: 2,
            bytes: (CONFIG_RS_DEV.len() + EXTRA_RS.len() + PENDING_RS_DEV.len()) as u64,
            max_bytes: 64 * 1024 * 1024,
        }
    );
    // extra.rs renamed (its content is held: nothing needed), config.rs reverted.
    let moved = [
        ("src/lib.rs", LIB_RS),
        ("src/config.rs", CONFIG_RS),
        ("src/net.rs", NET_RS),
        ("src/pending.rs", PENDING_RS_DEV),
        ("src/more/extra.rs", EXTRA_RS),
    ];
    let synced = s.sync(&alice, "s-alice", &moved).await.unwrap();
    assert_eq!(
        (synced.need.len(), synced.changed, synced.version),
        (0, 2, 3)
    );
    assert_eq!(
        s.overlay(&alice, "s-alice").await,
        overlay(
            &s,
            3,
            vec![
                changed("src/more/extra.rs", EXTRA_RS),
                deleted("src/old.rs"),
                changed("src/pending.rs", PENDING_RS_DEV),
            ]
        )
    );
    // The reverted file answers from the base again; the moved function from its new path.
    let r = s
        .search(&alice, "s-alice", "load_from_file", Strategy::Bm25)
        .await;
    assert_eq!(names(&r)[0], "crate::config::Settings::load_from_file");
    assert_eq!(r.hits[0].part.as_ref().unwrap().file_hash, hash(CONFIG_RS));
    let r = s
        .search(&alice, "s-alice", "quantum flux capacitor", Strategy::Bm25)
        .await;
    assert_eq!(files(&r), vec!["src/more/extra.rs"]);
    s.stop().await;
}

#[tokio::test]
async fn compare_and_set_puts_apply_or_write_nothing() {
    let (_ws, _data, mut s) = base(Options::default()).await;
    let alice = user("alice");
    // An edit to a session that never synced: expected = the base's hash.
    let put = s
        .put(
            &alice,
            "s-alice",
            &[("src/config.rs", CONFIG_RS_DEV, &hash(CONFIG_RS))],
        )
        .await
        .unwrap();
    assert_eq!(
        put,
        PutOverlayFilesResponse {
            version: 1,
            pending: 0,
            items: 3
        }
    );
    // A stale expectation fails the whole request.
    let err = s
        .put(
            &alice,
            "s-alice",
            &[
                ("src/net.rs", EXTRA_RS, ""),
                ("src/config.rs", CONFIG_RS, &hash(CONFIG_RS)),
            ],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(
        err.message(),
        format!(
            "files[1].expected_hash: `src/config.rs` is at {} in the overlay of session s-alice, not {}; nothing was written",
            hash(CONFIG_RS_DEV),
            hash(CONFIG_RS)
        )
    );
    let before = overlay(&s, 1, vec![changed("src/config.rs", CONFIG_RS_DEV)]);
    assert_eq!(s.overlay(&alice, "s-alice").await, before);
    // The current hash applies.
    let put = s
        .put(
            &alice,
            "s-alice",
            &[("src/config.rs", PENDING_RS, &hash(CONFIG_RS_DEV))],
        )
        .await
        .unwrap();
    assert_eq!(put.version, 2);
    // Content other than the manifest announced is stored with its real hash.
    s.sync(
        &alice,
        "s-alice",
        &[
            ("src/lib.rs", LIB_RS),
            ("src/config.rs", PENDING_RS),
            ("src/net.rs", NET_RS),
            ("src/old.rs", OLD_RS),
            ("src/pending.rs", PENDING_RS_DEV),
        ],
    )
    .await
    .unwrap();
    s.put(&alice, "s-alice", &[("src/pending.rs", EXTRA_RS, "")])
        .await
        .unwrap();
    assert_eq!(
        s.overlay(&alice, "s-alice").await.entries,
        vec![
            changed("src/config.rs", PENDING_RS),
            changed("src/pending.rs", EXTRA_RS)
        ]
    );
    s.stop().await;
}

#[tokio::test]
async fn over_a_limit_is_refused_and_changes_nothing() {
    let (_ws, _data, mut s) = base(Options {
        max_files: Some(3),
        max_bytes: Some(CONFIG_RS_DEV.len() as u64 + 10),
        ..Options::default()
    })
    .await;
    let alice = user("alice");
    // config, extra, pending and the deleted old.rs: four entries.
    let err = s
        .sync(&alice, "s-alice", &dev_manifest())
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (
            Code::ResourceExhausted,
            "overlay of session s-alice would hold 4 files, over the limit of 3; commit and push, or raise [rag_search] overlay_max_files"
        )
    );
    assert_eq!(
        s.overlay(&alice, "s-alice").await,
        Overlay {
            session_id: "s-alice".into(),
            ..Default::default()
        }
    );
    let two = [
        ("src/lib.rs", LIB_RS),
        ("src/config.rs", CONFIG_RS_DEV),
        ("src/net.rs", NET_RS),
        ("src/old.rs", OLD_RS),
        ("src/pending.rs", PENDING_RS),
        ("src/extra.rs", EXTRA_RS),
    ];
    assert_eq!(
        s.sync(&alice, "s-alice", &two).await.unwrap().need,
        vec!["src/config.rs", "src/extra.rs"]
    );
    let err = s
        .put(
            &alice,
            "s-alice",
            &[
                ("src/config.rs", CONFIG_RS_DEV, ""),
                ("src/extra.rs", EXTRA_RS, ""),
            ],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert_eq!(
        err.message(),
        format!(
            "overlay of session s-alice would hold {} bytes, over the limit of {}; commit and push, or raise [rag_search] overlay_max_bytes",
            CONFIG_RS_DEV.len() + EXTRA_RS.len(),
            CONFIG_RS_DEV.len() + 10
        )
    );
    let before = overlay(
        &s,
        1,
        vec![
            pending("src/config.rs", CONFIG_RS_DEV),
            pending("src/extra.rs", EXTRA_RS),
        ],
    );
    assert_eq!(s.overlay(&alice, "s-alice").await, before);
    let put = s
        .put(&alice, "s-alice", &[("src/config.rs", CONFIG_RS_DEV, "")])
        .await
        .unwrap();
    assert_eq!((put.version, put.pending), (2, 1));
    s.stop().await;
}

#[tokio::test]
async fn bad_requests_name_the_field() {
    let (_ws, _data, mut s) = base(Options::default()).await;
    let alice = user("alice");
    let good = hash("x");
    let manifest = |files: &[(&str, &str)]| SyncOverlayRequest {
        session_id: "s-alice".into(),
        files: files
            .iter()
            .map(|(p, h)| ManifestEntry {
                path: (*p).into(),
                hash: (*h).into(),
            })
            .collect(),
        ..Default::default()
    };
    let cases = [
        (
            manifest(&[("src/a.rs", &good), ("../etc/passwd", &good)]),
            "files[1].path",
            "`../etc/passwd` must not contain `..`",
        ),
        (
            manifest(&[("src/a.rs", &good), ("src//a.rs", &good)]),
            "files[1].path",
            "`src/a.rs` is listed twice (also files[0].path)",
        ),
        (
            manifest(&[("src/a.rs", "nothex")]),
            "files[0].hash",
            "must be a blake3 hash (64 hex digits), got `nothex`",
        ),
        (
            SyncOverlayRequest::default(),
            "session_id",
            "must name the session",
        ),
    ];
    for (request, field, reason) in cases {
        let err = s
            .client
            .sync_overlay(as_(&alice, request))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
        assert_eq!(
            field_violations(&err),
            vec![(field.to_owned(), reason.to_owned())]
        );
    }
    let err = s
        .client
        .put_overlay_files(as_(
            &alice,
            PutOverlayFilesRequest {
                session_id: "s-alice".into(),
                files: vec![OverlayFile {
                    path: "src/a.rs".into(),
                    content: vec![0xff, 0xfe, 0x00],
                    expected_hash: String::new(),
                }],
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(
        field_violations(&err),
        vec![(
            "files[0].content".to_owned(),
            "is not UTF-8 text (binary files are not indexed)".to_owned()
        )]
    );
    let err = s
        .client
        .search(as_(
            &alice,
            SearchRequest {
                query: "x".into(),
                session_id: "s".repeat(200),
                ..Default::default()
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(
        field_violations(&err),
        vec![(
            "session_id".to_owned(),
            "must be at most 128 bytes, got 200".to_owned()
        )]
    );
    // Nothing was made by any of them.
    assert_eq!(s.overlay(&alice, "s-alice").await.version, 0);
    s.stop().await;
}

#[tokio::test]
async fn an_overlay_survives_a_restart_and_expires_when_idle() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    fixture(ws.path());
    let mut s = start(ws.path(), data.path(), Options::default()).await;
    s.index().await;
    let alice = user("alice");
    s.sync(&alice, "s-alice", &dev_manifest()).await.unwrap();
    s.put(&alice, "s-alice", &[("src/config.rs", CONFIG_RS_DEV, "")])
        .await
        .unwrap();
    let before = s.overlay(&alice, "s-alice").await;
    s.stop().await;

    let mut s = start(ws.path(), data.path(), Options::default()).await;
    assert_eq!(s.overlay(&alice, "s-alice").await, before);
    let r = s
        .search(&alice, "s-alice", "frobnicate widget cache", Strategy::Bm25)
        .await;
    assert_eq!(
        names(&r)[0],
        "crate::config::Settings::frobnicate_widget_cache"
    );
    let r = s
        .search(&alice, "s-alice", "legacy tokenizer shim", Strategy::Bm25)
        .await;
    assert!(!files(&r).contains(&"src/old.rs".to_owned()));
    s.stop().await;

    // Expiry, driven by the clock the sweep is given.
    let service = RagService::open(
        Workspaces::new(&[ws.path().to_owned()]),
        data.path(),
        None,
        Retrieval::default(),
    )
    .unwrap()
    .with_overlay_limits(OverlayLimits {
        idle: Some(Duration::from_secs(3600)),
        ..OverlayLimits::default()
    });
    let now = SystemTime::now();
    assert!(service.expire_overlays(now).await.unwrap().is_empty());
    assert_eq!(
        service
            .get_overlay("s-alice", vec![], false)
            .await
            .unwrap()
            .version,
        2
    );
    assert_eq!(
        service
            .expire_overlays(now + Duration::from_secs(3601))
            .await
            .unwrap(),
        vec!["s-alice".to_owned()]
    );
    assert_eq!(
        service
            .get_overlay("s-alice", vec![], false)
            .await
            .unwrap()
            .version,
        0
    );
    service.close();
    drop(service);
    assert_eq!(
        std::fs::read_dir(data.path().join("overlays"))
            .unwrap()
            .count(),
        0
    );

    // One principal holds at most `max_per_principal` overlays; others are not affected.
    let service = RagService::open(
        Workspaces::new(&[ws.path().to_owned()]),
        data.path(),
        None,
        Retrieval::default(),
    )
    .unwrap()
    .with_overlay_limits(OverlayLimits {
        max_per_principal: 1,
        ..OverlayLimits::default()
    });
    let manifest = || {
        dev_manifest()
            .into_iter()
            .map(|(path, text)| ploke_rag_search::service::ManifestFile {
                path: path.into(),
                hash: hash(text),
            })
            .collect::<Vec<_>>()
    };
    let as_ = |who: &str, session: &'static str| {
        let service = service.clone();
        let files = manifest();
        ploke_runtime::principal::scope(Some(user(who)), async move {
            service.sync_overlay(session, "", files).await.map(|_| ())
        })
    };
    as_("alice", "s-a1").await.unwrap();
    let refused = as_("alice", "s-a2").await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "alice already has 1 sessions carrying their own changes on this server, the limit ([rag_search] overlay_max_per_principal); they are dropped after [rag_search] overlay_idle_secs without use"
    );
    as_("bob", "s-b1").await.unwrap();
    service.close();
}

#[tokio::test]
async fn damaged_overlays_are_repaired_or_dropped_never_fatal() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    fixture(ws.path());
    let mut s = start(ws.path(), data.path(), Options::default()).await;
    s.index().await;
    let alice = user("alice");
    s.sync(&alice, "s-alice", &dev_manifest()).await.unwrap();
    s.put(
        &alice,
        "s-alice",
        &[
            ("src/config.rs", CONFIG_RS_DEV, ""),
            ("src/extra.rs", EXTRA_RS, ""),
        ],
    )
    .await
    .unwrap();
    s.sync(&user("bob"), "s-bob", &dev_manifest())
        .await
        .unwrap();
    s.stop().await;
    let dirs: Vec<PathBuf> = std::fs::read_dir(data.path().join("overlays"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 2);
    let dir_of = |session: &str| {
        dirs.iter()
            .find(|d| {
                std::fs::read_to_string(d.join("overlay.json"))
                    .unwrap()
                    .contains(&format!("\"session\":\"{session}\""))
            })
            .unwrap()
            .clone()
    };
    // Alice's config.rs content is lost; Bob's manifest is garbage.
    std::fs::remove_file(dir_of("s-alice").join("blobs").join(hash(CONFIG_RS_DEV))).unwrap();
    std::fs::write(dir_of("s-bob").join("overlay.json"), b"{garbage").unwrap();

    let mut s = start(ws.path(), data.path(), Options::default()).await;
    assert_eq!(s.overlay(&user("bob"), "s-bob").await.version, 0);
    assert!(!dir_of_exists(&dirs, "s-bob"));
    // The lost file is awaited again, and never answered from the base meanwhile.
    let r = s
        .search(&alice, "s-alice", "load_from_file", Strategy::Bm25)
        .await;
    assert!(!files(&r).contains(&"src/config.rs".to_owned()));
    let synced = s.sync(&alice, "s-alice", &dev_manifest()).await.unwrap();
    assert_eq!(synced.need, vec!["src/config.rs", "src/pending.rs"]);
    let r = s
        .search(&alice, "s-alice", "quantum flux capacitor", Strategy::Bm25)
        .await;
    assert_eq!(files(&r), vec!["src/extra.rs"]);
    s.stop().await;
}

/// Whether one of `dirs` still holds the overlay of `session`.
fn dir_of_exists(dirs: &[PathBuf], session: &str) -> bool {
    dirs.iter().any(|d| {
        std::fs::read_to_string(d.join("overlay.json"))
            .is_ok_and(|m| m.contains(&format!("\"session\":\"{session}\"")))
    })
}
