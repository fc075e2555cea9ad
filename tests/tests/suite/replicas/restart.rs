//! The shared database over time and beside sessions: a restart, an outage, and proposals
//! across tool-executor replicas.

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::Reply;
use ploke_proto::session::v1::*;
use tonic::Code;

use super::*;

#[tokio::test]
async fn a_restart_keeps_everything_runs_no_migration_twice_and_recovers_only_expired_leases() {
    let Some(r) = replicas().await else { return };
    let id = create(&r.a).await;
    r.fake.push([Reply::text(&["kept"])]);
    let sent =
        r.a.sessions()
            .send_message(send(&id, "keep this"))
            .await
            .unwrap()
            .into_inner();
    until_end(&mut stream(&r.a, &id, sent.seq - 1, true).await).await;
    let before = all(&r.a, &id).await;
    // Two sessions left "running" by replicas that are not here: one whose lease expired
    // (it died), one whose lease is live (it runs elsewhere).
    let dead = create(&r.a).await;
    let elsewhere = create(&r.a).await;
    r.a.stop().await.unwrap();
    r.b.stop().await.unwrap();
    for (session, until) in [
        (&dead, "now() - interval '1 second'"),
        (&elsewhere, "now() + interval '1 hour'"),
    ] {
        r.pg.sql(
            "ploke",
            &format!(
                "UPDATE sessions SET running_parent = 'p-{session}', running_owner = 'gone', \
                     lease_until = {until} WHERE id = '{session}'"
            ),
        )
        .unwrap();
    }

    let c = Sandbox::start_with(replica_config(&r.url, r.workspace.path(), &r.fake))
        .await
        .unwrap();
    ready(&c).await;
    assert_eq!(all(&c, &id).await, before);
    // The expired turn was ended at start; the live one was left to its owner.
    let ended = all(&c, &dead).await;
    let Some(session_event::Event::TurnFailed(f)) = &ended.last().unwrap().event else {
        panic!("{ended:?}")
    };
    assert_eq!(f.reason(), TurnFailureReason::Interrupted);
    assert_eq!(
        ended[0].correlation.as_ref().unwrap().parent_id,
        format!("p-{dead}")
    );
    assert!(all(&c, &elsewhere).await.is_empty());
    let busy = c
        .sessions()
        .send_message(send(&elsewhere, "hello?"))
        .await
        .unwrap_err();
    assert_eq!(busy.code(), Code::FailedPrecondition, "{busy:?}");
    // Every migration ran once, though three replicas started.
    assert_eq!(
        r.pg.sql(
            "ploke",
            "SELECT component, version FROM ploke_migrations ORDER BY 1, 2"
        )
        .unwrap(),
        "llm-session|1\nllm-session|2\nllm-session|3\ntool-executor|1\ntool-executor|2"
    );
    c.stop().await.unwrap();
}

