//! A manifest that is not the workspace as a checkout has it (a subdirectory of the checkout,
//! a directory above the workspace's place in it, another tree, nothing at all) is refused
//! before anything changes.

use ploke_proto::rag::v1::*;
use ploke_proto::status::{CHECKOUT_MISALIGNED, precondition};
use tonic::Code;

use super::*;

#[tokio::test]
async fn a_manifest_that_is_not_a_checkout_of_the_workspace_is_refused_and_changes_nothing() {
    let (_ws, data, mut s) = base(Options::default()).await;
    let alice = user("alice");
    s.sync(&alice, "s-alice", &dev_manifest()).await.unwrap();
    let before = s.overlay(&alice, "s-alice").await;
    // The checkout's src/ sent as if it were the whole tree: as the overlay it would delete
    // every file of the workspace and add lib.rs, config.rs beside src/.
    let subdirectory = [("lib.rs", LIB_RS), ("config.rs", CONFIG_RS_DEV)];
    let root = s.root.display().to_string();
    let refused = |sent: usize| {
        format!(
            "none of the {sent} file(s) sent has a path of workspace {}, and all 5 of its file(s) are missing from them: the directory sent is not where the checkout has that workspace's root (it is a subdirectory of it, a directory above it, or another tree); the overlay is unchanged",
            root
        )
    };
    // An empty manifest too (a directory with nothing indexable) would delete everything.
    for (session, files) in [
        ("s-alice", &subdirectory[..]),
        ("s-new", &subdirectory[..]),
        ("s-alice", &[][..]),
    ] {
        let err = s.sync(&alice, session, files).await.unwrap_err();
        assert_eq!(
            (err.code(), err.message()),
            (Code::FailedPrecondition, refused(files.len()).as_str())
        );
        assert_eq!(
            precondition(&err, CHECKOUT_MISALIGNED),
            Some(
                [("sent", files.len().to_string()), ("missing", "5".into())]
                    .map(|(k, v)| (k.to_owned(), v))
                    .into()
            )
        );
    }
    assert_eq!(s.overlay(&alice, "s-alice").await, before);
    assert_eq!(
        s.overlay(&alice, "s-new").await,
        Overlay {
            session_id: "s-new".into(),
            ..Default::default()
        }
    );
    // Nothing of the refused new session was written either: only Alice's overlay has a
    // directory.
    let dirs = std::fs::read_dir(data.path().join("overlays"))
        .unwrap()
        .count();
    assert_eq!(dirs, 1);
    // One path in common is a checkout whose other files moved: taken.
    let moved = [("src/lib.rs", LIB_RS), ("lib/config.rs", CONFIG_RS_DEV)];
    let synced = s.sync(&alice, "s-alice", &moved).await.unwrap();
    assert_eq!((synced.unchanged, synced.added, synced.deleted), (1, 1, 4));
    s.stop().await;
}
