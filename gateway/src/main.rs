//! `ploke-gateway`: parse flags and config, start telemetry, serve until SIGTERM/Ctrl-C.

use anyhow::Context as _;
use clap::Parser;
use ploke_runtime::cli::CommonArgs;
use ploke_runtime::{PlokeConfig, ServiceKind};

/// ploke gateway: the authenticated door for ploke clients.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = PlokeConfig::load_from_process(ServiceKind::Gateway, &args.common)?;
    let telemetry =
        ploke_runtime::telemetry::init(ServiceKind::Gateway.binary(), &config.telemetry)?;
    let addr = config.listen(ServiceKind::Gateway);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let result = ploke_gateway::serve(
        ploke_gateway::Config::from(&config),
        listener,
        ploke_runtime::shutdown::signal(),
    )
    .await;
    telemetry.shutdown();
    Ok(result?)
}
