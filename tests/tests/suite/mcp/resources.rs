//! Resources: the index status and the indexed files of the client's workspace, read through
//! the same path policy as the tools; a workspace chosen with `?workspace=`.

use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use super::{ALICE, Era, TestClient, alice, args, connect, deployment};

fn text(c: &ResourceContents) -> (&str, Option<&str>) {
    match c {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => (text.as_str(), mime_type.as_deref()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn indexed_files_and_the_index_status_are_resources() {
    let d = deployment(|_| {}).await;
    let name = ploke_runtime::principal::workspace_name(d.sandbox.workspace_root());
    let client = alice(&d, Era::Modern).await;
    let listed = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    let file_uri = format!("ploke://workspace/{name}/src/lib.rs");
    assert_eq!(uris, ["ploke://index_status", file_uri.as_str()]);
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(
        templates[0].uri_template,
        "ploke://workspace/{workspace}/{+path}"
    );

    let file = client
        .read_resource(ReadResourceRequestParams::new(file_uri.clone()))
        .await
        .unwrap();
    assert_eq!(
        text(&file.contents[0]),
        (ploke_e2e::LIB_RS, Some("text/x-rust"))
    );
    let status = client
        .read_resource(ReadResourceRequestParams::new("ploke://index_status"))
        .await
        .unwrap();
    let (status, mime) = text(&status.contents[0]);
    assert_eq!(mime, Some("application/json"));
    let status: Value = serde_json::from_str(status).unwrap();
    assert_eq!(
        (&status["state"], &status["files"], &status["items"]),
        (&json!("ready"), &json!(1), &json!(1))
    );
    assert_eq!(
        status["workspace_root"],
        d.sandbox.workspace_root().display().to_string()
    );

    // The path policy holds for resources as for tools; unknown URIs are not found.
    for uri in [
        format!("ploke://workspace/{name}/..%2F..%2Fetc%2Fpasswd"),
        format!("ploke://workspace/{name}/missing.rs"),
        "ploke://workspace/elsewhere/src/lib.rs".to_owned(),
        "file:///etc/passwd".to_owned(),
    ] {
        let e = client
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await
            .unwrap_err();
        assert!(matches!(e, ServiceError::McpError(_)), "{uri}: {e:?}");
    }
    client.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn the_url_names_the_workspace() {
    let d = deployment(|_| {}).await;
    let name = ploke_runtime::principal::workspace_name(d.sandbox.workspace_root());
    let named = format!("{}?workspace={name}", d.url());
    let client = connect(&named, ALICE, TestClient::new(Era::Modern, None).0).await;
    let r = client
        .call_tool(
            CallToolRequestParams::new("read_file")
                .with_arguments(args(json!({"file": "src/lib.rs"}))),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    client.cancel().await.unwrap();
    let wrong = format!("{}?workspace=nope", d.url());
    let client = connect(&wrong, ALICE, TestClient::new(Era::Modern, None).0).await;
    let r = client
        .call_tool(
            CallToolRequestParams::new("read_file")
                .with_arguments(args(json!({"file": "src/lib.rs"}))),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        r.structured_content.unwrap(),
        json!({
            "code": "NOT_FOUND",
            "message": format!("no workspace `nope` among yours ({name}); name one in the MCP URL's ?workspace="),
        })
    );
    client.cancel().await.unwrap();
    d.sandbox.stop().await.unwrap();
}
