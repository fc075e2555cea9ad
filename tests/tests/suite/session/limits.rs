//! Events stay replayable whatever the provider sends, and a turn cannot run forever: a 20 MiB
//! reply replays from any seq (directly and through the gateway), an endless keep-alive stream
//! ends at the turn's time limit, endless text at its output limit, and an oversized user
//! message is refused.

use std::time::Duration;

use ploke_e2e::fake_provider::Reply;
use ploke_proto::session::v1::*;
use prost::Message;
use tonic::Code;

use super::{Chat, chat_with, failure};

/// The bound llm-session keeps every event within at the default 16 MiB transport limit.
const EVENT_BOUND: usize = 2 << 20;

fn delta_text(events: &[SessionEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(session_event::Event::AssistantDelta(d)) => Some(d.text.as_str()),
            _ => None,
        })
        .collect()
}

async fn gateway_replay(c: &Chat, after_seq: u64) -> Vec<SessionEvent> {
    let mut stream = c
        .sandbox
        .gateway()
        .stream_events(StreamEventsRequest {
            session_id: c.session_id.clone(),
            after_seq,
            no_follow: true,
        })
        .await
        .unwrap()
        .into_inner();
    let mut out = Vec::new();
    while let Some(e) = stream.message().await.unwrap() {
        out.push(e);
    }
    out
}

