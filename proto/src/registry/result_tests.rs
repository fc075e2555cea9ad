//! Results: the JSON Schema of every tool's result (snapshots) and results rendered as JSON in
//! that shape.

use super::*;

fn registry() -> &'static ToolRegistry {
    ToolRegistry::global().unwrap()
}

#[test]
fn result_schemas_snapshot() {
    for tool in registry().tools() {
        let schema: serde_json::Value =
            serde_json::from_str(&tool.definition().result_json_schema).unwrap();
        insta::assert_json_snapshot!(format!("result_schema_{}", tool.name()), schema);
    }
}

#[test]
fn results_render_as_json_in_the_shape_of_their_schema() {
    use crate::common::v1::ItemKind;
    use crate::rag::v1::CodeItem;
    use crate::tools::v1::{CodeItemLookupResult, ReadFileResult, tool_result};
    let read = ToolResult {
        result: Some(tool_result::Result::ReadFile(ReadFileResult {
            file_path: "src/lib.rs".into(),
            start_line: 1,
            end_line: 2,
            total_lines: 2,
            content: "fn a() {}\n".into(),
            file_hash: "ab".into(),
            truncated: false,
        })),
    };
    let (name, json) = registry().result_json(&read).unwrap();
    assert_eq!(name, "read_file");
    assert_eq!(
        json,
        serde_json::json!({
            "file_path": "src/lib.rs",
            "start_line": 1,
            "end_line": 2,
            "total_lines": 2,
            "content": "fn a() {}\n",
            "file_hash": "ab"
        })
    );
    let lookup = ToolResult {
        result: Some(tool_result::Result::CodeItemLookup(CodeItemLookupResult {
            found: true,
            items: vec![CodeItem {
                canon_path: "crate::a".into(),
                name: "a".into(),
                kind: ItemKind::Function as i32,
                ..Default::default()
            }],
        })),
    };
    let (name, json) = registry().result_json(&lookup).unwrap();
    assert_eq!(
        (name, json),
        (
            "code_item_lookup",
            serde_json::json!({
                "found": true,
                "items": [{"canon_path": "crate::a", "name": "a", "kind": "function"}]
            })
        )
    );
    assert_eq!(registry().result_json(&ToolResult { result: None }), None);
    // Nothing found is said, not an empty object; a missing file likewise.
    let nothing = ToolResult {
        result: Some(tool_result::Result::CodeItemLookup(CodeItemLookupResult {
            found: false,
            items: vec![],
        })),
    };
    assert_eq!(
        registry().result_json(&nothing),
        Some(("code_item_lookup", serde_json::json!({"found": false})))
    );
    assert_eq!(
        registry().model_json(&nothing).as_deref(),
        Some(r#"{"found":false}"#)
    );
    let missing = ToolResult {
        result: Some(tool_result::Result::GetFileMetadata(
            crate::tools::v1::GetFileMetadataResult {
                file_path: "src/gone.rs".into(),
                ..Default::default()
            },
        )),
    };
    assert_eq!(
        registry().result_json(&missing).map(|(_, json)| json),
        Some(serde_json::json!({"file_path": "src/gone.rs", "exists": false}))
    );
    // Every result schema is an object schema naming the result message's fields.
    for tool in registry().tools() {
        let schema: serde_json::Value =
            serde_json::from_str(&tool.definition().result_json_schema).unwrap();
        assert_eq!(schema["type"], "object", "{}", tool.name());
    }
}

/// What a session's model reads for each tool (`[session] tool_results = "json"`): the typed
/// result without `(model_omits)` fields, times as RFC 3339, one line.
#[test]
fn model_json_of_every_tool() {
    use crate::common::v1::{CodeSpan, ItemKind};
    use crate::rag::v1::CodeItem;
    use crate::tools::v1::*;
    let results = [
        tool_result::Result::RequestCodeContext(RequestCodeContextResult {
            search_term: "load settings".into(),
            parts: vec![ContextSnippet {
                file_path: "src/config.rs".into(),
                canon_path: "crate::config::Config::load".into(),
                line_start: 3,
                line_end: 5,
                snippet: "<code=\"/w/src/config.rs\" #20:61>\npub fn load() -> Self {\n    Config\n}\n</code>\n".into(),
                name: "load".into(),
                kind: ItemKind::Method as i32,
                crate_name: "demo".into(),
            }],
            total_tokens: 31,
            token_budget: 4000,
            truncated: false,
            index_note: String::new(),
        }),
        tool_result::Result::ReadFile(ReadFileResult {
            file_path: "src/lib.rs".into(),
            start_line: 1,
            end_line: 1,
            total_lines: 1,
            content: "pub mod config;\n".into(),
            file_hash: "af1349b9f5f9a1a6a0404dea36dcc949".into(),
            truncated: false,
        }),
        tool_result::Result::GetFileMetadata(GetFileMetadataResult {
            file_path: "src/lib.rs".into(),
            exists: true,
            size_bytes: 16,
            line_count: 1,
            file_hash: "af1349b9f5f9a1a6a0404dea36dcc949".into(),
            modified_at: Some(prost_types::Timestamp {
                seconds: 1_795_600_000,
                nanos: 0,
            }),
            language: "rust".into(),
            indexed_items: 1,
            is_dir: false,
        }),
        tool_result::Result::CodeItemLookup(CodeItemLookupResult {
            found: true,
            items: vec![CodeItem {
                canon_path: "crate::config::Config".into(),
                name: "Config".into(),
                kind: ItemKind::Struct as i32,
                language: "rust".into(),
                span: Some(CodeSpan {
                    path: "src/config.rs".into(),
                    byte_start: 0,
                    byte_end: 18,
                    line_start: 1,
                    line_end: 1,
                }),
                signature: "pub struct Config".into(),
                doc: String::new(),
                file_hash: "0f".into(),
            }],
        }),
    ];
    for result in results {
        let r = ToolResult {
            result: Some(result),
        };
        let (name, _) = registry().result_json(&r).unwrap();
        let text = registry().model_json(&r).unwrap();
        assert!(!text.contains('\n'), "{text}");
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        insta::assert_json_snapshot!(format!("model_json_{name}"), value);
    }
}
