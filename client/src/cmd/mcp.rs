//! `ploke mcp`: ploke's tools for an MCP client over stdio (the client starts this command).
//! It reaches the services like every other command — a gateway named with `--gateway` and
//! `PLOKE_TOKEN`, a `ploke up` of this workspace, or the services started in this process,
//! which index in the background (tools answer from the index as it is built). stdout carries
//! only the protocol; logs go to stderr.

use std::sync::Arc;

use anyhow::Context as _;
use ploke_gateway::mcp::{McpServer, Options};
use ploke_runtime::{PlokeConfig, ServiceKind};
use rmcp::ServiceExt as _;

use super::{Conn, Target};

/// `ploke mcp`.
pub(crate) async fn mcp(target: &Target, max_result_tokens: Option<u32>) -> anyhow::Result<()> {
    let defaults = PlokeConfig::load_from_process(
        ServiceKind::Gateway,
        &ploke_runtime::cli::CommonArgs {
            config: target.config.clone(),
            ..Default::default()
        },
    )?;
    // The MCP client keeps this process's stderr as its log: warnings and errors only, unless
    // a level was asked for (`PLOKE_LOG`, `[telemetry] log_filter`, `RUST_LOG`).
    let mut telemetry = defaults.telemetry.clone();
    if telemetry.log_filter == ploke_runtime::config::TelemetryConfig::default().log_filter {
        telemetry.log_filter = "warn".into();
    }
    let _telemetry = ploke_runtime::telemetry::init("ploke-mcp", &telemetry)?;
    PlokeConfig::warn_unknown_process_env();
    let max_result_tokens = max_result_tokens.unwrap_or(defaults.gateway.mcp_max_result_tokens);
    if max_result_tokens < ploke_runtime::config::GatewayConfig::MIN_MCP_RESULT_TOKENS {
        anyhow::bail!(
            "--max-result-tokens {max_result_tokens} is below {}",
            ploke_runtime::config::GatewayConfig::MIN_MCP_RESULT_TOKENS
        );
    }
    let mut conn = Conn::open_indexing(target, None).await?;
    // With a shared gateway, the tools work in the workspace this checkout stands for (named
    // with --server-workspace, or found by its git remote); when that cannot be told, the
    // gateway's default, and the MCP client may name another in each call.
    let workspace = match conn.workspace_root().await {
        Ok(root) if !root.is_empty() => Some(root),
        Ok(_) => None,
        Err(e) if target.server_workspace.is_some() => return Err(e),
        Err(e) => {
            tracing::warn!(error = %crate::describe::error(&e), "using the gateway's default workspace");
            None
        }
    };
    let backend = ploke_client::mcp::Remote::new(conn.gateway.clone());
    let options = Options {
        max_result_tokens,
        workspace,
        authenticated: false,
    };
    let server = McpServer::new(Arc::new(backend), Arc::new(options));
    tracing::info!("ploke mcp serving on stdio");
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .context("starting MCP on stdio")?;
    let quit = running.waiting().await;
    conn.close().await?;
    quit.context("serving MCP on stdio")?;
    Ok(())
}