#[tokio::test]
async fn a_20_mib_reply_replays_from_any_seq_directly_and_through_the_gateway() {
    let c = chat_with(|cfg| cfg.session.max_turn_output_bytes = 64 << 20).await;
    let reply: String = (0..20 << 16)
        .map(|i| format!("{:015x}\n", i))
        .collect::<String>();
    assert_eq!(reply.len(), 20 << 20);
    let pieces: Vec<&str> = (0..20).map(|i| &reply[i << 20..(i + 1) << 20]).collect();
    c.fake.push([Reply::text(&pieces)]);

    let live = c.turn("write twenty mebibytes").await;
    assert!(
        matches!(
            live.last().and_then(|e| e.event.as_ref()),
            Some(session_event::Event::TurnCompleted(_))
        ),
        "{:?}",
        live.last()
    );
    // Every byte arrived, in deltas; no event is near the transport limit.
    assert!(
        delta_text(&live) == reply,
        "the deltas do not add up to the reply"
    );
    for e in &live {
        assert!(
            e.encoded_len() <= EVENT_BOUND,
            "event {} is {} bytes",
            e.seq,
            e.encoded_len()
        );
    }
    let message = live
        .iter()
        .find_map(|e| match &e.event {
            Some(session_event::Event::AssistantMessage(m)) => Some(m.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        message
            .text
            .ends_with(&format!("of {} bytes kept]", 20 << 20)),
        "{}",
        &message.text[message.text.len().saturating_sub(80)..]
    );
    assert!(reply.starts_with(message.text.split('…').next().unwrap()));

    // Replays from the start and from the middle, directly and through the gateway.
    let all = c.all_events(0).await;
    assert_eq!(all, live);
    let middle = all.len() as u64 / 2;
    assert_eq!(c.all_events(middle).await, all[middle as usize..].to_vec());
    assert_eq!(gateway_replay(&c, 0).await, all);
    assert_eq!(
        gateway_replay(&c, middle).await,
        all[middle as usize..].to_vec()
    );
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn an_endless_keep_alive_stream_ends_at_the_turn_time_limit() {
    // Keep-alives every 100 ms reset the 3 s idle timeout (wide enough that a loaded machine
    // never stalls the stream that long); only the turn's limit ends it.
    let c = chat_with(|cfg| {
        cfg.session.max_turn_secs = 5;
        cfg.session.provider_idle_timeout_secs = 3;
    })
    .await;
    c.fake
        .push([Reply::keep_alive_forever(Duration::from_millis(100))]);
    let events = c.turn("are you there?").await;
    let f = failure(&events);
    assert_eq!(f.reason(), TurnFailureReason::TimeLimit, "{f:?}");
    assert!(f.message.contains("max_turn_secs"), "{}", f.message);
    let Some(session_event::Event::TurnFailed(_)) = events.last().unwrap().event else {
        unreachable!()
    };
    // The provider saw its request dropped (and got no other: nothing was retried).
    c.fake.disconnected().await;
    assert_eq!(c.requests().len(), 1);
    // The session takes the next message.
    c.fake.push([Reply::text(&["back"])]);
    let next = c.turn("again").await;
    assert!(matches!(
        next.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn endless_text_ends_at_the_turn_output_limit() {
    let limit = 256 << 10;
    let c = chat_with(|cfg| cfg.session.max_turn_output_bytes = limit).await;
    c.fake.push([Reply::deltas_forever(
        &"x".repeat(4096),
        Duration::from_millis(1),
    )]);
    let events = c.turn("talk forever").await;
    let f = failure(&events);
    assert_eq!(f.reason(), TurnFailureReason::OutputLimit, "{f:?}");
    assert!(
        f.message.contains(&limit.to_string()) && f.message.contains("max_turn_output_bytes"),
        "{}",
        f.message
    );
    let streamed = delta_text(&events).len() as u64;
    assert!(
        streamed > 0 && streamed <= limit,
        "{streamed} bytes streamed"
    );
    c.fake.disconnected().await;
    assert_eq!(c.requests().len(), 1);
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn an_oversized_user_message_is_refused_naming_the_field() {
    let c = chat_with(|_| {}).await;
    let err = c
        .client()
        .send_message(SendMessageRequest {
            session_id: c.session_id.clone(),
            content: "x".repeat((1 << 20) + 1),
            client_request_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("content"), "{}", err.message());
    // Nothing was recorded.
    assert!(c.all_events(0).await.is_empty());
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_reply_of_many_tool_calls_runs_the_first_32_and_answers_the_rest_as_not_run() {
    // 40 reads of the library in one reply.
    let c = chat_with(|_| {}).await;
    let calls: Vec<(String, String)> = (0..40)
        .map(|i| (format!("call_{i}"), r#"{"file": "src/lib.rs"}"#.to_owned()))
        .collect();
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "read_file", args.as_str()))
        .collect();
    c.fake
        .push([Reply::tool_calls(&calls), Reply::text(&["done"])]);
    let events = c.turn("read it all").await;
    assert!(
        matches!(
            events.last().unwrap().event,
            Some(session_event::Event::TurnCompleted(_))
        ),
        "{events:?}"
    );
    let ran = events
        .iter()
        .filter(|e| matches!(e.event, Some(session_event::Event::ToolCallRequested(_))))
        .count();
    assert_eq!(ran, 32);
    assert!(
        super::notices(&events).contains(
            &"the model asked for 40 tool calls in one reply; the first 32 ran".to_owned()
        )
    );
    // The second request answers every call, the last 8 as not run.
    let second = &c.requests()[1].body["messages"];
    let answers: Vec<&str> = second
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(answers.len(), 40);
    assert!(
        answers[32..]
            .iter()
            .all(|a| a.starts_with("not run: at most 32 tool calls"))
    );
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn small_fragments_that_come_while_text_is_written_go_out_together() {
    let c = chat_with(|_| {}).await;
    // 2,000 fragments of a few bytes, sent as fast as the socket takes them: far faster than
    // one event write each.
    let pieces: Vec<String> = (0..2000).map(|i| format!("{} ", i % 10)).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    c.fake.push([Reply::text(&pieces)]);
    let events = c.turn("count").await;
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            Some(session_event::Event::AssistantDelta(d)) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.concat(), pieces.concat());
    assert!(deltas.iter().all(|d| d.len() <= 1024));
    assert!(
        deltas.len() < pieces.len(),
        "{} events for {} fragments",
        deltas.len(),
        pieces.len()
    );
    c.sandbox.stop().await.unwrap();
}
