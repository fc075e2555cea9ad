//! `tools/list` and `tools/call`: the registry's tools with their schemas, typed results as
//! structured content, typed errors naming the field, results cut to the client's cap.

use ploke_proto::registry::ToolRegistry;
use rmcp::model::{CallToolRequestParams, ClientRequest, CustomRequest, ErrorCode, Tool};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use super::{Era, alice, args, deployment};

#[tokio::test]
async fn tools_list_is_the_registry_catalogue_in_both_eras() {
    let d = deployment(|_| {}).await;
    let expected: Vec<Tool> = ToolRegistry::global()
        .unwrap()
        .definitions()
        .iter()
        .map(ploke_gateway::mcp::tools::tool)
        .collect();
    for era in [Era::Modern, Era::Legacy] {
        let client = alice(&d, era).await;
        let tools = client.list_all_tools().await.unwrap();
        assert_eq!(tools, expected, "{era:?}");
        client.cancel().await.unwrap();
    }
    // What a client shows: names, titles and hints.
    let shown: Vec<Value> = expected
        .iter()
        .map(|t| json!({"name": t.name, "title": t.title, "annotations": t.annotations}))
        .collect();
    insta::assert_json_snapshot!(shown);
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn read_file_and_request_code_context_return_typed_results() {
    let d = deployment(|_| {}).await;
    for era in [Era::Modern, Era::Legacy] {
        let client = alice(&d, era).await;
        let read = client
            .call_tool(
                CallToolRequestParams::new("read_file")
                    .with_arguments(args(json!({"file": "src/lib.rs", "end_line": 2}))),
            )
            .await
            .unwrap();
        assert_eq!(read.is_error, Some(false));
        let hash = blake3::hash(ploke_e2e::LIB_RS.as_bytes())
            .to_hex()
            .to_string();
        assert_eq!(
            read.structured_content,
            Some(json!({
                "file_path": "src/lib.rs",
                "start_line": 1,
                "end_line": 2,
                "total_lines": 4,
                "content": "/// Adds two numbers.\npub fn add(a: i32, b: i32) -> i32 {\n",
                "file_hash": hash,
            }))
        );
        assert_eq!(
            read.content[0].as_text().unwrap().text,
            format!(
                "src/lib.rs lines 1-2 of 4 (blake3 {hash})\n/// Adds two numbers.\npub fn add(a: i32, b: i32) -> i32 {{\n"
            )
        );
        let context = client
            .call_tool(
                CallToolRequestParams::new("request_code_context")
                    .with_arguments(args(json!({"search_term": "add two numbers"}))),
            )
            .await
            .unwrap();
        assert_eq!(context.is_error, Some(false), "{context:?}");
        let s = context.structured_content.unwrap();
        assert_eq!(s["search_term"], "add two numbers");
        assert_eq!(s["parts"][0]["file_path"], "src/lib.rs");
        assert_eq!(s["parts"][0]["canon_path"], "crate::add");
        let text = &context.content[0].as_text().unwrap().text;
        assert!(text.contains("pub fn add(a: i32, b: i32) -> i32"), "{text}");
        client.cancel().await.unwrap();
    }
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_are_typed_errors_naming_the_field() {
    let d = deployment(|_| {}).await;
    let client = alice(&d, Era::Modern).await;
    let cases = [
        (
            json!({"file": "src/lib.rs", "start_line": 0}),
            json!({"code": "OUT_OF_RANGE", "field": "start_line", "message": "must be at least 1, got 0",
                   "retry_hint": "fix the arguments to match the tool's JSON Schema and call again"}),
        ),
        (
            json!({"path": "src/lib.rs"}),
            json!({"code": "UNKNOWN_FIELD", "field": "path", "message": "unknown field; the fields are: file, start_line, end_line",
                   "retry_hint": "fix the arguments to match the tool's JSON Schema and call again"}),
        ),
        (
            json!({"file": "../../etc/passwd"}),
            json!({"code": "OUTSIDE_WORKSPACE", "field": "file"}),
        ),
    ];
    for (arguments, expected) in cases {
        let r = client
            .call_tool(CallToolRequestParams::new("read_file").with_arguments(args(arguments)))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        let got = r.structured_content.unwrap();
        for (k, v) in expected.as_object().unwrap() {
            assert_eq!(&got[k], v, "{got}");
        }
        let text = &r.content[0].as_text().unwrap().text;
        assert!(
            text.starts_with(&format!("error {}", expected["code"].as_str().unwrap())),
            "{text}"
        );
    }
    // A tool that does not exist is a protocol error, as the specification has it.
    let unknown = client
        .call_tool(CallToolRequestParams::new("rm_rf"))
        .await
        .unwrap_err();
    let ServiceError::McpError(e) = unknown else {
        panic!("{unknown:?}")
    };
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(
        e.message.contains("no tool is named `rm_rf`"),
        "{}",
        e.message
    );
    // Params of the wrong shape name the param, as invalid params (not "method not found").
    let cases = [
        (
            json!({"name": "read_file", "arguments": "{\"file\": \"src/lib.rs\"}"}),
            "invalid params of tools/call: `arguments` must be a JSON object of the tool's arguments, not a string",
        ),
        (
            json!({"name": 7}),
            "invalid params of tools/call: `name` must be a string, not a number",
        ),
        (
            json!({"arguments": {}}),
            "invalid params of tools/call: `name` is missing: the tool to call",
        ),
    ];
    for (params, message) in cases {
        let sent = client
            .send_request(ClientRequest::CustomRequest(CustomRequest::new(
                "tools/call",
                Some(params),
            )))
            .await
            .unwrap_err();
        let ServiceError::McpError(e) = sent else {
            panic!("{sent:?}")
        };
        assert_eq!(
            (e.code, e.message.as_ref()),
            (ErrorCode::INVALID_PARAMS, message)
        );
    }
    let unknown_method = client
        .send_request(ClientRequest::CustomRequest(CustomRequest::new(
            "tools/destroy",
            None,
        )))
        .await
        .unwrap_err();
    let ServiceError::McpError(e) = unknown_method else {
        panic!("{unknown_method:?}")
    };
    assert_eq!(e.code, ErrorCode::METHOD_NOT_FOUND);
    client.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_result_over_the_clients_cap_is_cut_and_says_so() {
    let d = deployment(|c| c.gateway.mcp_max_result_tokens = 1_000).await;
    let big: String = (1..=3_000).map(|i| format!("// line {i}\n")).collect();
    std::fs::write(d.sandbox.workspace_root().join("big.rs"), &big).unwrap();
    let client = alice(&d, Era::Modern).await;
    let r = client
        .call_tool(
            CallToolRequestParams::new("read_file").with_arguments(args(json!({"file": "big.rs"}))),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    let text = &r.content[0].as_text().unwrap().text;
    let s = r.structured_content.unwrap();
    let total = text.len() + serde_json::to_string(&s).unwrap().len();
    assert!(total <= 4_000, "{total}");
    assert!(
        text.ends_with(&ploke_gateway::mcp::size::cut_note(1_000)),
        "{text}"
    );
    // Whole lines up to the cut.
    let kept = text
        .strip_suffix(&ploke_gateway::mcp::size::cut_note(1_000))
        .unwrap();
    assert!(kept.ends_with('\n') && kept.lines().count() > 50, "{kept}");
    assert_eq!(
        (s["truncated"].clone(), s["total_lines"].clone()),
        (json!(true), json!(3000))
    );
    client.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_long_tool_reports_its_progress() {
    let d = deployment(|_| {}).await;
    for i in 0..600 {
        let dir = d.sandbox.workspace_root().join(format!("gen/d{}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), format!("line {i}\n")).unwrap();
    }
    let (client, mut progress) = super::TestClient::new(Era::Modern, None);
    let client = super::connect(&d.url(), super::ALICE, client).await;
    let r = client
        .call_tool(
            CallToolRequestParams::new("search_code")
                .with_arguments(args(json!({"pattern": "no such text anywhere"}))),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let mut seen = Vec::new();
    for _ in 0..2 {
        let p = tokio::time::timeout(std::time::Duration::from_secs(10), progress.recv())
            .await
            .unwrap()
            .unwrap();
        seen.push((p.progress, p.message.unwrap_or_default()));
    }
    assert_eq!(
        seen,
        [
            (250.0, "searched 250 files".to_owned()),
            (500.0, "searched 500 files".to_owned())
        ]
    );
    client.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
}
