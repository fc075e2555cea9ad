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

use super::{ALICE, CAROL, RITA, ROOT, team};

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
    // Which build answers is anyone's business: an upgrade is told apart by its commit.
    assert_eq!(status.version, ploke_runtime::build::LONG_VERSION);
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

/// A read-only principal's own chat turns are read-only too: the model is offered only tools
/// without side effects, and an edit it asks for anyway is refused by tool-executor, so nothing
/// is staged (the turn used to act for its owner as a writer and staged, or with auto-approve
/// applied, the edit).
#[tokio::test]
async fn a_read_only_principal_s_turns_offer_and_run_read_only_tools_only() {
    use ploke_e2e::fake_provider::Reply;
    use ploke_proto::session::v1::{SendMessageRequest, StreamEventsRequest, session_event};
    use ploke_proto::tools::v1::{ListEditsRequest, SideEffect};
    let t = team(|c| c.tool_executor.auto_approve = true).await;
    let mut rita = t.as_(RITA);
    let session = rita
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner();
    let create = r#"{"file_path": "src/by_rita.rs", "content": "pub fn r() {}\n"}"#;
    t.fake.push([
        Reply::tool_calls(&[("call_1", "create_file", create)]),
        Reply::text(&["Could not."]),
    ]);
    let mut live = rita
        .stream_events(StreamEventsRequest {
            session_id: session.session_id.clone(),
            after_seq: 0,
            no_follow: false,
        })
        .await
        .unwrap()
        .into_inner();
    rita.send_message(SendMessageRequest {
        session_id: session.session_id.clone(),
        content: "create src/by_rita.rs".into(),
        client_request_id: String::new(),
    })
    .await
    .unwrap();
    let mut events = Vec::new();
    loop {
        let e = live.message().await.unwrap().unwrap();
        let end = matches!(
            e.event,
            Some(session_event::Event::TurnCompleted(_) | session_event::Event::TurnFailed(_))
        );
        events.push(e);
        if end {
            break;
        }
    }
    // Offered: exactly the read-only tools of the registry.
    let offered: Vec<String> = t.fake.received()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    let read_only: Vec<String> = ploke_proto::registry::ToolRegistry::global()
        .unwrap()
        .definitions()
        .into_iter()
        .filter(|d| d.side_effect() == SideEffect::ReadOnly)
        .map(|d| d.name)
        .collect();
    assert_eq!(offered, read_only);
    // Asked for anyway: refused, nothing staged, nothing written.
    let failed = events
        .iter()
        .find_map(|e| match &e.event {
            Some(session_event::Event::ToolCallFailed(f)) => Some(f.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{events:?}"));
    let error = failed.error.unwrap();
    assert!(
        error
            .message
            .contains("create_file changes files; rita may run read-only tools only"),
        "{error:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.event, Some(session_event::Event::EditProposed(_)))),
        "{events:?}"
    );
    let edits = t
        .as_(ROOT)
        .list_edits(ListEditsRequest {
            all_principals: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(edits.proposals, Vec::new());
    assert!(!t.sandbox.workspace_root().join("src/by_rita.rs").exists());
    t.sandbox.stop().await.unwrap();
}
