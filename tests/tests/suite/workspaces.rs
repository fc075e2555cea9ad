//! Workspaces at run time, through the gateway as an operator would: a git repository (a real
//! `file://` repository made here; nothing leaves the machine) and a local directory are added
//! with an admin token, listed, searched, used by tools and sessions (which learn them from
//! rag-search), updated, kept across a restart and removed.

use std::path::{Path, PathBuf};

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::FakeProvider;
use ploke_e2e::git::git;
use ploke_proto::rag::v1::{
    AddWorkspaceRequest, GitSource, IndexWorkspaceRequest, ListWorkspacesRequest,
    RemoveWorkspaceRequest, SearchRequest, Strategy, WorkspaceOrigin, add_workspace_request,
};
use ploke_proto::session::v1::CreateSessionRequest;
use ploke_proto::tools::v1::{ReadFileArgs, tool_call, tool_result};
use ploke_runtime::config::Secret;
use tonic::Code;

const ADMIN: &str = "admin-token";

/// A repository with one commit on `main`; its file:// URL and that commit.
fn repository(dir: &Path) -> (String, String) {
    git(dir, &["init", "--quiet", "-b", "main"]);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "/// Rotates the ring buffer.\npub fn rotate_ring(n: usize) -> usize {\n    n + 1\n}\n",
    )
    .unwrap();
    git(dir, &["add", "."]);
    git(dir, &["commit", "--quiet", "-m", "first"]);
    (
        format!("file://{}", dir.display()),
        git(dir, &["rev-parse", "HEAD"]),
    )
}

fn add_git(url: &str) -> AddWorkspaceRequest {
    AddWorkspaceRequest {
        source: Some(add_workspace_request::Source::Git(GitSource {
            url: url.into(),
            branch: "main".into(),
        })),
    }
}

fn add_path(path: &Path) -> AddWorkspaceRequest {
    AddWorkspaceRequest {
        source: Some(add_workspace_request::Source::Path(
            path.display().to_string(),
        )),
    }
}

async fn index(sandbox: &Sandbox, root: &str) {
    let mut run = sandbox
        .gateway_with_token(Some(ADMIN))
        .index_workspace(IndexWorkspaceRequest {
            workspace_root: root.into(),
            force: false,
        })
        .await
        .unwrap()
        .into_inner();
    while run.message().await.unwrap().is_some() {}
}

