//! MCP clients at the gateway's `/mcp`, driven by the official Rust SDK's client: the tools of
//! the registry with their schemas, typed results and errors, the caps, bearer tokens and
//! read-only principals, edits approved by a person (elicitation in both protocol eras, or
//! `DecideEdit` while the call waits), cancellation, trace context and resources. The official
//! Python SDK drives the same endpoint and `ploke mcp` in client/tests (suite/mcp.rs).

mod auth;
mod edits;
mod resources;
mod tools;
mod trace;

use std::sync::{Arc, Mutex};

use ploke_e2e::{LIB_RS, Sandbox};
use ploke_runtime::config::PlokeConfig;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, ErrorData, RoleClient};
use tokio::sync::mpsc;

/// A developer who may use every workspace.
pub(super) const ALICE: &str = "alice-mcp-token-0123456789";
/// A reviewer whose token runs read-only tools only.
pub(super) const RITA: &str = "rita-mcp-token-0123456789a";

fn hash(token: &str) -> String {
    ploke_gateway::auth::principals::token_sha256(token)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A deployment with principals (alice; rita, read-only) and [`LIB_RS`] indexed.
pub(super) struct Deployment {
    pub sandbox: Sandbox,
    _principals: tempfile::TempDir,
}

impl Deployment {
    /// The MCP endpoint's URL.
    pub(super) fn url(&self) -> String {
        self.sandbox.mcp_url().unwrap()
    }
}

pub(super) async fn deployment(adjust: impl FnOnce(&mut PlokeConfig)) -> Deployment {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("principals.toml");
    std::fs::write(
        &file,
        format!(
            "[[principal]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\nworkspaces = [\"*\"]\n\n\
             [[principal]]\nname = \"rita\"\ntoken_sha256 = \"{}\"\nworkspaces = [\"*\"]\nread_only = true\n",
            hash(ALICE),
            hash(RITA)
        ),
    )
    .unwrap();
    let sandbox = Sandbox::start_with(move |c| {
        c.gateway.principals_file = Some(file);
        c.gateway.tokens.clear();
        adjust(c);
    })
    .await
    .unwrap();
    sandbox
        .index_files(&[("src/lib.rs", LIB_RS)])
        .await
        .unwrap();
    Deployment {
        sandbox,
        _principals: dir,
    }
}

/// Which protocol era the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Era {
    /// 2026-07-28: stateless, `server/discover`, `input_required` results.
    Modern,
    /// 2025-11-25: `initialize`, a session, server-to-client requests.
    Legacy,
}

/// A scripted MCP client: answers elicitations with `answer` (and declares the capability only
/// then), records what it was asked and the progress it was sent.
#[derive(Clone)]
pub(super) struct TestClient {
    era: Era,
    answer: Option<ElicitResult>,
    pub asked: Arc<Mutex<Vec<String>>>,
    progress: mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl TestClient {
    /// A client of `era`; the progress it receives arrives on the returned channel.
    pub(super) fn new(
        era: Era,
        answer: Option<ElicitResult>,
    ) -> (Self, mpsc::UnboundedReceiver<ProgressNotificationParam>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                era,
                answer,
                asked: Arc::default(),
                progress: tx,
            },
            rx,
        )
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.answer.is_some() {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        let mut info = ClientConfig::new(capabilities, Implementation::new("ploke-test", "1.0"));
        if self.era == Era::Legacy {
            info.protocol_version = ProtocolVersion::V_2025_11_25;
        }
        info
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().unwrap().push(message.clone());
        }
        Ok(self
            .answer
            .clone()
            .unwrap_or_else(|| ElicitResult::new(ElicitationAction::Decline)))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params);
    }
}

/// Connects `client` to `url` with `token`.
pub(super) async fn connect(
    url: &str,
    token: &str,
    client: TestClient,
) -> RunningService<RoleClient, TestClient> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let mode = match client.era {
        Era::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        Era::Legacy => ClientLifecycleMode::Initialize,
    };
    client.serve_with_lifecycle(transport, mode).await.unwrap()
}

/// A client of `era` without elicitation, as alice.
pub(super) async fn alice(d: &Deployment, era: Era) -> RunningService<RoleClient, TestClient> {
    connect(&d.url(), ALICE, TestClient::new(era, None).0).await
}

/// `tools/call` arguments.
pub(super) fn args(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match v {
        serde_json::Value::Object(o) => o,
        _ => serde_json::Map::new(),
    }
}
