//! `ploke-llm-session`: parse flags and config, start telemetry, serve until SIGTERM/Ctrl-C.

use anyhow::Context as _;
use clap::Parser;
use ploke_runtime::cli::CommonArgs;
use ploke_runtime::{PlokeConfig, ServiceKind};

/// ploke llm-session: model turns, tools and durable resumable events over gRPC.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = PlokeConfig::load_from_process(ServiceKind::LlmSession, &args.common)?;
    let telemetry =
        ploke_runtime::telemetry::init(ServiceKind::LlmSession.binary(), &config.telemetry)?;
    let addr = config.listen(ServiceKind::LlmSession);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let result = ploke_llm_session::serve(
        ploke_llm_session::Config::from(&config),
        listener,
        ploke_runtime::shutdown::signal(),
    )
    .await;
    telemetry.shutdown();
    Ok(result?)
}
