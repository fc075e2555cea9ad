//! `ploke up` (all four services in this process on loopback), the configuration of that
//! embedded deployment, indexing with a progress line, and `ploke status`.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use ploke_client::embedded::Embedded;
use ploke_proto::gateway::v1::{GetSystemStatusRequest, ServingState, SystemStatus};
use ploke_proto::rag::v1::{IndexPhase, IndexStatusRequest, IndexWorkspaceRequest};
use ploke_runtime::cli::CommonArgs;
use ploke_runtime::{PlokeConfig, ServiceKind};

use super::{Gateway, providers, running};

/// Where `ploke up` serves MCP unless `[gateway] mcp_listen` says otherwise.
pub(crate) const DEFAULT_MCP_LISTEN: std::net::SocketAddr = std::net::SocketAddr::V4(
    std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 50055),
);

/// The configuration of the embedded deployment for `workspace`: state under
/// `WORKSPACE/.ploke`, loopback only, no token, the cached model if there is one, and a
/// provider from the config files or the environment.
pub(crate) async fn embedded_config(
    workspace: &Path,
    config: Option<PathBuf>,
) -> anyhow::Result<(PlokeConfig, Option<String>)> {
    let (_, cfg, provider) = embedded_layers(workspace, config).await?;
    let data_dir = std::env::current_dir()
        .unwrap_or_default()
        .join(&cfg.data_dir);
    if data_dir.starts_with(workspace) && !data_dir.starts_with(workspace.join(".ploke")) {
        bail!(
            "data_dir {} is inside the workspace {}: its index, sessions and logs would be \
             indexed and read by the model's tools; set a directory outside the workspace, or \
             leave data_dir unset for {}",
            data_dir.display(),
            workspace.display(),
            workspace.join(".ploke").display()
        );
    }
    std::fs::create_dir_all(&cfg.data_dir)
        .with_context(|| format!("creating {}", cfg.data_dir.display()))?;
    if cfg.data_dir == workspace.join(".ploke") {
        ignored_by_git(&cfg.data_dir);
    }
    Ok((cfg, provider))
}

/// Puts a `.gitignore` of `*` in ploke's state directory, so that git ignores it without a
/// change to the repository's own `.gitignore` (a user's own file there is left alone). It is
/// written whole or not at all (a temporary file renamed), and an empty one — a write a full
/// disk cut short — is written again: git would otherwise list sessions and proposals.
pub(crate) fn ignored_by_git(state: &Path) {
    let file = state.join(".gitignore");
    if std::fs::metadata(&file).is_ok_and(|m| m.len() > 0) {
        return;
    }
    let temporary = state.join(".gitignore.ploke-tmp");
    let written = std::fs::write(
        &temporary,
        "# ploke's state (index, sessions, logs): not part of the repository\n*\n",
    )
    .and_then(|()| std::fs::rename(&temporary, &file));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        tracing::warn!(path = %file.display(), error = %e, "ploke's state is not ignored by git");
    }
}

