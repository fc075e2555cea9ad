use super::*;
use crate::common::v1::ItemKind;
use crate::tools::v1::{
    ApplyCodeEditArgs, CodeEdit, CodeItemLookupArgs, CreateFileArgs, OnExists, ReadFileArgs,
    RequestCodeContextArgs, SearchReplaceEdit, code_edit, code_item_lookup_args, tool_call::Args,
};

fn registry() -> &'static ToolRegistry {
    ToolRegistry::global().unwrap()
}

fn err(name: &str, args: &str) -> ArgError {
    registry().parse_call(name, args).unwrap_err()
}

#[test]
fn registry_has_the_eight_tools_of_the_design() {
    let names: Vec<&str> = registry().tools().iter().map(Tool::name).collect();
    assert_eq!(
        names,
        vec![
            "request_code_context",
            "get_file_metadata",
            "apply_code_edit",
            "read_file",
            "list_dir",
            "search_code",
            "code_item_lookup",
            "create_file",
        ]
    );
}

#[test]
fn every_tool_has_description_side_effect_and_timeout() {
    for tool in registry().tools() {
        let d = tool.definition();
        assert!(d.description.len() > 40, "{} description too short", d.name);
        assert_ne!(d.side_effect(), SideEffect::Unspecified, "{}", d.name);
        assert!(d.default_timeout_ms >= 1000, "{}", d.name);
    }
    assert_eq!(
        registry().get("apply_code_edit").unwrap().side_effect(),
        SideEffect::Writes
    );
    assert_eq!(
        registry()
            .get("read_file")
            .unwrap()
            .definition()
            .default_timeout_ms,
        30_000
    );
}

#[test]
fn every_argument_field_is_described_and_has_a_presence_rule() {
    // Each field is optional (proto3 `optional`), part of a oneof, declared required, or a
    // list (absent = empty, which its description says what it means): no silent zero
    // defaults for a field the model forgot.
    fn check(registry: &ToolRegistry, m: &MessageDescriptor) {
        for f in m.fields() {
            let comment = schema::comment_of(f.parent_file(), f.path());
            assert!(!comment.is_empty(), "{} has no comment", f.full_name());
            let rules = schema::rules_of(registry, &f);
            let has_presence = f.containing_oneof().is_some() || rules.required || f.is_list();
            assert!(
                has_presence,
                "{} neither optional nor required",
                f.full_name()
            );
            if let prost_reflect::Kind::Message(inner) = f.kind() {
                check(registry, &inner);
            }
        }
    }
    for tool in registry().tools() {
        check(registry(), tool.args_descriptor());
    }
}

#[test]
fn schemas_snapshot() {
    for tool in registry().tools() {
        let schema: serde_json::Value =
            serde_json::from_str(&tool.definition().parameters_json_schema).unwrap();
        insta::assert_json_snapshot!(format!("schema_{}", tool.name()), schema);
    }
}

#[test]
fn descriptions_snapshot() {
    let descriptions: Vec<(String, String)> = registry()
        .tools()
        .iter()
        .map(|t| (t.name().to_owned(), t.definition().description.clone()))
        .collect();
    insta::assert_debug_snapshot!(descriptions);
}

#[test]
fn parses_full_arguments_into_typed_call() {
    let call = registry()
        .parse_call(
            "read_file",
            r#"{"file": "src/lib.rs", "start_line": 3, "end_line": 10}"#,
        )
        .unwrap();
    assert_eq!(
        call,
        ToolCall {
            args: Some(Args::ReadFile(ReadFileArgs {
                file: "src/lib.rs".into(),
                start_line: Some(3),
                end_line: Some(10),
            }))
        }
    );
}

#[test]
fn empty_arguments_mean_an_empty_object() {
    let call = registry().parse_call("request_code_context", "").unwrap();
    assert_eq!(
        call,
        ToolCall {
            args: Some(Args::RequestCodeContext(RequestCodeContextArgs {
                search_term: None,
                token_budget: None,
                languages: vec![],
            }))
        }
    );
}

#[test]
fn null_is_absent_for_optional_fields() {
    let call = registry()
        .parse_call(
            "request_code_context",
            r#"{"search_term": null, "token_budget": 500, "languages": ["python", "go"]}"#,
        )
        .unwrap();
    assert_eq!(
        call,
        ToolCall {
            args: Some(Args::RequestCodeContext(RequestCodeContextArgs {
                search_term: None,
                token_budget: Some(500),
                languages: vec!["python".into(), "go".into()],
            }))
        }
    );
}

