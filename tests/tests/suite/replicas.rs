//! A shared deployment: two Sandboxes (each a gateway, llm-session, tool-executor and
//! rag-search on 127.0.0.1:0) on one real PostgreSQL database (`[storage] url`) and one
//! workspace. A session created through one replica continues through the other; a subscriber
//! on one sees the live events of a turn the other runs, in order, without gap or duplicate;
//! racing replicas start a turn once; a cancel reaches the replica running the turn; a
//! restart keeps everything and runs no migration twice; startup recovery ends only turns
//! whose lease expired.

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::{FakeProvider, Reply};
use ploke_e2e::postgres::Postgres;
use ploke_proto::session::v1::*;
use ploke_runtime::config::{PlokeConfig, Secret};
use tonic::Code;

/// The env var whose value the fake provider's "API key" is (set by cargo for every test).
const KEY_ENV: &str = "CARGO_MANIFEST_DIR";

pub struct Replicas {
    pub pg: Postgres,
    pub url: String,
    pub fake: FakeProvider,
    pub workspace: tempfile::TempDir,
    pub a: Sandbox,
    pub b: Sandbox,
}

/// Configures a Sandbox as one replica of the deployment.
pub fn replica_config(
    url: &str,
    workspace: &std::path::Path,
    fake: &FakeProvider,
) -> impl FnOnce(&mut PlokeConfig) + use<> {
    let url = url.to_owned();
    let workspace = workspace.to_owned();
    let mut provider = fake.provider_config(Some(16_000));
    provider.api_key_env = Some(KEY_ENV.into());
    move |c| {
        c.storage.url = Some(Secret::new(url));
        c.workspaces = vec![workspace];
        c.providers = std::collections::BTreeMap::from([("fake".to_owned(), provider)]);
        c.session.retry_base_ms = 1;
    }
}

/// Two replicas on a fresh database; `None` when PostgreSQL cannot run here (outside CI).
pub async fn replicas() -> Option<Replicas> {
    let pg = Postgres::for_test()?;
    let url = pg.create_database("ploke").unwrap();
    let fake = FakeProvider::start().await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let a = Sandbox::start_with(replica_config(&url, workspace.path(), &fake))
        .await
        .unwrap();
    let b = Sandbox::start_with(replica_config(&url, workspace.path(), &fake))
        .await
        .unwrap();
    for s in [&a, &b] {
        ready(s).await;
    }
    Some(Replicas {
        pg,
        url,
        fake,
        workspace,
        a,
        b,
    })
}

/// Waits until the replica's llm-session and tool-executor have opened the database: the
/// Sandbox returns once every port is bound, and a service answers only after its start.
pub async fn ready(s: &Sandbox) {
    s.sessions()
        .list_sessions(ListSessionsRequest::default())
        .await
        .unwrap();
    s.tools()
        .list_edits(ploke_proto::tools::v1::ListEditsRequest::default())
        .await
        .unwrap();
}

async fn create(s: &Sandbox) -> String {
    s.sessions()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session_id
}

fn send(session_id: &str, text: &str) -> SendMessageRequest {
    SendMessageRequest {
        session_id: session_id.into(),
        content: text.into(),
        client_request_id: String::new(),
    }
}

async fn stream(
    s: &Sandbox,
    session_id: &str,
    after_seq: u64,
    follow: bool,
) -> tonic::Streaming<SessionEvent> {
    s.sessions()
        .stream_events(StreamEventsRequest {
            session_id: session_id.into(),
            after_seq,
            no_follow: !follow,
        })
        .await
        .unwrap()
        .into_inner()
}

fn is_end(e: &SessionEvent) -> bool {
    matches!(
        e.event,
        Some(session_event::Event::TurnCompleted(_) | session_event::Event::TurnFailed(_))
    )
}

/// Reads `live` until a turn ends.
async fn until_end(live: &mut tonic::Streaming<SessionEvent>) -> Vec<SessionEvent> {
    let mut out = Vec::new();
    while let Some(e) = live.message().await.unwrap() {
        let end = is_end(&e);
        out.push(e);
        if end {
            return out;
        }
    }
    panic!("the stream ended before the turn: {out:?}");
}

/// Every stored event of the session, through `s`.
async fn all(s: &Sandbox, session_id: &str) -> Vec<SessionEvent> {
    let mut replay = stream(s, session_id, 0, false).await;
    let mut out = Vec::new();
    while let Some(e) = replay.message().await.unwrap() {
        out.push(e);
    }
    out
}