/// The config files a command reads, lowest first: `--config` / `PLOKE_CONFIG` alone when
/// given; else the user's (`$XDG_CONFIG_HOME/ploke/config.toml`, `~/.config/ploke/…`) and
/// then the workspace's `ploke.toml`, each when it exists — found like cargo's and git's.
pub(crate) fn config_files(workspace: &Path, explicit: Option<PathBuf>) -> Vec<(PathBuf, bool)> {
    let explicit = explicit.or_else(|| {
        std::env::var_os("PLOKE_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    if let Some(file) = explicit {
        return vec![(file, true)];
    }
    let user = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|dir| dir.join("ploke").join("config.toml"));
    user.into_iter()
        .chain([workspace.join("ploke.toml")])
        .map(|f| {
            let found = f.is_file();
            (f, found)
        })
        .collect()
}

/// [`embedded_config`], with the layers it was built from (for `ploke config`).
pub(crate) async fn embedded_layers(
    workspace: &Path,
    config: Option<PathBuf>,
) -> anyhow::Result<(ploke_runtime::config::Layers, PlokeConfig, Option<String>)> {
    let args = CommonArgs {
        workspace: vec![workspace.to_owned()],
        ..CommonArgs::default()
    };
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    for name in PlokeConfig::unknown_env(&names) {
        eprintln!("warning: ignoring unknown environment variable {name}");
    }
    let files: Vec<PathBuf> = config_files(workspace, config)
        .into_iter()
        .filter(|(_, found)| *found)
        .map(|(f, _)| f)
        .collect();
    let layers = PlokeConfig::load_layers(ServiceKind::Gateway, &files, &args, &|k| {
        std::env::var(k).ok()
    })?;
    let mut cfg = layers.config.clone();
    if !cfg.workspaces.iter().any(|w| w == workspace) {
        cfg.workspaces.insert(0, workspace.to_owned());
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
                "`ploke` runs the services on loopback only; {} is configured to listen on {}",
                kind.binary(),
                cfg.listen(kind)
            );
        }
    }
    cfg.gateway.allow_unauthenticated = true;
    // The cached model, unless the configuration names a model or an embedding endpoint.
    if cfg.rag_search.embed_model.is_none() && cfg.embedding.is_none() {
        cfg.rag_search.embed_model = cached_model();
    }
    let provider = providers::detect(&mut cfg).await;
    Ok((layers, cfg, provider))
}

/// The model `scripts/fetch-model` puts in the user's cache, if it is there.
fn cached_model() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let dir = cache.join("ploke/models/all-MiniLM-L6-v2");
    dir.join("model.safetensors").is_file().then_some(dir)
}

/// The workspace a command means: `--workspace`, else the current directory.
pub(crate) fn workspace(dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(d) => d,
        None => {
            let here = std::env::current_dir().context("reading the current directory")?;
            let here = std::fs::canonicalize(&here)
                .with_context(|| format!("workspace {}", here.display()))?;
            return Ok(enclosing(
                &here,
                std::env::var_os("HOME").map(PathBuf::from).as_deref(),
            ));
        }
    };
    std::fs::canonicalize(&dir).with_context(|| format!("workspace {}", dir.display()))
}

/// The workspace a command run in `here` stands for: the nearest directory at or above it
/// that holds `ploke.toml`, `.ploke/` or `.git` (a repository's root, as git and cargo find
/// theirs), else `here`. The home directory and `/` are never taken (a dotfiles repository in
/// `~` must not make every directory below it one workspace).
pub(crate) fn enclosing(here: &Path, home: Option<&Path>) -> PathBuf {
    here.ancestors()
        .take_while(|d| d.parent().is_some() && Some(*d) != home)
        .find(|d| {
            d.join("ploke.toml").is_file() || d.join(".ploke").is_dir() || d.join(".git").exists()
        })
        .unwrap_or(here)
        .to_owned()
}

/// `ploke up`.
pub(crate) async fn up(
    workspace_dir: Option<PathBuf>,
    config: Option<PathBuf>,
    check: bool,
    no_tui: bool,
    port_base: Option<u16>,
) -> anyhow::Result<()> {
    let workspace = workspace(workspace_dir)?;
    let (mut cfg, provider) = embedded_config(&workspace, config).await?;
    if cfg.gateway.mcp_listen.is_none() {
        cfg.gateway.mcp_listen = Some(DEFAULT_MCP_LISTEN);
    }
    if let Some(addr) = cfg.gateway.mcp_listen
        && !addr.ip().is_loopback()
    {
        bail!("`ploke up` serves MCP on loopback only; [gateway] mcp_listen is {addr}");
    }
    if let Some(other) = running::Record::read(&workspace)
        && running::answering(&other.gateway, &workspace, None)
            .await
            .is_some()
    {
        bail!(
            "another `ploke up` (pid {}) already serves {} at {}; use it (`ploke chat`, `ploke ask` \
             here find it) or stop it first",
            other.pid,
            workspace.display(),
            other.gateway
        );
    }
    if let Some(base) = port_base {
        running::use_port_base(&mut cfg, base)?;
    }
    // With the TUI on this terminal, the services' logs go to files instead of over it.
    let tui =
        !no_tui && !check && std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let (_telemetry, notices, log_dir) = if tui {
        let (guard, notices, dir) = super::tui_logging(&workspace, &cfg.telemetry)?;
        (guard, Some(notices), Some(dir))
    } else {
        let guard = ploke_runtime::telemetry::init_to("ploke", &cfg.telemetry, None)?;
        (guard, None, None)
    };
    // The default ports taken (another repository's `ploke up`): any free ones, recorded in
    // .ploke/up.json for the other commands. Ports the user chose are never changed.
    let defaults = running::on_default_ports(&cfg, DEFAULT_MCP_LISTEN);
    let embedded = match Embedded::start(cfg.clone()).await {
        Err(ploke_client::embedded::EmbeddedError::Bind { source, .. })
            if defaults && source.kind() == std::io::ErrorKind::AddrInUse =>
        {
            println!("(the default ports are taken, another `ploke up`? using free ones)");
            running::use_free_ports(&mut cfg);
            Embedded::start(cfg).await?
        }
        started => started?,
    };
    let url = embedded.addrs.url(ServiceKind::Gateway);
    let record = running::Record {
        pid: std::process::id(),
        workspace: workspace.clone(),
        gateway: url.clone(),
        mcp: embedded.mcp.map(|a| format!("http://{a}/mcp")),
    };
    record.write(&workspace)?;
    let served = serve(embedded, &workspace, tui, check, provider, notices, log_dir).await;
    record.remove(&workspace);
    served
}

