//! The end-to-end Sandbox: all four services in this process on `127.0.0.1:0`, with a temp
//! workspace and data dir, the gateway requiring a bearer token, the backends the embedded
//! deployment's random internal token, and connected clients for the gateway (authenticated)
//! and every service (sending the internal token).

pub mod bench;
pub mod fake_embeddings;
pub mod fake_provider;
pub mod git;
pub mod ports;
pub mod postgres;
pub mod wait;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use ploke_client::embedded::{Addrs, Embedded, EmbeddedError};
use ploke_proto::gateway::v1::gateway_client::GatewayClient;
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::{IndexProgress, IndexWorkspaceRequest};
use ploke_proto::session::v1::llm_session_client::LlmSessionClient;
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_runtime::ServiceKind;
use ploke_runtime::client::TracedChannel;
use ploke_runtime::config::{PlokeConfig, Secret};
use ploke_runtime::internal::{InternalTokens, TokenError};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use fake_embeddings::FakeEmbeddings;

/// The one-function library the provider-backed Sandbox indexes.
pub const LIB_RS: &str =
    "/// Adds two numbers.\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";

/// The token the Sandbox's gateway accepts.
pub const TOKEN: &str = "sandbox-token";

/// A direct `ExecuteTool` request for `args`, as one call (`call_id`) of a turn of the
/// session `session_id`, on the default workspace with the tool's default timeout.
pub fn tool_request(
    session_id: &str,
    call_id: &str,
    args: ploke_proto::tools::v1::tool_call::Args,
) -> ploke_proto::tools::v1::ExecuteToolRequest {
    ploke_proto::tools::v1::ExecuteToolRequest {
        correlation: Some(ploke_proto::common::v1::Correlation {
            session_id: session_id.into(),
            request_id: "req".into(),
            parent_id: "parent".into(),
            call_id: call_id.into(),
        }),
        call: Some(ploke_proto::tools::v1::ToolCall { args: Some(args) }),
        ..Default::default()
    }
}

/// The next proposal, outcome or error of a tool call (progress passed over); panics when the
/// stream ends or fails first.
pub async fn next_tool_event(
    stream: &mut tonic::Streaming<ploke_proto::tools::v1::ExecuteToolEvent>,
) -> ploke_proto::tools::v1::execute_tool_event::Event {
    use ploke_proto::tools::v1::execute_tool_event::Event;
    loop {
        match stream.message().await {
            Ok(Some(e)) => match e.event {
                Some(Event::Progress(_)) | None => {}
                Some(event) => return event,
            },
            Ok(None) => panic!("the tool call ended without an outcome"),
            Err(status) => panic!("the tool call failed: {status:?}"),
        }
    }
}

/// The Sandbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A temp dir could not be made.
    #[error("temp dir: {0}")]
    Io(#[from] std::io::Error),
    /// The services did not start.
    #[error(transparent)]
    Embedded(#[from] EmbeddedError),
    /// A client could not connect.
    #[error("connecting to {0}: {1}")]
    Connect(String, tonic::transport::Error),
    /// Indexing the workspace failed.
    #[error("indexing: {0}")]
    Index(tonic::Status),
    /// The internal token of the services is not usable.
    #[error(transparent)]
    Token(#[from] TokenError),
}

/// Adds `authorization: Bearer <token>` to every call.
#[derive(Debug, Clone)]
pub struct BearerToken(pub String);

impl Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let value = format!("Bearer {}", self.0)
            .parse()
            .map_err(|_| tonic::Status::invalid_argument("token is not a header value"))?;
        request.metadata_mut().insert("authorization", value);
        Ok(request)
    }
}

/// A gateway client that sends the Sandbox token.
pub type AuthedGateway = GatewayClient<InterceptedService<Channel, BearerToken>>;

/// All four services, running.
#[derive(Debug)]
pub struct Sandbox {
    /// The workspace every service is configured with.
    pub workspace: tempfile::TempDir,
    /// Where state goes.
    pub data: tempfile::TempDir,
    embedded: Embedded,
    channels: Channels,
    config: PlokeConfig,
}

#[derive(Debug, Clone)]
struct Channels {
    gateway: Channel,
    sessions: Channel,
    tools: Channel,
    rag: Channel,
    internal: InternalTokens,
}

