//! Paths stay inside the workspace: traversal, absolute paths elsewhere and symlink escapes
//! are refused for reads and writes; `.git/` and `.ploke/` are neither read nor written.

use ploke_proto::tools::v1::*;

use super::{Harness, code, edit_call, search_replace};

fn read(file: &str) -> tool_call::Args {
    tool_call::Args::ReadFile(ReadFileArgs {
        file: file.into(),
        start_line: None,
        end_line: None,
    })
}

fn create(file: &str) -> tool_call::Args {
    tool_call::Args::CreateFile(CreateFileArgs {
        file_path: file.into(),
        content: "x\n".into(),
        on_exists: Some(OnExists::Overwrite as i32),
    })
}

#[tokio::test]
async fn traversal_and_absolute_paths_elsewhere_are_refused() {
    let h = Harness::start().await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s\n").unwrap();
    let abs = outside.path().join("secret.txt").display().to_string();
    for call in [
        read("../secret.txt"),
        read("src/../../secret.txt"),
        read(&abs),
        tool_call::Args::ListDir(ListDirArgs {
            path: Some("..".into()),
            ..Default::default()
        }),
        tool_call::Args::SearchCode(SearchCodeArgs {
            pattern: "s".into(),
            path: Some("../".into()),
            ..Default::default()
        }),
        tool_call::Args::GetFileMetadata(GetFileMetadataArgs {
            file_path: abs.clone(),
        }),
        create("../evil.rs"),
        create(&abs),
        edit_call(vec![search_replace("../secret.txt", "s", "t")]),
    ] {
        let e = h.err(call.clone()).await;
        assert_eq!(code(&e), ToolErrorCode::OutsideWorkspace, "{call:?}: {e:?}");
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "s\n"
    );
    assert!(!h.root.parent().unwrap().join("evil.rs").exists());
    h.stop().await;
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_that_leave_the_workspace_are_refused() {
    let h = Harness::start().await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), h.path("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), h.path("src/leak.rs")).unwrap();
    for call in [
        read("escape/secret.txt"),
        read("src/leak.rs"),
        create("escape/new.rs"),
        create("src/leak.rs"),
        edit_call(vec![search_replace("src/leak.rs", "s", "t")]),
    ] {
        let e = h.err(call.clone()).await;
        assert_eq!(code(&e), ToolErrorCode::OutsideWorkspace, "{call:?}: {e:?}");
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "s\n"
    );
    assert!(!outside.path().join("new.rs").exists());
    h.stop().await;
}

#[cfg(unix)]
#[tokio::test]
async fn git_and_ploke_state_are_neither_read_nor_written() {
    let h = Harness::start().await;
    // A CI checkout's credential in git's config; another workspace's clone and every
    // developer's sessions under ploke's state, as `ploke up` keeps them in the repository.
    std::fs::create_dir_all(h.path(".git")).unwrap();
    let config = "[http]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\n";
    std::fs::write(h.path(".git/config"), config).unwrap();
    std::fs::create_dir_all(h.path(".ploke/repos/billing-1a2b/src")).unwrap();
    std::fs::write(
        h.path(".ploke/repos/billing-1a2b/src/lib.rs"),
        "fn bill() {}\n",
    )
    .unwrap();
    std::fs::write(h.path(".ploke/sessions.sqlite"), "alice: my password is\n").unwrap();
    std::os::unix::fs::symlink(h.path(".git/config"), h.path("git-config.txt")).unwrap();
    let listing = |path: &str| {
        tool_call::Args::ListDir(ListDirArgs {
            path: Some(path.into()),
            include_hidden: Some(true),
            ..Default::default()
        })
    };
    for call in [
        read(".git/config"),
        read(".GIT/config"),
        read("git-config.txt"),
        read(".ploke/repos/billing-1a2b/src/lib.rs"),
        read(".ploke/sessions.sqlite"),
        listing(".ploke/repos"),
        listing(".git"),
        tool_call::Args::GetFileMetadata(GetFileMetadataArgs {
            file_path: ".git/config".into(),
        }),
        tool_call::Args::SearchCode(SearchCodeArgs {
            pattern: "bill".into(),
            path: Some(".ploke/repos".into()),
            ..Default::default()
        }),
        create(".git/config"),
        create(".git/hooks/post-checkout"),
        create(".ploke/repos/billing-1a2b/src/evil.rs"),
        edit_call(vec![search_replace(".git/config", "basic", "evil")]),
    ] {
        let e = h.err(call.clone()).await;
        assert_eq!(code(&e), ToolErrorCode::PermissionDenied, "{call:?}: {e:?}");
    }
    let e = h.err(read(".git/config")).await;
    assert!(
        e.message
            .contains("`.git/config` is under .git/, which is never read or written"),
        "{e:?}"
    );
    // Listing the root with hidden entries leaves them out; other hidden entries stay.
    std::fs::write(h.path(".env.example"), "X=1\n").unwrap();
    let tool_result::Result::ListDir(listed) = h.ok(listing("")).await else {
        panic!()
    };
    let names: Vec<&str> = listed.entries.iter().map(|e| e.name.as_str()).collect();
    assert!(names.contains(&".env.example"), "{names:?}");
    assert!(
        !names.contains(&".git") && !names.contains(&".ploke"),
        "{names:?}"
    );
    assert_eq!(h.read(".git/config"), config);
    assert!(!h.path(".ploke/repos/billing-1a2b/src/evil.rs").exists());
    h.stop().await;
}

#[tokio::test]
async fn big_and_non_utf8_files_are_refused_for_edits() {
    let h = Harness::start_with(super::Options {
        max_file_bytes: Some(1000),
        ..Default::default()
    })
    .await;
    std::fs::write(h.path("big.rs"), "x".repeat(2000)).unwrap();
    std::fs::write(h.path("bin.rs"), [0xff, 0x00, b'x']).unwrap();
    let e = h
        .err(edit_call(vec![search_replace("big.rs", "x", "y")]))
        .await;
    assert_eq!(
        (code(&e), e.field.as_str()),
        (ToolErrorCode::TooLarge, "edits[0].search_replace.file_path")
    );
    let e = h
        .err(edit_call(vec![search_replace("bin.rs", "x", "y")]))
        .await;
    assert_eq!(code(&e), ToolErrorCode::NotUtf8);
    let e = h
        .err(tool_call::Args::CreateFile(CreateFileArgs {
            file_path: "huge.rs".into(),
            content: "y".repeat(2000),
            on_exists: None,
        }))
        .await;
    assert_eq!(
        (code(&e), e.field.as_str()),
        (ToolErrorCode::TooLarge, "content")
    );
    h.stop().await;
}
