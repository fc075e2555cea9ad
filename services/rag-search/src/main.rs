//! `ploke-rag-search`: parse flags and config, start telemetry, serve until SIGTERM/Ctrl-C.

use std::path::PathBuf;

use clap::Parser;
use ploke_runtime::cli::CommonArgs;
use ploke_runtime::{PlokeConfig, ServiceKind};

/// mimalloc reuses freed memory: candle allocates a fresh tensor per operation, and the system
/// allocator returns large ones to the kernel each time (page faults and zeroing cost ~10 % of
/// embedding throughput; docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// ploke rag-search: code index, hybrid search and token-budgeted context over gRPC.
#[derive(Debug, Parser)]
#[command(version = ploke_runtime::build::LONG_VERSION)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Local embedding model directory (config.json, tokenizer.json, model.safetensors)
    /// [env: PLOKE_EMBED_MODEL].
    #[arg(long, value_name = "DIR")]
    embed_model: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    ploke_runtime::binary::main(main_async())
}

async fn main_async() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut config = PlokeConfig::load_from_process(ServiceKind::RagSearch, &args.common)?;
    if let Some(dir) = args.embed_model {
        config.rag_search.embed_model = Some(dir);
    }
    ploke_runtime::binary::run(
        ServiceKind::RagSearch,
        config,
        |config, listener, shutdown| {
            ploke_rag_search::serve(ploke_rag_search::Config::from(&config), listener, shutdown)
        },
    )
    .await?;
    Ok(())
}
