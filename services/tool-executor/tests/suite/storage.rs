//! A data dir removed while the real binary runs (the tests run as root, where chmod stops
//! nothing): a proposal that cannot be recorded is the tool error UNAVAILABLE naming storage —
//! never a proposal "applied" into a deleted database — health turns NOT_SERVING, and the
//! process keeps running and stops cleanly on SIGTERM.

use std::path::Path;
use std::time::Duration;

use ploke_proto::common::v1::Correlation;
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_proto::tools::v1::{
    CreateFileArgs, ExecuteToolRequest, ToolCall, ToolErrorCode, execute_tool_event, tool_call,
};
use ploke_runtime::testing::RunningBinary;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

fn create_file(call_id: &str, path: &str) -> ExecuteToolRequest {
    ExecuteToolRequest {
        correlation: Some(Correlation {
            session_id: "storage".into(),
            request_id: "req".into(),
            parent_id: "parent".into(),
            call_id: call_id.into(),
        }),
        call: Some(ToolCall {
            args: Some(tool_call::Args::CreateFile(CreateFileArgs {
                file_path: path.into(),
                content: "pub fn made() {}\n".into(),
                on_exists: None,
            })),
        }),
        ..Default::default()
    }
}

/// The first proposal or outcome of a call.
async fn first_event(
    tools: &ToolExecutorClient<Channel>,
    call_id: &str,
) -> execute_tool_event::Event {
    let mut stream = tools
        .clone()
        .execute_tool(create_file(call_id, &format!("src/{call_id}.rs")))
        .await
        .unwrap()
        .into_inner();
    loop {
        match stream.message().await.unwrap().unwrap().event {
            Some(execute_tool_event::Event::Progress(_)) | None => {}
            Some(e) => return e,
        }
    }
}

#[tokio::test]
async fn a_removed_data_dir_is_a_tool_error_and_not_serving_without_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (data, workspace) = (dir.path().join("data"), dir.path().join("ws"));
    std::fs::create_dir(&workspace).unwrap();
    let paths = [data.display().to_string(), workspace.display().to_string()];
    let bin = RunningBinary::start(
        Path::new(env!("CARGO_BIN_EXE_ploke-tool-executor")),
        &["--data-dir", &paths[0], "--workspace", &paths[1]],
        Duration::from_secs(30),
    )
    .unwrap();
    let channel = tonic::transport::Endpoint::from_shared(bin.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let tools = ToolExecutorClient::new(channel.clone());
    assert!(matches!(
        first_event(&tools, "before").await,
        execute_tool_event::Event::EditProposed(_)
    ));
    let mut health = HealthClient::new(channel.clone())
        .watch(HealthCheckRequest {
            service: "ploke.tools.v1.ToolExecutor".into(),
        })
        .await
        .unwrap()
        .into_inner();

    std::fs::remove_dir_all(&data).unwrap();
    let execute_tool_event::Event::Error(e) = first_event(&tools, "after").await else {
        panic!("expected a tool error")
    };
    assert_eq!(e.code(), ToolErrorCode::Unavailable, "{e:?}");
    assert!(
        e.message.contains("storage unavailable")
            && e.message.contains("proposals.sqlite")
            && e.message.contains("was removed"),
        "{}",
        e.message
    );
    while health.message().await.unwrap().unwrap().status() != ServingStatus::NotServing {}

    // An open connection (a Watch stream) would hold the drain open to its deadline.
    drop((health, tools, channel));
    let (exit, lines) = tokio::task::spawn_blocking(move || bin.terminate())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{exit:?}\n{}", lines.join("\n"));
    assert!(
        lines.iter().any(|l| l.contains("storage broken")),
        "{}",
        lines.join("\n")
    );
}
