//! Resources: the indexed files of the client's workspace (`ploke://workspace/NAME/PATH`, listed
//! a page at a time from rag-search's index) and its index status (`ploke://index_status`).
//! A file is read with the `read_file` tool, so the same path policy, workspace permissions
//! and size caps apply as to any tool call.

use futures::StreamExt as _;
use ploke_proto::common::v1::Correlation;
use ploke_proto::rag::v1::{IndexStatusRequest, ListFilesRequest};
use ploke_proto::registry::ToolRegistry;
use ploke_proto::tools::v1::{
    ExecuteToolRequest, ReadFileArgs, ToolCall, execute_tool_event, tool_call, tool_result,
};
use ploke_runtime::principal::workspace_name;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tonic::Status;

use super::{McpServer, size, uri};

/// Files per page of `resources/list`.
const PAGE: u32 = 1000;

fn status_error(s: &Status) -> ErrorData {
    match s.code() {
        tonic::Code::NotFound => ErrorData::resource_not_found(s.message().to_owned(), None),
        tonic::Code::InvalidArgument | tonic::Code::PermissionDenied => {
            ErrorData::invalid_params(s.message().to_owned(), None)
        }
        _ => ErrorData::internal_error(s.message().to_owned(), None),
    }
}

/// The MIME type of a file by its extension.
fn mime(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, e)| e) {
        Some("rs") => "text/x-rust",
        Some("md") => "text/markdown",
        Some("toml") => "application/toml",
        Some("json") => "application/json",
        Some("py") => "text/x-python",
        Some("ts" | "tsx") => "text/x-typescript",
        Some("js") => "text/javascript",
        Some("go") => "text/x-go",
        Some("yaml" | "yml") => "application/yaml",
        _ => "text/plain",
    }
}

/// The resource templates: any file of a workspace the caller may use.
pub(super) fn templates() -> ListResourceTemplatesResult {
    let template = ResourceTemplate::new(uri::WORKSPACE_TEMPLATE, "workspace file")
        .with_description("A file of a workspace you may use, by the workspace's name and the file's path relative to its root");
    ListResourceTemplatesResult::with_all_items(vec![template])
}

/// One page of the workspace's indexed files; the first page starts with the index status.
pub(super) async fn list(
    server: &McpServer,
    cursor: Option<String>,
    ctx: &RequestContext<RoleServer>,
) -> Result<ListResourcesResult, ErrorData> {
    let caller = server.caller(ctx)?;
    let requested = server.requested_workspace(ctx);
    let mut root = server
        .workspace_root(&caller, requested.as_deref())
        .await
        .map_err(|s| status_error(&s))?;
    if root.is_empty() {
        // The server's default workspace: its root names the URIs.
        root = server
            .backend
            .index_status(&caller, IndexStatusRequest::default())
            .await
            .map_err(|s| status_error(&s))?
            .workspace_root;
    }
    let page = server
        .backend
        .list_files(
            &caller,
            ListFilesRequest {
                workspace_root: root.clone(),
                page_token: cursor.clone().unwrap_or_default(),
                limit: PAGE,
            },
        )
        .await
        .map_err(|s| status_error(&s))?;
    let name = workspace_name(std::path::Path::new(&root));
    let mut resources = Vec::with_capacity(page.files.len() + 1);
    if cursor.is_none() {
        resources.push(
            Resource::new(uri::INDEX_STATUS, "index status")
                .with_description("State of this workspace's index: files, items, embeddings, progress of a running index")
                .with_mime_type("application/json"),
        );
    }
    for f in &page.files {
        resources.push(
            Resource::new(uri::file(&name, &f.path), f.path.clone()).with_mime_type(mime(&f.path)),
        );
    }
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = (!page.next_page_token.is_empty()).then_some(page.next_page_token);
    Ok(result)
}

/// Reads `uri`.
pub(super) async fn read(
    server: &McpServer,
    uri_text: &str,
    ctx: &RequestContext<RoleServer>,
) -> Result<ReadResourceResponse, ErrorData> {
    let caller = server.caller(ctx)?;
    let max_chars = server.options.max_result_tokens as usize * size::CHARS_PER_TOKEN;
    if uri_text == uri::INDEX_STATUS {
        let requested = server.requested_workspace(ctx);
        let root = server
            .workspace_root(&caller, requested.as_deref())
            .await
            .map_err(|s| status_error(&s))?;
        let status = server
            .backend
            .index_status(
                &caller,
                IndexStatusRequest {
                    workspace_root: root,
                },
            )
            .await
            .map_err(|s| status_error(&s))?;
        let json = ToolRegistry::global()
            .ok()
            .and_then(|r| r.message_json("ploke.rag.v1.IndexStatusResponse", &status))
            .unwrap_or_default();
        let text = serde_json::to_string_pretty(&json).unwrap_or_default();
        return Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, uri_text).with_mime_type("application/json"),
        ])
        .into());
    }
    let Some((name, path)) = uri::parse_file(uri_text) else {
        return Err(ErrorData::resource_not_found(
            format!(
                "`{uri_text}` is not a ploke resource: {} or {}",
                uri::INDEX_STATUS,
                uri::WORKSPACE_TEMPLATE
            ),
            None,
        ));
    };
    let root = server
        .workspace_root(&caller, Some(&name))
        .await
        .map_err(|s| status_error(&s))?;
    let request = ExecuteToolRequest {
        correlation: Some(Correlation {
            session_id: super::MCP_SESSION.to_owned(),
            request_id: uuid::Uuid::now_v7().to_string(),
            call_id: uuid::Uuid::now_v7().to_string(),
            ..Correlation::default()
        }),
        workspace_root: root,
        call: Some(ToolCall {
            args: Some(tool_call::Args::ReadFile(ReadFileArgs {
                file: path.clone(),
                start_line: None,
                end_line: None,
            })),
        }),
        user_message: String::new(),
        timeout_ms: 0,
    };
    let mut events = server
        .backend
        .execute_tool(&caller, request)
        .await
        .map_err(|s| status_error(&s))?;
    while let Some(event) = events.next().await {
        match event.map_err(|s| status_error(&s))?.event {
            Some(execute_tool_event::Event::Result(r)) => {
                let Some(tool_result::Result::ReadFile(f)) = r.result else {
                    return Err(ErrorData::internal_error(
                        "read_file returned another result",
                        None,
                    ));
                };
                let mut text = f.content;
                if f.truncated {
                    text.push_str(&format!(
                        "\n[cut at line {} of {}: the file is over the server's read cap; read the rest with the read_file tool]\n",
                        f.end_line, f.total_lines
                    ));
                }
                let text = size::cut_text(
                    text,
                    max_chars,
                    &size::cut_note(server.options.max_result_tokens),
                );
                return Ok(ReadResourceResult::new(vec![
                    ResourceContents::text(text, uri_text).with_mime_type(mime(&path)),
                ])
                .into());
            }
            Some(execute_tool_event::Event::Error(e)) => {
                let message = ploke_proto::tool_text::error(&e);
                return Err(match e.code() {
                    ploke_proto::tools::v1::ToolErrorCode::NotFound => {
                        ErrorData::resource_not_found(message, None)
                    }
                    _ => ErrorData::invalid_params(message, None),
                });
            }
            Some(_) | None => {}
        }
    }
    Err(ErrorData::internal_error(
        "read_file ended without a result",
        None,
    ))
}
