//! llm-session against the fake OpenAI provider: whole turns through real gRPC, with
//! tool-executor and rag-search running in the Sandbox.

mod broken_tools;
mod events;
mod limits;
mod loop_;
mod metrics;
mod provider;
mod spans;

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::{FakeProvider, Received};
use ploke_proto::session::v1::llm_session_client::LlmSessionClient;
use ploke_proto::session::v1::*;
use ploke_runtime::client::TracedChannel;
use ploke_runtime::config::PlokeConfig;

/// The env var whose value the fake provider's "API key" is (set by cargo for every test).
pub(super) const KEY_ENV: &str = "CARGO_MANIFEST_DIR";

pub(super) struct Chat {
    pub sandbox: Sandbox,
    pub fake: FakeProvider,
    pub session_id: String,
}

pub(super) async fn chat() -> Chat {
    chat_with(|_| {}).await
}

pub(super) async fn chat_with(adjust: impl FnOnce(&mut PlokeConfig)) -> Chat {
    let fake = FakeProvider::start().await.unwrap();
    let mut provider = fake.provider_config(Some(16_000));
    provider.api_key_env = Some(KEY_ENV.into());
    let sandbox = Sandbox::start_with_provider(provider, move |c| {
        c.session.retry_max_ms = 2000;
        adjust(c);
    })
    .await
    .unwrap();
    let session = sandbox
        .sessions()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner();
    Chat {
        sandbox,
        fake,
        session_id: session.session_id,
    }
}

impl Chat {
    pub(super) fn client(&self) -> LlmSessionClient<TracedChannel> {
        self.sandbox.sessions()
    }

    pub(super) async fn send(&self, text: &str) -> SendMessageResponse {
        self.client()
            .send_message(SendMessageRequest {
                session_id: self.session_id.clone(),
                content: text.into(),
                client_request_id: String::new(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    /// The event stream after `after_seq`; with `follow`, live events after the replay.
    pub(super) async fn events(
        &self,
        after_seq: u64,
        follow: bool,
    ) -> tonic::Streaming<SessionEvent> {
        self.client()
            .stream_events(StreamEventsRequest {
                session_id: self.session_id.clone(),
                after_seq,
                no_follow: !follow,
            })
            .await
            .unwrap()
            .into_inner()
    }

    /// Events after `after_seq`, following live until a turn ends.
    pub(super) async fn until_turn_end(&self, after_seq: u64) -> Vec<SessionEvent> {
        let mut stream = self.events(after_seq, true).await;
        let mut out = Vec::new();
        while let Some(e) = stream.message().await.unwrap() {
            let end = matches!(
                e.event,
                Some(session_event::Event::TurnCompleted(_) | session_event::Event::TurnFailed(_))
            );
            out.push(e);
            if end {
                break;
            }
        }
        out
    }

    /// Every stored event (replay only).
    pub(super) async fn all_events(&self, after_seq: u64) -> Vec<SessionEvent> {
        let mut stream = self.events(after_seq, false).await;
        let mut out = Vec::new();
        while let Some(e) = stream.message().await.unwrap() {
            out.push(e);
        }
        out
    }

    /// Sends `text` and returns the turn's events.
    pub(super) async fn turn(&self, text: &str) -> Vec<SessionEvent> {
        let sent = self.send(text).await;
        self.until_turn_end(sent.seq - 1).await
    }

    pub(super) fn requests(&self) -> Vec<Received> {
        self.fake.received()
    }
}

/// The name of each event, in order; consecutive deltas collapse into one.
/// Asserts the turn of `events` completed (its last event), naming the kinds seen otherwise.
pub(super) fn assert_completed(events: &[SessionEvent]) {
    assert!(
        matches!(
            events.last().map(|e| &e.event),
            Some(Some(session_event::Event::TurnCompleted(_)))
        ),
        "{:?}",
        kinds(events)
    );
}

pub(super) fn kinds(events: &[SessionEvent]) -> Vec<&'static str> {
    use session_event::Event as E;
    let mut out: Vec<&'static str> = Vec::new();
    for e in events {
        let k = match &e.event {
            Some(E::UserMessage(_)) => "user_message",
            Some(E::AssistantDelta(_)) => "assistant_delta",
            Some(E::AssistantMessage(_)) => "assistant_message",
            Some(E::ToolCallRequested(_)) => "tool_call_requested",
            Some(E::ToolCallProgress(_)) => "tool_call_progress",
            Some(E::ToolCallCompleted(_)) => "tool_call_completed",
            Some(E::ToolCallFailed(_)) => "tool_call_failed",
            Some(E::EditProposed(_)) => "edit_proposed",
            Some(E::EditDecided(_)) => "edit_decided",
            Some(E::ContextPlan(_)) => "context_plan",
            Some(E::Notice(_)) => "notice",
            Some(E::TurnCompleted(_)) => "turn_completed",
            Some(E::TurnFailed(_)) => "turn_failed",
            None => "none",
        };
        if !(k == "assistant_delta" && out.last() == Some(&"assistant_delta")) {
            out.push(k);
        }
    }
    out
}

/// The messages of a recorded provider request, as (role, content or tool-call names).
pub(super) fn messages(r: &Received) -> Vec<(String, String)> {
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let role = m["role"].as_str().unwrap_or("").to_owned();
            let text = match m["tool_calls"].as_array() {
                Some(calls) => calls
                    .iter()
                    .map(|c| {
                        format!(
                            "{}#{}",
                            c["function"]["name"].as_str().unwrap(),
                            c["id"].as_str().unwrap()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                None => m["content"].as_str().unwrap_or("").to_owned(),
            };
            (role, text)
        })
        .collect()
}

pub(super) fn failure(events: &[SessionEvent]) -> TurnFailed {
    match events.last().and_then(|e| e.event.clone()) {
        Some(session_event::Event::TurnFailed(f)) => f,
        other => panic!("expected turn_failed, got {other:?}"),
    }
}

pub(super) fn notices(events: &[SessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(session_event::Event::Notice(n)) => Some(n.text.clone()),
            _ => None,
        })
        .collect()
}