#[test]
fn nested_oneof_and_enum_arguments() {
    let call = registry()
        .parse_call(
            "apply_code_edit",
            r#"{"edits": [{"search_replace": {"file_path": "a.rs", "search": "x", "replace": ""}}]}"#,
        )
        .unwrap();
    assert_eq!(
        call,
        ToolCall {
            args: Some(Args::ApplyCodeEdit(ApplyCodeEditArgs {
                edits: vec![CodeEdit {
                    edit: Some(code_edit::Edit::SearchReplace(SearchReplaceEdit {
                        file_path: "a.rs".into(),
                        search: "x".into(),
                        replace: String::new(),
                    }))
                }]
            }))
        }
    );
    let call = registry()
        .parse_call("code_item_lookup", r#"{"name": "load", "kind": "method"}"#)
        .unwrap();
    assert_eq!(
        call,
        ToolCall {
            args: Some(Args::CodeItemLookup(CodeItemLookupArgs {
                target: Some(code_item_lookup_args::Target::Name("load".into())),
                kind: Some(ItemKind::Method as i32),
            }))
        }
    );
}

#[test]
fn enum_accepts_full_proto_name_too() {
    let call = registry()
        .parse_call(
            "create_file",
            r#"{"file_path": "n.rs", "content": "", "on_exists": "ON_EXISTS_OVERWRITE"}"#,
        )
        .unwrap();
    assert_eq!(
        call,
        ToolCall {
            args: Some(Args::CreateFile(CreateFileArgs {
                file_path: "n.rs".into(),
                content: String::new(),
                on_exists: Some(OnExists::Overwrite as i32),
            }))
        }
    );
}

#[test]
fn round_trip_render_then_parse_is_identity() {
    // One valid call of each tool (the mutation test starts from the same ones).
    let calls = super::fuzz::SEEDS;
    for (name, args) in calls {
        let call = registry().parse_call(name, args).unwrap();
        let (rendered_name, json) = registry().render_call(&call).unwrap();
        assert_eq!(rendered_name, name);
        let again = registry().parse_call(name, &json).unwrap();
        assert_eq!(again, call, "{name}: {json}");
        let original: serde_json::Value = serde_json::from_str(args).unwrap();
        let rendered: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(rendered, original, "{name}");
    }
}

#[test]
fn error_bad_json() {
    let e = err("read_file", r#"{"file": "a.rs""#);
    assert_eq!(e.kind, ArgErrorKind::BadJson);
    assert_eq!(e.field, "");
    assert!(e.message.starts_with("arguments are not valid JSON"), "{e}");
    let e = err("read_file", r#"["a.rs"]"#);
    assert_eq!(
        e,
        ArgError {
            kind: ArgErrorKind::BadJson,
            field: String::new(),
            message: "arguments must be a JSON object, got an array".into(),
        }
    );
}

#[test]
fn error_unknown_tool() {
    let e = err("rm_rf", "{}");
    assert_eq!(e.kind, ArgErrorKind::UnknownTool);
    assert_eq!(
        e.message,
        "no tool is named `rm_rf`; the tools are: request_code_context, get_file_metadata, \
         apply_code_edit, read_file, list_dir, search_code, code_item_lookup, create_file"
    );
}

#[test]
fn error_unknown_field() {
    let e = err("read_file", r#"{"file": "a.rs", "lines": "1-3"}"#);
    assert_eq!(
        e,
        ArgError {
            kind: ArgErrorKind::UnknownField,
            field: "lines".into(),
            message: "unknown field; the fields are: file, start_line, end_line".into(),
        }
    );
    let e = err(
        "apply_code_edit",
        r#"{"edits": [{"search_replace": {"file_path": "a", "search": "x", "replace": "y", "all": true}}]}"#,
    );
    assert_eq!(e.kind, ArgErrorKind::UnknownField);
    assert_eq!(e.field, "edits[0].search_replace.all");
}

#[test]
fn error_wrong_type() {
    let e = err("read_file", r#"{"file": "a.rs", "start_line": "3"}"#);
    assert_eq!(
        e,
        ArgError {
            kind: ArgErrorKind::WrongType,
            field: "start_line".into(),
            message: "expected an integer, got a string".into(),
        }
    );
    let e = err("read_file", r#"{"file": "a.rs", "start_line": 2.5}"#);
    assert_eq!(e.kind, ArgErrorKind::WrongType);
    let e = err("list_dir", r#"{"include_hidden": "yes"}"#);
    assert_eq!(e.field, "include_hidden");
    assert_eq!(e.kind, ArgErrorKind::WrongType);
    let e = err("apply_code_edit", r#"{"edits": {"replace_item": {}}}"#);
    assert_eq!(
        (e.kind, e.field.as_str()),
        (ArgErrorKind::WrongType, "edits")
    );
}

#[test]
fn error_missing_required() {
    let e = err("get_file_metadata", "{}");
    assert_eq!(
        e,
        ArgError {
            kind: ArgErrorKind::MissingField,
            field: "file_path".into(),
            message: "required field is missing".into(),
        }
    );
    let e = err(
        "apply_code_edit",
        r#"{"edits": [{"replace_item": {"canon_path": "crate::f"}}]}"#,
    );
    assert_eq!(
        (e.kind, e.field.as_str()),
        (ArgErrorKind::MissingField, "edits[0].replace_item.new_code")
    );
    let e = err("code_item_lookup", "{}");
    assert_eq!(
        e,
        ArgError {
            kind: ArgErrorKind::MissingField,
            field: "canon_path|name".into(),
            message: "give exactly one of: canon_path, name".into(),
        }
    );
}

#[test]
fn error_out_of_range() {
    let e = err("request_code_context", r#"{"token_budget": 10}"#);
    assert_eq!(
        e,
        ArgError {
            kind: ArgErrorKind::OutOfRange,
            field: "token_budget".into(),
            message: "must be at least 64, got 10".into(),
        }
    );
    let e = err("read_file", r#"{"file": "a.rs", "start_line": -1}"#);
    assert_eq!(
        e,
        ArgError {
            kind: ArgErrorKind::OutOfRange,
            field: "start_line".into(),
            message: "-1 does not fit in a non-negative 32-bit integer".into(),
        }
    );
    let e = err("get_file_metadata", r#"{"file_path": ""}"#);
    assert_eq!(e.message, "must have at least 1 characters, got 0");
    let e = err("apply_code_edit", r#"{"edits": []}"#);
    assert_eq!(
        (e.kind, e.field.as_str(), e.message.as_str()),
        (
            ArgErrorKind::OutOfRange,
            "edits",
            "must have at least 1 items, got 0"
        )
    );
    let e = err(
        "create_file",
        r#"{"file_path": "a", "content": "", "on_exists": "append"}"#,
    );
    assert_eq!(
        (e.kind, e.message.as_str()),
        (
            ArgErrorKind::OutOfRange,
            "`append` is not one of: error, overwrite"
        )
    );
}

#[test]
fn error_exclusive_oneof() {
    let e = err(
        "code_item_lookup",
        r#"{"canon_path": "crate::a", "name": "a"}"#,
    );
    assert_eq!(
        e,
        ArgError {
            kind: ArgErrorKind::Invalid,
            field: "canon_path|name".into(),
            message: "give exactly one of: canon_path, name; got canon_path and name".into(),
        }
    );
}

#[test]
fn arg_error_becomes_tool_error() {
    let e = err("get_file_metadata", "{}");
    let t = e.to_tool_error();
    assert_eq!(
        t,
        crate::tools::v1::ToolError {
            code: crate::tools::v1::ToolErrorCode::MissingField as i32,
            field: "file_path".into(),
            message: "required field is missing".into(),
            retry_hint: "fix the arguments to match the tool's JSON Schema and call again".into(),
        }
    );
}

/// A typed call and the JSON a model would send for it give the same error.
fn same_error_typed_and_json(call: &ToolCall) -> ArgError {
    let typed = registry().check_call(call).unwrap_err();
    let (name, json) = registry().render_call(call).unwrap();
    assert_eq!(registry().parse_call(name, &json).unwrap_err(), typed);
    typed
}

fn replace_item(new_code: String) -> CodeEdit {
    CodeEdit {
        edit: Some(code_edit::Edit::ReplaceItem(
            crate::tools::v1::ReplaceItemEdit {
                canon_path: "crate::f".into(),
                new_code,
                file_path: None,
            },
        )),
    }
}

#[test]
fn typed_calls_are_held_to_the_json_rules() {
    let edits = |n: usize| ToolCall {
        args: Some(Args::ApplyCodeEdit(ApplyCodeEditArgs {
            edits: vec![replace_item("fn f() {}".into()); n],
        })),
    };
    assert_eq!(registry().check_call(&edits(100)), Ok(()));
    assert_eq!(
        same_error_typed_and_json(&edits(101)),
        ArgError {
            kind: ArgErrorKind::OutOfRange,
            field: "edits".into(),
            message: "must have at most 100 items, got 101".into(),
        }
    );
    let huge = ToolCall {
        args: Some(Args::ApplyCodeEdit(ApplyCodeEditArgs {
            edits: vec![replace_item("x".repeat(5_000_000))],
        })),
    };
    assert_eq!(
        same_error_typed_and_json(&huge),
        ArgError {
            kind: ArgErrorKind::OutOfRange,
            field: "edits[0].replace_item.new_code".into(),
            message: "must have at most 1048576 characters, got 5000000".into(),
        }
    );
    let create = ToolCall {
        args: Some(Args::CreateFile(CreateFileArgs {
            file_path: "big.txt".into(),
            content: "é".repeat(1_048_577),
            on_exists: None,
        })),
    };
    assert_eq!(
        same_error_typed_and_json(&create).field,
        "content".to_owned()
    );
    let budget = ToolCall {
        args: Some(Args::RequestCodeContext(RequestCodeContextArgs {
            search_term: Some(String::new()),
            token_budget: Some(10),
            languages: vec![],
        })),
    };
    assert_eq!(
        same_error_typed_and_json(&budget),
        ArgError {
            kind: ArgErrorKind::OutOfRange,
            field: "search_term".into(),
            message: "must have at least 1 characters, got 0".into(),
        }
    );
}

#[test]
fn typed_calls_need_their_oneofs_and_known_enum_values() {
    let no_edit = ToolCall {
        args: Some(Args::ApplyCodeEdit(ApplyCodeEditArgs {
            edits: vec![CodeEdit { edit: None }],
        })),
    };
    assert_eq!(
        registry().check_call(&no_edit).unwrap_err(),
        ArgError {
            kind: ArgErrorKind::MissingField,
            field: "edits[0].replace_item|search_replace".into(),
            message: "give exactly one of: replace_item, search_replace".into(),
        }
    );
    let lookup = ToolCall {
        args: Some(Args::CodeItemLookup(CodeItemLookupArgs {
            target: None,
            kind: None,
        })),
    };
    assert_eq!(
        registry().check_call(&lookup).unwrap_err().field,
        "canon_path|name"
    );
    let odd_enum = ToolCall {
        args: Some(Args::CreateFile(CreateFileArgs {
            file_path: "a.rs".into(),
            content: String::new(),
            on_exists: Some(7),
        })),
    };
    assert_eq!(
        registry().check_call(&odd_enum).unwrap_err(),
        ArgError {
            kind: ArgErrorKind::OutOfRange,
            field: "on_exists".into(),
            message: "`7` is not one of: error, overwrite".into(),
        }
    );
    let empty_ok = ToolCall {
        args: Some(Args::CreateFile(CreateFileArgs {
            file_path: "a.rs".into(),
            content: String::new(),
            on_exists: Some(OnExists::Overwrite as i32),
        })),
    };
    assert_eq!(registry().check_call(&empty_ok), Ok(()));
    assert_eq!(
        registry()
            .check_call(&ToolCall { args: None })
            .unwrap_err()
            .kind,
        ArgErrorKind::MissingField
    );
}

#[test]
fn typed_zero_values_a_rule_forbids_are_missing_as_in_json() {
    // Protobuf cannot tell `edits: []` or `file: ""` from absent: both are what a JSON call
    // without the key gets.
    let no_edits = ToolCall {
        args: Some(Args::ApplyCodeEdit(ApplyCodeEditArgs { edits: vec![] })),
    };
    assert_eq!(
        registry().check_call(&no_edits).unwrap_err(),
        err("apply_code_edit", "{}")
    );
    let no_file = ToolCall {
        args: Some(Args::ReadFile(ReadFileArgs::default())),
    };
    assert_eq!(
        registry().check_call(&no_file).unwrap_err(),
        err("read_file", "{}")
    );
    // An empty value the rules allow is a value: new_code "" deletes the item.
    let delete = ToolCall {
        args: Some(Args::ApplyCodeEdit(ApplyCodeEditArgs {
            edits: vec![replace_item(String::new())],
        })),
    };
    assert_eq!(registry().check_call(&delete), Ok(()));
}
