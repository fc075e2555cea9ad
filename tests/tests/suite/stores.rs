//! The session store contract, run the same way against the embedded SQLite store and the
//! PostgreSQL store (a real server): sessions, listing pages, the seq check, an event's effects
//! committing with it, an event written twice stored once, replay by seq, history, request ids, running turns and deleting a
//! session. Then what only the shared store has: migrations safe when replicas start at once,
//! and turn leases between two replicas.

use std::sync::Arc;
use std::time::Duration;

use ploke_e2e::postgres::Postgres;
use ploke_llm_session::provider::wire::ChatMessage;
use ploke_llm_session::store::postgres::{Lease, PgStore};
use ploke_llm_session::store::sqlite::SqliteStore;
use ploke_llm_session::store::{Effects, PageCursor, SessionStore, StoreError};
use ploke_proto::common::v1::{Correlation, TokenUsage};
use ploke_proto::session::v1::{
    AssistantDelta, SendMessageResponse, Session, SessionEvent, TurnFailed, TurnFailureReason,
    session_event,
};

fn session(id: &str, created_s: i64) -> Session {
    let at = prost_types::Timestamp {
        seconds: created_s,
        nanos: 0,
    };
    Session {
        session_id: id.into(),
        workspace_root: "/ws".into(),
        provider: "fake".into(),
        model: "m".into(),
        usage: Some(TokenUsage::default()),
        created_at: Some(at),
        updated_at: Some(at),
        ..Session::default()
    }
}

fn event(session_id: &str, seq: u64, parent: &str) -> SessionEvent {
    SessionEvent {
        seq,
        session_id: session_id.into(),
        correlation: Some(Correlation {
            session_id: session_id.into(),
            parent_id: parent.into(),
            ..Correlation::default()
        }),
        at: Some(prost_types::Timestamp {
            seconds: 100 + seq as i64,
            nanos: 0,
        }),
        event: Some(session_event::Event::AssistantDelta(AssistantDelta {
            text: format!("e{seq}"),
        })),
    }
}

