use super::*;
use crate::service::overlay::check_session_id;

fn h(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

fn changed(text: &str) -> Entry {
    Entry::Changed {
        hash: h(text),
        size: text.len() as u64,
    }
}

fn base() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("src/a.rs".to_owned(), h("a")),
        ("src/b.rs".to_owned(), h("b")),
        ("src/c.rs".to_owned(), h("c")),
    ])
}

fn manifest(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files.iter().map(|(p, t)| ((*p).to_owned(), h(t))).collect()
}

#[test]
fn a_sync_sorts_paths_into_unchanged_changed_pending_and_deleted() {
    // The overlay holds "a2" (at src/a.rs) and awaits "n1".
    let current = BTreeMap::from([
        ("src/a.rs".to_owned(), changed("a2")),
        ("src/new.rs".to_owned(), Entry::Pending { hash: h("n1") }),
    ]);
    // a.rs reverted, b.rs changed to content held under another path (a rename), new.rs
    // still awaited, c.rs deleted, z.rs new and unknown.
    let planned = plan_sync(
        &current,
        &base(),
        &manifest(&[
            ("src/a.rs", "a"),
            ("src/b.rs", "a2"),
            ("src/new.rs", "n1"),
            ("src/z.rs", "z"),
        ]),
    );
    assert_eq!(
        planned,
        Planned {
            next: BTreeMap::from([
                ("src/b.rs".to_owned(), changed("a2")),
                ("src/c.rs".to_owned(), Entry::Deleted),
                ("src/new.rs".to_owned(), Entry::Pending { hash: h("n1") }),
                ("src/z.rs".to_owned(), Entry::Pending { hash: h("z") }),
            ]),
            need: vec!["src/new.rs".to_owned(), "src/z.rs".to_owned()],
            changed: 3,
            added: 2,
            deleted: 1,
            unchanged: 1,
        }
    );
    // The same manifest again changes nothing but what arrived.
    let again = plan_sync(
        &planned.next,
        &base(),
        &manifest(&[
            ("src/a.rs", "a"),
            ("src/b.rs", "a2"),
            ("src/new.rs", "n1"),
            ("src/z.rs", "z"),
        ]),
    );
    assert_eq!(again.next, planned.next);
}

#[test]
fn a_put_stores_the_real_hash_and_compare_and_set_refuses_others() {
    let current = BTreeMap::from([
        ("src/a.rs".to_owned(), changed("a2")),
        ("src/c.rs".to_owned(), Entry::Deleted),
        ("src/p.rs".to_owned(), Entry::Pending { hash: h("p1") }),
    ]);
    let bases = HashMap::from([
        ("src/a.rs".to_owned(), Some(h("a"))),
        ("src/b.rs".to_owned(), Some(h("b"))),
        ("src/c.rs".to_owned(), Some(h("c"))),
        ("src/p.rs".to_owned(), None),
        ("src/n.rs".to_owned(), None),
    ]);
    let put = |path: &str, text: &str, expected: Option<&str>| Checked {
        path: path.to_owned(),
        content: text.as_bytes().to_vec(),
        hash: h(text),
        expected: expected.map(h),
    };
    // The overlay's hash, the base's for a path it does not hold, the announced one for a
    // pending path; content equal to the base's leaves the overlay.
    let next = plan_put(
        "s1",
        &current,
        &bases,
        &[
            put("src/a.rs", "a3", Some("a2")),
            put("src/b.rs", "b2", Some("b")),
            put("src/p.rs", "p2", Some("p1")),
            put("src/n.rs", "n", None),
        ],
    )
    .unwrap();
    assert_eq!(
        next,
        BTreeMap::from([
            ("src/a.rs".to_owned(), changed("a3")),
            ("src/b.rs".to_owned(), changed("b2")),
            ("src/c.rs".to_owned(), Entry::Deleted),
            ("src/n.rs".to_owned(), changed("n")),
            ("src/p.rs".to_owned(), changed("p2")),
        ])
    );
    let reverted = plan_put("s1", &current, &bases, &[put("src/a.rs", "a", None)]).unwrap();
    assert!(!reverted.contains_key("src/a.rs"));
    // The base's hash does not hold for a path the overlay changed; a deleted file has none.
    let e = plan_put("s1", &current, &bases, &[put("src/a.rs", "x", Some("a"))]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "files[0].expected_hash: `src/a.rs` is at {} in the overlay of session s1, not {}; nothing was written",
            h("a2"),
            h("a")
        )
    );
    let e = plan_put(
        "s1",
        &current,
        &bases,
        &[put("src/n.rs", "n", None), put("src/c.rs", "c2", Some("c"))],
    )
    .unwrap_err();
    assert!(matches!(
        e,
        RagError::OverlayConflict { ref field, ref current, .. }
            if field == "files[1].expected_hash" && current == "no file"
    ));
}