fn seqs(events: &[SessionEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

fn user_messages(events: &[SessionEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.event, Some(session_event::Event::UserMessage(_))))
        .count()
}

#[tokio::test]
async fn a_session_created_on_one_replica_continues_on_the_other_with_its_whole_history() {
    let Some(r) = replicas().await else { return };
    let id = create(&r.a).await;
    r.fake.push([Reply::text(&["one"]), Reply::text(&["two"])]);

    let first =
        r.a.sessions()
            .send_message(send(&id, "first"))
            .await
            .unwrap()
            .into_inner();
    until_end(&mut stream(&r.a, &id, first.seq - 1, true).await).await;
    let second =
        r.b.sessions()
            .send_message(send(&id, "second"))
            .await
            .unwrap()
            .into_inner();
    until_end(&mut stream(&r.b, &id, second.seq - 1, true).await).await;

    // B's request to the model carried the turn A ran.
    let asked = r.fake.received();
    assert_eq!(asked.len(), 2);
    let texts: Vec<(String, String)> = asked[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        texts,
        [("user", "first"), ("assistant", "one"), ("user", "second")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    // Both replicas hold the same log: dense seqs, both turns complete.
    let on_a = all(&r.a, &id).await;
    let on_b = all(&r.b, &id).await;
    assert_eq!(on_a, on_b);
    assert_eq!(seqs(&on_a), (1..=on_a.len() as u64).collect::<Vec<_>>());
    assert_eq!(user_messages(&on_a), 2);
    assert_eq!(on_a.iter().filter(|e| is_end(e)).count(), 2);
    // The session (title, usage, idle) reads the same on both.
    let get = |s: &Sandbox| {
        let mut c = s.sessions();
        let id = id.clone();
        async move {
            c.get_session(GetSessionRequest { session_id: id })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let (sa, sb) = (get(&r.a).await, get(&r.b).await);
    assert_eq!(sa, sb);
    assert_eq!(sa.state(), SessionState::Idle);
    assert_eq!(sa.last_seq, on_a.len() as u64);
    assert_eq!(sa.usage.unwrap().output_tokens, 2);
    let listed =
        r.b.sessions()
            .list_sessions(ListSessionsRequest::default())
            .await
            .unwrap()
            .into_inner();
    assert!(listed.sessions.iter().any(|s| s.session_id == id));
    r.a.stop().await.unwrap();
    r.b.stop().await.unwrap();
}

#[tokio::test]
async fn a_subscriber_on_one_replica_follows_a_turn_running_on_the_other_without_gap_or_duplicate()
{
    let Some(r) = replicas().await else { return };
    let id = create(&r.a).await;
    let pieces: Vec<String> = (0..40).map(|i| format!("p{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    // The reply pauses after its role chunk and first delta, so the turn is seen running.
    r.fake.push([Reply::text(&pieces).pause_after(2)]);
    let mut on_a = stream(&r.a, &id, 0, true).await;
    let sent =
        r.b.sessions()
            .send_message(send(&id, "go"))
            .await
            .unwrap()
            .into_inner();
    let mut head = Vec::new();
    loop {
        let e = on_a.message().await.unwrap().unwrap();
        let delta = matches!(e.event, Some(session_event::Event::AssistantDelta(_)));
        head.push(e);
        if delta {
            break;
        }
    }
    // A sees the turn B runs as running, from the lease.
    let state =
        r.a.sessions()
            .get_session(GetSessionRequest {
                session_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
    assert_eq!(state.state(), SessionState::Running);
    // A second subscriber on A resumes after the user message.
    let mut resumed = stream(&r.a, &id, sent.seq, true).await;
    r.fake.resume();
    let rest = until_end(&mut on_a).await;
    let followed: Vec<SessionEvent> = head.into_iter().chain(rest).collect();
    let resumed = until_end(&mut resumed).await;

    let stored = all(&r.b, &id).await;
    assert_eq!(
        seqs(&followed),
        (1..=stored.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(followed, stored);
    assert_eq!(resumed, stored[sent.seq as usize..]);
    let text: String = followed
        .iter()
        .filter_map(|e| match &e.event {
            Some(session_event::Event::AssistantDelta(d)) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, pieces.concat());
    r.a.stop().await.unwrap();
    r.b.stop().await.unwrap();
}

#[tokio::test]
async fn racing_replicas_start_one_turn_and_a_cancel_reaches_the_replica_running_it() {
    let Some(r) = replicas().await else { return };
    for round in 0..8 {
        let id = create(&r.a).await;
        // The winner's turn waits mid-reply, so the loser's send meets it running.
        r.fake
            .push([Reply::text(&["held", " never"]).pause_after(2)]);
        let (mut ca, mut cb) = (r.a.sessions(), r.b.sessions());
        let (ra, rb) = tokio::join!(
            ca.send_message(send(&id, "from a")),
            cb.send_message(send(&id, "from b"))
        );
        let (won, lost, winner_is_a) = match (ra, rb) {
            (Ok(w), Err(l)) => (w.into_inner(), l, true),
            (Err(l), Ok(w)) => (w.into_inner(), l, false),
            other => panic!("round {round}: expected exactly one turn, got {other:?}"),
        };
        assert_eq!(lost.code(), Code::FailedPrecondition, "{lost:?}");
        assert!(
            lost.message().contains("is running a turn"),
            "{}",
            lost.message()
        );
        // The loser's replica cancels the winner's turn.
        let (loser, winner) = if winner_is_a {
            (&r.b, &r.a)
        } else {
            (&r.a, &r.b)
        };
        let mut live = stream(winner, &id, won.seq, true).await;
        let mut events = Vec::new();
        // The turn is mid-reply once its first delta is out.
        while !matches!(
            events.last().map(|e: &SessionEvent| &e.event),
            Some(Some(session_event::Event::AssistantDelta(_)))
        ) {
            events.push(live.message().await.unwrap().unwrap());
        }
        let reason = format!("stopped from the other replica {round}");
        let cancelled = loser
            .sessions()
            .cancel_turn(CancelTurnRequest {
                session_id: id.clone(),
                reason: reason.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            (cancelled.cancelled, cancelled.parent_id.as_str()),
            (true, won.parent_id.as_str())
        );
        events.extend(until_end(&mut live).await);
        let Some(session_event::Event::TurnFailed(f)) = &events.last().unwrap().event else {
            panic!("{events:?}")
        };
        assert_eq!(f.reason(), TurnFailureReason::Cancelled);
        assert_eq!(f.message, reason);
        let stored = all(loser, &id).await;
        assert_eq!(user_messages(&stored), 1, "round {round}: {stored:?}");
        assert_eq!(seqs(&stored), (1..=stored.len() as u64).collect::<Vec<_>>());
        assert_eq!(r.fake.received().len(), round + 1, "round {round}");
    }
    // One provider request per round: no turn ran twice.
    assert_eq!(r.fake.received().len(), 8);
    r.a.stop().await.unwrap();
    r.b.stop().await.unwrap();
}

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
        "llm-session|1\ntool-executor|1"
    );
    c.stop().await.unwrap();
}

#[tokio::test]
async fn a_proposal_made_through_one_tool_executor_is_listed_and_decided_through_the_other() {
    use ploke_proto::tools::v1::{
        CreateFileArgs, DecideEditRequest, Decision, ListEditsRequest, ProposalState,
        execute_tool_event, tool_call,
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
    let proposal = loop {
        match waiting.message().await.unwrap().unwrap().event {
            Some(execute_tool_event::Event::EditProposed(p)) => break p,
            Some(execute_tool_event::Event::Progress(_)) | None => {}
            Some(other) => panic!("expected a proposal, got {other:?}"),
        }
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
    drop(waiting);
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
async fn through_two_gateways_a_turn_sent_to_one_is_followed_on_the_other() {
    let Some(r) = replicas().await else { return };
    let id =
        r.a.gateway()
            .create_session(CreateSessionRequest::default())
            .await
            .unwrap()
            .into_inner()
            .session_id;
    r.fake
        .push([Reply::text(&["through ", "the ", "gateways"])]);
    let mut on_a =
        r.a.gateway()
            .stream_events(StreamEventsRequest {
                session_id: id.clone(),
                after_seq: 0,
                no_follow: false,
            })
            .await
            .unwrap()
            .into_inner();
    r.b.gateway()
        .send_message(send(&id, "hello"))
        .await
        .unwrap();
    let followed = until_end(&mut on_a).await;
    let stored = all(&r.b, &id).await;
    assert_eq!(followed, stored);
    assert_eq!(
        seqs(&followed),
        (1..=stored.len() as u64).collect::<Vec<_>>()
    );
    assert!(matches!(
        followed.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    let seen_by_b =
        r.b.gateway()
            .get_session(GetSessionRequest { session_id: id })
            .await
            .unwrap()
            .into_inner();
    assert_eq!(seen_by_b.last_seq, stored.len() as u64);
    drop(on_a);
    r.a.stop().await.unwrap();
    r.b.stop().await.unwrap();
}
