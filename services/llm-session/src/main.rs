//! `ploke-llm-session`: parse flags and config, then serve until SIGTERM/Ctrl-C.

use clap::Parser;
use ploke_runtime::cli::CommonArgs;
use ploke_runtime::{PlokeConfig, ServiceKind};

/// ploke llm-session: model turns, tools and durable resumable events over gRPC.
#[derive(Debug, Parser)]
#[command(version = ploke_runtime::build::LONG_VERSION)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> std::process::ExitCode {
    ploke_runtime::binary::main(main_async())
}

async fn main_async() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = PlokeConfig::load_from_process(ServiceKind::LlmSession, &args.common)?;
    ploke_runtime::binary::run(
        ServiceKind::LlmSession,
        config,
        |config, listener, shutdown| {
            ploke_llm_session::serve(ploke_llm_session::Config::from(&config), listener, shutdown)
        },
    )
    .await?;
    Ok(())
}