/// Serves until the user quits (the TUI) or Ctrl-C; `check` stops after the index.
async fn serve(
    embedded: Embedded,
    workspace: &Path,
    tui: bool,
    check: bool,
    provider: Option<String>,
    notices: Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
    log_dir: Option<PathBuf>,
) -> anyhow::Result<()> {
    let url = embedded.addrs.url(ServiceKind::Gateway);
    println!("ploke up: workspace {}", workspace.display());
    let started = async {
        let mut gateway = super::connect(&url, None).await?;
        let status = system_status(&mut gateway).await?;
        anyhow::Ok((gateway, status))
    };
    let (mut gateway, status) = match started.await {
        Ok(started) => started,
        Err(e) => return Err(why_stopped(embedded, e).await),
    };
    print_status(&url, &status);
    if let Some(addr) = embedded.metrics {
        println!("  metrics: http://{addr}/metrics");
    }
    if let Some(addr) = embedded.mcp {
        println!(
            "  MCP: http://{addr}/mcp  (claude mcp add --transport http ploke http://{addr}/mcp; docs/MCP.md)"
        );
    }
    match provider {
        Some(p) => println!("  model provider: {p}"),
        None => println!("  model provider: none ({})", providers::NONE_HINT),
    }
    if let Some(dir) = &log_dir {
        println!("  logs: {}", dir.display());
    }
    if tui {
        // The TUI opens at once: the services index in the background and the tools answer
        // from what is indexed so far; the status bar shows the progress.
        let which = super::chat::Which::default();
        let session = match super::chat::open_session(&mut gateway, which, "").await {
            Ok(s) => Some(s),
            Err(e) if e.downcast_ref::<super::chat::NoProvider>().is_some() => None,
            Err(e) => return Err(why_stopped(embedded, e).await),
        };
        let options = crate::tui::Options {
            session,
            workspace_root: String::new(),
            checkout: None,
            notices,
            no_provider: super::chat::no_provider_text(),
            fresh: true,
        };
        let ran = crate::tui::run(gateway.clone(), options).await;
        super::stop_visibly(embedded.stop()).await?;
        return ran;
    }
    if let Err(e) = index(&mut gateway, "", (false, Until::Done), false).await {
        return Err(why_stopped(embedded, e).await);
    }
    if check {
        // Judged once the index is done: at the start a service may still be binding its port.
        let after = system_status(&mut gateway).await;
        let failing: Vec<String> = match &after {
            Ok(status) => status
                .services
                .iter()
                .filter(|s| s.state != ServingState::Serving as i32)
                .map(|s| s.service.clone())
                .collect(),
            Err(e) => vec![format!("the gateway ({e})")],
        };
        if let (Ok(status), false) = (&after, failing.is_empty()) {
            println!("after indexing:");
            print_status(&url, status);
        }
        embedded.stop().await?;
        if !failing.is_empty() {
            anyhow::bail!("not serving: {}", failing.join(", "));
        }
        return Ok(());
    }
    // Handlers first: a signal right after the line below must drain, not kill.
    let signalled = ploke_runtime::shutdown::signal();
    let stop = embedded.shutdown_handle();
    tokio::spawn(async move {
        signalled.await;
        stop.trigger();
    });
    println!(
        "\nthe services run until Ctrl-C; in another terminal: `ploke ask \"…\"`, `ploke search \"…\"`, \
         `ploke edits`, or `grpcurl -plaintext {} list`",
        embedded.addrs.gateway
    );
    embedded.wait().await?;
    Ok(())
}