/// The contract every store keeps.
async fn contract(store: &dyn SessionStore) {
    for (id, t, owner) in [("s1", 1, "alice"), ("s2", 2, "bob"), ("s3", 3, "alice")] {
        store
            .create_session(&Session {
                owner: owner.into(),
                ..session(id, t)
            })
            .await
            .unwrap();
    }
    assert!(store.create_session(&session("s1", 1)).await.is_err());
    assert_eq!(store.get_session("nope").await.unwrap(), None);
    assert_eq!(store.get_session("s2").await.unwrap().unwrap().owner, "bob");
    // Newest first, in pages; of one owner or of all.
    let page = store.list_sessions("", None, 2, None).await.unwrap();
    let ids: Vec<&str> = page.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, ["s3", "s2"]);
    let cursor = PageCursor {
        created_ms: 2000,
        session_id: "s2".into(),
    };
    let rest = store
        .list_sessions("", None, 2, Some(&cursor))
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].session_id, "s1");
    let alices: Vec<String> = store
        .list_sessions("", Some(&["alice".to_owned()]), 10, None)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    assert_eq!(alices, ["s3", "s1"]);
    assert!(
        store
            .list_sessions("", Some(&["carol".to_owned(), String::new()]), 10, None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list_sessions("/other", None, 10, None)
            .await
            .unwrap()
            .is_empty()
    );

    // A turn: its start commits the message, request id, title and running mark with it.
    let answer = SendMessageResponse {
        request_id: "r".into(),
        parent_id: "p1".into(),
        seq: 1,
        duplicate: false,
    };
    store
        .append_event(
            &event("s1", 1, "p1"),
            &Effects {
                messages: vec![ChatMessage::text("user", "hi")],
                request: Some(("c1".into(), answer.clone())),
                title: Some("hi".into()),
                running: Some(Some("p1".into())),
                usage: None,
                ended: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        store.running().await.unwrap().len(),
        usize::from(!shared(store))
    );
    // The same event again (a try whose commit landed but reported a failure): nothing
    // written, no error; so a writer may try again after a lost connection.
    store
        .append_event(&event("s1", 1, "p1"), &Effects::default())
        .await
        .unwrap();
    assert_eq!(store.events_after("s1", 0, 10).await.unwrap().len(), 1);
    // Not the next seq: refused, nothing written.
    let mut other = event("s1", 1, "p1");
    other.at = Some(prost_types::Timestamp {
        seconds: 1,
        nanos: 0,
    });
    for e in [other, event("s1", 3, "p1")] {
        let seq = e.seq;
        match store.append_event(&e, &Effects::default()).await {
            Err(StoreError::NotNext { session_id, seq: s }) => {
                assert_eq!((session_id.as_str(), s), ("s1", seq))
            }
            other => panic!("expected NotNext, got {other:?}"),
        }
    }
    store
        .append_event(&event("s1", 2, "p1"), &Effects::default())
        .await
        .unwrap();
    store
        .append_event(
            &event("s1", 3, "p1"),
            &Effects {
                messages: vec![ChatMessage::text("assistant", "hello")],
                running: Some(None),
                usage: Some(TokenUsage {
                    input_tokens: 10,
                    output_tokens: 2,
                    total_tokens: 12,
                }),
                ..Effects::default()
            },
        )
        .await
        .unwrap();
    assert!(store.running().await.unwrap().is_empty());

    let s1 = store.get_session("s1").await.unwrap().unwrap();
    assert_eq!((s1.last_seq, s1.title.as_str()), (3, "hi"));
    assert_eq!(s1.usage.unwrap().total_tokens, 12);
    assert_eq!(s1.updated_at.unwrap().seconds, 103);
    let seqs = |events: Vec<SessionEvent>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(store.events_after("s1", 0, 10).await.unwrap()),
        [1, 2, 3]
    );
    assert_eq!(seqs(store.events_after("s1", 1, 1).await.unwrap()), [2]);
    assert_eq!(
        store.events_after("s1", 2, 10).await.unwrap()[0],
        event("s1", 3, "p1")
    );
    let history = store.messages("s1").await.unwrap();
    let roles: Vec<(u64, &str, &str)> = history
        .iter()
        .map(|m| (m.seq, m.parent_id.as_str(), m.message.role.as_str()))
        .collect();
    assert_eq!(roles, [(1, "p1", "user"), (3, "p1", "assistant")]);
    assert_eq!(store.find_request("s1", "c1").await.unwrap(), Some(answer));
    assert_eq!(store.find_request("s1", "c2").await.unwrap(), None);
    assert!(store.events_after("s2", 0, 10).await.unwrap().is_empty());
    // Idle since: creation (s2 at 2 s, s3 at 3 s), or the end of a turn (s1's at 103 s).
    assert_eq!(store.idle_sessions(2500, 10).await.unwrap(), ["s2"]);
    assert_eq!(store.idle_sessions(200_000, 2).await.unwrap(), ["s2", "s3"]);

    // Deleting: refused while a turn runs (nothing goes), then the whole session and nothing
    // of another's.
    let running = Effects {
        running: Some(Some("p3".into())),
        ..Effects::default()
    };
    store
        .append_event(&event("s3", 1, "p3"), &running)
        .await
        .unwrap();
    match store.delete_session("s3", None).await {
        Err(StoreError::Busy {
            session_id,
            parent_id,
        }) => assert_eq!((session_id.as_str(), parent_id.as_str()), ("s3", "p3")),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(store.events_after("s3", 0, 10).await.unwrap().len(), 1);
    // A session running a turn is never idle.
    assert_eq!(
        store.idle_sessions(200_000, 10).await.unwrap(),
        ["s2", "s1"]
    );
    // The turn ends failed: the session keeps why, in reads and in lists.
    let cancelled = TurnFailed {
        reason: TurnFailureReason::Cancelled as i32,
        message: "cancelled with `ploke sessions cancel`".into(),
    };
    let ended = Effects {
        running: Some(None),
        ended: Some(Some(cancelled.clone())),
        ..Effects::default()
    };
    store
        .append_event(&event("s3", 2, "p3"), &ended)
        .await
        .unwrap();
    let s3 = store.get_session("s3").await.unwrap().unwrap();
    assert_eq!(s3.last_failure.as_ref(), Some(&cancelled));
    let listed = store.list_sessions("", None, 10, None).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|s| (s.session_id.as_str(), s.last_failure.as_ref()))
            .collect::<Vec<_>>(),
        [("s3", Some(&cancelled)), ("s2", None), ("s1", None)]
    );
    // A turn's start and end are activity (s3's ended at 102 s); deleting for retention spares
    // a session active since it was found idle.
    assert_eq!(store.idle_sessions(102_000, 10).await.unwrap(), ["s2"]);
    assert_eq!(
        store.idle_sessions(102_500, 10).await.unwrap(),
        ["s2", "s3"]
    );
    assert_eq!(
        store.delete_session("s3", Some(102_000)).await.unwrap(),
        None
    );
    assert_eq!(store.delete_session("s1", None).await.unwrap(), Some(3));
    assert_eq!(store.get_session("s1").await.unwrap(), None);
    assert!(store.events_after("s1", 0, 10).await.unwrap().is_empty());
    assert!(store.messages("s1").await.unwrap().is_empty());
    assert_eq!(store.find_request("s1", "c1").await.unwrap(), None);
    assert_eq!(store.delete_session("s1", None).await.unwrap(), None);
    let left: Vec<String> = store
        .list_sessions("", None, 10, None)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    assert_eq!(left, ["s3", "s2"]);
    assert_eq!(store.events_after("s3", 0, 10).await.unwrap().len(), 2);
    // A turn that completes after it clears the failure.
    let next = Effects {
        running: Some(Some("p4".into())),
        ..Effects::default()
    };
    store
        .append_event(&event("s3", 3, "p4"), &next)
        .await
        .unwrap();
    let completed = Effects {
        running: Some(None),
        ended: Some(None),
        ..Effects::default()
    };
    store
        .append_event(&event("s3", 4, "p4"), &completed)
        .await
        .unwrap();
    assert_eq!(
        store.get_session("s3").await.unwrap().unwrap().last_failure,
        None
    );
    // The same session id again starts from nothing.
    store.create_session(&session("s1", 1)).await.unwrap();
    assert_eq!(store.get_session("s1").await.unwrap().unwrap().last_seq, 0);
    assert!(store.messages("s1").await.unwrap().is_empty());
}

