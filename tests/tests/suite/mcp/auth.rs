//! The MCP endpoint takes the gateway's bearer tokens: none or a wrong one is a 401 that names
//! the scheme, and a read-only principal sees and runs only tools without side effects.

use rmcp::model::CallToolRequestParams;
use serde_json::json;

use super::{ALICE, Era, RITA, TestClient, args, connect, deployment};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}"#;

#[tokio::test]
async fn requests_without_a_valid_token_get_401_with_the_bearer_scheme() {
    let d = deployment(|_| {}).await;
    let http = reqwest::Client::new();
    for token in [None, Some("wrong-token"), Some("")] {
        let mut request = http
            .post(d.url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(INITIALIZE);
        if let Some(t) = token {
            request = request.header("authorization", format!("Bearer {t}"));
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{token:?}");
        assert_eq!(
            response.headers()["www-authenticate"],
            "Bearer realm=\"ploke\""
        );
        let body = response.text().await.unwrap();
        assert!(body.contains("Authorization: Bearer"), "{body}");
    }
    // Anything but /mcp is not there.
    let other = http
        .post(d.url().replace("/mcp", "/other"))
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_read_only_token_sees_and_runs_read_only_tools_only() {
    let d = deployment(|_| {}).await;
    let rita = connect(&d.url(), RITA, TestClient::new(Era::Modern, None).0).await;
    let names: Vec<String> = rita
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "request_code_context",
            "get_file_metadata",
            "read_file",
            "list_dir",
            "search_code",
            "code_item_lookup"
        ]
    );
    let refused = rita
        .call_tool(
            CallToolRequestParams::new("create_file").with_arguments(args(
                json!({"file_path": "new.rs", "content": "fn x() {}\n"}),
            )),
        )
        .await
        .unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(
        refused.structured_content,
        Some(json!({
            "code": "PERMISSION_DENIED",
            "message": "create_file changes files; rita may run read-only tools only",
            "retry_hint": "this token may not do that; ask the team's ploke operator",
        }))
    );
    assert!(!d.sandbox.workspace_root().join("new.rs").exists());
    rita.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_session_is_only_its_principals_and_web_pages_are_refused() {
    let d = deployment(|_| {}).await;
    let http = reqwest::Client::new();
    let post = |token: &str, body: &'static str| {
        http.post(d.url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {token}"))
            .body(body)
    };
    let opened = post(ALICE, INITIALIZE).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;
    let with = |token: &str| {
        post(token, LIST)
            .header("mcp-session-id", session.as_str())
            .header("mcp-protocol-version", "2025-11-25")
    };
    let theirs = with(RITA).send().await.unwrap();
    assert_eq!(theirs.status(), 404);
    assert_eq!(
        theirs.json::<serde_json::Value>().await.unwrap(),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": "session not found"}})
    );
    assert_eq!(with(ALICE).send().await.unwrap().status(), 200);
    // Ending it: only its principal may; a DELETE refused for its protocol version leaves it
    // its principal's; ended, it is 204 and then gone.
    let delete = |token: &str, version: &str| {
        http.delete(d.url())
            .header("authorization", format!("Bearer {token}"))
            .header("mcp-session-id", session.as_str())
            .header("mcp-protocol-version", version)
    };
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(
        status(delete(RITA, "2025-11-25").send().await.unwrap()),
        404
    );
    let refused = delete(ALICE, "2026-07-28").send().await.unwrap();
    assert!(refused.status().is_client_error(), "{refused:?}");
    assert_eq!(status(with(RITA).send().await.unwrap()), 404);
    assert_eq!(status(with(ALICE).send().await.unwrap()), 200);
    assert_eq!(
        status(delete(ALICE, "2025-11-25").send().await.unwrap()),
        204
    );
    assert_eq!(
        status(delete(ALICE, "2025-11-25").send().await.unwrap()),
        404
    );
    assert_eq!(status(with(ALICE).send().await.unwrap()), 404);
    // A page elsewhere cannot use a browser to reach the endpoint.
    let page = post(ALICE, INITIALIZE)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 403);
    // A body that is no JSON-RPC message is a parse error, not a media type refused; a body
    // sent as something else than JSON still is.
    let broken = post(ALICE, r#"{"jsonrpc":"2.0","#).send().await.unwrap();
    assert_eq!(broken.status(), 400);
    assert_eq!(
        broken.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        json!(-32700)
    );
    let text = http
        .post(d.url())
        .header("content-type", "text/plain")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {ALICE}"))
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), 415);
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn an_mcp_call_is_in_the_gateways_audit_trail() {
    let lines =
        crate::suite::logs::Logs::capture(ploke_gateway::AUDIT_TARGET, tracing::Level::INFO, true);
    let d = deployment(|_| {}).await;
    for token in [ALICE, RITA] {
        let client = connect(&d.url(), token, TestClient::new(Era::Modern, None).0).await;
        let r = client
            .call_tool(
                CallToolRequestParams::new("read_file")
                    .with_arguments(args(json!({"file": "src/lib.rs"}))),
            )
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false));
        client.cancel().await.unwrap();
    }
    d.sandbox.stop().await.unwrap();
    let text = lines.text();
    let calls: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["method"] == "ExecuteTool")
        .collect();
    assert_eq!(calls.len(), 2, "{text}");
    let [alice, rita] = [&calls[0], &calls[1]];
    for (c, who) in [(alice, "alice"), (rita, "rita")] {
        assert_eq!(
            (&c["principal"], &c["tool"], &c["code"]),
            (&json!(who), &json!("read_file"), &json!("Ok"))
        );
        // The ids the call ran with: tool-executor's call id, and the session its principal's
        // edits are staged under (tagged per principal, not the shared name clients send).
        let session = c["session_id"].as_str().unwrap();
        assert!(
            session.starts_with("mcp-") && session.ends_with("-edits") && session != "mcp-edits",
            "{c}"
        );
        for id in ["call_id", "request_id"] {
            assert_eq!(c[id].as_str().map(str::len), Some(36), "a UUID: {c}");
        }
    }
    assert_ne!(alice["session_id"], rita["session_id"]);
    assert_ne!(alice["call_id"], rita["call_id"]);
}
