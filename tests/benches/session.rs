//! llm-session's overhead with the fake provider answering at once: the time from the
//! provider's first byte to the first assistant_delta reaching a StreamEvents subscriber, and
//! the cost of one tool round trip excluding the tool's own work. Not a test: results go to
//! docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-e2e --bench session -- [--turns N]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::{FakeProvider, Moment, Reply};
use ploke_proto::session::v1::*;

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p50 = ms(samples[samples.len() / 2]);
    let p99 = ms(samples[(samples.len() * 99 / 100).min(samples.len() - 1)]);
    println!(
        "{name:<62} p50 {p50:>7.3} ms   p99 {p99:>7.3} ms   (n = {})",
        samples.len()
    );
}

#[tokio::main]
async fn main() {
    let mut turns = 300usize;
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--turns") {
        turns = args[i + 1].parse().unwrap();
    }
    let fake = FakeProvider::start().await.unwrap();
    let provider = fake.provider_config(Some(128_000));
    let sandbox = Sandbox::start_with(move |c| {
        c.providers = BTreeMap::from([("fake".to_owned(), provider)]);
    })
    .await
    .unwrap();
    std::fs::write(sandbox.workspace_root().join("README.md"), "# bench\n").unwrap();
    let mut client = sandbox.sessions();
    let session = client
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner();

    let mut first_delta = Vec::with_capacity(turns);
    let mut tool_round = Vec::with_capacity(turns);
    let mut whole_turn = Vec::with_capacity(turns);
    let mut last_seq = 0;
    for i in 0..turns {
        let with_tool = i % 2 == 1;
        if with_tool {
            fake.push([
                Reply::tool_calls(&[("call_1", "list_dir", "{}")]),
                Reply::text(&["Hello", " world"]),
            ]);
        } else {
            fake.push([Reply::text(&["Hello", " world"])]);
        }
        let mark = fake.timeline().len();
        let mut events = client
            .stream_events(StreamEventsRequest {
                session_id: session.session_id.clone(),
                after_seq: last_seq,
                no_follow: false,
            })
            .await
            .unwrap()
            .into_inner();
        let started = Instant::now();
        client
            .send_message(SendMessageRequest {
                session_id: session.session_id.clone(),
                content: format!("question {i}"),
                client_request_id: String::new(),
            })
            .await
            .unwrap();
        let mut delta_at = None;
        while let Some(e) = events.message().await.unwrap() {
            last_seq = e.seq;
            match e.event {
                Some(session_event::Event::AssistantDelta(_)) if delta_at.is_none() => {
                    delta_at = Some(Instant::now())
                }
                Some(session_event::Event::TurnCompleted(_)) => break,
                Some(session_event::Event::TurnFailed(f)) => panic!("turn failed: {f:?}"),
                _ => {}
            }
        }
        whole_turn.push(started.elapsed());
        let timeline: Vec<(Moment, Instant)> = fake.timeline()[mark..].to_vec();
        // The stream whose text arrived is the last one of the turn.
        let first_byte = timeline
            .iter()
            .rev()
            .find(|(m, _)| *m == Moment::FirstByte)
            .unwrap()
            .1;
        first_delta.push(delta_at.unwrap() - first_byte);
        if with_tool {
            let end_of_first = timeline
                .iter()
                .find(|(m, _)| *m == Moment::StreamEnd)
                .unwrap()
                .1;
            let second_request = timeline
                .iter()
                .filter(|(m, _)| *m == Moment::Request)
                .nth(1)
                .unwrap()
                .1;
            tool_round.push(second_request - end_of_first);
        }
    }
    println!();
    summary(
        "provider first byte → first assistant_delta at a subscriber",
        first_delta,
    );
    summary(
        "tool round trip (stream end → next provider request, list_dir)",
        tool_round,
    );
    summary(
        "whole turn, SendMessage → turn_completed (half with a tool round)",
        whole_turn,
    );
    sandbox.stop().await.unwrap();
}
