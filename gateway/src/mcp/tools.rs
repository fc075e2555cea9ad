//! The registry's tools as MCP tools, and typed results and errors as MCP tool results: the
//! description, input schema and output schema come from the proto through the registry (no
//! second copy); a result carries the text a session's model reads and the typed result as
//! `structuredContent`; an error is an `isError` result with the typed error, naming the field.

use std::sync::Arc;

use ploke_proto::registry::ToolRegistry;
use ploke_proto::tool_text;
use ploke_proto::tools::v1::{SideEffect, ToolDefinition, ToolError, ToolResult};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::size;

fn object(schema_json: &str) -> JsonObject {
    match serde_json::from_str::<Value>(schema_json) {
        Ok(Value::Object(o)) => o,
        _ => JsonObject::from_iter([("type".to_owned(), json!("object"))]),
    }
}

/// The MCP tool of a catalogue entry.
pub fn tool(d: &ToolDefinition) -> Tool {
    let read_only = d.side_effect() == SideEffect::ReadOnly;
    let title = d
        .name
        .split('_')
        .enumerate()
        .map(|(i, w)| {
            let mut w = w.to_owned();
            if i == 0
                && let Some(first) = w.get_mut(..1)
            {
                first.make_ascii_uppercase();
            }
            w
        })
        .collect::<Vec<_>>()
        .join(" ");
    let annotations = ToolAnnotations::with_title(title.clone())
        .read_only(read_only)
        // Edits change files only once a person approves; they overwrite what they change.
        .destructive(!read_only)
        .idempotent(read_only)
        .open_world(false);
    let mut t = Tool::new(
        d.name.clone(),
        d.description.clone(),
        object(&d.parameters_json_schema),
    )
    .with_title(title)
    .with_annotations(annotations);
    if !d.result_json_schema.is_empty() {
        t = t.with_raw_output_schema(Arc::new(object(&d.result_json_schema)));
    }
    t
}

/// Whether the tool's result says itself when it was cut (a top-level `truncated`).
fn has_truncated_flag(tool: &ploke_proto::registry::Tool) -> bool {
    serde_json::from_str::<Value>(&tool.definition().result_json_schema)
        .ok()
        .is_some_and(|s| s["properties"].get("truncated").is_some())
}

/// A tool's typed result for an MCP client, fitted into `max_tokens`.
pub fn result(r: &ToolResult, max_tokens: u32) -> CallToolResult {
    let text = tool_text::result(r);
    let registry = ToolRegistry::global().ok();
    let (structured, flag) = match registry.and_then(|reg| Some((reg, reg.result_json(r)?))) {
        Some((reg, (name, v))) => (Some(v), reg.get(name).is_some_and(has_truncated_flag)),
        None => (None, false),
    };
    let fitted = size::fit(text, structured, max_tokens, flag);
    let mut out = CallToolResult::success(vec![ContentBlock::text(fitted.text)]);
    out.structured_content = fitted.structured;
    out
}

/// A typed tool error as an `isError` result.
pub fn error(e: &ToolError) -> CallToolResult {
    let mut out = CallToolResult::error(vec![ContentBlock::text(tool_text::error(e))]);
    out.structured_content = Some(tool_text::error_json(e));
    out
}

/// The typed error a refused or failed gateway call is for the model.
pub use ploke_proto::status::tool_error as status_error;

#[cfg(test)]
mod tests {
    use ploke_proto::tools::v1::{ReadFileResult, ToolErrorCode, tool_result};
    use tonic::Status;

    use super::*;

    #[test]
    fn tools_carry_the_registry_schemas_and_hints() {
        let registry = ToolRegistry::global().unwrap();
        let tools: Vec<Tool> = registry.definitions().iter().map(tool).collect();
        assert_eq!(tools.len(), 8);
        let read = tools.iter().find(|t| t.name == "read_file").unwrap();
        let d = registry.get("read_file").unwrap().definition();
        assert_eq!(read.description.as_deref(), Some(d.description.as_str()));
        assert_eq!(
            Value::Object((*read.input_schema).clone()),
            serde_json::from_str::<Value>(&d.parameters_json_schema).unwrap()
        );
        assert_eq!(
            Value::Object((*read.output_schema.clone().unwrap()).clone()),
            serde_json::from_str::<Value>(&d.result_json_schema).unwrap()
        );
        assert_eq!(read.title.as_deref(), Some("Read file"));
        let a = read.annotations.clone().unwrap();
        assert_eq!(
            (a.read_only_hint, a.destructive_hint, a.open_world_hint),
            (Some(true), Some(false), Some(false))
        );
        let edit = tools.iter().find(|t| t.name == "apply_code_edit").unwrap();
        let a = edit.annotations.clone().unwrap();
        assert_eq!(
            (a.read_only_hint, a.destructive_hint),
            (Some(false), Some(true))
        );
    }

    #[test]
    fn results_carry_text_and_structure_and_errors_name_the_field() {
        let r = ToolResult {
            result: Some(tool_result::Result::ReadFile(ReadFileResult {
                file_path: "a.rs".into(),
                start_line: 1,
                end_line: 1,
                total_lines: 1,
                content: "fn a() {}\n".into(),
                file_hash: "h".into(),
                truncated: false,
            })),
        };
        let out = result(&r, 25_000);
        assert_eq!(out.is_error, Some(false));
        assert_eq!(
            out.structured_content,
            Some(json!({
                "file_path": "a.rs", "start_line": 1, "end_line": 1, "total_lines": 1,
                "content": "fn a() {}\n", "file_hash": "h"
            }))
        );
        let e = ToolError {
            code: ToolErrorCode::OutOfRange as i32,
            field: "start_line".into(),
            message: "must be at least 1".into(),
            retry_hint: "fix it".into(),
        };
        let out = error(&e);
        assert_eq!(out.is_error, Some(true));
        assert_eq!(
            out.structured_content,
            Some(json!({
                "code": "OUT_OF_RANGE", "field": "start_line",
                "message": "must be at least 1", "retry_hint": "fix it"
            }))
        );
        let denied = status_error(&Status::permission_denied("alice may not use w"));
        assert_eq!(denied.code(), ToolErrorCode::PermissionDenied);
    }
}