async fn top(sandbox: &Sandbox, root: &str, query: &str) -> String {
    sandbox
        .gateway()
        .search(SearchRequest {
            workspace_root: root.into(),
            query: query.into(),
            strategy: Strategy::Bm25 as i32,
            top_k: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .hits
        .first()
        .and_then(|h| h.part.as_ref())
        .map(|p| p.canon_path.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn git_and_local_workspaces_are_added_used_updated_kept_and_removed() {
    let repo = tempfile::tempdir().unwrap();
    let (url, first) = repository(repo.path());
    let local = tempfile::tempdir().unwrap();
    std::fs::write(
        local.path().join("notes.rs"),
        "pub fn measure_latency() {}\n",
    )
    .unwrap();
    let provider = FakeProvider::start().await.unwrap();
    let sandbox = Sandbox::start_with_provider(provider.provider_config(None), |c| {
        c.gateway.admin_tokens = vec![Secret::new(ADMIN)];
        c.rag_search.watch = false;
    })
    .await
    .unwrap();
    let admin = || sandbox.gateway_with_token(Some(ADMIN));

    // Only an admin may add.
    let refused = sandbox
        .gateway()
        .add_workspace(add_git(&url))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let added = admin()
        .add_workspace(add_git(&url))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            added.origin,
            added.git.clone().unwrap().url,
            added.head_commit.as_str()
        ),
        (WorkspaceOrigin::Added as i32, url.clone(), first.as_str())
    );
    let git_root = added.workspace_root.clone();
    assert!(Path::new(&git_root).join("src/lib.rs").is_file());
    index(&sandbox, &git_root).await;
    assert_eq!(
        top(&sandbox, &git_root, "rotate ring").await,
        "crate::rotate_ring"
    );

    // tool-executor and llm-session learn it from rag-search.
    let read = ploke_e2e::tool_request(
        "ws",
        "read-1",
        tool_call::Args::ReadFile(ReadFileArgs {
            file: "src/lib.rs".into(),
            ..Default::default()
        }),
    );
    let mut events = sandbox
        .tools()
        .execute_tool(ploke_proto::tools::v1::ExecuteToolRequest {
            workspace_root: git_root.clone(),
            ..read
        })
        .await
        .unwrap()
        .into_inner();
    let mut content = String::new();
    while let Some(e) = events.message().await.unwrap() {
        if let Some(ploke_proto::tools::v1::execute_tool_event::Event::Result(r)) = e.event
            && let Some(tool_result::Result::ReadFile(f)) = r.result
        {
            content = f.content;
        }
    }
    assert!(content.contains("rotate_ring"), "{content}");
    let session = sandbox
        .gateway()
        .create_session(CreateSessionRequest {
            workspace_root: git_root.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(session.workspace_root, git_root);

    // A local directory; bad and duplicate adds are refused clearly.
    let local_root = admin()
        .add_workspace(add_path(local.path()))
        .await
        .unwrap()
        .into_inner()
        .workspace_root;
    for (request, code, text) in [
        (
            add_path(local.path()),
            Code::AlreadyExists,
            "is served already",
        ),
        (
            add_path(Path::new("relative/dir")),
            Code::InvalidArgument,
            "path: must be an absolute path",
        ),
        (
            add_git("--upload-pack=touch /tmp/owned"),
            Code::InvalidArgument,
            "git.url: must not start with `-`",
        ),
        (
            add_git(&format!("file://{}/missing", repo.path().display())),
            Code::FailedPrecondition,
            "git clone failed",
        ),
        (
            add_git("https://ci:ghp_secret@git.example.com/team/service.git"),
            Code::InvalidArgument,
            "git.url: must not carry a user or password (the clone would keep it",
        ),
    ] {
        let e = admin().add_workspace(request).await.unwrap_err();
        assert_eq!(e.code(), code, "{e:?}");
        assert!(e.message().contains(text), "{e:?}");
    }

    // A new commit: adding the repository again fetches it and re-indexes.
    std::fs::write(
        repo.path().join("src/more.rs"),
        "pub fn compact_journal() {}\n",
    )
    .unwrap();
    git(repo.path(), &["add", "."]);
    git(repo.path(), &["commit", "--quiet", "-m", "second"]);
    let second = git(repo.path(), &["rev-parse", "HEAD"]);
    let updated = admin()
        .add_workspace(add_git(&url))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            updated.workspace_root.as_str(),
            updated.head_commit.as_str()
        ),
        (git_root.as_str(), second.as_str())
    );
    index(&sandbox, &git_root).await;
    assert_eq!(
        top(&sandbox, &git_root, "compact journal").await,
        "crate::more::compact_journal"
    );

    // Kept across a restart: listed, and searchable without adding them again.
    let sandbox = sandbox.restart().await.unwrap();
    let listed: Vec<(String, i32)> = sandbox
        .gateway()
        .list_workspaces(ListWorkspacesRequest {})
        .await
        .unwrap()
        .into_inner()
        .workspaces
        .into_iter()
        .map(|w| (w.workspace_root, w.origin))
        .collect();
    let configured = std::fs::canonicalize(sandbox.workspace_root())
        .unwrap()
        .display()
        .to_string();
    assert_eq!(
        listed,
        vec![
            (configured.clone(), WorkspaceOrigin::Configured as i32),
            (git_root.clone(), WorkspaceOrigin::Added as i32),
            (local_root.clone(), WorkspaceOrigin::Added as i32),
        ]
    );
    index(&sandbox, &local_root).await;
    assert_eq!(
        top(&sandbox, &local_root, "measure latency").await,
        "crate::measure_latency"
    );

    // Removing: configured ones stay; an added one goes with its clone and index.
    let admin = || sandbox.gateway_with_token(Some(ADMIN));
    let e = admin()
        .remove_workspace(RemoveWorkspaceRequest {
            workspace_root: configured,
            delete_data: false,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    admin()
        .remove_workspace(RemoveWorkspaceRequest {
            workspace_root: git_root.clone(),
            delete_data: true,
        })
        .await
        .unwrap();
    assert!(!PathBuf::from(&git_root).exists());
    let e = sandbox
        .gateway()
        .search(SearchRequest {
            workspace_root: git_root,
            query: "rotate ring".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    sandbox.stop().await.unwrap();
}
