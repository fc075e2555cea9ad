//! Clear codes for oversized input: a 1 MiB `workspace_root` is INVALID_ARGUMENT with a short
//! message on every service and through the gateway (not RESOURCE_EXHAUSTED from an error too
//! large to send), and tool arguments over the schema's limits are the same ToolError whether a
//! model sent them as JSON or a caller sent them typed to ExecuteTool.

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::Reply;
use ploke_proto::common::v1::Correlation;
use ploke_proto::rag::v1::SearchRequest;
use ploke_proto::session::v1::{CreateSessionRequest, ListSessionsRequest, session_event};
use ploke_proto::tools::v1::*;
use tonic::{Code, Status};

use super::session::chat;

const TOO_LONG: &str = "workspace_root: workspace_root must be at most 4096 bytes, got 1048577";

fn huge_root() -> String {
    format!("/{}", "w".repeat(1 << 20))
}

fn short_invalid(s: &Status) -> (Code, &str) {
    (s.code(), s.message())
}

#[tokio::test]
async fn a_megabyte_workspace_root_is_invalid_argument_everywhere() {
    let sandbox = Sandbox::start().await.unwrap();
    let search = || SearchRequest {
        query: "add".into(),
        workspace_root: huge_root(),
        ..Default::default()
    };
    let create = || CreateSessionRequest {
        workspace_root: huge_root(),
        ..Default::default()
    };
    let s = sandbox.gateway().search(search()).await.unwrap_err();
    assert_eq!(short_invalid(&s), (Code::InvalidArgument, TOO_LONG));
    let s = sandbox
        .gateway()
        .create_session(create())
        .await
        .unwrap_err();
    assert_eq!(short_invalid(&s), (Code::InvalidArgument, TOO_LONG));
    let s = sandbox
        .gateway()
        .list_sessions(ListSessionsRequest {
            workspace_root: huge_root(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(short_invalid(&s), (Code::InvalidArgument, TOO_LONG));

    let s = sandbox.rag().search(search()).await.unwrap_err();
    assert_eq!(short_invalid(&s), (Code::InvalidArgument, TOO_LONG));
    let s = sandbox
        .sessions()
        .create_session(create())
        .await
        .unwrap_err();
    assert_eq!(short_invalid(&s), (Code::InvalidArgument, TOO_LONG));
    let s = sandbox
        .tools()
        .execute_tool(ExecuteToolRequest {
            correlation: Some(Correlation {
                call_id: "call_1".into(),
                ..Default::default()
            }),
            workspace_root: huge_root(),
            call: Some(ToolCall {
                args: Some(tool_call::Args::ListDir(ListDirArgs::default())),
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(short_invalid(&s), (Code::InvalidArgument, TOO_LONG));

    // Under the limit but unknown: NOT_FOUND naming a short prefix of the root.
    let long = format!("/{}", "u".repeat(4000));
    let s = sandbox
        .gateway()
        .search(SearchRequest {
            query: "add".into(),
            workspace_root: long,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message().to_owned()),
        (
            Code::NotFound,
            format!("workspace /{}…(4001 bytes) not found", "u".repeat(199))
        )
    );
    sandbox.stop().await.unwrap();
}

fn replace_item(new_code: &str) -> CodeEdit {
    CodeEdit {
        edit: Some(code_edit::Edit::ReplaceItem(ReplaceItemEdit {
            canon_path: "crate::add".into(),
            new_code: new_code.into(),
            file_path: None,
        })),
    }
}

#[tokio::test]
async fn arguments_over_the_limits_are_the_same_tool_error_from_a_model_or_a_direct_call() {
    let c = chat().await;
    let cases = [
        (
            ApplyCodeEditArgs {
                edits: vec![replace_item("pub fn add() {}"); 101],
            },
            "edits",
        ),
        (
            ApplyCodeEditArgs {
                edits: vec![replace_item(&"x".repeat(1_048_577))],
            },
            "edits[0].replace_item.new_code",
        ),
    ];
    for (i, (args, field)) in cases.into_iter().enumerate() {
        let call_id = format!("call_{i}");
        let call = ToolCall {
            args: Some(tool_call::Args::ApplyCodeEdit(args.clone())),
        };
        let registry = ploke_proto::registry::ToolRegistry::global().unwrap();
        let (name, json) = registry.render_call(&call).unwrap();
        c.fake.push([
            Reply::tool_calls(&[(call_id.as_str(), name, json.as_str())]),
            Reply::text(&["too big"]),
        ]);
        let events = c.turn("edit everything").await;
        let model = events
            .iter()
            .find_map(|e| match &e.event {
                Some(session_event::Event::ToolCallFailed(f)) => f.error.clone(),
                _ => None,
            })
            .unwrap();

        let mut stream = c
            .sandbox
            .tools()
            .execute_tool(ExecuteToolRequest {
                correlation: Some(Correlation {
                    call_id: call_id.clone(),
                    request_id: format!("direct-{i}"),
                    ..Default::default()
                }),
                call: Some(call),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let mut events = Vec::new();
        while let Some(e) = stream.message().await.unwrap() {
            events.push(e.event);
        }
        assert_eq!(
            events,
            vec![Some(execute_tool_event::Event::Error(model.clone()))]
        );
        assert_eq!(
            (model.code(), model.field.as_str()),
            (ToolErrorCode::OutOfRange, field)
        );
    }
    let pending = c
        .sandbox
        .tools()
        .list_edits(ListEditsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(pending.proposals, Vec::new());
    c.sandbox.stop().await.unwrap();
}

/// Ids and names of any length came back in errors whole: a 20 kB `session_id` made a reply
/// header too large to pass, which the gateway answered as INTERNAL.
#[tokio::test]
async fn long_ids_and_names_are_invalid_argument_naming_the_field() {
    use ploke_proto::session::v1::{GetSessionRequest, StreamEventsRequest};
    let sandbox = Sandbox::start().await.unwrap();
    let long = "s".repeat(20_000);
    let id_refused =
        |field: &str| format!("{field}: must be at most 128 bytes, got {}", long.len());
    let get = || GetSessionRequest {
        session_id: long.clone(),
    };
    let s = sandbox.gateway().get_session(get()).await.unwrap_err();
    assert_eq!(
        short_invalid(&s),
        (Code::InvalidArgument, id_refused("session_id").as_str())
    );
    let s = sandbox.sessions().get_session(get()).await.unwrap_err();
    assert_eq!(
        short_invalid(&s),
        (Code::InvalidArgument, id_refused("session_id").as_str())
    );
    let s = sandbox
        .gateway()
        .stream_events(StreamEventsRequest {
            session_id: long.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        short_invalid(&s),
        (Code::InvalidArgument, id_refused("session_id").as_str())
    );
    let decide = |proposal_id: &str, reason: &str| DecideEditRequest {
        proposal_id: proposal_id.into(),
        decision: Decision::Approve as i32,
        reason: reason.into(),
        ..Default::default()
    };
    let s = sandbox
        .gateway()
        .decide_edit(decide(&long, ""))
        .await
        .unwrap_err();
    assert_eq!(
        short_invalid(&s),
        (Code::InvalidArgument, id_refused("proposal_id").as_str())
    );
    let s = sandbox
        .tools()
        .decide_edit(decide("p1", &"r".repeat(1 << 20)))
        .await
        .unwrap_err();
    assert_eq!(
        short_invalid(&s),
        (
            Code::InvalidArgument,
            "reason: must be at most 4096 bytes, got 1048576"
        )
    );
    // Through the gateway, and on llm-session itself.
    for (through_gateway, request, message) in [
        (
            true,
            CreateSessionRequest {
                model: "m".repeat(3 << 20),
                ..Default::default()
            },
            "model: must be at most 256 bytes, got 3145728",
        ),
        (
            false,
            CreateSessionRequest {
                provider: "p".repeat(8_000),
                ..Default::default()
            },
            "provider: must be at most 256 bytes, got 8000",
        ),
    ] {
        let s = if through_gateway {
            sandbox.gateway().create_session(request).await
        } else {
            sandbox.sessions().create_session(request).await
        }
        .unwrap_err();
        assert_eq!(short_invalid(&s), (Code::InvalidArgument, message));
    }
    sandbox.stop().await.unwrap();
}
