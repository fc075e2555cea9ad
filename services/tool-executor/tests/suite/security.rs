//! Paths stay inside the workspace: traversal, absolute paths elsewhere and symlink escapes
//! are refused for reads and writes; `.git/` is read-only.

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

#[tokio::test]
async fn git_is_readable_but_never_written() {
    let h = Harness::start().await;
    std::fs::create_dir_all(h.path(".git")).unwrap();
    std::fs::write(h.path(".git/config"), "[core]\n").unwrap();
    let tool_result::Result::ReadFile(r) = h.ok(read(".git/config")).await else {
        panic!()
    };
    assert_eq!(r.content, "[core]\n");
    for call in [
        create(".git/config"),
        create(".git/hooks/post-checkout"),
        edit_call(vec![search_replace(".git/config", "core", "evil")]),
    ] {
        let e = h.err(call.clone()).await;
        assert_eq!(code(&e), ToolErrorCode::PermissionDenied, "{call:?}: {e:?}");
    }
    assert_eq!(h.read(".git/config"), "[core]\n");
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
