//! Many StreamEvents subscribers through the gateway under sustained turns: `--subscribers`
//! (100) streams follow one session while turns run back to back for `--seconds` (60) against
//! the fake provider; every subscriber must see every event exactly once, in order. The
//! process's resident memory is read from /proc before, sampled during (peak) and after the
//! subscribers are gone. The Sandbox runs in this process, so the figures include the clients'
//! own memory. Not a test: results go to docs/PERFORMANCE.md.
//!
//!   cargo bench -p ploke-e2e --bench subscribers -- [--subscribers N] [--seconds S]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::{FakeProvider, Reply};
use ploke_proto::session::v1::*;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let subscribers = arg("--subscribers", 100) as usize;
    let seconds = arg("--seconds", 60);
    let fake = FakeProvider::start().await.unwrap();
    let provider = fake.provider_config(Some(128_000));
    let sandbox = Sandbox::start_with(move |c| {
        c.providers = BTreeMap::from([("fake".to_owned(), provider)]);
    })
    .await
    .unwrap();
    let session = sandbox
        .gateway()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session_id;
    let idle = rss_mib();

    // Each follower counts the turns it has seen end.
    let seen: Vec<Arc<AtomicU64>> = (0..subscribers).map(|_| Arc::default()).collect();
    let followers: Vec<_> = seen
        .iter()
        .map(|counter| {
            let mut gateway = sandbox.gateway();
            let (session, counter) = (session.clone(), counter.clone());
            tokio::spawn(async move {
                let mut stream = gateway
                    .stream_events(StreamEventsRequest {
                        session_id: session,
                        after_seq: 0,
                        no_follow: false,
                    })
                    .await
                    .unwrap()
                    .into_inner();
                let mut last = 0u64;
                while let Ok(Some(e)) = stream.message().await {
                    assert_eq!(e.seq, last + 1, "a gap or a repeat");
                    last = e.seq;
                    if matches!(e.event, Some(session_event::Event::TurnCompleted(_))) {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();

    let deadline = Instant::now() + Duration::from_secs(seconds);
    let sampler = tokio::spawn(async move {
        let mut peak: f64 = 0.0;
        while Instant::now() < deadline {
            peak = peak.max(rss_mib());
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        peak
    });
    let mut sessions = sandbox.sessions();
    // One turn at a time: the next is sent once this stream has seen the last one end.
    let mut own = sessions
        .stream_events(StreamEventsRequest {
            session_id: session.clone(),
            after_seq: 0,
            no_follow: false,
        })
        .await
        .unwrap()
        .into_inner();
    let mut turns = 0u64;
    let started = Instant::now();
    while Instant::now() < deadline {
        // The fake keeps every request (each with the whole history): not the services' memory.
        fake.forget();
        fake.push([Reply::text(&["Hello", " from", " a", " long", " soak"])]);
        sessions
            .send_message(SendMessageRequest {
                session_id: session.clone(),
                content: format!("turn {turns}"),
                client_request_id: String::new(),
            })
            .await
            .unwrap();
        while let Some(e) = own.message().await.unwrap() {
            match e.event {
                Some(session_event::Event::TurnCompleted(_)) => break,
                Some(session_event::Event::TurnFailed(f)) => panic!("turn failed: {f:?}"),
                _ => {}
            }
        }
        turns += 1;
    }
    drop(own);
    let wall = started.elapsed();
    let peak = sampler.await.unwrap();
    let during = rss_mib();
    // Every follower catches up (a slow one is cut off by the gateway and would fail here).
    let catch_up = Instant::now() + Duration::from_secs(60);
    while seen.iter().any(|c| c.load(Ordering::Relaxed) < turns) && Instant::now() < catch_up {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let complete = seen
        .iter()
        .filter(|c| c.load(Ordering::Relaxed) == turns)
        .count();
    for f in &followers {
        f.abort();
    }
    for f in followers {
        let _ = f.await;
    }
    // The streams are gone; tokio lets idle threads go after 10 s.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let after = rss_mib();
    let gateway = sandbox.addrs().url(ploke_runtime::ServiceKind::Gateway);
    sandbox.stop().await.unwrap();
    println!(
        "{subscribers} subscribers through the gateway ({gateway}), {turns} turns in {:.1} s \
         ({:.1} turns/s); subscribers that saw every turn: {complete}/{subscribers}",
        wall.as_secs_f64(),
        turns as f64 / wall.as_secs_f64()
    );
    println!(
        "RSS idle {idle:.0} MiB, peak {peak:.0} MiB (limit 2 x idle + 200 = {:.0}), at the end of the load {during:.0} MiB, after {after:.0} MiB",
        2.0 * idle + 200.0,
    );
}
