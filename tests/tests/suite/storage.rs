//! Storage faults end cleanly. The tests run as root, where chmod stops nothing, so the faults
//! are real ones: a service's database file moved away while it runs (and moved back:
//! recovery) or removed — what a removed or replaced data dir looks like to the store; the
//! rest of the data dir (rag-search's index) stays. Writes answer UNAVAILABLE naming storage, a
//! running turn ends in `turn_failed{storage}` (recorded once storage is back, never before it
//! is durable; meanwhile its subscribers' streams end UNAVAILABLE saying so), a proposal that cannot be recorded is a tool error, health is NOT_SERVING while
//! storage is broken and SERVING again after, and no process dies. (A removed data dir and a
//! full disk are covered by the services' own suites, against their real binaries.) An index
//! that cannot be written degrades rag-search without stopping it: searches answer from the
//! last committed index and the gateway's status says DEGRADED, and why.

use std::path::PathBuf;
use std::time::Duration;

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::Reply;
use ploke_proto::session::v1::*;
use ploke_proto::tools::v1::{
    CreateFileArgs, DecideEditRequest, Decision, EditProposal, ExecuteToolEvent,
    ExecuteToolRequest, ProposalState, ToolErrorCode, execute_tool_event, tool_call, tool_result,
};
use ploke_runtime::ServiceKind;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::session::chat;

const SESSIONS: &str = "ploke.session.v1.LlmSession";
const TOOLS: &str = "ploke.tools.v1.ToolExecutor";

/// Waits (on the health Watch stream) until `service` reports `want`.
async fn health_becomes(sandbox: &Sandbox, kind: ServiceKind, service: &str, want: ServingStatus) {
    let mut stream = HealthClient::new(sandbox.channel(kind))
        .watch(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    let reached = async {
        while let Some(r) = stream.message().await.unwrap() {
            if r.status() == want {
                return;
            }
        }
        panic!("the health stream of {service} ended");
    };
    // The deadline only bounds a failing test.
    tokio::time::timeout(Duration::from_secs(30), reached)
        .await
        .unwrap_or_else(|_| panic!("{service} never reported {want:?}"));
}

/// Moves the database file `name` of the data dir away; rename the pair back to restore it.
fn move_away(sandbox: &Sandbox, name: &str) -> (PathBuf, PathBuf) {
    let file = sandbox.data.path().join(name);
    let away = sandbox.data.path().join(format!("{name}.away"));
    std::fs::rename(&file, &away).unwrap();
    (file, away)
}

fn create_file(call_id: &str, path: &str) -> ExecuteToolRequest {
    ploke_e2e::tool_request(
        "storage",
        call_id,
        tool_call::Args::CreateFile(CreateFileArgs {
            file_path: path.into(),
            content: "pub fn made() {}\n".into(),
            on_exists: None,
        }),
    )
}

async fn propose(
    sandbox: &Sandbox,
    call_id: &str,
    path: &str,
) -> (tonic::Streaming<ExecuteToolEvent>, EditProposal) {
    let mut stream = sandbox
        .tools()
        .execute_tool(create_file(call_id, path))
        .await
        .unwrap()
        .into_inner();
    match ploke_e2e::next_tool_event(&mut stream).await {
        execute_tool_event::Event::EditProposed(p) => (stream, p),
        other => panic!("expected a proposal, got {other:?}"),
    }
}

fn approve(proposal_id: &str) -> DecideEditRequest {
    DecideEditRequest {
        proposal_id: proposal_id.into(),
        decision: Decision::Approve as i32,
        ..Default::default()
    }
}

/// The error a following stream ends with (the events before it skipped).
async fn ended_with(stream: &mut tonic::Streaming<SessionEvent>) -> tonic::Status {
    loop {
        match stream.message().await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the stream ended without a reason"),
            Err(s) => return s,
        }
    }
}