async fn connect(url: String) -> Result<Channel, SandboxError> {
    let endpoint =
        Endpoint::from_shared(url.clone()).map_err(|e| SandboxError::Connect(url.clone(), e))?;
    endpoint
        .connect()
        .await
        .map_err(|e| SandboxError::Connect(url, e))
}

async fn launch(config: PlokeConfig) -> Result<(Embedded, Channels), SandboxError> {
    let embedded = Embedded::start(config).await?;
    let a = embedded.addrs;
    let connected = async {
        Ok::<_, SandboxError>(Channels {
            gateway: connect(a.url(ServiceKind::Gateway)).await?,
            sessions: connect(a.url(ServiceKind::LlmSession)).await?,
            tools: connect(a.url(ServiceKind::ToolExecutor)).await?,
            rag: connect(a.url(ServiceKind::RagSearch)).await?,
            internal: InternalTokens::load(&embedded.config.internal)?,
        })
    }
    .await;
    match connected {
        Ok(channels) => Ok((embedded, channels)),
        // A service that failed to start explains the refused connection better.
        Err(e) => Err(match embedded.stop().await {
            Err(start) => SandboxError::Embedded(start),
            Ok(()) => e,
        }),
    }
}

impl Sandbox {
    /// Starts the Sandbox with the default configuration.
    pub async fn start() -> Result<Self, SandboxError> {
        Self::start_with(|_| {}).await
    }

    /// Starts the Sandbox after `adjust` has changed its configuration.
    pub async fn start_with(adjust: impl FnOnce(&mut PlokeConfig)) -> Result<Self, SandboxError> {
        let workspace = tempfile::tempdir()?;
        let data = tempfile::tempdir()?;
        let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let mut config = PlokeConfig {
            data_dir: data.path().to_owned(),
            workspaces: vec![workspace.path().to_owned()],
            ..PlokeConfig::default()
        };
        for kind in [
            ServiceKind::Gateway,
            ServiceKind::LlmSession,
            ServiceKind::ToolExecutor,
            ServiceKind::RagSearch,
        ] {
            config.set_listen(kind, any);
        }
        config.gateway.tokens = vec![Secret::new(TOKEN)];
        config.gateway.mcp_listen = Some(any);
        adjust(&mut config);
        let (embedded, channels) = launch(config.clone()).await?;
        Ok(Self {
            workspace,
            data,
            embedded,
            channels,
            config,
        })
    }

    /// Starts the Sandbox with `provider` as the only model provider (named `fake`), retries
    /// without waiting, and [`LIB_RS`] indexed as `src/lib.rs`; `adjust` may change the rest.
    pub async fn start_with_provider(
        provider: ploke_runtime::config::ProviderConfig,
        adjust: impl FnOnce(&mut PlokeConfig),
    ) -> Result<Self, SandboxError> {
        let sandbox = Self::start_with(move |c| {
            c.providers = std::collections::BTreeMap::from([("fake".to_owned(), provider)]);
            c.session.retry_base_ms = 1;
            adjust(c);
        })
        .await?;
        sandbox.index_files(&[("src/lib.rs", LIB_RS)]).await?;
        Ok(sandbox)
    }

    /// Stops every service and starts them again on the same workspace and data directory
    /// (new ports; clients must be taken again).
    pub async fn restart(self) -> Result<Self, SandboxError> {
        let Self {
            workspace,
            data,
            embedded,
            channels,
            config,
        } = self;
        drop(channels);
        embedded.stop().await?;
        let (embedded, channels) = launch(config.clone()).await?;
        Ok(Self {
            workspace,
            data,
            embedded,
            channels,
            config,
        })
    }

    /// Where the services listen.
    pub fn addrs(&self) -> Addrs {
        self.embedded.addrs
    }

