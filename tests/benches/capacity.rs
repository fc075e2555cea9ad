//! Capacity of the shared deployment for docs/DEPLOY.md: two replicas of the whole stack (two
//! Sandboxes, so two gateways, two llm-session, …) on one real PostgreSQL, measured through the
//! gateways with real gRPC clients. Three figures, each for `--seconds` (10):
//!
//! 1. sessions created per second, `--clients` (8) callers alternating the two gateways;
//! 2. StreamEvents fan-out: `--subscribers` (20) per gateway follow one session while turns run
//!    back to back through gateway B (each a 20-delta reply); events delivered per second per
//!    gateway, every subscriber checked for no gap and no duplicate;
//! 3. BM25 Search through gateway A, 8 in flight, on `--workspace` (default: this repository's
//!    `services/`), indexed on its own at start.
//!
//! Not a test. The client shares the machine's cores with both replicas and PostgreSQL.
//!
//!   cargo bench -p ploke-e2e --bench capacity -- [--seconds N] [--clients N] [--subscribers N]
//!       [--workspace DIR]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ploke_e2e::Sandbox;
use ploke_e2e::bench::{ms, number};
use ploke_e2e::fake_provider::{FakeProvider, Reply};
use ploke_e2e::postgres::Postgres;
use ploke_proto::rag::v1::{IndexWorkspaceRequest, SearchRequest, Strategy};
use ploke_proto::session::v1::*;
use ploke_runtime::config::{PlokeConfig, Secret};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds = Duration::from_secs(number(&args, "--seconds", 10));
    let clients = number(&args, "--clients", 8) as usize;
    let subscribers = number(&args, "--subscribers", 20) as usize;
    let workspace = ploke_e2e::bench::workspace(&args);
    let workspace = std::fs::canonicalize(workspace).unwrap();
    let pg = Postgres::start().expect("this bench needs PostgreSQL (see scripts/test)");
    let url = pg.create_database("capacity").unwrap();
    let fake = FakeProvider::start().await.unwrap();
    let config = |c: &mut PlokeConfig| {
        c.storage.url = Some(Secret::new(url.clone()));
        c.workspaces = vec![workspace.clone()];
        c.rag_search.watch = false;
        c.providers = BTreeMap::from([("fake".to_owned(), fake.provider_config(Some(128_000)))]);
    };
    let a = Sandbox::start_with(config).await.unwrap();
    let b = Sandbox::start_with(config).await.unwrap();
    println!(
        "capacity: 2 replicas of every service on one PostgreSQL, {} s per figure",
        seconds.as_secs()
    );

    // 1. Sessions created per second through both gateways.
    let deadline = Instant::now() + seconds;
    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            let mut gw = if i % 2 == 0 { a.gateway() } else { b.gateway() };
            tokio::spawn(async move {
                let mut took = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    gw.create_session(CreateSessionRequest::default())
                        .await
                        .unwrap();
                    took.push(t.elapsed());
                }
                took
            })
        })
        .collect();
    let mut took = Vec::new();
    for w in workers {
        took.extend(w.await.unwrap());
    }
    took.sort();
    println!(
        "sessions created: {:.0}/s ({} in {:.1} s, {clients} callers over 2 gateways), p50 {:.2} ms, p99 {:.2} ms",
        took.len() as f64 / started.elapsed().as_secs_f64(),
        took.len(),
        started.elapsed().as_secs_f64(),
        ms(&took, 50),
        ms(&took, 99)
    );

    // 2. Fan-out: subscribers on both gateways follow turns that run through gateway B.
    let id = b
        .gateway()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .session_id;
    let stop = Arc::new(AtomicBool::new(false));
    let mut followers = Vec::new();
    for (gateway, sandbox) in [("A", &a), ("B", &b)] {
        for _ in 0..subscribers {
            let mut stream = sandbox
                .gateway()
                .stream_events(StreamEventsRequest {
                    session_id: id.clone(),
                    after_seq: 0,
                    no_follow: false,
                })
                .await
                .unwrap()
                .into_inner();
            let stop = stop.clone();
            followers.push((
                gateway,
                tokio::spawn(async move {
                    let mut seqs = Vec::new();
                    while let Some(e) = stream.message().await.unwrap() {
                        seqs.push(e.seq);
                        if stop.load(Ordering::Relaxed)
                            && matches!(
                                e.event,
                                Some(
                                    session_event::Event::TurnCompleted(_)
                                        | session_event::Event::TurnFailed(_)
                                )
                            )
                        {
                            break;
                        }
                    }
                    seqs
                }),
            ));
        }
    }
    let pieces: Vec<String> = (0..20).map(|i| format!("w{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let deadline = Instant::now() + seconds;
    let started = Instant::now();
    let mut turns = 0;
    let mut gw = b.gateway();
    while Instant::now() < deadline {
        fake.push([Reply::text(&pieces)]);
        let sent = gw
            .send_message(SendMessageRequest {
                session_id: id.clone(),
                content: "go".into(),
                client_request_id: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        // The next turn starts when this one has ended (replay from its seq, no follow).
        loop {
            let mut done = gw
                .stream_events(StreamEventsRequest {
                    session_id: id.clone(),
                    after_seq: sent.seq,
                    no_follow: false,
                })
                .await
                .unwrap()
                .into_inner();
            let mut ended = false;
            while let Some(e) = done.message().await.unwrap() {
                if matches!(
                    e.event,
                    Some(
                        session_event::Event::TurnCompleted(_)
                            | session_event::Event::TurnFailed(_)
                    )
                ) {
                    ended = true;
                    break;
                }
            }
            if ended {
                break;
            }
        }
        turns += 1;
    }
    stop.store(true, Ordering::Relaxed);
    // One last turn so that every follower sees an end after the stop.
    fake.push([Reply::text(&["end"])]);
    gw.send_message(SendMessageRequest {
        session_id: id.clone(),
        content: "last".into(),
        client_request_id: String::new(),
    })
    .await
    .unwrap();
    let wall = started.elapsed().as_secs_f64();
    let mut per_gateway: BTreeMap<&str, usize> = BTreeMap::new();
    let mut clean = 0;
    let total = followers.len();
    for (gateway, f) in followers {
        let seqs = f.await.unwrap();
        if seqs.windows(2).all(|w| w[1] == w[0] + 1) {
            clean += 1;
        }
        *per_gateway.entry(gateway).or_default() += seqs.len();
    }
    let events = per_gateway.values().copied().max().unwrap_or(0) / subscribers.max(1);
    println!(
        "fan-out: {turns} turns through gateway B in {wall:.1} s, {events} events each; \
         {subscribers} subscribers per gateway; delivered/s: A {:.0}, B {:.0}; \
         {clean}/{total} subscribers saw every seq once, in order",
        per_gateway.get("A").copied().unwrap_or(0) as f64 / wall,
        per_gateway.get("B").copied().unwrap_or(0) as f64 / wall,
    );

    // 3. BM25 Search through gateway A on the workspace indexed at start.
    let mut index = a
        .gateway()
        .index_workspace(IndexWorkspaceRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut items = 0;
    while let Some(p) = index.message().await.unwrap() {
        items = p.summary.map_or(items, |s| s.items_total);
    }
    let queries = [
        "retry with backoff",
        "parse the config file",
        "index a workspace",
        "stream events to subscribers",
        "apply an edit proposal",
        "blocking pool saturated",
        "token budget for context",
        "internal token authentication",
    ];
    let deadline = Instant::now() + seconds;
    let started = Instant::now();
    let workers: Vec<_> = (0..8)
        .map(|i| {
            let mut gw = a.gateway();
            tokio::spawn(async move {
                let mut took = Vec::new();
                let mut n = i;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    gw.search(SearchRequest {
                        query: queries[n % queries.len()].into(),
                        strategy: Strategy::Bm25 as i32,
                        top_k: 10,
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                    took.push(t.elapsed());
                    n += 3;
                }
                took
            })
        })
        .collect();
    let mut took = Vec::new();
    for w in workers {
        took.extend(w.await.unwrap());
    }
    took.sort();
    println!(
        "Search through gateway A (BM25, {items} items, 8 in flight): {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms",
        took.len() as f64 / started.elapsed().as_secs_f64(),
        ms(&took, 50),
        ms(&took, 99)
    );
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}
