//! What the benches that run the real server share: starting the `ploke-rag-search` binary in
//! its own process over a workspace, as an operator runs it.

use std::path::Path;
use std::time::Duration;

use ploke_runtime::testing::RunningBinary;

/// Starts `ploke-rag-search` over `workspace` with its index in `data_dir` (and `embed_model`
/// when given), plus `extra` flags; waits up to two minutes for it to serve.
pub(crate) fn start_server(
    workspace: &Path,
    data_dir: &Path,
    embed_model: Option<&Path>,
    extra: &[&str],
) -> anyhow::Result<RunningBinary> {
    start_server_binary(
        Path::new(env!("CARGO_BIN_EXE_ploke-rag-search")),
        workspace,
        data_dir,
        embed_model,
        extra,
    )
}

/// [`start_server`] with another build of the server, or a script that runs it (another
/// commit's binary to compare against; valgrind around it: `scripts/bench-instructions`).
pub(crate) fn start_server_binary(
    binary: &Path,
    workspace: &Path,
    data_dir: &Path,
    embed_model: Option<&Path>,
    extra: &[&str],
) -> anyhow::Result<RunningBinary> {
    let mut flags = vec![
        "--workspace".to_owned(),
        workspace.display().to_string(),
        "--data-dir".to_owned(),
        data_dir.display().to_string(),
    ];
    if let Some(model) = embed_model {
        flags.extend(["--embed-model".to_owned(), model.display().to_string()]);
    }
    flags.extend(extra.iter().map(|f| (*f).to_owned()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    // Under valgrind the server starts ~50x slower.
    Ok(RunningBinary::start(
        binary,
        &flags,
        Duration::from_secs(600),
    )?)
}
