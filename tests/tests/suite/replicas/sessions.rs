//! Sessions across replicas: continuing on the other, following a turn the other runs (directly
//! and through two gateways), racing sends and a cancel reaching the replica running the turn.

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::Reply;
use ploke_proto::session::v1::*;
use tonic::Code;

use super::*;

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

    // Deleted through A: B's subscriber following it is told, and B finds it no more.
    let mut following = stream(&r.b, &id, sa.last_seq, true).await;
    let deleted =
        r.a.sessions()
            .delete_session(DeleteSessionRequest {
                session_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
    assert_eq!(deleted.events, sa.last_seq);
    let ended = following.message().await.unwrap_err();
    assert_eq!(
        (ended.code(), ended.message()),
        (Code::NotFound, format!("session {id} was deleted").as_str())
    );
    let gone =
        r.b.sessions()
            .get_session(GetSessionRequest { session_id: id })
            .await
            .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
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
