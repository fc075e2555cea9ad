//! Who may do what: an overlay belongs to the principal that made it (others are told it does
//! not exist), ListWorkspaces shows a principal its own workspaces with their names, and
//! workspace administration needs an admin.

use ploke_proto::rag::v1::*;
use ploke_runtime::principal::{Principal, Role};
use tonic::Code;

use super::*;

#[tokio::test]
async fn an_overlay_is_its_owners_alone() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    fixture(ws.path());
    let mut s = start(ws.path(), data.path(), Options::default()).await;
    s.index().await;
    let (alice, bob) = (user("alice"), user("bob"));
    let admin = Principal::everywhere("root", Role::Admin);
    s.sync(&alice, "s-alice", &dev_manifest()).await.unwrap();

    let err = s.sync(&bob, "s-alice", &dev_manifest()).await.unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::NotFound, "session s-alice has no overlay")
    );
    let err = s
        .put(&bob, "s-alice", &[("src/extra.rs", EXTRA_RS, "")])
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::NotFound, "session s-alice has no overlay")
    );
    // Reading or dropping another's overlay: the answers of a session without one.
    assert_eq!(
        s.overlay(&bob, "s-alice").await,
        Overlay {
            session_id: "s-alice".into(),
            ..Default::default()
        }
    );
    let drop = |who: &Principal| {
        as_(
            who,
            DropOverlayRequest {
                session_id: "s-alice".into(),
            },
        )
    };
    assert!(
        !s.client
            .drop_overlay(drop(&bob))
            .await
            .unwrap()
            .into_inner()
            .dropped
    );
    // An admin sees it, owner and all.
    let seen = s.overlay(&admin, "s-alice").await;
    assert_eq!((seen.owner.as_str(), seen.version), ("alice", 1));
    assert!(
        s.client
            .drop_overlay(drop(&alice))
            .await
            .unwrap()
            .into_inner()
            .dropped
    );
    assert_eq!(s.overlay(&alice, "s-alice").await.version, 0);
    assert!(
        !s.client
            .drop_overlay(drop(&alice))
            .await
            .unwrap()
            .into_inner()
            .dropped
    );
    s.stop().await;
}

#[tokio::test]
async fn workspaces_are_listed_per_principal_and_administered_by_admins() {
    let ws = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let added = tempfile::tempdir().unwrap();
    fixture(ws.path());
    fixture(added.path());
    let mut s = start(ws.path(), data.path(), Options::default()).await;
    s.index().await;
    let name = ploke_runtime::principal::workspace_name(&s.root);
    let admin = Principal::everywhere("root", Role::Admin);
    let limited = |workspaces: &[&str]| Principal {
        name: "alice".into(),
        role: Role::User,
        workspaces: workspaces.iter().map(|w| (*w).to_owned()).collect(),
        read_only: false,
    };

    let list = |who: &Principal| as_(who, ListWorkspacesRequest {});
    let listed = s
        .client
        .list_workspaces(list(&limited(&["elsewhere"])))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.workspaces.is_empty());
    let listed = s
        .client
        .list_workspaces(list(&limited(&[&name])))
        .await
        .unwrap()
        .into_inner()
        .workspaces;
    assert_eq!(
        listed
            .iter()
            .map(|w| (w.workspace_root.clone(), w.name.clone()))
            .collect::<Vec<_>>(),
        vec![(s.root.display().to_string(), name.clone())]
    );
    // A workspace the principal may not use is refused, overlays included.
    let err = s
        .sync(&limited(&["elsewhere"]), "s-1", &dev_manifest())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);

    // Administration needs an admin.
    let user = user("alice");
    let add = |who: &Principal| {
        as_(
            who,
            AddWorkspaceRequest {
                source: Some(add_workspace_request::Source::Path(
                    added.path().display().to_string(),
                )),
            },
        )
    };
    let err = s.client.add_workspace(add(&user)).await.unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (
            Code::PermissionDenied,
            "AddWorkspace needs an admin principal (alice is a user)"
        )
    );
    let err = s
        .client
        .index_workspace(as_(&user, IndexWorkspaceRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (
            Code::PermissionDenied,
            "IndexWorkspace needs an admin principal (alice is a user)"
        )
    );
    let added_root = std::fs::canonicalize(added.path()).unwrap();
    let remove = |who: &Principal| {
        as_(
            who,
            RemoveWorkspaceRequest {
                workspace_root: added_root.display().to_string(),
                delete_data: true,
            },
        )
    };
    let err = s.client.remove_workspace(remove(&user)).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);

    let made = s
        .client
        .add_workspace(add(&admin))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (made.workspace_root.as_str(), made.name.as_str()),
        (
            added_root.display().to_string().as_str(),
            ploke_runtime::principal::workspace_name(&added_root).as_str()
        )
    );
    // The admin brings it up to date (joining the run AddWorkspace started).
    let mut stream = s
        .client
        .index_workspace(as_(
            &admin,
            IndexWorkspaceRequest {
                workspace_root: made.workspace_root.clone(),
                force: false,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    while tokio_stream::StreamExt::next(&mut stream).await.is_some() {}
    // An overlay over it goes with it.
    let synced = s
        .client
        .sync_overlay(as_(
            &user,
            SyncOverlayRequest {
                session_id: "s-added".into(),
                workspace_root: made.workspace_root.clone(),
                files: vec![ManifestEntry {
                    path: "src/lib.rs".into(),
                    hash: hash(LIB_RS),
                }],
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((synced.deleted, synced.version), (4, 1));
    let removed = s
        .client
        .remove_workspace(remove(&admin))
        .await
        .unwrap()
        .into_inner()
        .removed
        .unwrap();
    assert_eq!(removed.name, made.name);
    assert_eq!(s.overlay(&user, "s-added").await.version, 0);
    s.stop().await;
}
