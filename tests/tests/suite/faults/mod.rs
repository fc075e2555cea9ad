//! The fault suite: every way the hardening issue found to escape the workspace, wedge a
//! service or lose a clear error, reproduced against the real services, so none comes back.

mod escapes;
mod special_files;

use ploke_e2e::Sandbox;
use ploke_proto::rag::v1::{SearchRequest, Strategy};
use ploke_proto::tools::v1::{
    ExecuteToolRequest, ToolError, ToolResult, execute_tool_event, tool_call,
};

/// A file outside every workspace whose text must never come back from any service.
pub(super) const SECRET: &str = "pub fn exfiltrated_secret() -> &'static str { \"s3cr3t\" }\n";

/// Canonical paths BM25 finds for `query`.
pub(super) async fn search(sandbox: &Sandbox, query: &str) -> Vec<String> {
    sandbox
        .rag()
        .search(SearchRequest {
            query: query.into(),
            strategy: Strategy::Bm25 as i32,
            top_k: 20,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .hits
        .into_iter()
        .map(|h| {
            let part = h.part.unwrap();
            format!("{}:{}", part.file_path, part.canon_path)
        })
        .collect()
}

/// Runs one tool call directly on tool-executor; its result or its typed error.
pub(super) async fn tool(
    sandbox: &Sandbox,
    args: tool_call::Args,
) -> Result<ToolResult, ToolError> {
    let mut stream = sandbox
        .tools()
        .execute_tool(ExecuteToolRequest {
            timeout_ms: 10_000,
            ..ploke_e2e::tool_request("faults", &next_call_id(), args)
        })
        .await
        .unwrap()
        .into_inner();
    while let Some(event) = stream.message().await.unwrap() {
        match event.event {
            Some(execute_tool_event::Event::Result(r)) => return Ok(r),
            Some(execute_tool_event::Event::Error(e)) => return Err(e),
            _ => {}
        }
    }
    panic!("the stream ended without a result")
}

fn next_call_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("call-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}