    /// Where the process serves its metrics (`[telemetry] metrics_listen`), if it does.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.embedded.metrics
    }

    /// The URL of the gateway's MCP endpoint (`http://ADDR/mcp`), when it serves one.
    pub fn mcp_url(&self) -> Option<String> {
        self.embedded.mcp.map(|a| format!("http://{a}/mcp"))
    }

    /// The workspace root.
    pub fn workspace_root(&self) -> &Path {
        self.workspace.path()
    }

    /// A gateway client that sends the Sandbox token.
    pub fn gateway(&self) -> AuthedGateway {
        GatewayClient::with_interceptor(self.channels.gateway.clone(), BearerToken(TOKEN.into()))
    }

    /// Writes `files` (relative path, text) into the workspace and indexes it.
    pub async fn index_files(&self, files: &[(&str, &str)]) -> Result<(), SandboxError> {
        for (path, text) in files {
            let abs = self.workspace_root().join(path);
            if let Some(dir) = abs.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(abs, text)?;
        }
        self.index().await
    }

    /// Indexes the workspace (its changed files) and waits for the run to end.
    pub async fn index(&self) -> Result<(), SandboxError> {
        let mut progress = self
            .rag()
            .index_workspace(ploke_proto::rag::v1::IndexWorkspaceRequest::default())
            .await
            .map_err(SandboxError::Index)?
            .into_inner();
        while progress
            .message()
            .await
            .map_err(SandboxError::Index)?
            .is_some()
        {}
        Ok(())
    }

    /// A gateway client on a connection of its own with small (64 KiB) HTTP/2 windows, like a
    /// reader on a slow link (flow control is per connection: a subscriber that stops reading
    /// holds up every stream of its connection, and only those).
    pub async fn gateway_on_new_connection(&self) -> Result<AuthedGateway, SandboxError> {
        let url = self.addrs().url(ServiceKind::Gateway);
        let channel = Endpoint::from_shared(url.clone())
            .map_err(|e| SandboxError::Connect(url.clone(), e))?
            .initial_stream_window_size(64 * 1024)
            .initial_connection_window_size(64 * 1024)
            .connect()
            .await
            .map_err(|e| SandboxError::Connect(url, e))?;
        Ok(GatewayClient::with_interceptor(
            channel,
            BearerToken(TOKEN.to_owned()),
        ))
    }

    pub fn gateway_with_token(&self, token: Option<&str>) -> AuthedGateway {
        let token = token.unwrap_or_default().to_owned();
        GatewayClient::with_interceptor(self.channels.gateway.clone(), BearerToken(token))
    }

    /// The raw gateway channel (no token).
    pub fn gateway_channel(&self) -> Channel {
        self.channels.gateway.clone()
    }

    /// A direct llm-session client (sending the internal token, as the gateway does).
    pub fn sessions(&self) -> LlmSessionClient<TracedChannel> {
        LlmSessionClient::new(self.internal(ServiceKind::LlmSession))
    }

    /// A direct tool-executor client (sending the internal token).
    pub fn tools(&self) -> ToolExecutorClient<TracedChannel> {
        ToolExecutorClient::new(self.internal(ServiceKind::ToolExecutor))
    }

    /// A direct rag-search client (sending the internal token).
    pub fn rag(&self) -> RagSearchClient<TracedChannel> {
        RagSearchClient::new(self.internal(ServiceKind::RagSearch))
    }

    /// Starts an index run of the default workspace and returns its progress once `fake`, the
    /// embedding endpoint set to [`FakeEmbeddings::hold`], holds the run's first request: every
    /// file is parsed and the run waits at the model.
    pub async fn index_run_held(
        &self,
        fake: &FakeEmbeddings,
    ) -> Result<tonic::Streaming<IndexProgress>, tonic::Status> {
        let run = self
            .rag()
            .index_workspace(IndexWorkspaceRequest::default())
            .await?
            .into_inner();
        fake.held_request().await;
        Ok(run)
    }

    /// The channel of one service, sending the services' internal token.
    pub fn internal(&self, service: ServiceKind) -> TracedChannel {
        ploke_runtime::client::internal(self.channel(service), &self.channels.internal)
    }

    /// The internal tokens the services were started with (a random one unless configured).
    pub fn internal_tokens(&self) -> &InternalTokens {
        &self.channels.internal
    }

    /// The channel of one service, without any token.
    pub fn channel(&self, service: ServiceKind) -> Channel {
        match service {
            ServiceKind::Gateway => self.channels.gateway.clone(),
            ServiceKind::LlmSession => self.channels.sessions.clone(),
            ServiceKind::ToolExecutor => self.channels.tools.clone(),
            ServiceKind::RagSearch => self.channels.rag.clone(),
        }
    }

    /// Stops every service and reports the first failure.
    pub async fn stop(self) -> Result<(), EmbeddedError> {
        drop(self.channels);
        self.embedded.stop().await
    }
}
