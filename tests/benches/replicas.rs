//! What following a turn through another replica adds: two Sandboxes on one real PostgreSQL
//! (`[storage] url`); a turn runs on replica B while one StreamEvents subscriber follows it on
//! B (events reach it in-process, right after their commit) and one on A (the commit's NOTIFY
//! wakes A, which reads the new events from the database by seq). For every event, the added
//! latency is its arrival on A minus its arrival on B. Not a test: results go to
//! docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-e2e --bench replicas -- [--turns N] [--deltas N] [--gap-ms N]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::{FakeProvider, Reply};
use ploke_e2e::postgres::Postgres;
use ploke_proto::session::v1::*;
use ploke_runtime::config::{PlokeConfig, Secret};

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: usize| ms(samples[(samples.len() * q / 100).min(samples.len() - 1)]);
    println!(
        "{name:<44} p50 {:>7.3} ms   p95 {:>7.3} ms   p99 {:>7.3} ms   max {:>7.3} ms   (n = {})",
        at(50),
        at(95),
        at(99),
        ms(*samples.last().unwrap()),
        samples.len()
    );
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .map_or(default, |i| args[i + 1].parse().unwrap())
}

/// Arrival time of every event of one turn, from `after_seq` to the turn's end.
async fn follow(mut stream: tonic::Streaming<SessionEvent>) -> Vec<(u64, Instant)> {
    let mut out = Vec::new();
    while let Some(e) = stream.message().await.unwrap() {
        out.push((e.seq, Instant::now()));
        if matches!(
            e.event,
            Some(session_event::Event::TurnCompleted(_) | session_event::Event::TurnFailed(_))
        ) {
            return out;
        }
    }
    panic!("stream ended before the turn");
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let turns = arg(&args, "--turns", 20);
    let deltas = arg(&args, "--deltas", 50) as usize;
    let gap = Duration::from_millis(arg(&args, "--gap-ms", 2));
    let pg = Postgres::start().expect("this bench needs PostgreSQL (see scripts/test)");
    let url = pg.create_database("bench").unwrap();
    let fake = FakeProvider::start().await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let config = |c: &mut PlokeConfig| {
        c.storage.url = Some(Secret::new(url.clone()));
        c.workspaces = vec![workspace.path().to_owned()];
        c.providers = BTreeMap::from([("fake".to_owned(), fake.provider_config(Some(128_000)))]);
    };
    let a = Sandbox::start_with(config).await.unwrap();
    let b = Sandbox::start_with(config).await.unwrap();
    let id = b
        .sessions()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session_id;
    let pieces: Vec<String> = (0..deltas).map(|i| format!("w{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();

    let mut added = Vec::new();
    let mut last_seq = 0;
    for _ in 0..turns {
        fake.push([Reply::text(&pieces).slow(gap)]);
        let open = |s: &Sandbox| {
            let mut c = s.sessions();
            let id = id.clone();
            async move {
                c.stream_events(StreamEventsRequest {
                    session_id: id,
                    after_seq: last_seq,
                    no_follow: false,
                })
                .await
                .unwrap()
                .into_inner()
            }
        };
        let on_a = tokio::spawn(follow(open(&a).await));
        let on_b = tokio::spawn(follow(open(&b).await));
        let sent = b
            .sessions()
            .send_message(SendMessageRequest {
                session_id: id.clone(),
                content: "go".into(),
                client_request_id: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let (on_a, on_b) = (on_a.await.unwrap(), on_b.await.unwrap());
        assert_eq!(
            on_a.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            on_b.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            "both subscribers see every event once, in order"
        );
        // The user message is written before either subscriber could be told; skip it.
        for ((seq, ta), (_, tb)) in on_a.iter().zip(&on_b) {
            if *seq > sent.seq {
                added.push(ta.saturating_duration_since(*tb));
            }
        }
        last_seq = on_b.last().unwrap().0;
    }
    println!(
        "replicas: {turns} turns of {deltas} deltas ({} ms apart) on replica B",
        gap.as_millis()
    );
    summary("added latency, subscriber on A vs on B", added);
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}