#[test]
fn limits_count_entries_and_content_bytes() {
    let next = BTreeMap::from([
        ("a".to_owned(), changed("12345")),
        ("b".to_owned(), Entry::Deleted),
        ("c".to_owned(), Entry::Pending { hash: h("c") }),
    ]);
    let limits = |max_bytes, max_files| OverlayLimits {
        max_bytes,
        max_files,
        idle: None,
        max_per_principal: 16,
    };
    assert!(check_limits("s", &next, limits(5, 3)).is_ok());
    assert_eq!(
        check_limits("s", &next, limits(4, 3))
            .unwrap_err()
            .to_string(),
        "overlay of session s would hold 5 bytes, over the limit of 4; commit and push, or raise [rag_search] overlay_max_bytes"
    );
    assert_eq!(
        check_limits("s", &next, limits(5, 2))
            .unwrap_err()
            .to_string(),
        "overlay of session s would hold 3 files, over the limit of 2; commit and push, or raise [rag_search] overlay_max_files"
    );
}

#[test]
fn requests_are_checked_field_by_field() {
    let field = |e: RagError| match e {
        RagError::Invalid { field, reason } => format!("{field}: {reason}"),
        RagError::BadPath {
            field,
            path,
            reason,
        } => format!("{field}: `{path}` {reason}"),
        other => panic!("{other}"),
    };
    let file = |path: &str, hash: &str| ManifestFile {
        path: path.into(),
        hash: hash.into(),
    };
    let good = h("x");
    assert_eq!(
        field(check_manifest(vec![file("src/a.rs", &good), file("../x", &good)]).unwrap_err()),
        "files[1].path: `../x` must not contain `..`"
    );
    assert_eq!(
        field(
            check_manifest(vec![file("src/a.rs", &good), file("./src/a.rs", &good)]).unwrap_err()
        ),
        "files[1].path: `src/a.rs` is listed twice (also files[0].path)"
    );
    assert_eq!(
        field(check_manifest(vec![file("src/a.rs", "abc")]).unwrap_err()),
        "files[0].hash: must be a blake3 hash (64 hex digits), got `abc`"
    );
    assert_eq!(
        check_manifest(vec![file("./src/a.rs", &good.to_uppercase())]).unwrap(),
        vec![("src/a.rs".to_owned(), good.clone())]
    );
    // Git's and ploke's own files are never asked for.
    assert_eq!(
        check_manifest(vec![
            file(".git/config", &good),
            file("src/a.rs", &good),
            file("sub/.Ploke/x", &good)
        ])
        .unwrap(),
        vec![("src/a.rs".to_owned(), good.clone())]
    );
    let put = |path: &str, content: &[u8]| OverlayPut {
        path: path.into(),
        content: content.to_vec(),
        expected_hash: String::new(),
    };
    assert_eq!(
        field(check_puts(vec![]).unwrap_err()),
        "files: must not be empty"
    );
    assert_eq!(
        field(check_puts(vec![put("a.rs", b"ok"), put("b.rs", &[0xff, 0xfe])]).unwrap_err()),
        "files[1].content: is not UTF-8 text (binary files are not indexed)"
    );
    assert_eq!(
        field(check_puts(vec![put("a.rs", b"ok"), put(".git/config", b"[core]")]).unwrap_err()),
        "files[1].path: `.git/config` is under .git/, which is never read or written"
    );
    let big = vec![b'a'; scan::MAX_FILE_BYTES as usize + 1];
    assert_eq!(
        field(check_puts(vec![put("a.rs", &big)]).unwrap_err()),
        "files[0].content: is 1048577 bytes; files over 1048576 bytes are not indexed"
    );
    assert_eq!(
        field(
            check_puts(vec![OverlayPut {
                expected_hash: "zz".into(),
                ..put("a.rs", b"ok")
            }])
            .unwrap_err()
        ),
        "files[0].expected_hash: must be a blake3 hash (64 hex digits), got `zz`"
    );
    for (id, reason) in [
        ("", "must name the session"),
        (
            "a b",
            "must be printable ASCII without spaces or control characters",
        ),
        (
            "é",
            "must be printable ASCII without spaces or control characters",
        ),
    ] {
        assert_eq!(
            field(check_session_id("session_id", id, false).unwrap_err()),
            format!("session_id: {reason}")
        );
    }
    assert_eq!(
        field(check_session_id("session_id", &"s".repeat(129), true).unwrap_err()),
        "session_id: must be at most 128 bytes, got 129"
    );
    assert!(check_session_id("session_id", "", true).is_ok());
    assert!(check_session_id("session_id", "019a-b7_c:d", false).is_ok());
}
