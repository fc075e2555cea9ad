//! The durable event log: replay from every seq, live following equal to the replay, a second
//! subscriber, and sessions that survive a restart with their history.

use ploke_e2e::fake_provider::Reply;
use ploke_proto::session::v1::*;

use super::{chat, messages};

#[tokio::test]
async fn resuming_at_every_seq_yields_the_rest_exactly_once() {
    let c = chat().await;
    c.fake.push([
        Reply::tool_calls(&[("call_1", "list_dir", "{}")]),
        Reply::text(&["a", "b", "c"]),
    ]);
    // Two live subscribers from the start, one replay afterwards.
    let live_a = c.until_turn_end(0);
    let live_b = c.until_turn_end(0);
    let send = async {
        c.send("list").await;
    };
    let (a, b, ()) = tokio::join!(live_a, live_b, send);
    let all = c.all_events(0).await;
    assert_eq!(a, all);
    assert_eq!(b, all);
    let n = all.len() as u64;
    for k in 0..=n {
        let rest = c.all_events(k).await;
        assert_eq!(rest, all[k as usize..].to_vec(), "after_seq {k}");
    }
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn sessions_and_history_survive_a_restart() {
    let c = chat().await;
    c.fake.push([Reply::text(&["first answer"])]);
    c.turn("first question").await;
    let before = c.all_events(0).await;
    let fake = c.fake.clone();
    let session_id = c.session_id.clone();
    let sandbox = c.sandbox.restart().await.unwrap();
    let c = super::Chat {
        sandbox,
        fake,
        session_id,
    };
    assert_eq!(c.all_events(0).await, before);
    let session = c
        .client()
        .get_session(GetSessionRequest {
            session_id: c.session_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (session.last_seq, session.state(), session.title.as_str()),
        (before.len() as u64, SessionState::Idle, "first question")
    );
    let listed = c
        .client()
        .list_sessions(ListSessionsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.sessions.len(), 1);
    c.fake.push([Reply::text(&["second answer"])]);
    c.turn("second question").await;
    let last = messages(c.requests().last().unwrap());
    assert_eq!(
        last[1..].to_vec(),
        vec![
            ("user".to_owned(), "first question".to_owned()),
            ("assistant".to_owned(), "first answer".to_owned()),
            ("user".to_owned(), "second question".to_owned()),
        ]
    );
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_turn_running_at_shutdown_is_marked_interrupted() {
    let c = chat().await;
    c.fake
        .push([Reply::text(&["never", " ends"]).hold_after(1)]);
    let sent = c.send("hang").await;
    c.fake.first_byte().notified().await;
    let fake = c.fake.clone();
    let session_id = c.session_id.clone();
    let sandbox = c.sandbox.restart().await.unwrap();
    let c = super::Chat {
        sandbox,
        fake,
        session_id,
    };
    let events = c.all_events(sent.seq).await;
    let Some(session_event::Event::TurnFailed(f)) = &events.last().unwrap().event else {
        panic!("{events:?}")
    };
    assert_eq!(f.reason(), TurnFailureReason::Interrupted);
    c.sandbox.stop().await.unwrap();
}
