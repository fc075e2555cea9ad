//! The provider edge: retries (429 with Retry-After, 500 ×3, a stream cut off), the 404
//! "no tool support" fallback, the API key kept out of events, idempotent SendMessage.

use ploke_e2e::fake_provider::Reply;
use ploke_proto::session::v1::*;

use super::{KEY_ENV, assert_completed, chat, failure, notices};

#[tokio::test]
async fn rate_limited_then_success_honours_retry_after() {
    let c = chat().await;
    c.fake
        .push([Reply::rate_limited(1), Reply::text(&["fine"])]);
    let events = c.turn("hi").await;
    assert!(matches!(
        events.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    assert_eq!(
        notices(&events),
        vec![format!(
            "provider {} answered HTTP 429: Rate limit reached; retrying in 1.0 s (try 2 of 3)",
            c.fake.url()
        )]
    );
    assert_eq!(c.requests().len(), 2);
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn three_server_errors_fail_the_turn() {
    let c = chat().await;
    c.fake.push([
        Reply::status(500, "boom"),
        Reply::status(502, "bad gateway"),
        Reply::status(500, "boom"),
    ]);
    let events = c.turn("hi").await;
    let f = failure(&events);
    assert_eq!(
        (f.reason(), f.message.clone()),
        (
            TurnFailureReason::Provider,
            format!("provider {} answered HTTP 500: boom", c.fake.url())
        )
    );
    assert_eq!(notices(&events).len(), 2);
    assert_eq!(c.requests().len(), 3);
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn no_tool_support_is_retried_once_without_tools() {
    let c = chat().await;
    c.fake.push([
        Reply::status(
            404,
            r#"{"error":{"message":"No endpoints found that support tool use.","code":404}}"#,
        ),
        Reply::text(&["plain answer"]),
    ]);
    let events = c.turn("hi").await;
    assert!(matches!(
        events.last().unwrap().event,
        Some(session_event::Event::TurnCompleted(_))
    ));
    assert!(
        notices(&events)[0].starts_with("model fake-model does not accept tools"),
        "{:?}",
        notices(&events)
    );
    let requests = c.requests();
    assert!(requests[0].body.get("tools").is_some());
    assert!(requests[1].body.get("tools").is_none());
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_stream_cut_off_midway_is_retried() {
    let c = chat().await;
    c.fake.push([
        Reply::text(&["Hel", "lo"]).cut_after(2),
        Reply::text(&["Hello"]),
    ]);
    let events = c.turn("hi").await;
    assert_completed(&events);
    assert_eq!(notices(&events).len(), 1, "{:?}", notices(&events));
    let Some(session_event::Event::AssistantMessage(m)) = &events[events.len() - 2].event else {
        panic!()
    };
    assert_eq!(m.text, "Hello");
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn the_api_key_is_sent_but_never_recorded() {
    let c = chat().await;
    let key = std::env::var(KEY_ENV).unwrap();
    // A provider that echoes the key it was sent (some do, in their 401's message).
    let echo = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {key}","type":"invalid_request_error"}}}}"#
    );
    c.fake
        .push([Reply::status(401, &echo), Reply::text(&["unused"])]);
    let events = c.turn("hi").await;
    assert_eq!(
        c.requests()[0].authorization.as_deref(),
        Some(format!("Bearer {key}").as_str())
    );
    let f = failure(&events);
    assert_eq!(
        (f.reason(), f.message.clone()),
        (
            TurnFailureReason::Provider,
            format!(
                "provider {} answered HTTP 401: Incorrect API key provided: [redacted]",
                c.fake.url()
            )
        )
    );
    let all = format!("{:?}", c.all_events(0).await);
    assert!(!all.contains(&key), "the key leaked into events");
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn send_message_is_idempotent_on_client_request_id() {
    let c = chat().await;
    c.fake.push([Reply::text(&["once"])]);
    let send = |id: &str| SendMessageRequest {
        session_id: c.session_id.clone(),
        content: "hi".into(),
        client_request_id: id.into(),
    };
    let first = c
        .client()
        .send_message(send("req-1"))
        .await
        .unwrap()
        .into_inner();
    let events = c.until_turn_end(0).await;
    let again = c
        .client()
        .send_message(send("req-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        again,
        SendMessageResponse {
            duplicate: true,
            ..first.clone()
        }
    );
    assert_eq!(
        c.all_events(0).await.len(),
        events.len(),
        "nothing new was started"
    );
    assert_eq!(c.requests().len(), 1);
    let e = c
        .client()
        .send_message(SendMessageRequest {
            session_id: "nope".into(),
            content: "x".into(),
            client_request_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    let e = c
        .client()
        .send_message(SendMessageRequest {
            content: " ".into(),
            ..send("x")
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn openrouter_preferences_and_extra_headers_are_sent() {
    use ploke_runtime::config::ProviderPreferences;
    let c = super::chat_with(|c| {
        let p = c.providers.get_mut("fake").unwrap();
        p.preferences = Some(ProviderPreferences {
            order: vec!["anthropic".into(), "openai".into()],
            allow_fallbacks: Some(false),
            require_parameters: Some(true),
            ..Default::default()
        });
        p.headers
            .insert("HTTP-Referer".into(), "https://github.com/ploke".into());
        p.headers.insert("X-Title".into(), "ploke".into());
    })
    .await;
    c.fake.push([Reply::text(&["ok"])]);
    c.turn("hi").await;
    let r = &c.requests()[0];
    assert_eq!(
        r.body["provider"],
        serde_json::json!({"order": ["anthropic", "openai"], "allow_fallbacks": false, "require_parameters": true})
    );
    assert_eq!(r.body["model"], "fake-model");
    assert_eq!(r.body["tool_choice"], "auto");
    assert!(
        r.headers
            .contains(&("x-title".to_owned(), "ploke".to_owned())),
        "{:?}",
        r.headers
    );
    assert!(r.headers.contains(&(
        "http-referer".to_owned(),
        "https://github.com/ploke".to_owned()
    )));
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_local_provider_without_a_key_sends_no_authorization() {
    // Ollama, vLLM and llama.cpp's server on localhost take no key.
    let c = super::chat_with(|c| {
        let p = c.providers.get_mut("fake").unwrap();
        p.api_key_env = None;
    })
    .await;
    c.fake.push([Reply::text(&["ok"])]);
    c.turn("hi").await;
    assert_eq!(c.requests()[0].authorization, None);
    assert!(c.requests()[0].body.get("provider").is_none());
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_missing_key_is_refused_before_the_turn_starts() {
    let c = super::chat_with(|c| {
        let p = c.providers.get_mut("fake").unwrap();
        p.api_key_env = Some("PLOKE_TEST_KEY_THAT_IS_NOT_SET".into());
    })
    .await;
    let e = c
        .client()
        .send_message(SendMessageRequest {
            session_id: c.session_id.clone(),
            content: "hi".into(),
            client_request_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        e.message(),
        "provider `fake`: environment variable PLOKE_TEST_KEY_THAT_IS_NOT_SET (the provider's api_key_env) is not set"
    );
    assert!(c.requests().is_empty());
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn list_models_reports_the_configured_providers_and_why_one_cannot_be_used() {
    let c = super::chat_with(|c| {
        let mut offline = c.providers["fake"].clone();
        offline.api_key_env = Some("PLOKE_TEST_KEY_THAT_IS_NOT_SET".into());
        offline.default_model = None;
        offline.models = vec![ploke_runtime::config::ModelConfig {
            id: "big".into(),
            context_window: None,
            supports_tools: Some(false),
        }];
        c.providers.insert("offline".into(), offline);
        c.session.default_provider = Some("fake".into());
    })
    .await;
    let expected = ListModelsResponse {
        providers: vec![
            ProviderInfo {
                name: "fake".into(),
                default_model: ploke_e2e::fake_provider::MODEL.into(),
                models: vec![ModelInfo {
                    id: ploke_e2e::fake_provider::MODEL.into(),
                    context_window: Some(16_000),
                    supports_tools: Some(true),
                }],
                unusable_reason: String::new(),
            },
            ProviderInfo {
                name: "offline".into(),
                default_model: String::new(),
                models: vec![ModelInfo {
                    id: "big".into(),
                    context_window: None,
                    supports_tools: Some(false),
                }],
                unusable_reason: "environment variable PLOKE_TEST_KEY_THAT_IS_NOT_SET (the provider's api_key_env) is not set".into(),
            },
        ],
        default_provider: "fake".into(),
    };
    let direct = c.client().list_models(ListModelsRequest {}).await.unwrap();
    assert_eq!(direct.into_inner(), expected);
    // The gateway forwards it as is, to any principal (no key, URL or header is in it).
    let through = c
        .sandbox
        .gateway()
        .list_models(ListModelsRequest {})
        .await
        .unwrap();
    assert_eq!(through.into_inner(), expected);
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn chunks_with_nulls_as_proxies_send_them_complete_the_turn() {
    let c = chat().await;
    c.fake.push([Reply::events(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel","tool_calls":null},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":null,"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}],"usage":null}"#,
        r#"{"choices":null,"usage":{"prompt_tokens":12.0,"completion_tokens":2,"total_tokens":null}}"#,
        "[DONE]",
    ])]);
    let events = c.turn("hi").await;
    let Some(session_event::Event::TurnCompleted(done)) = &events.last().unwrap().event else {
        panic!("{events:?}");
    };
    let usage = done.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (12, 2));
    let text: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            Some(session_event::Event::AssistantMessage(m)) => Some(m.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, vec!["Hello"]);
    c.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn an_error_inside_the_stream_is_not_taken_for_the_whole_reply() {
    let c = chat().await;
    let role = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"The ans"},"finish_reason":null}]}"#;
    c.fake.push([
        // OpenRouter: the choice finishes with "error" and says why; worth another try.
        Reply::events(&[
            role,
            r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error","error":{"code":502,"message":"upstream went away"}}]}"#,
            "[DONE]",
        ]),
        // OpenAI: an `error` object instead of a chunk; a 400 is not worth another.
        Reply::events(&[
            role,
            r#"{"error":{"message":"maximum context length exceeded","type":"invalid_request_error","code":400}}"#,
        ]),
    ]);
    let events = c.turn("hi").await;
    let notices = notices(&events);
    let retry = format!(
        "provider {} reported an error in the middle of its reply: upstream went away (code 502); retrying in ",
        c.fake.url()
    );
    assert!(
        notices.len() == 1
            && notices[0].starts_with(&retry)
            && notices[0].ends_with("(try 2 of 3)"),
        "{notices:?}"
    );
    let f = failure(&events);
    assert_eq!(
        (f.reason(), f.message.clone()),
        (
            TurnFailureReason::Provider,
            format!(
                "provider {} reported an error in the middle of its reply: maximum context length exceeded (code 400)",
                c.fake.url()
            )
        )
    );
    assert_eq!(c.requests().len(), 2);
    c.sandbox.stop().await.unwrap();
}
