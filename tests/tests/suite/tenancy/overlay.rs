//! Each developer's own code on a shared deployment: alice's checkout differs from the served
//! tree (a function only on her branch, a file she changed, one she deleted); her client sends
//! it as her session's overlay. Her session's tools see her tree and nobody else's do; an edit
//! she approves is written into her checkout and never into the served tree; deleting her
//! session drops her overlay.

use std::collections::BTreeMap;
use std::path::Path;

use ploke_client::delivery::Delivered;
use ploke_e2e::AuthedGateway;
use ploke_e2e::fake_provider::Reply;
use ploke_proto::session::v1::*;
use ploke_proto::tools::v1::{DecideEditRequest, Decision, ProposalState};
use ploke_runtime::ServiceKind;
use ploke_runtime::config::ApplyTo;

use super::super::session::messages;
use super::{ALICE, BOB, Team, team};

const OLD_RS: &str = "/// Bumps a counter.\npub fn legacy_helper(n: u32) -> u32 {\n    n + 1\n}\n";
const MINE_OLD_RS: &str =
    "/// Bumps a counter.\npub fn modern_helper(n: u32) -> u32 {\n    n + 1\n}\n";
const GONE_RS: &str = "/// Soon removed.\npub fn removed_thing() -> u8 {\n    9\n}\n";
const MINE_EXTRA: &str =
    "\n/// Only on alice's branch.\npub fn xyzzy_frobnicate(n: u32) -> u32 {\n    n * 7\n}\n";

