//! A shared deployment: two Sandboxes (each a gateway, llm-session, tool-executor and
//! rag-search on 127.0.0.1:0) on one real PostgreSQL database (`[storage] url`) and one
//! workspace. A session created through one replica continues through the other; a subscriber
//! on one sees the live events of a turn the other runs, in order, without gap or duplicate;
//! racing replicas start a turn once; a cancel reaches the replica running the turn; a
//! restart keeps everything and runs no migration twice; startup recovery ends only turns
//! whose lease expired.

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::FakeProvider;
use ploke_e2e::postgres::Postgres;
use ploke_proto::session::v1::*;
use ploke_runtime::config::{PlokeConfig, Secret};

mod restart;
mod sessions;

/// The env var whose value the fake provider's "API key" is (set by cargo for every test).
const KEY_ENV: &str = "CARGO_MANIFEST_DIR";

pub(super) struct Replicas {
    pub pg: Postgres,
    pub url: String,
    pub fake: FakeProvider,
    pub workspace: tempfile::TempDir,
    pub a: Sandbox,
    pub b: Sandbox,
}

/// Configures a Sandbox as one replica of the deployment.
pub(super) fn replica_config(
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
pub(super) async fn replicas() -> Option<Replicas> {
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
pub(super) async fn ready(s: &Sandbox) {
    s.sessions()
        .list_sessions(ListSessionsRequest::default())
        .await
        .unwrap();
    s.tools()
        .list_edits(ploke_proto::tools::v1::ListEditsRequest::default())
        .await
        .unwrap();
}

pub(super) async fn create(s: &Sandbox) -> String {
    s.sessions()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session_id
}

pub(super) fn send(session_id: &str, text: &str) -> SendMessageRequest {
    SendMessageRequest {
        session_id: session_id.into(),
        content: text.into(),
        client_request_id: String::new(),
    }
}

pub(super) async fn stream(
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

pub(super) fn is_end(e: &SessionEvent) -> bool {
    matches!(
        e.event,
        Some(session_event::Event::TurnCompleted(_) | session_event::Event::TurnFailed(_))
    )
}

/// Reads `live` until a turn ends.
pub(super) async fn until_end(live: &mut tonic::Streaming<SessionEvent>) -> Vec<SessionEvent> {
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
pub(super) async fn all(s: &Sandbox, session_id: &str) -> Vec<SessionEvent> {
    let mut replay = stream(s, session_id, 0, false).await;
    let mut out = Vec::new();
    while let Some(e) = replay.message().await.unwrap() {
        out.push(e);
    }
    out
}

pub(super) fn seqs(events: &[SessionEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

pub(super) fn user_messages(events: &[SessionEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.event, Some(session_event::Event::UserMessage(_))))
        .count()
}
