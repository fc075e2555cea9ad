//! The spans of a turn: `chat {model}` with the GenAI attributes and `execute_tool {name}` in
//! llm-session and tool-executor, all carrying the turn's ids. A capturing subscriber sees
//! every service because the Sandbox runs them on this test's (current-thread) runtime.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ploke_e2e::fake_provider::Reply;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

use super::chat;

type Spans = Arc<Mutex<Vec<(u64, String, BTreeMap<String, String>)>>>;

struct Capture(Spans);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        if let Ok(mut spans) = self.0.lock() {
            spans.push((id.into_u64(), attrs.metadata().name().to_owned(), fields));
        }
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Ok(mut spans) = self.0.lock()
            && let Some(span) = spans.iter_mut().rev().find(|s| s.0 == id.into_u64())
        {
            values.record(&mut Fields(&mut span.2));
        }
    }
}

#[tokio::test]
async fn a_turn_has_chat_and_execute_tool_spans_with_its_ids() {
    let spans: Spans = Arc::default();
    // tracing caches each callsite's interest process-wide when it is first hit. With a single
    // registered dispatcher that interest is asked of the hitting thread's default only, so a
    // sibling test without a subscriber could cache `never` for `execute_tool` while this test
    // runs. A second live dispatcher makes every registration ask all of them (this capture
    // included); the rebuild repairs what was cached before.
    let _anchor = tracing::Dispatch::new(tracing_subscriber::registry());
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(Capture(spans.clone())),
    );
    tracing::callsite::rebuild_interest_cache();
    let c = chat().await;
    c.fake.push([
        Reply::tool_calls(&[("call_1", "list_dir", "{}")]),
        Reply::text(&["ok"]),
    ]);
    let events = c.turn("list").await;
    let parent = events[0].correlation.as_ref().unwrap().parent_id.clone();
    let first_request = events[1].correlation.as_ref().unwrap().request_id.clone();
    let spans = spans.lock().unwrap().clone();
    let chat: Vec<&BTreeMap<String, String>> = spans
        .iter()
        .filter(|s| s.1 == "chat")
        .map(|s| &s.2)
        .collect();
    assert_eq!(chat.len(), 2);
    let first = chat[0];
    let get = |m: &BTreeMap<String, String>, k: &str| m.get(k).cloned().unwrap_or_default();
    assert_eq!(get(first, "otel.name"), "chat fake-model");
    assert_eq!(get(first, "gen_ai.operation.name"), "chat");
    assert_eq!(get(first, "gen_ai.provider.name"), "fake");
    assert_eq!(get(first, "gen_ai.request.model"), "fake-model");
    assert_eq!(get(first, "gen_ai.conversation.id"), c.session_id);
    assert_eq!(get(first, "gen_ai.usage.input_tokens"), "200");
    assert_eq!(get(first, "gen_ai.usage.output_tokens"), "20");
    assert_eq!(get(first, "gen_ai.response.finish_reasons"), "tool_calls");
    assert_eq!(get(first, "ploke.request_id"), first_request);
    assert_eq!(get(first, "ploke.parent_id"), parent);
    // One execute_tool span in llm-session and one in tool-executor, both with the call id.
    let tools: Vec<&BTreeMap<String, String>> = spans
        .iter()
        .filter(|s| s.1 == "execute_tool")
        .map(|s| &s.2)
        .collect();
    assert_eq!(tools.len(), 2, "{tools:?}");
    for t in tools {
        assert_eq!(get(t, "otel.name"), "execute_tool list_dir");
        assert_eq!(get(t, "gen_ai.tool.name"), "list_dir");
        assert_eq!(get(t, "gen_ai.tool.call.id"), "call_1");
        assert_eq!(get(t, "ploke.call_id"), "call_1");
        assert_eq!(get(t, "ploke.request_id"), first_request);
        assert_eq!(get(t, "ploke.parent_id"), parent);
    }
    // tool-executor's gRPC server span carries the same ids from the metadata.
    let server = spans
        .iter()
        .find(|s| {
            s.1 == "grpc.server"
                && s.2
                    .get("otel.name")
                    .is_some_and(|n| n.ends_with("ToolExecutor/ExecuteTool"))
        })
        .unwrap();
    assert_eq!(get(&server.2, "ploke.call_id"), "call_1");
    assert_eq!(get(&server.2, "ploke.parent_id"), parent);
    c.sandbox.stop().await.unwrap();
}