/// Every file under `root` (but ploke's own state) with its bytes.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel.starts_with(".ploke") {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// Runs one turn in `session` through `gateway`: the model calls `tool` with `args`, then
/// answers; an edit it proposes is approved. The tool's answer as the model read it, and the
/// approval's response when there was one.
async fn tool_turn(
    t: &Team,
    gateway: &mut AuthedGateway,
    session: &str,
    tool: &str,
    args: &str,
) -> (String, Option<ploke_proto::tools::v1::DecideEditResponse>) {
    t.fake.push([
        Reply::tool_calls(&[("call_1", tool, args)]),
        Reply::text(&["ok"]),
    ]);
    let mut events = gateway
        .stream_events(StreamEventsRequest {
            session_id: session.into(),
            after_seq: 0,
            no_follow: false,
        })
        .await
        .unwrap()
        .into_inner();
    let sent = gateway
        .send_message(SendMessageRequest {
            session_id: session.into(),
            content: format!("use {tool}"),
            client_request_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut decided = None;
    while let Some(e) = events.message().await.unwrap() {
        if e.seq < sent.seq {
            continue;
        }
        match e.event {
            Some(session_event::Event::EditProposed(p)) => {
                let p = p.proposal.unwrap();
                decided = Some(
                    gateway
                        .decide_edit(DecideEditRequest {
                            proposal_id: p.proposal_id,
                            decision: Decision::Approve as i32,
                            ..Default::default()
                        })
                        .await
                        .unwrap()
                        .into_inner(),
                );
            }
            Some(session_event::Event::TurnCompleted(_) | session_event::Event::TurnFailed(_)) => {
                break;
            }
            _ => {}
        }
    }
    let last = t.fake.received().pop().unwrap();
    let tool_message = messages(&last)
        .into_iter()
        .rfind(|m| m.0 == "tool")
        .unwrap()
        .1;
    (tool_message, decided)
}

async fn session(gateway: &mut AuthedGateway) -> String {
    gateway
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session_id
}

#[tokio::test]
async fn a_developers_changes_are_theirs_alone_and_approved_edits_land_in_their_checkout() {
    let t = team(|c| c.tool_executor.apply_to = ApplyTo::Overlay).await;
    t.sandbox
        .index_files(&[("src/old.rs", OLD_RS), ("src/gone.rs", GONE_RS)])
        .await
        .unwrap();
    let served = t.sandbox.workspace_root().to_owned();
    let served_before = snapshot(&served);

    // Alice's checkout: the served tree, with her branch's changes.
    let mine = tempfile::tempdir().unwrap();
    for (rel, bytes) in &served_before {
        let path = mine.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let lib = std::fs::read_to_string(mine.path().join("src/lib.rs")).unwrap();
    std::fs::write(mine.path().join("src/lib.rs"), lib + MINE_EXTRA).unwrap();
    std::fs::write(mine.path().join("src/old.rs"), MINE_OLD_RS).unwrap();
    std::fs::remove_file(mine.path().join("src/gone.rs")).unwrap();

    let (mut alice, mut bob) = (t.as_(ALICE), t.as_(BOB));
    let hers = session(&mut alice).await;
    let url = t.sandbox.addrs().url(ServiceKind::Gateway);
    let mut client = ploke_client::gateway::connect(&url, Some(ALICE.into()))
        .await
        .unwrap();
    let synced = ploke_client::overlay::sync(&mut client, &hers, mine.path())
        .await
        .unwrap();
    assert_eq!(
        (synced.changed, synced.deleted, synced.uploaded),
        (2, 1, 2),
        "{synced}"
    );
    // Nothing changed: nothing is sent again.
    let again = ploke_client::overlay::sync(&mut client, &hers, mine.path())
        .await
        .unwrap();
    assert_eq!(
        (again.uploaded, again.version),
        (0, synced.version),
        "{again}"
    );

    // Her function is found in her session, and nowhere else.
    let find = r#"{"search_term": "xyzzy_frobnicate"}"#;
    let (answer, _) = tool_turn(&t, &mut alice, &hers, "request_code_context", find).await;
    assert!(answer.contains("n * 7"), "{answer}");
    let theirs = session(&mut bob).await;
    // (The answer repeats the search term; the function's body is what must not be there.)
    let (answer, _) = tool_turn(&t, &mut bob, &theirs, "request_code_context", find).await;
    assert!(!answer.contains("n * 7"), "{answer}");
    let plain = session(&mut alice).await;
    let (answer, _) = tool_turn(&t, &mut alice, &plain, "request_code_context", find).await;
    assert!(!answer.contains("n * 7"), "{answer}");

    // What she deleted or changed never comes back in its served version to her session.
    let (answer, _) = tool_turn(
        &t,
        &mut alice,
        &hers,
        "read_file",
        r#"{"file": "src/gone.rs"}"#,
    )
    .await;
    assert!(answer.contains("src/gone.rs does not exist"), "{answer}");
    for (tool, args) in [
        (
            "search_code",
            r#"{"pattern": "removed_thing|legacy_helper"}"#,
        ),
        (
            "request_code_context",
            r#"{"search_term": "removed_thing legacy_helper"}"#,
        ),
        ("read_file", r#"{"file": "src/old.rs"}"#),
    ] {
        let (answer, _) = tool_turn(&t, &mut alice, &hers, tool, args).await;
        assert!(
            !answer.contains("fn removed_thing") && !answer.contains("fn legacy_helper"),
            "{tool}: {answer}"
        );
    }
    let (answer, _) = tool_turn(&t, &mut alice, &hers, "list_dir", r#"{"path": "src"}"#).await;
    assert!(
        answer.contains("lib.rs") && answer.contains("old.rs") && !answer.contains("gone.rs"),
        "{answer}"
    );
    let (answer, _) = tool_turn(
        &t,
        &mut alice,
        &hers,
        "read_file",
        r#"{"file": "src/old.rs"}"#,
    )
    .await;
    assert!(answer.contains("modern_helper"), "{answer}");
    // Bob still reads the served tree.
    let (answer, _) = tool_turn(
        &t,
        &mut bob,
        &theirs,
        "search_code",
        r#"{"pattern": "removed_thing"}"#,
    )
    .await;
    let found: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        (
            &found["matches"][0]["file_path"],
            &found["matches"][0]["line_number"]
        ),
        (&serde_json::json!("src/gone.rs"), &serde_json::json!(2)),
        "{answer}"
    );

    // An edit she approves: her checkout changes, the served tree does not.
    let edit = r#"{"edits": [{"search_replace": {"file_path": "src/old.rs", "search": "n + 1", "replace": "n + 2"}}]}"#;
    let (answer, decided) = tool_turn(&t, &mut alice, &hers, "apply_code_edit", edit).await;
    let decided = decided.unwrap();
    let proposal = decided.proposal.clone().unwrap();
    assert_eq!(
        (
            proposal.state(),
            proposal.in_overlay,
            proposal.decided_by.as_str()
        ),
        (ProposalState::Applied, true, "alice"),
        "{answer}"
    );
    let state = tempfile::tempdir().unwrap();
    let deliver = || {
        ploke_client::delivery::write(
            mine.path(),
            state.path(),
            &proposal.proposal_id,
            &decided.deliveries,
        )
        .unwrap()
    };
    let written = deliver();
    assert_eq!(written, Delivered::Written(vec!["src/old.rs".into()]));
    assert_eq!(
        std::fs::read_to_string(mine.path().join("src/old.rs")).unwrap(),
        MINE_OLD_RS.replace("n + 1", "n + 2")
    );
    assert_eq!(snapshot(&served), served_before);
    // Seen twice (the deciding client and the TUI following the session): written once.
    let twice = deliver();
    assert_eq!(twice, Delivered::AlreadyThere);
    // Her session reads the edited version from then on.
    let (answer, _) = tool_turn(
        &t,
        &mut alice,
        &hers,
        "read_file",
        r#"{"file": "src/old.rs"}"#,
    )
    .await;
    assert!(answer.contains("n + 2"), "{answer}");

    // Deleting her session drops her overlay with it: her branch's function is found no more.
    let search = |session_id: &str| ploke_proto::rag::v1::SearchRequest {
        query: "xyzzy_frobnicate".into(),
        strategy: ploke_proto::rag::v1::Strategy::Bm25 as i32,
        top_k: 3,
        session_id: session_id.into(),
        ..Default::default()
    };
    let names = |r: ploke_proto::rag::v1::SearchResponse| -> Vec<String> {
        r.hits
            .into_iter()
            .filter_map(|h| h.part.map(|p| p.name))
            .collect()
    };
    let before = names(alice.search(search(&hers)).await.unwrap().into_inner());
    assert_eq!(before.first().map(String::as_str), Some("xyzzy_frobnicate"));
    alice
        .delete_session(DeleteSessionRequest {
            session_id: hers.clone(),
        })
        .await
        .unwrap();
    let after = names(alice.search(search(&hers)).await.unwrap().into_inner());
    assert!(!after.iter().any(|n| n == "xyzzy_frobnicate"), "{after:?}");
    let resync = ploke_client::overlay::sync(&mut client, &hers, mine.path())
        .await
        .unwrap_err();
    assert!(resync.to_string().contains("not found"), "{resync:#}");
    t.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_delivery_over_a_file_changed_locally_writes_nothing_and_keeps_the_approved_content() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "fn a() { 2 }\n").unwrap();
    let delivery = ploke_proto::tools::v1::FileDelivery {
        file_path: "src/a.rs".into(),
        base_hash: blake3::hash(b"fn a() { 1 }\n").to_hex().to_string(),
        hash: blake3::hash(b"fn a() { 3 }\n").to_hex().to_string(),
        content: b"fn a() { 3 }\n".to_vec(),
    };
    let state = tempfile::tempdir().unwrap();
    let id = "edit-0123456789abcdef0123";
    let got = ploke_client::delivery::write(dir.path(), state.path(), id, &[delivery]).unwrap();
    let saved = state.path().join("deliveries").join(id);
    assert_eq!(
        got,
        Delivered::Stale {
            reason: "src/a.rs changed since the proposal was made; nothing was written".into(),
            saved: saved.clone(),
        }
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/a.rs")).unwrap(),
        "fn a() { 2 }\n"
    );
    assert_eq!(
        std::fs::read_to_string(saved.join("src/a.rs")).unwrap(),
        "fn a() { 3 }\n"
    );
}
