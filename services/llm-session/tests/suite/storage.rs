//! Storage faults as the real binary meets them: writes answer UNAVAILABLE naming storage,
//! health turns NOT_SERVING, and the process keeps running and stops cleanly on SIGTERM.
//!
//! - A full disk: a file-size limit (RLIMIT_FSIZE, set with `prlimit` on the process, SIGXFSZ
//!   ignored as a service would see it) makes the store's writes fail the way a full file
//!   system does.
//! - A removed data dir (the tests run as root, where chmod stops nothing).

use std::path::Path;
use std::time::Duration;

use ploke_proto::session::v1::CreateSessionRequest;
use ploke_proto::session::v1::llm_session_client::LlmSessionClient;
use ploke_runtime::principal::{Principal, Role};
use ploke_runtime::testing::RunningBinary;
use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const SERVICE: &str = "ploke.session.v1.LlmSession";
/// Largest file the process may write: room for the schema and a few sessions, no more.
const FILE_LIMIT: u64 = 160 * 1024;

/// The binary on a fresh data dir (with a workspace and a provider that is never called),
/// optionally under a file-size limit.
struct Service {
    dir: tempfile::TempDir,
    bin: RunningBinary,
    channel: Channel,
}

impl Service {
    async fn start(file_limit: Option<u64>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("ploke.toml");
        std::fs::write(
            &config,
            "[providers.fake]\nbase_url = \"http://127.0.0.1:9/v1\"\ndefault_model = \"m\"\n",
        )
        .unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        let paths = [config, dir.path().join("data"), workspace].map(|p| p.display().to_string());
        let binary = env!("CARGO_BIN_EXE_ploke-llm-session");
        let mut args = vec![
            binary,
            "--config",
            &paths[0],
            "--data-dir",
            &paths[1],
            "--workspace",
            &paths[2],
        ];
        let prlimit = Path::new("/usr/bin/prlimit");
        let script = format!(
            "trap '' XFSZ; exec {} --fsize={} -- \"$0\" \"$@\"",
            prlimit.display(),
            file_limit.unwrap_or(0)
        );
        let bin = match file_limit {
            None => RunningBinary::start(Path::new(binary), &args[1..], Duration::from_secs(30)),
            Some(_) => {
                assert!(prlimit.exists(), "this test needs prlimit (util-linux)");
                args.splice(0..0, ["-c", script.as_str()]);
                RunningBinary::start(Path::new("/bin/sh"), &args, Duration::from_secs(30))
            }
        }
        .unwrap();
        let channel = tonic::transport::Endpoint::from_shared(bin.url())
            .unwrap()
            .connect()
            .await
            .unwrap();
        Self { dir, bin, channel }
    }

    fn sessions(&self) -> LlmSessionClient<Channel> {
        LlmSessionClient::new(self.channel.clone())
    }

    /// Health as a stream of changes (the first is the current status).
    async fn health(&self) -> tonic::Streaming<tonic_health::pb::HealthCheckResponse> {
        HealthClient::new(self.channel.clone())
            .watch(HealthCheckRequest {
                service: SERVICE.into(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    /// SIGTERM; the exit must be clean and the log must say storage broke.
    async fn stop_cleanly(self) {
        // An open connection (a Watch stream) would hold the drain open to its deadline.
        drop(self.channel);
        let bin = self.bin;
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
        drop(self.dir);
    }
}

async fn refused(service: &Service) -> tonic::Status {
    let refused = service
        .sessions()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("storage unavailable")
            && refused.message().contains("sessions.sqlite"),
        "{}",
        refused.message()
    );
    refused
}

async fn not_serving(health: &mut tonic::Streaming<tonic_health::pb::HealthCheckResponse>) {
    while health.message().await.unwrap().unwrap().status() != ServingStatus::NotServing {}
}

#[tokio::test]
async fn a_full_disk_is_a_clean_error_and_not_serving_without_a_crash() {
    let service = Service::start(Some(FILE_LIMIT)).await;
    let mut health = service.health().await;
    assert_eq!(
        health.message().await.unwrap().unwrap().status(),
        ServingStatus::Serving
    );
    // Each session grows the write-ahead log until the file limit refuses a write.
    let mut created = 0;
    while service
        .sessions()
        .create_session(CreateSessionRequest::default())
        .await
        .is_ok()
    {
        created += 1;
        assert!(created < 10_000, "the file limit never refused a write");
    }
    assert!(created > 0);
    refused(&service).await;
    not_serving(&mut health).await;
    drop(health);
    service.stop_cleanly().await;
}

#[tokio::test]
async fn a_removed_data_dir_is_a_clean_error_and_not_serving_without_a_crash() {
    let service = Service::start(None).await;
    let first = service
        .sessions()
        .create_session(CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mut health = service.health().await;
    std::fs::remove_dir_all(service.dir.path().join("data")).unwrap();
    let status = refused(&service).await;
    assert!(
        status.message().contains("was removed"),
        "{}",
        status.message()
    );
    not_serving(&mut health).await;
    // A plain principal of a shared deployment is told that storage is unavailable, not
    // where the service keeps its files (the cause is in the log and the health check).
    let mut as_alice = tonic::Request::new(CreateSessionRequest::default());
    Principal::everywhere("alice", Role::User).write_headers(as_alice.metadata_mut().as_mut());
    let told = service
        .sessions()
        .create_session(as_alice)
        .await
        .unwrap_err();
    assert_eq!(
        (told.code(), told.message()),
        (
            Code::Unavailable,
            "session store: storage unavailable: the service cannot use its database now; the \
             operators see why in its health check and log"
        )
    );
    // What was recorded before still reads; nothing more is written.
    let got = service
        .sessions()
        .get_session(ploke_proto::session::v1::GetSessionRequest {
            session_id: first.session_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.session_id, first.session_id);
    drop(health);
    service.stop_cleanly().await;
}
