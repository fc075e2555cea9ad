//! A full disk, as the real binary meets it: a file-size limit (RLIMIT_FSIZE, set with
//! `prlimit` on the process, SIGXFSZ ignored as a service would see it) makes the session
//! store's writes fail the way a full filesystem does. Writes then answer UNAVAILABLE naming
//! storage, health turns NOT_SERVING, and the process keeps running and stops cleanly.

use std::path::Path;
use std::time::Duration;

use ploke_proto::session::v1::CreateSessionRequest;
use ploke_proto::session::v1::llm_session_client::LlmSessionClient;
use ploke_runtime::testing::RunningBinary;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const SERVICE: &str = "ploke.session.v1.LlmSession";
/// Largest file the process may write: room for the schema and a few sessions, no more.
const FILE_LIMIT: u64 = 160 * 1024;

#[tokio::test]
async fn a_full_disk_is_a_clean_error_and_not_serving_without_a_crash() {
    let prlimit = Path::new("/usr/bin/prlimit");
    assert!(prlimit.exists(), "this test needs prlimit (util-linux)");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ploke.toml");
    // A provider is needed to create sessions; it is never called.
    std::fs::write(
        &config,
        "[providers.fake]\nbase_url = \"http://127.0.0.1:9/v1\"\ndefault_model = \"m\"\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let script = format!(
        "trap '' XFSZ; exec {} --fsize={FILE_LIMIT} -- \"$0\" \"$@\"",
        prlimit.display()
    );
    let (config, data, workspace) = (
        config.display().to_string(),
        data.display().to_string(),
        workspace.display().to_string(),
    );
    let bin = RunningBinary::start(
        Path::new("/bin/sh"),
        &[
            "-c",
            &script,
            env!("CARGO_BIN_EXE_ploke-llm-session"),
            "--config",
            &config,
            "--data-dir",
            &data,
            "--workspace",
            &workspace,
        ],
        Duration::from_secs(30),
    )
    .unwrap();
    let channel = tonic::transport::Endpoint::from_shared(bin.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut sessions = LlmSessionClient::new(channel.clone());
    let mut health = HealthClient::new(channel)
        .watch(HealthCheckRequest {
            service: SERVICE.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        health.message().await.unwrap().unwrap().status(),
        ServingStatus::Serving
    );

    // Each session grows the write-ahead log until the file limit refuses a write.
    let mut created = 0;
    let refused = loop {
        match sessions
            .create_session(CreateSessionRequest::default())
            .await
        {
            Ok(_) => created += 1,
            Err(status) => break status,
        }
        assert!(created < 10_000, "the file limit never refused a write");
    };
    assert!(created > 0, "{refused:?}");
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("storage unavailable")
            && refused.message().contains("sessions.sqlite"),
        "{}",
        refused.message()
    );
    while health.message().await.unwrap().unwrap().status() != ServingStatus::NotServing {}
    // Still refused (the probe write cannot get through either), still answering.
    let again = sessions
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap_err();
    assert_eq!(again.code(), Code::Unavailable);

    // An open Watch stream would hold the drain open to its deadline.
    drop((health, sessions));
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
