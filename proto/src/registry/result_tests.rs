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
    // Every result schema is an object schema naming the result message's fields.
    for tool in registry().tools() {
        let schema: serde_json::Value =
            serde_json::from_str(&tool.definition().result_json_schema).unwrap();
        assert_eq!(schema["type"], "object", "{}", tool.name());
    }
}
