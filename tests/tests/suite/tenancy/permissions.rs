//! Who may use which workspace, and who administers: a principal limited to another workspace
//! is refused this one everywhere it is named (and does not see it listed); re-indexing and
//! adding or removing workspaces need an admin; the gateway says who it took the caller for;
//! a JWT from the team's identity provider names a principal, verified offline.

use ploke_proto::gateway::v1::GetSystemStatusRequest;
use ploke_proto::rag::v1::{
    AddWorkspaceRequest, IndexStatusRequest, IndexWorkspaceRequest, ListWorkspacesRequest,
    SearchRequest, add_workspace_request,
};
use ploke_proto::session::v1::CreateSessionRequest;
use tonic::Code;

use super::{ALICE, CAROL, ROOT, team};

fn refusal<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> (Code, String) {
    let s = r.unwrap_err();
    (s.code(), s.message().to_owned())
}

#[tokio::test]
async fn workspace_permissions_and_administration_are_enforced_per_principal() {
    let t = team(|_| {}).await;
    let root_dir = t.sandbox.workspace_root().canonicalize().unwrap();
    let (mut alice, mut carol, mut root) = (t.as_(ALICE), t.as_(CAROL), t.as_(ROOT));
    let denied = (
        Code::PermissionDenied,
        format!("carol may not use workspace {}", root_dir.display()),
    );
    assert_eq!(
        refusal(carol.create_session(CreateSessionRequest::default()).await),
        denied
    );
    assert_eq!(
        refusal(
            carol
                .search(SearchRequest {
                    query: "add".into(),
                    ..Default::default()
                })
                .await
        ),
        denied
    );
    assert_eq!(
        refusal(carol.index_status(IndexStatusRequest::default()).await),
        denied
    );
    let listed = carol
        .list_workspaces(ListWorkspacesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.workspaces, Vec::new());
    // Alice may use it, and sees it listed with its name.
    let listed = alice
        .list_workspaces(ListWorkspacesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed
            .workspaces
            .iter()
            .map(|w| (w.workspace_root.clone(), w.name.clone()))
            .collect::<Vec<_>>(),
        vec![(
            root_dir.display().to_string(),
            root_dir.file_name().unwrap().to_string_lossy().into_owned()
        )]
    );
    // Administration is for admins.
    assert_eq!(
        refusal(
            alice
                .index_workspace(IndexWorkspaceRequest::default())
                .await
        ),
        (
            Code::PermissionDenied,
            "IndexWorkspace needs an admin principal (alice is a user)".to_owned()
        )
    );
    let other = tempfile::tempdir().unwrap();
    assert_eq!(
        refusal(
            alice
                .add_workspace(AddWorkspaceRequest {
                    source: Some(add_workspace_request::Source::Path(
                        other.path().display().to_string()
                    )),
                })
                .await
        ),
        (
            Code::PermissionDenied,
            "AddWorkspace needs an admin principal (alice is a user)".to_owned()
        )
    );
    let mut progress = root
        .index_workspace(IndexWorkspaceRequest::default())
        .await
        .unwrap()
        .into_inner();
    while progress.message().await.unwrap().is_some() {}
    // The gateway says who it took each caller for.
    let who = alice
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap()
        .into_inner()
        .principal
        .unwrap();
    assert_eq!(
        (who.name.as_str(), who.workspaces),
        ("alice", vec!["*".to_owned()])
    );
    // Where the services run is not a user's business; an admin sees it.
    let status = alice
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(status.services.iter().all(|s| s.endpoint.is_empty()));
    let status = root
        .get_system_status(GetSystemStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(
        status
            .services
            .iter()
            .all(|s| s.endpoint.starts_with("http://127.0.0.1:"))
    );
    t.sandbox.stop().await.unwrap();
}
