//! Typed arguments sent straight to ExecuteTool are held to the rules the model's JSON is
//! parsed with: too many edits or too much code is the tool's one `error` event, naming the
//! field, and nothing is staged.

use ploke_proto::registry::ToolRegistry;
use ploke_proto::tools::v1::*;

use super::{Harness, finish, replace_item, request};

/// What ExecuteTool answers for `args`, and what the model would be told for the same
/// arguments as JSON.
async fn direct_and_model(
    h: &mut Harness,
    call_id: &str,
    args: tool_call::Args,
) -> (ToolError, ToolError) {
    let call = ToolCall {
        args: Some(args.clone()),
    };
    let registry = ToolRegistry::global().unwrap();
    let (name, json) = registry.render_call(&call).unwrap();
    let model = registry
        .parse_call(name, &json)
        .unwrap_err()
        .to_tool_error();
    let stream = h
        .tools
        .execute_tool(request("req-limits", call_id, args))
        .await
        .unwrap()
        .into_inner();
    match finish(stream).await {
        execute_tool_event::Event::Error(e) => (e, model),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn direct_calls_over_the_schema_limits_are_refused_like_the_models() {
    let mut h = Harness::start().await;
    let too_many = tool_call::Args::ApplyCodeEdit(ApplyCodeEditArgs {
        edits: vec![replace_item("crate::helper", "pub fn helper() -> u32 { 42 }"); 101],
    });
    let (direct, model) = direct_and_model(&mut h, "call-101", too_many).await;
    assert_eq!(
        direct,
        ToolError {
            code: ToolErrorCode::OutOfRange as i32,
            field: "edits".into(),
            message: "must have at most 100 items, got 101".into(),
            retry_hint: "fix the arguments to match the tool's JSON Schema and call again".into(),
        }
    );
    assert_eq!(direct, model);

    let huge = tool_call::Args::ApplyCodeEdit(ApplyCodeEditArgs {
        edits: vec![replace_item("crate::helper", &"x".repeat(5 * 1024 * 1024))],
    });
    let (direct, model) = direct_and_model(&mut h, "call-5mb", huge).await;
    assert_eq!(
        (
            direct.code(),
            direct.field.as_str(),
            direct.message.as_str()
        ),
        (
            ToolErrorCode::OutOfRange,
            "edits[0].replace_item.new_code",
            "must have at most 1048576 characters, got 5242880"
        )
    );
    assert_eq!(direct, model);

    let big_file = tool_call::Args::CreateFile(CreateFileArgs {
        file_path: "big.txt".into(),
        content: "y".repeat(1_048_577),
        on_exists: None,
    });
    let (direct, model) = direct_and_model(&mut h, "call-big-file", big_file).await;
    assert_eq!(
        (direct.code(), direct.field.as_str()),
        (ToolErrorCode::OutOfRange, "content")
    );
    assert_eq!(direct, model);

    let staged = h
        .tools
        .list_edits(ListEditsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(staged.proposals, Vec::new());
    assert!(!h.root.join("big.txt").exists());
    h.stop().await;
}
