//! A real turn against the fake provider, seen by scraping the process's metrics endpoint
//! (`[telemetry] metrics_listen`, one for all four services): provider requests by outcome, the
//! retry, tokens, the tool call by name and outcome, the turn, the RPCs, the index, the live
//! subscribers (llm-session's, the gateway's) and the session's deletion; the provider's
//! counters from 0 before its first request. The provider has a name of its own here, so its values are exact; other tests of
//! this binary may add tool calls, turns and RPCs while this one runs, so those are at least.

use std::net::SocketAddr;

use ploke_e2e::fake_provider::Reply;
use ploke_proto::session::v1::{DeleteSessionRequest, StreamEventsRequest, session_event};
use ploke_runtime::testing::{metric, scrape};

use super::chat_with;

const PROVIDER: &str = "metered";

#[tokio::test]
async fn a_turn_is_counted_by_provider_tool_and_rpc() {
    let c = chat_with(|c| {
        let fake = c.providers.remove("fake").unwrap();
        c.providers.insert(PROVIDER.to_owned(), fake);
        c.telemetry.metrics_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await;
    let addr = c.sandbox.metrics_addr().expect("metrics are served");
    assert_eq!(ploke_runtime::metrics::serving(), Some(addr));
    // Before any turn, each outcome and retry reason of the provider and each way a turn ends
    // are there at 0 (a series first seen at 1 loses that increment to `rate()`).
    let body = &scrape(addr, "/metrics").await.unwrap().body;
    let zero = |name, labels: &[(&str, &str)]| {
        assert_eq!(
            metric(body, name, labels),
            Some(0.0),
            "{name} {labels:?}\n{body}"
        );
    };
    zero(
        "ploke_provider_requests_total",
        &[("provider", PROVIDER), ("outcome", "http_5xx")],
    );
    zero(
        "ploke_provider_retries_total",
        &[("provider", PROVIDER), ("reason", "http_429")],
    );
    for (name, labels) in [
        ("ploke_turns_finished_total", [("outcome", "TIME_LIMIT")]),
        ("ploke_sessions_deleted_total", [("reason", "retention")]),
    ] {
        assert!(metric(body, name, &labels).is_some(), "{name}\n{body}");
    }
    c.fake.push([
        Reply::status(500, "boom"),
        Reply::tool_calls(&[("call-1", "read_file", r#"{"file":"src/lib.rs"}"#)]),
        Reply::text(&["done"]),
    ]);
    let events = c.turn("what does add do?").await;
    assert!(
        matches!(
            events.last().unwrap().event,
            Some(session_event::Event::TurnCompleted(_))
        ),
        "{:?}",
        super::kinds(&events)
    );

    let scraped = scrape(addr, "/metrics").await.unwrap();
    assert_eq!(scraped.status, 200);
    let body = &scraped.body;
    let provider = |outcome| [("provider", PROVIDER), ("outcome", outcome)];
    let requests = "ploke_provider_requests_total";
    assert_eq!(
        metric(body, requests, &provider("http_5xx")),
        Some(1.0),
        "{body}"
    );
    assert_eq!(metric(body, requests, &provider("ok")), Some(2.0));
    assert_eq!(
        metric(
            body,
            "ploke_provider_retries_total",
            &[("provider", PROVIDER), ("reason", "http_5xx")]
        ),
        Some(1.0)
    );
    // The fake reports 200 + 20 tokens for the tool-call reply and 100 + 1 for the text.
    let tokens = |kind| {
        metric(
            body,
            "ploke_provider_tokens_total",
            &[("provider", PROVIDER), ("kind", kind)],
        )
    };
    assert_eq!(tokens("prompt"), Some(300.0));
    assert_eq!(tokens("completion"), Some(21.0));

    let at_least_one = |name: &str, labels: &[(&str, &str)]| {
        let value = metric(body, name, labels);
        assert!(
            value.is_some_and(|v| v >= 1.0),
            "{name} {labels:?} = {value:?}"
        );
    };
    at_least_one(
        "ploke_tool_calls_total",
        &[("tool", "read_file"), ("outcome", "OK")],
    );
    at_least_one("ploke_turns_started_total", &[]);
    at_least_one("ploke_turns_finished_total", &[("outcome", "COMPLETED")]);
    for (service, method) in [
        ("ploke.session.v1.LlmSession", "SendMessage"),
        ("ploke.session.v1.LlmSession", "CreateSession"),
        ("ploke.tools.v1.ToolExecutor", "ExecuteTool"),
    ] {
        at_least_one(
            "ploke_rpc_requests_total",
            &[("service", service), ("method", method), ("code", "OK")],
        );
    }
    at_least_one("ploke_index_duration_seconds_count", &[]);
    // The workspace's own index holds the one function of the library, at least.
    let workspace = c.sandbox.workspace_root().file_name().unwrap();
    let items = body
        .lines()
        .find(|l| l.starts_with("ploke_index_items{") && l.contains(&*workspace.to_string_lossy()))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse::<f64>().ok());
    assert!(items.is_some_and(|n| n >= 1.0), "{items:?}\n{body}");
    assert!(
        metric(
            body,
            "ploke_event_subscribers",
            &[("service", "llm-session")]
        )
        .is_some(),
        "{body}"
    );

    // A client following the session through the gateway is a live subscriber and an RPC in
    // flight until it leaves.
    let mut relayed = c
        .sandbox
        .gateway()
        .stream_events(StreamEventsRequest {
            session_id: c.session_id.clone(),
            after_seq: 0,
            no_follow: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(relayed.message().await.unwrap().is_some());
    let body = &scrape(addr, "/metrics").await.unwrap().body;
    let value = |name, labels: &[(&str, &str)]| metric(body, name, labels).unwrap_or(0.0);
    assert!(value("ploke_event_subscribers", &[("service", "gateway")]) >= 1.0);
    let relay = [
        ("service", "ploke.gateway.v1.Gateway"),
        ("method", "StreamEvents"),
    ];
    assert!(value("ploke_rpc_in_flight", &relay) >= 1.0, "{body}");
    drop(relayed);

    // Deleting the session is counted by why it went.
    c.sandbox
        .gateway()
        .delete_session(DeleteSessionRequest {
            session_id: c.session_id.clone(),
        })
        .await
        .unwrap();
    let body = &scrape(addr, "/metrics").await.unwrap().body;
    assert!(
        metric(
            body,
            "ploke_sessions_deleted_total",
            &[("reason", "request")]
        )
        .is_some_and(|v| v >= 1.0),
        "{body}"
    );
    c.sandbox.stop().await.unwrap();
}
