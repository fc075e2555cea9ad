//! A developer's checkout against a gateway serving several repositories: the client finds the
//! workspace it stands for (its git remote, or `--server-workspace`), makes sessions there,
//! sends its changes only to them and writes only that workspace's approved edits into it.

use std::path::Path;
use std::process::Command;

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::{FakeProvider, Reply};
use ploke_e2e::git::git;
use ploke_proto::rag::v1::{
    AddWorkspaceRequest, GitSource, IndexWorkspaceRequest, add_workspace_request,
};
use ploke_proto::session::v1::ListSessionsRequest;
use ploke_proto::tools::v1::{ListEditsRequest, ProposalState};
use ploke_runtime::ServiceKind;
use ploke_runtime::config::Secret;

use super::text;

const ADMIN: &str = "admin-token";
const BILLING_RS: &str = "/// Charges the card.\npub fn charge_card() -> u8 {\n    1\n}\n";

#[tokio::test]
async fn a_checkout_works_in_the_workspace_cloned_from_its_remote_and_nowhere_else() {
    // The team's repository, served by the gateway as a git workspace beside the default one.
    let upstream = tempfile::tempdir().unwrap();
    git(upstream.path(), &["init", "--quiet", "-b", "main"]);
    std::fs::create_dir_all(upstream.path().join("src")).unwrap();
    std::fs::write(upstream.path().join("src/lib.rs"), BILLING_RS).unwrap();
    git(upstream.path(), &["add", "."]);
    git(upstream.path(), &["commit", "--quiet", "-m", "first"]);
    let url = format!("file://{}", upstream.path().display());

    let fake = FakeProvider::start().await.unwrap();
    let sandbox = Sandbox::start_with_provider(fake.provider_config(None), |c| {
        c.tool_executor.apply_to = ploke_runtime::config::ApplyTo::Overlay;
        c.gateway.admin_tokens = vec![Secret::new(ADMIN)];
        c.rag_search.watch = false;
    })
    .await
    .unwrap();
    let admin = || sandbox.gateway_with_token(Some(ADMIN));
    let billing = admin()
        .add_workspace(AddWorkspaceRequest {
            source: Some(add_workspace_request::Source::Git(GitSource {
                url: url.clone(),
                branch: "main".into(),
            })),
        })
        .await
        .unwrap()
        .into_inner();
    let mut run = admin()
        .index_workspace(IndexWorkspaceRequest {
            workspace_root: billing.workspace_root.clone(),
            force: false,
        })
        .await
        .unwrap()
        .into_inner();
    while run.message().await.unwrap().is_some() {}

    // The developer's clone (under a directory name of their own), with a change of theirs.
    let home = tempfile::tempdir().unwrap();
    let mine = home.path().join("my-billing");
    let cloned = Command::new("git")
        .args(["clone", "--quiet", &url])
        .arg(&mine)
        .output()
        .unwrap();
    assert!(cloned.status.success(), "{cloned:?}");
    let local = format!("{BILLING_RS}\npub fn refund() -> u8 {{\n    7\n}}\n");
    std::fs::write(mine.join("src/lib.rs"), &local).unwrap();
    let edit = r#"{"edits": [{"search_replace": {"file_path": "src/lib.rs", "search": "    7\n", "replace": "    8\n"}}]}"#;
    fake.push([
        Reply::tool_calls(&[("call_1", "apply_code_edit", edit)]),
        Reply::text(&["Done."]),
    ]);
    let gateway = sandbox.addrs().url(ServiceKind::Gateway);
    let state = tempfile::tempdir().unwrap();
    let state = state.path().display().to_string();
    let env = [
        ("PLOKE_TOKEN", ploke_e2e::TOKEN),
        ("XDG_STATE_HOME", &state),
    ];
    let ploke = |dir: &Path, args: &[&str]| {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.extend(["--gateway".to_owned(), gateway.clone()]);
        let (dir, env) = (dir.to_owned(), &env);
        async move { super::run(&dir, all, env).await }
    };

    let out = ploke(&mine, &["ask", "make refund return 8", "--approve"]).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "(workspace {}: cloned from {url}, this checkout's remote)\n",
            billing.workspace_root
        )),
        "{stderr}"
    );
    assert!(stderr.contains("(your changes: 1 changed"), "{stderr}");
    assert!(stderr.contains("(wrote src/lib.rs)"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(mine.join("src/lib.rs")).unwrap(),
        local.replace("    7\n", "    8\n")
    );
    // The session is over the billing workspace, whose clone is untouched.
    let sessions = sandbox
        .gateway()
        .list_sessions(ListSessionsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .sessions;
    let roots: Vec<&str> = sessions.iter().map(|s| s.workspace_root.as_str()).collect();
    assert_eq!(roots, vec![billing.workspace_root.as_str()]);
    assert_eq!(
        std::fs::read_to_string(Path::new(&billing.workspace_root).join("src/lib.rs")).unwrap(),
        BILLING_RS
    );

    // A directory that is neither workspace: refused, naming both and how to choose.
    let elsewhere = home.path().join("scratch");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = ploke(&elsewhere, &["search", "charge card", "--strategy", "bm25"]).await;
    assert!(!out.status.success());
    let default_root = sandbox.workspace_root().display().to_string();
    let default_name = default_root.rsplit('/').next().unwrap();
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: this checkout (no git remote; directory name `scratch`) is none of the 2 \
             workspaces the gateway serves you: {default_name} ({default_root}), {} ({}, from \
             {url}); name one with --server-workspace NAME (or PLOKE_SERVER_WORKSPACE)\n",
            billing.name, billing.workspace_root
        )
    );
    // Named, it searches that workspace.
    let out = ploke(
        &elsewhere,
        &[
            "search",
            "charge card",
            "--strategy",
            "bm25",
            "--server-workspace",
            &billing.name,
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("  1. src/lib.rs:1-4  crate::charge_card (function)"),
        "{}",
        text(&out.stdout)
    );

    // Billing's approved edit is not written into a checkout of the other workspace.
    let applied = sandbox
        .gateway()
        .list_edits(ListEditsRequest {
            states: vec![ProposalState::Applied as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .proposals;
    let id = applied[0].proposal_id.clone();
    let out = ploke(
        &elsewhere,
        &["edits", "fetch", &id, "--server-workspace", &default_root],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "not written here: it is over workspace {}, and this checkout ({}) stands for \
             {default_root} (`ploke edits fetch ID` in a checkout of that workspace writes it)\n",
            billing.workspace_root,
            elsewhere.display()
        )
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    // From the developer's clone it is there already.
    let out = ploke(&mine, &["edits", "fetch", &id]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("your files already hold these changes (in "),
        "{}",
        text(&out.stdout)
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn an_edit_the_auto_approve_policy_applies_to_the_overlay_is_written_into_the_checkout() {
    let fake = FakeProvider::start().await.unwrap();
    let sandbox = Sandbox::start_with_provider(fake.provider_config(None), |c| {
        c.tool_executor.apply_to = ploke_runtime::config::ApplyTo::Overlay;
        c.tool_executor.auto_approve = true;
        c.rag_search.watch = false;
    })
    .await
    .unwrap();
    let served = sandbox.workspace_root().display().to_string();
    // The developer's checkout of the served workspace, named on the command line.
    let home = tempfile::tempdir().unwrap();
    let mine = home.path().join("mine");
    std::fs::create_dir_all(mine.join("src")).unwrap();
    std::fs::write(mine.join("src/lib.rs"), ploke_e2e::LIB_RS).unwrap();
    let edit = r#"{"edits": [{"search_replace": {"file_path": "src/lib.rs", "search": "a + b", "replace": "a - b"}}]}"#;
    fake.push([
        Reply::tool_calls(&[("call_1", "apply_code_edit", edit)]),
        Reply::text(&["Done."]),
    ]);
    let state = tempfile::tempdir().unwrap();
    let state = state.path().display().to_string();
    let gateway = sandbox.addrs().url(ServiceKind::Gateway);
    // `ploke ask` in the checkout, on the served workspace, with `extra` flags.
    let ask = |question: &str, extra: &[&str]| {
        let mut args = vec!["ask".to_owned(), question.to_owned()];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args.extend(["--server-workspace", &served, "--gateway", &gateway].map(str::to_owned));
        let (mine, state) = (mine.clone(), state.clone());
        async move {
            super::run(
                &mine,
                args,
                &[
                    ("PLOKE_TOKEN", ploke_e2e::TOKEN),
                    ("XDG_STATE_HOME", &state),
                ],
            )
            .await
        }
    };
    let out = ask("subtract instead", &[]).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(" is applied: decided by the auto_approve policy)\n(wrote src/lib.rs)"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("[y/N]") && !stderr.contains("denied"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("src/lib.rs")).unwrap(),
        ploke_e2e::LIB_RS.replace("a + b", "a - b")
    );
    // The served tree is the team's: the edit went to the session's overlay only.
    assert_eq!(
        std::fs::read_to_string(sandbox.workspace_root().join("src/lib.rs")).unwrap(),
        ploke_e2e::LIB_RS
    );
    // Without the overlay sync the client writes nothing, and says how to.
    let edit = r#"{"edits": [{"search_replace": {"file_path": "src/lib.rs", "search": "a + b", "replace": "a * b"}}]}"#;
    fake.push([
        Reply::tool_calls(&[("call_1", "apply_code_edit", edit)]),
        Reply::text(&["Done."]),
    ]);
    let out = ask("multiply instead", &["--no-overlay"]).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            " is applied: decided by the auto_approve policy)\n(`ploke edits fetch edit-"
        ),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("src/lib.rs")).unwrap(),
        ploke_e2e::LIB_RS.replace("a + b", "a - b")
    );
    sandbox.stop().await.unwrap();
}
