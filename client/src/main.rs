//! `ploke`: the terminal client. `ploke up` hosts all four services in this process on
//! loopback (the embedded default); `ploke status` asks a gateway for the system's health.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use ploke_client::embedded::Embedded;
use ploke_proto::gateway::v1::gateway_client::GatewayClient;
use ploke_proto::gateway::v1::{GetSystemStatusRequest, ServingState, SystemStatus};
use ploke_proto::rag::v1::{IndexPhase, IndexWorkspaceRequest};
use ploke_runtime::cli::CommonArgs;
use ploke_runtime::{PlokeConfig, ServiceKind};
use tokio_stream::StreamExt as _;

/// ploke: chat with an LLM about your repository, with exact code context.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run all four services in this process on loopback, for one workspace.
    Up {
        /// The workspace (default: the current directory). State goes to DIR/.ploke.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Config file (`ploke.toml`) [env: PLOKE_CONFIG].
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Start, print the status and stop (a smoke test of the deployment).
        #[arg(long)]
        check: bool,
    },
    /// Show the health of a gateway and the services behind it.
    Status {
        /// Gateway URL [env: PLOKE_GATEWAY].
        #[arg(
            long,
            value_name = "URL",
            env = "PLOKE_GATEWAY",
            default_value = "http://127.0.0.1:50051"
        )]
        gateway: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Up {
            workspace,
            config,
            check,
        } => up(workspace, config, check).await,
        Command::Status { gateway } => {
            let status = system_status(&gateway, std::env::var("PLOKE_TOKEN").ok()).await?;
            print_status(&gateway, &status);
            if status
                .services
                .iter()
                .any(|s| s.state != ServingState::Serving as i32)
            {
                bail!("some services are not serving");
            }
            Ok(())
        }
    }
}

async fn up(
    workspace: Option<PathBuf>,
    config: Option<PathBuf>,
    check: bool,
) -> anyhow::Result<()> {
    let workspace = match workspace {
        Some(dir) => dir,
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let workspace = std::fs::canonicalize(&workspace)
        .with_context(|| format!("workspace {}", workspace.display()))?;
    let args = CommonArgs {
        config,
        workspace: vec![workspace.clone()],
        ..CommonArgs::default()
    };
    let mut cfg = PlokeConfig::load_from_process(ServiceKind::Gateway, &args)?;
    if !cfg.workspaces.contains(&workspace) {
        cfg.workspaces.insert(0, workspace.clone());
    }
    if cfg.data_dir == PlokeConfig::default().data_dir {
        cfg.data_dir = workspace.join(".ploke");
    }
    // The embedded gateway needs no token, but only while every service stays on loopback.
    for kind in [
        ServiceKind::Gateway,
        ServiceKind::LlmSession,
        ServiceKind::ToolExecutor,
        ServiceKind::RagSearch,
    ] {
        if !cfg.listen(kind).ip().is_loopback() {
            bail!(
                "`ploke up` binds loopback only; {} is configured to listen on {}",
                kind.binary(),
                cfg.listen(kind)
            );
        }
    }
    cfg.gateway.allow_unauthenticated = true;
    // Dense retrieval when a model is at hand: the configured one, else the one
    // scripts/fetch-model puts in the user's cache.
    if cfg.rag_search.embed_model.is_none() {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
        if let Some(dir) = cache.map(|c| c.join("ploke/models/all-MiniLM-L6-v2"))
            && dir.join("model.safetensors").is_file()
        {
            cfg.rag_search.embed_model = Some(dir);
        }
    }
    let _telemetry = ploke_runtime::telemetry::init("ploke", &cfg.telemetry)?;
    std::fs::create_dir_all(&cfg.data_dir)
        .with_context(|| format!("creating {}", cfg.data_dir.display()))?;

    let embedded = Embedded::start(cfg).await?;
    let gateway = embedded.addrs.url(ServiceKind::Gateway);
    println!("ploke up: workspace {}", workspace.display());
    let status = system_status(&gateway, None).await?;
    print_status(&gateway, &status);
    index(&gateway).await?;
    if check {
        embedded.stop().await?;
        return Ok(());
    }
    println!(
        "\nthe services run until Ctrl-C; try `ploke status` or `grpcurl -plaintext {} list`",
        embedded.addrs.gateway
    );
    let stop = embedded.shutdown_handle();
    tokio::spawn(async move {
        ploke_runtime::shutdown::signal().await;
        stop.trigger();
    });
    embedded.wait().await?;
    Ok(())
}

/// Indexes the workspace through the gateway, printing progress on one line.
async fn index(gateway: &str) -> anyhow::Result<()> {
    use std::io::Write as _;

    let channel = tonic::transport::Endpoint::from_shared(gateway.to_owned())?
        .connect()
        .await?;
    let mut stream = GatewayClient::new(channel)
        .index_workspace(IndexWorkspaceRequest::default())
        .await
        .map_err(|s| anyhow::anyhow!("indexing: {}: {}", s.code(), s.message()))?
        .into_inner();
    let mut last = None;
    while let Some(p) = stream.next().await {
        let p = p.map_err(|s| anyhow::anyhow!("indexing: {}: {}", s.code(), s.message()))?;
        let phase = IndexPhase::try_from(p.phase)
            .map(|ph| {
                ph.as_str_name()
                    .trim_start_matches("INDEX_PHASE_")
                    .to_lowercase()
            })
            .unwrap_or_default();
        print!(
            "\r  indexing: {phase:<10} files {}/{}  items {}  embedded {}      ",
            p.files_done, p.files_total, p.items_done, p.embedded_done
        );
        let _ = std::io::stdout().flush();
        last = Some(p);
    }
    println!();
    if let Some(p) = last {
        println!("  {}", p.message);
    }
    Ok(())
}

async fn system_status(gateway: &str, token: Option<String>) -> anyhow::Result<SystemStatus> {
    let channel = tonic::transport::Endpoint::from_shared(gateway.to_owned())
        .with_context(|| format!("gateway URL `{gateway}`"))?
        .connect()
        .await
        .with_context(|| format!("connecting to the gateway at {gateway}"))?;
    let mut request = tonic::Request::new(GetSystemStatusRequest {});
    if let Some(token) = token {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {token}")
                .parse()
                .context("PLOKE_TOKEN is not a valid header value")?,
        );
    }
    let status = GatewayClient::new(channel)
        .get_system_status(request)
        .await
        .map_err(|s| anyhow::anyhow!("gateway {gateway}: {}: {}", s.code(), s.message()))?;
    Ok(status.into_inner())
}

fn print_status(gateway: &str, status: &SystemStatus) {
    println!(
        "  {:<30} {:<28} SERVING   (version {})",
        "ploke.gateway.v1.Gateway", gateway, status.version
    );
    for s in &status.services {
        let state = ServingState::try_from(s.state)
            .map(|st| {
                st.as_str_name()
                    .trim_start_matches("SERVING_STATE_")
                    .to_owned()
            })
            .unwrap_or_else(|_| s.state.to_string());
        let detail = if s.message.is_empty() {
            format!("{} µs", s.latency_us)
        } else {
            s.message.clone()
        };
        println!(
            "  {:<30} {:<28} {:<9} {}",
            s.service, s.endpoint, state, detail
        );
    }
}