/// A stream ended because the turn's end could not be recorded.
fn unrecorded(status: &tonic::Status) {
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("its end could not be recorded")
            && status.message().contains("sessions.sqlite")
            && status.message().contains("recorded when storage recovers"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn a_turn_that_meets_a_vanished_database_fails_with_the_reason_once_it_is_back() {
    let c = chat().await;
    // "before" arrives, then the reply waits for the fault; " the fault" meets it.
    c.fake
        .push([Reply::text(&["before", " the fault", " never sent"])
            .pause_after(2)
            .hold_after(3)]);
    let mut live = c.events(0, true).await;
    c.send("hello").await;
    loop {
        let e = live.message().await.unwrap().unwrap();
        if matches!(e.event, Some(session_event::Event::AssistantDelta(_))) {
            break;
        }
    }

    let (data, away) = move_away(&c.sandbox, "sessions.sqlite");
    health_becomes(
        &c.sandbox,
        ServiceKind::LlmSession,
        SESSIONS,
        ServingStatus::NotServing,
    )
    .await;
    let refused = c
        .client()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("storage unavailable")
            && refused.message().contains("sessions.sqlite"),
        "{}",
        refused.message()
    );

    // The next delta cannot be recorded: the turn ends and drops the provider's stream.
    c.fake.resume();
    c.fake.disconnected().await;
    // Its end cannot be recorded either: the live subscriber is told so instead of waiting in
    // silence for an event held back until storage returns.
    let held = ended_with(&mut live).await;
    unrecorded(&held);
    // A subscriber that comes now reads what is stored, then hears the same.
    let mut again = c.events(0, true).await;
    let mut replayed = Vec::new();
    let held = loop {
        match again.message().await {
            Ok(Some(e)) => replayed.push(e),
            Ok(None) => panic!("the stream ended without a reason"),
            Err(s) => break s,
        }
    };
    unrecorded(&held);
    assert_eq!(
        super::session::kinds(&replayed),
        vec!["user_message", "context_plan", "assistant_delta"]
    );

    std::fs::rename(&away, &data).unwrap();
    health_becomes(
        &c.sandbox,
        ServiceKind::LlmSession,
        SESSIONS,
        ServingStatus::Serving,
    )
    .await;
    // The end was held until storage could keep it; a message sent now comes after it.
    c.fake.push([Reply::text(&["after"])]);
    let next = c.turn("again").await;
    assert!(matches!(
        next.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    // The log is dense and holds only what was acknowledged.
    let all = c.all_events(0).await;
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=all.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        super::session::kinds(&all[..all.len() - next.len()]),
        vec![
            "user_message",
            "context_plan",
            "assistant_delta",
            "turn_failed"
        ]
    );
    let Some(session_event::Event::TurnFailed(end)) = &all[all.len() - next.len() - 1].event else {
        panic!("{all:?}")
    };
    assert_eq!(end.reason(), TurnFailureReason::Storage, "{end:?}");
    assert!(
        end.message.contains("storage unavailable") && end.message.contains("sessions.sqlite"),
        "{}",
        end.message
    );

    // Everything works again.
    c.client()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap();
    // A following subscriber would hold the drain open.
    drop(live);
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_proposal_that_cannot_be_recorded_is_a_tool_error_and_nothing_pending_is_lost() {
    let sandbox = Sandbox::start().await.unwrap();
    let (mut waiting, proposal) = propose(&sandbox, "call-a", "src/a.rs").await;

    let (data, away) = move_away(&sandbox, "proposals.sqlite");
    health_becomes(
        &sandbox,
        ServiceKind::ToolExecutor,
        TOOLS,
        ServingStatus::NotServing,
    )
    .await;
    // A new proposal cannot be recorded: a typed tool error with the reason.
    let mut refused = sandbox
        .tools()
        .execute_tool(create_file("call-b", "src/b.rs"))
        .await
        .unwrap()
        .into_inner();
    let execute_tool_event::Event::Error(e) = ploke_e2e::next_tool_event(&mut refused).await else {
        panic!("expected an error")
    };
    assert_eq!(e.code(), ToolErrorCode::Unavailable, "{e:?}");
    assert!(
        e.message.contains("storage unavailable") && e.message.contains("proposals.sqlite"),
        "{}",
        e.message
    );
    // A decision cannot be recorded either: UNAVAILABLE, and nothing is written.
    let status = sandbox
        .tools()
        .decide_edit(approve(&proposal.proposal_id))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("storage unavailable"),
        "{}",
        status.message()
    );
    assert!(!sandbox.workspace_root().join("src/a.rs").exists());

    std::fs::rename(&away, &data).unwrap();
    health_becomes(
        &sandbox,
        ServiceKind::ToolExecutor,
        TOOLS,
        ServingStatus::Serving,
    )
    .await;
    // The pending proposal survived and can be decided; its caller gets the outcome.
    let decided = sandbox
        .tools()
        .decide_edit(approve(&proposal.proposal_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        decided.proposal.map(|p| p.state()),
        Some(ProposalState::Applied)
    );
    let execute_tool_event::Event::Result(r) = ploke_e2e::next_tool_event(&mut waiting).await
    else {
        panic!("expected the outcome")
    };
    assert!(matches!(
        r.result,
        Some(tool_result::Result::CreateFile(ref o)) if o.state() == ProposalState::Applied
    ));
    assert_eq!(
        std::fs::read_to_string(sandbox.workspace_root().join("src/a.rs")).unwrap(),
        "pub fn made() {}\n"
    );
    // New proposals are recorded again.
    propose(&sandbox, "call-c", "src/c.rs").await;
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn removed_databases_refuse_writes_and_report_not_serving_without_a_crash() {
    let c = chat().await;
    c.fake.push([Reply::text(&["fine"])]);
    c.turn("before").await;
    for name in ["sessions.sqlite", "proposals.sqlite"] {
        std::fs::remove_file(c.sandbox.data.path().join(name)).unwrap();
    }
    for (kind, service) in [
        (ServiceKind::LlmSession, SESSIONS),
        (ServiceKind::ToolExecutor, TOOLS),
    ] {
        health_becomes(&c.sandbox, kind, service, ServingStatus::NotServing).await;
    }
    let status = c
        .client()
        .send_message(SendMessageRequest {
            session_id: c.session_id.clone(),
            content: "after".into(),
            client_request_id: "r1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("was removed"),
        "{}",
        status.message()
    );
    let mut refused = c
        .sandbox
        .tools()
        .execute_tool(create_file("call-x", "src/x.rs"))
        .await
        .unwrap()
        .into_inner();
    let execute_tool_event::Event::Error(e) = ploke_e2e::next_tool_event(&mut refused).await else {
        panic!("expected an error")
    };
    assert_eq!(e.code(), ToolErrorCode::Unavailable, "{e:?}");
    // Reads of what is already open still answer; nothing was appended after the fault.
    let events = c.all_events(0).await;
    assert!(matches!(
        events.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    assert_eq!(c.requests().len(), 1);
    // Both services still run (health answers) and stop cleanly.
    assert_eq!(
        ploke_runtime::probe::health(c.sandbox.channel(ServiceKind::LlmSession), SESSIONS)
            .await
            .unwrap(),
        ServingStatus::NotServing
    );
    c.sandbox.stop().await.unwrap();
}

/// rag-search whose index cannot be written (its directory gone, as a full disk) stays SERVING
/// (a replica's disk is no outage of search): searches answer from the last committed index, a
/// refresh is UNAVAILABLE, and the gateway's status says DEGRADED with the fault until a write
/// works again.
#[tokio::test]
async fn an_index_that_cannot_be_written_degrades_search_in_the_status_without_stopping_it() {
    use ploke_proto::gateway::v1::{GetSystemStatusRequest, ServingState};
    use ploke_proto::rag::v1::RefreshFilesRequest;
    const RAG: &str = "ploke.rag.v1.RagSearch";
    let sandbox = Sandbox::start_with(|c| c.rag_search.watch = false)
        .await
        .unwrap();
    sandbox
        .index_files(&[("src/lib.rs", "pub fn load_settings() {}\n")])
        .await
        .unwrap();
    let index = sandbox.data.path().join("index");
    let away = sandbox.data.path().join("index.away");
    std::fs::rename(&index, &away).unwrap();
    std::fs::write(
        sandbox.workspace_root().join("src/later.rs"),
        "pub fn later() {}\n",
    )
    .unwrap();
    let refused = sandbox
        .rag()
        .refresh_files(RefreshFilesRequest {
            workspace_root: String::new(),
            paths: vec!["src/later.rs".into()],
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    let rag_status = || async {
        sandbox
            .gateway()
            .get_system_status(GetSystemStatusRequest {})
            .await
            .unwrap()
            .into_inner()
            .services
            .into_iter()
            .find(|s| s.service == RAG)
            .unwrap()
    };
    let degraded = rag_status().await;
    assert_eq!(degraded.state(), ServingState::Degraded, "{degraded:?}");
    assert!(
        degraded.message.starts_with(
            "degraded: index_storage: the index cannot be written (index storage unavailable"
        ) && degraded
            .message
            .ends_with("; searches answer from the last committed index"),
        "{degraded:?}"
    );
    assert_eq!(
        ploke_runtime::probe::health(sandbox.channel(ServiceKind::RagSearch), RAG)
            .await
            .unwrap(),
        ServingStatus::Serving
    );
    // Searches answer from the last committed index.
    assert_eq!(
        super::faults::search(&sandbox, "load_settings").await[0],
        "src/lib.rs:crate::load_settings"
    );
    // Storage back: the service recovers by itself (a run that writes what it missed) and
    // the fault clears; the deadline only bounds a failing test.
    std::fs::rename(&away, &index).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let now = rag_status().await;
        if now.state() == ServingState::Serving {
            assert_eq!(now.message, "", "{now:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sandbox.stop().await.unwrap();
}
