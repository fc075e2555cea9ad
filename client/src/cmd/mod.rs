//! The commands of `ploke` and how they reach the services: a gateway named with `--gateway`
//! (token from `PLOKE_TOKEN`), else a `ploke up` already serving this workspace on the default
//! port, else the services started in this process for the workspace.

pub mod ask;
pub mod chat;
pub mod edits;
pub mod providers;
pub mod query;
pub mod up;
pub mod workspaces;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use ploke_client::embedded::Embedded;
use ploke_proto::gateway::v1::gateway_client::GatewayClient;
use ploke_proto::rag::v1::IndexStatusRequest;
use ploke_runtime::ServiceKind;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// Adds `authorization: Bearer TOKEN` when there is a token.
#[derive(Debug, Clone)]
pub struct Auth(Option<MetadataValue<Ascii>>);

impl Interceptor for Auth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            request.metadata_mut().insert("authorization", v.clone());
        }
        Ok(request)
    }
}

/// A gateway client.
pub type Gateway = GatewayClient<InterceptedService<Channel, Auth>>;

/// The gateway the default `ploke up` serves.
pub const DEFAULT_GATEWAY: &str = "http://127.0.0.1:50051";

/// Connects to the gateway at `url`.
pub async fn connect(url: &str, token: Option<String>) -> anyhow::Result<Gateway> {
    let channel = Endpoint::from_shared(url.to_owned())
        .with_context(|| format!("gateway URL `{url}`"))?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .with_context(|| format!("connecting to the gateway at {url}"))?;
    Ok(GatewayClient::with_interceptor(channel, auth(token)?))
}

/// The interceptor that sends `token`.
fn auth(token: Option<String>) -> anyhow::Result<Auth> {
    let value = match token {
        Some(t) => Some(
            format!("Bearer {t}")
                .parse()
                .context("PLOKE_TOKEN is not a valid header value")?,
        ),
        None => None,
    };
    Ok(Auth(value))
}

/// Where a command's services are.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// Gateway URL [env: PLOKE_GATEWAY]; without it, a `ploke up` of this workspace on the
    /// default port, else the services started in this process.
    #[arg(long, value_name = "URL", env = "PLOKE_GATEWAY", global = true)]
    pub gateway: Option<String>,
    /// The workspace (default: the current directory).
    #[arg(long, value_name = "DIR", global = true)]
    pub workspace: Option<PathBuf>,
    /// Config file (`ploke.toml`) for services started in this process [env: PLOKE_CONFIG].
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
}

/// A connection, and the services behind it when this process runs them.
#[derive(Debug)]
pub struct Conn {
    /// The gateway.
    pub gateway: Gateway,
    embedded: Option<Embedded>,
    /// The provider found for in-process services (`None` when remote or none).
    pub provider: Option<String>,
    /// Whether opening indexed the workspace (in-process services).
    pub indexed: bool,
}

impl Conn {
    /// Opens the target; in-process services index the workspace first.
    pub async fn open(target: &Target) -> anyhow::Result<Self> {
        let token = std::env::var("PLOKE_TOKEN").ok().filter(|t| !t.is_empty());
        if let Some(url) = &target.gateway {
            return Ok(Self {
                gateway: connect(url, token).await?,
                embedded: None,
                provider: None,
                indexed: false,
            });
        }
        let workspace = up::workspace(target.workspace.clone())?;
        if let Some(gateway) = serving(&workspace, token).await {
            return Ok(Self {
                gateway,
                embedded: None,
                provider: None,
                indexed: false,
            });
        }
        let (mut cfg, provider) = up::embedded_config(&workspace, target.config.clone()).await?;
        // Services for this one command only: any free loopback ports, so that two commands
        // (or a command beside another workspace's `ploke up`) never compete for the defaults.
        for kind in [
            ServiceKind::Gateway,
            ServiceKind::LlmSession,
            ServiceKind::ToolExecutor,
            ServiceKind::RagSearch,
        ] {
            cfg.set_listen(
                kind,
                std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
            );
        }
        let embedded = Embedded::start(cfg).await?;
        let mut gateway = connect(&embedded.addrs.url(ServiceKind::Gateway), None).await?;
        up::index(&mut gateway, false, false).await?;
        Ok(Self {
            gateway,
            embedded: Some(embedded),
            provider,
            indexed: true,
        })
    }

    /// Stops services this process started.
    pub async fn close(self) -> anyhow::Result<()> {
        if let Some(e) = self.embedded {
            e.stop().await?;
        }
        Ok(())
    }
}

/// A `ploke up` on the default port serving `workspace`, if there is one.
async fn serving(workspace: &std::path::Path, token: Option<String>) -> Option<Gateway> {
    let channel = Endpoint::from_static(DEFAULT_GATEWAY)
        .connect_timeout(Duration::from_millis(300))
        .connect()
        .await
        .ok()?;
    let mut gateway = GatewayClient::with_interceptor(channel, auth(token).ok()?);
    let status = gateway
        .index_status(IndexStatusRequest {
            workspace_root: workspace.display().to_string(),
        })
        .await
        .ok()?;
    (status.into_inner().workspace_root == workspace.display().to_string()).then_some(gateway)
}
