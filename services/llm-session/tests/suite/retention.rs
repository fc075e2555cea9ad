//! `[session] retention_days` as an operator sets it: the service, started on a store holding
//! a session idle for 100 days and one active today, deletes the first on its own (with its
//! events) and keeps the second; with retention off both stay.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use ploke_llm_session::store::sqlite::SqliteStore;
use ploke_llm_session::store::{Effects, SessionStore};
use ploke_proto::common::v1::TokenUsage;
use ploke_proto::session::v1::llm_session_client::LlmSessionClient;
use ploke_proto::session::v1::{
    AssistantDelta, GetSessionRequest, ListSessionsRequest, Session, SessionEvent, session_event,
};
use ploke_runtime::testing::RunningBinary;
use tonic::Code;

const DAY: Duration = Duration::from_secs(86_400);

fn at(t: SystemTime) -> prost_types::Timestamp {
    prost_types::Timestamp::from(t)
}

/// A session last active at `t`, with one event.
async fn stored(store: &SqliteStore, id: &str, root: &Path, t: SystemTime) {
    store
        .create_session(&Session {
            session_id: id.into(),
            workspace_root: root.display().to_string(),
            provider: "fake".into(),
            model: "m".into(),
            usage: Some(TokenUsage::default()),
            created_at: Some(at(t)),
            updated_at: Some(at(t)),
            ..Session::default()
        })
        .await
        .unwrap();
    let event = SessionEvent {
        seq: 1,
        session_id: id.into(),
        at: Some(at(t)),
        event: Some(session_event::Event::AssistantDelta(AssistantDelta {
            text: "hello".into(),
        })),
        ..SessionEvent::default()
    };
    store
        .append_event(&event, &Effects::default())
        .await
        .unwrap();
}

/// The sessions the service lists, once it has had `settle` to delete what it deletes.
async fn run(retention_days: u32) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let store = SqliteStore::open(&data.join("sessions.sqlite"))
        .await
        .unwrap();
    let now = SystemTime::now();
    stored(&store, "old", &workspace, now - 100 * DAY).await;
    stored(&store, "today", &workspace, now).await;
    store.database().close().await;
    drop(store);

    let config = dir.path().join("ploke.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.fake]\nbase_url = \"http://127.0.0.1:9/v1\"\ndefault_model = \"m\"\n\
             [session]\nretention_days = {retention_days}\n"
        ),
    )
    .unwrap();
    let paths = [config, data, workspace].map(|p| p.display().to_string());
    let args = [
        "--config",
        &paths[0],
        "--data-dir",
        &paths[1],
        "--workspace",
        &paths[2],
    ];
    let binary = Path::new(env!("CARGO_BIN_EXE_ploke-llm-session"));
    let bin = RunningBinary::start(binary, &args, Duration::from_secs(30)).unwrap();
    let channel = tonic::transport::Endpoint::from_shared(bin.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut sessions = LlmSessionClient::new(channel);
    if retention_days > 0 {
        // Deleted in the background, soon after the start.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let old = sessions
                .get_session(GetSessionRequest {
                    session_id: "old".into(),
                })
                .await;
            match old {
                Err(s) if s.code() == Code::NotFound => break,
                _ => assert!(Instant::now() < deadline, "the idle session was kept"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let listed: Vec<String> = sessions
        .list_sessions(ListSessionsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .sessions
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    drop(sessions);
    let (exit, lines) = tokio::task::spawn_blocking(move || bin.terminate())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{}", lines.join("\n"));
    listed
}

#[tokio::test]
async fn sessions_idle_past_the_retention_go_with_their_events_and_the_others_stay() {
    assert_eq!(run(30).await, ["today"]);
    assert_eq!(run(0).await, ["today", "old"]);
}