/// What to report when talking to the services failed with `e`: the failure of the service
/// that stopped them all (a model that does not load, a database that refuses) rather than the
/// refused connection it caused; the services are stopped either way.
pub(super) async fn why_stopped(embedded: Embedded, e: anyhow::Error) -> anyhow::Error {
    match super::stop_visibly(embedded.stop()).await {
        Err(failed) => failed.into(),
        Ok(()) => e,
    }
}

/// How long [`index`] follows a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// To its end, embeddings included (`ploke index`).
    Done,
    /// Until keyword search answers from it (its items committed); the embedding goes on in
    /// the background, and searches use vectors as they come.
    Searchable,
}

/// Indexes `workspace_root` (empty = the gateway's default), with a progress line on stderr
/// unless `quiet`.
pub(crate) async fn index(
    gateway: &mut Gateway,
    workspace_root: &str,
    (force, until): (bool, Until),
    quiet: bool,
) -> anyhow::Result<()> {
    let started = gateway
        .index_workspace(IndexWorkspaceRequest {
            workspace_root: workspace_root.to_owned(),
            force,
        })
        .await;
    let mut stream = match started {
        Ok(s) => s.into_inner(),
        Err(s) => return last_index(gateway, workspace_root, until, &s).await,
    };
    let mut last = None;
    // An early return (an error) leaves no status line open for the next log line.
    let _drawing = ploke_runtime::telemetry::status_line::Drawing;
    loop {
        let p = match stream.message().await {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(s) => return last_index(gateway, workspace_root, until, &s).await,
        };
        if !quiet {
            let phase = IndexPhase::try_from(p.phase)
                .map(|ph| crate::describe::lower(ph.as_str_name(), "INDEX_PHASE_"))
                .unwrap_or_default();
            ploke_runtime::telemetry::status_line::draw(&format!(
                "\r  indexing {} {phase:<10} files {}/{}  items {}  embedded {}   ",
                bar(p.files_done, p.files_total),
                p.files_done,
                p.files_total,
                p.items_done,
                p.embedded_done
            ));
        }
        let searchable = p.phase == IndexPhase::Embedding as i32;
        if until == Until::Searchable && searchable {
            if !quiet {
                ploke_runtime::telemetry::status_line::end();
                eprintln!(
                    "  {} items searchable by keywords; embedding {}/{} goes on in the background",
                    p.items_done, p.embedded_done, p.items_total
                );
            }
            return Ok(());
        }
        last = Some(p);
    }
    if !quiet {
        ploke_runtime::telemetry::status_line::end();
        if let Some(p) = last {
            eprintln!("  {}", p.message);
        }
    }
    Ok(())
}

/// An index run that failed. Where the command only needs something to search, an index that
/// cannot be brought up to date for want of storage (a full disk) is searched as it was
/// committed last, with a warning; with none committed, and for any other failure, the
/// command fails.
async fn last_index(
    gateway: &mut Gateway,
    workspace_root: &str,
    until: Until,
    failed: &tonic::Status,
) -> anyhow::Result<()> {
    ploke_runtime::telemetry::status_line::end();
    if until == Until::Searchable && for_want_of_storage(failed) {
        let status = gateway
            .index_status(IndexStatusRequest {
                workspace_root: workspace_root.to_owned(),
            })
            .await
            .map(tonic::Response::into_inner);
        if let Ok(status) = status
            && status.items > 0
        {
            eprintln!(
                "(the index was not brought up to date: {}; searching the last one, {} items)",
                failed.message(),
                status.items
            );
            return Ok(());
        }
    }
    anyhow::bail!("indexing: {}", failed.message())
}

