//! `ploke-tool-executor`: parse flags and config, start telemetry, serve until SIGTERM/Ctrl-C.

use anyhow::Context as _;
use clap::Parser;
use ploke_runtime::cli::CommonArgs;
use ploke_runtime::{PlokeConfig, ServiceKind};

/// ploke tool-executor: typed tools and staged edits over gRPC.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = PlokeConfig::load_from_process(ServiceKind::ToolExecutor, &args.common)?;
    let telemetry =
        ploke_runtime::telemetry::init(ServiceKind::ToolExecutor.binary(), &config.telemetry)?;
    let addr = config.listen(ServiceKind::ToolExecutor);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let result = ploke_tool_executor::serve(
        ploke_tool_executor::Config::from(&config),
        listener,
        ploke_runtime::shutdown::signal(),
    )
    .await;
    telemetry.shutdown();
    Ok(result?)
}