#[tokio::test]
async fn a_proposal_made_through_one_tool_executor_is_listed_and_decided_through_the_other() {
    use ploke_proto::tools::v1::{
        CreateFileArgs, DecideEditRequest, Decision, ListEditsRequest, ProposalState,
        execute_tool_event, tool_call, tool_result,
    };
    let Some(r) = replicas().await else { return };
    let request = ploke_e2e::tool_request(
        "shared",
        "call-1",
        tool_call::Args::CreateFile(CreateFileArgs {
            file_path: "src/shared.rs".into(),
            content: "pub fn shared() {}\n".into(),
            on_exists: None,
        }),
    );
    let mut waiting =
        r.a.tools()
            .execute_tool(request)
            .await
            .unwrap()
            .into_inner();
    let execute_tool_event::Event::EditProposed(proposal) =
        ploke_e2e::next_tool_event(&mut waiting).await
    else {
        panic!("expected a proposal")
    };
    let listed = |s: &Sandbox| {
        let mut tools = s.tools();
        async move {
            tools
                .list_edits(ListEditsRequest {
                    session_id: "shared".into(),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .proposals
        }
    };
    let on_b = listed(&r.b).await;
    assert_eq!(on_b.len(), 1);
    assert_eq!(on_b[0].proposal_id, proposal.proposal_id);
    assert_eq!(on_b[0].state(), ProposalState::Pending);

    let decided =
        r.b.tools()
            .decide_edit(DecideEditRequest {
                proposal_id: proposal.proposal_id.clone(),
                decision: Decision::Approve as i32,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
    assert_eq!(
        decided.proposal.map(|p| p.state()),
        Some(ProposalState::Applied)
    );
    assert_eq!(
        std::fs::read_to_string(r.workspace.path().join("src/shared.rs")).unwrap(),
        "pub fn shared() {}\n"
    );
    // A sees B's decision; a second decision (through A) cannot undo it.
    let on_a = listed(&r.a).await;
    assert_eq!(on_a[0].state(), ProposalState::Applied);
    let again =
        r.a.tools()
            .decide_edit(DecideEditRequest {
                proposal_id: proposal.proposal_id.clone(),
                decision: Decision::Deny as i32,
                ..Default::default()
            })
            .await;
    if let Ok(again) = &again {
        assert_eq!(
            again.get_ref().proposal.as_ref().map(|p| p.state()),
            Some(ProposalState::Applied)
        );
    }
    assert_eq!(listed(&r.b).await[0].state(), ProposalState::Applied);
    // The call waiting on A gets the outcome decided through B.
    let execute_tool_event::Event::Result(outcome) = ploke_e2e::next_tool_event(&mut waiting).await
    else {
        panic!("expected the outcome")
    };
    assert!(
        matches!(
            outcome.result,
            Some(tool_result::Result::CreateFile(ref o)) if o.state() == ProposalState::Applied
        ),
        "{outcome:?}"
    );
    r.a.stop().await.unwrap();
    r.b.stop().await.unwrap();
}

#[tokio::test]
async fn a_database_that_goes_away_answers_unavailable_and_not_serving_until_it_is_back() {
    use ploke_runtime::ServiceKind;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let Some(r) = replicas().await else { return };
    let id = create(&r.a).await;
    let becomes = |want: ServingStatus| {
        let channel = r.a.channel(ServiceKind::LlmSession);
        async move {
            let mut stream = HealthClient::new(channel)
                .watch(HealthCheckRequest {
                    service: "ploke.session.v1.LlmSession".into(),
                })
                .await
                .unwrap()
                .into_inner();
            let reached = async {
                while let Some(h) = stream.message().await.unwrap() {
                    if h.status() == want {
                        return;
                    }
                }
                panic!("the health stream ended");
            };
            // The deadline only bounds a failing test.
            tokio::time::timeout(std::time::Duration::from_secs(30), reached)
                .await
                .unwrap_or_else(|_| panic!("never reported {want:?}"));
        }
    };
    r.pg.stop().unwrap();
    let refused =
        r.a.sessions()
            .create_session(CreateSessionRequest::default())
            .await
            .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("storage unavailable")
            && refused.message().contains("postgres 127.0.0.1"),
        "{}",
        refused.message()
    );
    becomes(ServingStatus::NotServing).await;
    // The gateway's status says why, from the backend's own faults.
    let status =
        r.a.gateway()
            .get_system_status(ploke_proto::gateway::v1::GetSystemStatusRequest {})
            .await
            .unwrap()
            .into_inner();
    let session = status
        .services
        .iter()
        .find(|s| s.service == "ploke.session.v1.LlmSession")
        .unwrap();
    assert!(
        session.message.starts_with("not serving: storage: ")
            && session.message.contains("postgres 127.0.0.1"),
        "{session:?}"
    );

    r.pg.restart().unwrap();
    becomes(ServingStatus::Serving).await;
    let again = create(&r.a).await;
    let listed =
        r.b.sessions()
            .list_sessions(ListSessionsRequest::default())
            .await
            .unwrap()
            .into_inner();
    let ids: Vec<&str> = listed
        .sessions
        .iter()
        .map(|s| s.session_id.as_str())
        .collect();
    assert!(
        ids.contains(&id.as_str()) && ids.contains(&again.as_str()),
        "{ids:?}"
    );
    r.a.stop().await.unwrap();
    r.b.stop().await.unwrap();
}

#[tokio::test]
async fn a_running_turn_rides_out_a_database_restart() {
    // The test's runtime has one thread, so the services' tasks log here.
    let lines = crate::suite::logs::Logs::capture("ploke_llm_session", tracing::Level::INFO, false);
    let Some(r) = replicas().await else { return };
    let id = create(&r.a).await;
    // The reply's first piece, then (once the database is down) the rest.
    let (mut live, mut seen) =
        held_after_first_piece(&r, &id, &["before the restart, ", "after it"]).await;
    r.pg.stop().unwrap();
    r.fake.resume();
    // The turn tried to append while the database was down.
    lines
        .wait_for("appending a turn's event failed; trying again")
        .await;
    r.pg.restart().unwrap();
    seen.extend(until_end(&mut live).await);
    let Some(session_event::Event::TurnCompleted(_)) = &seen.last().unwrap().event else {
        panic!("{seen:?}\n{}", lines.text())
    };
    let text: String = seen
        .iter()
        .filter_map(|e| match &e.event {
            Some(session_event::Event::AssistantDelta(d)) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "before the restart, after it");
    // Stored once each, in order, as both replicas read them.
    let stored = all(&r.b, &id).await;
    assert_eq!(seqs(&stored), (1..=stored.len() as u64).collect::<Vec<_>>());
    assert_eq!(stored, all(&r.a, &id).await);
    assert!(
        lines
            .text()
            .contains("turn event appended once the database answered again"),
        "{}",
        lines.text()
    );
    r.a.stop().await.unwrap();
    r.b.stop().await.unwrap();
}

#[tokio::test]
async fn a_replica_leaves_its_own_running_turn_alone_when_its_lease_lapsed() {
    let lines = crate::suite::logs::Logs::capture("ploke_llm_session", tracing::Level::INFO, false);
    let Some(r) = replicas().await else { return };
    let id = create(&r.a).await;
    let (mut live, mut seen) = held_after_first_piece(&r, &id, &["still ", "mine"]).await;
    // Only A: B would end an expired turn as a replica that outlived A (by design).
    r.b.stop().await.unwrap();
    // The lease reads as lapsed whatever A renews (as after a database outage longer than
    // the lease): A's own sweep finds its own live turn.
    r.pg.sql(
        "ploke",
        &format!(
            "CREATE FUNCTION lapse() RETURNS trigger AS $$ BEGIN \
               NEW.lease_until := now() - interval '1 second'; RETURN NEW; END $$ LANGUAGE plpgsql; \
             CREATE TRIGGER lapse BEFORE UPDATE ON sessions FOR EACH ROW \
               WHEN (NEW.id = '{id}' AND NEW.running_parent IS NOT NULL) EXECUTE FUNCTION lapse(); \
             UPDATE sessions SET lease_until = now() WHERE id = '{id}'"
        ),
    )
    .unwrap();
    // A's sweep ran and left it alone.
    lines
        .wait_for("this replica's running turn: left to run")
        .await;
    r.fake.resume();
    seen.extend(until_end(&mut live).await);
    let Some(session_event::Event::TurnCompleted(_)) = &seen.last().unwrap().event else {
        panic!("{seen:?}\n{}", lines.text())
    };
    r.a.stop().await.unwrap();
}

/// A turn of session `id` on replica A whose reply is `pieces`, held by the provider after the
/// first: the live stream, and the events read until that piece was stored.
async fn held_after_first_piece(
    r: &Replicas,
    id: &str,
    pieces: &[&str],
) -> (tonic::Streaming<SessionEvent>, Vec<SessionEvent>) {
    // The role chunk and the first piece.
    r.fake.push([Reply::text(pieces).pause_after(2)]);
    let mut live = stream(&r.a, id, 0, true).await;
    r.a.sessions()
        .send_message(send(id, "go on"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|e: &SessionEvent| matches!(e.event, Some(session_event::Event::AssistantDelta(_))))
    {
        seen.push(live.message().await.unwrap().unwrap());
    }
    (live, seen)
}