/// Whether an index run failed because its index could not be written (rag-search's
/// UNAVAILABLE "index storage unavailable": a full disk, a data dir gone).
fn for_want_of_storage(failed: &tonic::Status) -> bool {
    failed.code() == tonic::Code::Unavailable
        && failed.message().starts_with("index storage unavailable")
}

/// A 24-cell progress bar.
fn bar(done: u64, total: u64) -> String {
    const CELLS: u64 = 24;
    let filled = (done.min(total) * CELLS).checked_div(total).unwrap_or(0) as usize;
    format!(
        "[{}{}]",
        "#".repeat(filled),
        " ".repeat(CELLS as usize - filled)
    )
}

/// The gateway's view of the system.
pub(crate) async fn system_status(gateway: &mut Gateway) -> anyhow::Result<SystemStatus> {
    Ok(gateway
        .get_system_status(GetSystemStatusRequest {})
        .await
        .map_err(|s| anyhow::anyhow!("gateway: {}: {}", s.code(), s.message()))?
        .into_inner())
}

/// Prints the status table.
pub(crate) fn print_status(gateway: &str, status: &SystemStatus) {
    println!(
        "  {:<30} {:<28} SERVING   ploke {}",
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

#[cfg(test)]
mod tests {

    #[test]
    fn a_command_in_a_subdirectory_stands_for_its_repository() {
        let dir = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        let repo = home.join("repo");
        let deep = repo.join("crates/core/src");
        std::fs::create_dir_all(&deep).unwrap();
        // No marker: the directory itself.
        assert_eq!(super::enclosing(&deep, Some(&home)), deep);
        std::fs::create_dir(repo.join(".git")).unwrap();
        assert_eq!(super::enclosing(&deep, Some(&home)), repo);
        // A member with its own ploke.toml is a workspace of its own.
        std::fs::write(repo.join("crates/core/ploke.toml"), "").unwrap();
        assert_eq!(
            super::enclosing(&deep, Some(&home)),
            repo.join("crates/core")
        );
        // The home directory is never one, even with a .git (dotfiles).
        std::fs::create_dir(home.join(".git")).unwrap();
        let elsewhere = home.join("notes");
        std::fs::create_dir(&elsewhere).unwrap();
        assert_eq!(super::enclosing(&elsewhere, Some(&home)), elsewhere);
    }
    #[test]
    fn the_progress_bar_fills_with_the_files_done() {
        assert_eq!(super::bar(0, 0), format!("[{}]", " ".repeat(24)));
        assert_eq!(
            super::bar(1, 2),
            format!("[{}{}]", "#".repeat(12), " ".repeat(12))
        );
        assert_eq!(super::bar(5, 4), format!("[{}]", "#".repeat(24)));
    }

    #[test]
    fn only_an_index_that_cannot_be_written_is_searched_as_it_was() {
        let full = tonic::Status::unavailable(
            "index storage unavailable: no space left on the file system of /w/.ploke (0 bytes \
             free); bm25 index: An index writer was killed",
        );
        assert!(super::for_want_of_storage(&full));
        for other in [
            tonic::Status::unavailable("the blocking pool is saturated"),
            tonic::Status::internal("index storage unavailable"),
            tonic::Status::permission_denied("workspace not yours"),
        ] {
            assert!(!super::for_want_of_storage(&other), "{other:?}");
        }
    }

    #[test]
    fn the_state_dir_is_ignored_by_git_even_after_a_cut_short_write() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".gitignore");
        let ours = "# ploke's state (index, sessions, logs): not part of the repository\n*\n";
        // Missing, then empty (a full disk cut the write short): written whole.
        super::ignored_by_git(dir.path());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), ours);
        std::fs::write(&file, "").unwrap();
        super::ignored_by_git(dir.path());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), ours);
        // A user's own is left alone.
        std::fs::write(&file, "*.log\n").unwrap();
        super::ignored_by_git(dir.path());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "*.log\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
