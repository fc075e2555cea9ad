//! Reading outside the workspace through a symlink, by every entry point that touches files:
//! the file watcher, RefreshFiles, GetSnippets, request_code_context and the file tools.

use std::os::unix::fs::symlink;

use ploke_e2e::wait::eventually;
use ploke_e2e::{LIB_RS, Sandbox};
use ploke_proto::common::v1::CodeSpan;
use ploke_proto::rag::v1::{
    GetSnippetsRequest, RefreshFilesRequest, SnippetRequest, SnippetStatus,
};
use ploke_proto::tools::v1::{
    GetFileMetadataArgs, ReadFileArgs, RequestCodeContextArgs, ToolErrorCode, tool_call,
    tool_result,
};

use super::{SECRET, search, tool};

/// A Sandbox whose workspace holds `notes.md` → a file outside and `linkdir` → a directory
/// outside, both made after the first index; the outside directory is returned to keep it.
async fn with_links() -> (Sandbox, tempfile::TempDir) {
    let sandbox = Sandbox::start().await.unwrap();
    sandbox
        .index_files(&[("src/lib.rs", LIB_RS)])
        .await
        .unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.rs"), SECRET).unwrap();
    std::fs::write(outside.path().join("notes.md"), SECRET).unwrap();
    let ws = sandbox.workspace_root();
    symlink(outside.path().join("notes.md"), ws.join("notes.md")).unwrap();
    symlink(outside.path(), ws.join("linkdir")).unwrap();
    (sandbox, outside)
}

#[tokio::test]
async fn the_watcher_never_indexes_what_a_symlink_points_to_outside() {
    let (sandbox, _outside) = with_links().await;
    // A real file written after the links: once the watcher has indexed it, it has seen the
    // links too.
    std::fs::write(
        sandbox.workspace_root().join("src/marker.rs"),
        "pub fn watcher_marker() {}\n",
    )
    .unwrap();
    eventually("the watcher indexes src/marker.rs", || async {
        !search(&sandbox, "watcher_marker").await.is_empty()
    })
    .await;
    assert_eq!(
        search(&sandbox, "exfiltrated_secret s3cr3t").await,
        Vec::<String>::new()
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn refresh_files_and_get_snippets_never_follow_a_symlink_out() {
    let (sandbox, _outside) = with_links().await;
    let refreshed = sandbox
        .rag()
        .refresh_files(RefreshFilesRequest {
            workspace_root: String::new(),
            paths: vec![
                "linkdir".into(),
                "linkdir/secret.rs".into(),
                "notes.md".into(),
            ],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (refreshed.files_updated, refreshed.items_added),
        (0, 0),
        "{refreshed:?}"
    );
    assert_eq!(
        search(&sandbox, "exfiltrated_secret s3cr3t").await,
        Vec::<String>::new()
    );
    let snippets = sandbox
        .rag()
        .get_snippets(GetSnippetsRequest {
            workspace_root: String::new(),
            session_id: String::new(),
            spans: ["notes.md", "linkdir/secret.rs"]
                .map(|path| SnippetRequest {
                    span: Some(CodeSpan {
                        path: path.into(),
                        byte_start: 0,
                        byte_end: 20,
                        ..Default::default()
                    }),
                    expected_file_hash: String::new(),
                })
                .to_vec(),
        })
        .await
        .unwrap()
        .into_inner()
        .snippets;
    let seen: Vec<(SnippetStatus, &str)> = snippets
        .iter()
        .map(|s| (s.status(), s.text.as_str()))
        .collect();
    assert_eq!(
        seen,
        [(SnippetStatus::Missing, ""), (SnippetStatus::Missing, "")]
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn no_tool_reads_through_a_symlink_that_leaves() {
    let (sandbox, _outside) = with_links().await;
    let context = tool(
        &sandbox,
        tool_call::Args::RequestCodeContext(RequestCodeContextArgs {
            search_term: Some("exfiltrated_secret s3cr3t".into()),
            token_budget: None,
            languages: vec![],
        }),
    )
    .await
    .unwrap();
    let Some(tool_result::Result::RequestCodeContext(context)) = context.result else {
        panic!("{context:?}")
    };
    // The query names the secret; no part may carry it.
    assert!(
        context
            .parts
            .iter()
            .all(|p| !format!("{p:?}").contains("s3cr3t")),
        "{context:?}"
    );
    for (args, field) in [
        (
            tool_call::Args::ReadFile(ReadFileArgs {
                file: "notes.md".into(),
                ..Default::default()
            }),
            "file",
        ),
        (
            tool_call::Args::ReadFile(ReadFileArgs {
                file: "linkdir/secret.rs".into(),
                ..Default::default()
            }),
            "file",
        ),
        (
            tool_call::Args::GetFileMetadata(GetFileMetadataArgs {
                file_path: "linkdir/secret.rs".into(),
            }),
            "file_path",
        ),
    ] {
        let e = tool(&sandbox, args).await.unwrap_err();
        assert_eq!(
            (e.code(), e.field.as_str()),
            (ToolErrorCode::OutsideWorkspace, field),
            "{e:?}"
        );
        assert!(!e.message.contains("s3cr3t"));
    }
    sandbox.stop().await.unwrap();
}