fn shared(store: &dyn SessionStore) -> bool {
    store.remote().is_some()
}

#[tokio::test]
async fn the_sqlite_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.sqlite"))
        .await
        .unwrap();
    contract(&store).await;
    // SQLite: a turn left running counts as interrupted at the next start.
    store.create_session(&session("r", 9)).await.unwrap();
    let start = Effects {
        running: Some(Some("p".into())),
        ..Effects::default()
    };
    store
        .append_event(&event("r", 1, "p"), &start)
        .await
        .unwrap();
    assert_eq!(
        store.running().await.unwrap(),
        [("r".to_owned(), "p".to_owned())]
    );
}

#[tokio::test]
async fn the_postgres_store_keeps_the_contract_and_turn_leases_between_replicas() {
    let Some(pg) = Postgres::for_test() else {
        return;
    };
    let url = pg.create_database("stores").unwrap();
    let lease = Lease {
        ttl: Duration::from_secs(30),
        renew: Duration::from_secs(10),
    };
    // Two replicas starting at once: both migrate safely, each migration runs once.
    let (a, b) = tokio::join!(PgStore::connect(&url, lease), PgStore::connect(&url, lease));
    let (a, b) = (Arc::new(a.unwrap()), Arc::new(b.unwrap()));
    assert_eq!(
        pg.sql("stores", "SELECT count(*) FROM ploke_migrations")
            .unwrap(),
        "3"
    );
    contract(&*a).await;
    // What A wrote, B reads.
    assert_eq!(b.events_after("s3", 0, 10).await.unwrap().len(), 4);

    // A takes s2's turn; B can neither start one nor append to A's.
    let start = |parent: &str| Effects {
        running: Some(Some(parent.into())),
        ..Effects::default()
    };
    a.append_event(&event("s2", 1, "pa"), &start("pa"))
        .await
        .unwrap();
    match b.append_event(&event("s2", 2, "pb"), &start("pb")).await {
        Err(StoreError::Busy { parent_id, .. }) => assert_eq!(parent_id, "pa"),
        other => panic!("expected Busy, got {other:?}"),
    }
    match b
        .append_event(&event("s2", 2, "pa"), &Effects::default())
        .await
    {
        Err(StoreError::Superseded { parent_id, .. }) => assert_eq!(parent_id, "pa"),
        other => panic!("expected Superseded, got {other:?}"),
    }
    // A live lease is not B's to recover; the session reads as running on B.
    assert!(b.running().await.unwrap().is_empty());
    assert_eq!(
        b.get_session("s2").await.unwrap().unwrap().state(),
        ploke_proto::session::v1::SessionState::Running
    );
    // Once it expires (A is gone), B may end it; A's late events are refused after that.
    pg.sql(
        "stores",
        "UPDATE sessions SET lease_until = now() - interval '1 second' WHERE id = 's2'",
    )
    .unwrap();
    assert_eq!(
        b.running().await.unwrap(),
        [("s2".to_owned(), "pa".to_owned())]
    );
    let end = Effects {
        running: Some(None),
        ..Effects::default()
    };
    b.append_event(&event("s2", 2, "pa"), &end).await.unwrap();
    match a
        .append_event(&event("s2", 3, "pa"), &Effects::default())
        .await
    {
        Err(StoreError::Superseded { .. }) => {}
        other => panic!("expected Superseded, got {other:?}"),
    }
    // The session is free again: B starts the next turn.
    b.append_event(&event("s2", 3, "pb"), &start("pb"))
        .await
        .unwrap();
    // A restart with the same database runs no migration again.
    drop((a, b));
    let again = PgStore::connect(&url, lease).await.unwrap();
    assert_eq!(again.events_after("s2", 0, 10).await.unwrap().len(), 3);
    assert_eq!(
        pg.sql("stores", "SELECT count(*) FROM ploke_migrations")
            .unwrap(),
        "3"
    );
}
