//! The commands of `ploke` and how they reach the services: a gateway named with `--gateway`
//! (token from `PLOKE_TOKEN`), else a `ploke up` already serving this workspace (found by its
//! record in `.ploke/up.json`, or on the default port) or a directory above it, else the
//! services started in this process for the workspace.

pub(crate) mod ask;
pub(crate) mod chat;
pub(crate) mod config;
pub(crate) mod edits;
pub(crate) mod mcp;
pub(crate) mod providers;
pub(crate) mod query;
pub(crate) mod running;
pub(crate) mod sessions;
pub(crate) mod up;
pub(crate) mod workspaces;

use std::path::{Path, PathBuf};
use std::time::Duration;

use ploke_client::checkout::Chosen;
use ploke_client::embedded::Embedded;
use ploke_runtime::ServiceKind;

use ploke_client::gateway::auth;
pub(crate) use ploke_client::gateway::{Gateway, connect};

/// The gateway the default `ploke up` serves.
pub(crate) const DEFAULT_GATEWAY: &str = "http://127.0.0.1:50051";

/// Where a command's services are.
#[derive(Debug, clap::Args)]
pub(crate) struct Target {
    /// Gateway URL; without it, a `ploke up` of this workspace, else the services started in
    /// this process.
    #[arg(
        long,
        value_name = "URL",
        env = "PLOKE_GATEWAY",
        hide_env_values = true,
        global = true
    )]
    pub gateway: Option<String>,
    /// The workspace (default: the nearest directory at or above the current one holding
    /// ploke.toml, .ploke or .git, else the current directory; below a directory that a
    /// `ploke up` serves, a command uses that `ploke up`). With --gateway: your checkout's root.
    #[arg(long, value_name = "DIR", global = true)]
    pub workspace: Option<PathBuf>,
    /// Config file (`ploke.toml`) for services started in this process [env: PLOKE_CONFIG].
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// With a shared gateway: do not send this checkout's changes (the server's workspace is
    /// this very checkout).
    #[arg(long, global = true)]
    pub no_overlay: bool,
    /// The served workspace to work in (its name or root, as `ploke workspaces` lists them, or
    /// a git workspace's repository name when one clone has it);
    /// default with --gateway: the one cloned from this checkout's git remote, or of its
    /// directory's name, or the only one you may use; else this checkout.
    #[arg(
        long,
        value_name = "NAME",
        env = "PLOKE_SERVER_WORKSPACE",
        hide_env_values = true,
        global = true
    )]
    pub server_workspace: Option<String>,
}

/// A connection, and the services behind it when this process runs them.
#[derive(Debug)]
pub(crate) struct Conn {
    /// The gateway.
    pub gateway: Gateway,
    embedded: Option<Embedded>,
    /// The provider found for in-process services (`None` when remote or none).
    pub provider: Option<String>,
    /// Whether opening indexed the workspace (in-process services).
    pub indexed: bool,
    /// The developer's checkout: sent as a session's overlay when the gateway serves another
    /// tree, and where approved edits are written then.
    pub local_root: PathBuf,
    /// A gateway named with --gateway: whether sessions carry this checkout's changes;
    /// `None` for services of this checkout.
    remote: Option<Remote>,
    /// The served workspace asked for with --server-workspace.
    named: Option<String>,
    /// The served workspace this checkout stands for, once asked ([`Self::workspace_root`]).
    served: Option<String>,
}

/// A shared gateway's view of this checkout.
#[derive(Debug, Clone)]
struct Remote {
    overlays: bool,
}

/// `e`, said for a person when it is the lock of another process on this workspace's data:
/// another command running its own services here (without a `ploke up`, each command starts
/// them, and one at a time may hold a workspace's index and stores).
fn in_use(e: anyhow::Error) -> anyhow::Error {
    if e.chain()
        .any(|c| c.to_string().contains("locked by another process"))
    {
        e.context(
            "another ploke command is using this workspace's index right now; wait for it to \
             end, or start `ploke up` here once: every command then uses it",
        )
    } else {
        e
    }
}

/// `PLOKE_TOKEN`, when set and not empty.
fn token() -> Option<String> {
    std::env::var("PLOKE_TOKEN").ok().filter(|t| !t.is_empty())
}

impl Conn {
    /// Opens the target; in-process services index the workspace first.
    pub(crate) async fn open(target: &Target) -> anyhow::Result<Self> {
        Self::open_indexing(target, Some(up::Until::Searchable)).await
    }

    /// Opens the target for a command that reads no index (sessions, edits, workspaces): it
    /// answers at once, and in-process services index in the background meanwhile.
    pub(crate) async fn open_unindexed(target: &Target) -> anyhow::Result<Self> {
        Self::open_indexing(target, None).await
    }

    /// Opens the target; in-process services index the workspace first, `until` searchable or
    /// done, or (`None`) in the background (answering from what is indexed so far).
    pub(crate) async fn open_indexing(
        target: &Target,
        until: Option<up::Until>,
    ) -> anyhow::Result<Self> {
        let served = Self::served(target).await?;
        Self::open_served(target, until, served).await
    }

    /// The `ploke up` already serving the target's workspace (or, without `--workspace`, the
    /// nearest directory above it that one serves), with the directory it serves; none with
    /// `--gateway`. What [`Self::open_served`] then connects to, so that a caller deciding
    /// something by it first (where `ploke chat` logs) decides by the same one.
    async fn served(target: &Target) -> anyhow::Result<Option<(Gateway, PathBuf)>> {
        if target.gateway.is_some() {
            return Ok(None);
        }
        let token = token();
        let workspace = up::workspace(target.workspace.clone())?;
        Ok(match running::find(&workspace, token.clone()).await {
            Some(gateway) => Some((gateway, workspace)),
            // In a subdirectory of a workspace `ploke up` serves: that one, not a second index.
            None if target.workspace.is_none() => running::find_above(&workspace, token).await,
            None => None,
        })
    }

    /// [`Self::open_indexing`] with what [`Self::served`] found.
    async fn open_served(
        target: &Target,
        until: Option<up::Until>,
        served: Option<(Gateway, PathBuf)>,
    ) -> anyhow::Result<Self> {
        let workspace = up::workspace(target.workspace.clone())?;
        if let Some(url) = &target.gateway {
            if let Ok(state) = ploke_client::delivery::state_dir(&workspace) {
                for interrupted in ploke_client::delivery::recover(&state) {
                    eprintln!(
                        "(rolled back an interrupted write of approved edits: {interrupted})"
                    );
                }
            }
            return Ok(Self {
                gateway: connect(url, token()).await?,
                embedded: None,
                provider: None,
                indexed: false,
                local_root: workspace,
                remote: Some(Remote {
                    overlays: !target.no_overlay,
                }),
                named: target.server_workspace.clone(),
                served: None,
            });
        }
        if target.server_workspace.is_some() {
            eprintln!(
                "(--server-workspace names a shared gateway's workspace: ignored without --gateway)"
            );
        }
        if let Some((gateway, served)) = served {
            if served != workspace {
                eprintln!("(using the `ploke up` of {})", served.display());
            }
            return Ok(Self {
                gateway,
                embedded: None,
                provider: None,
                indexed: false,
                local_root: served,
                remote: None,
                named: target.server_workspace.clone(),
                served: None,
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
        // MCP is served by `ploke up` or `ploke mcp`, never by a command's own services.
        cfg.gateway.mcp_listen = None;
        let embedded = Embedded::start(cfg)
            .await
            .map_err(|e| in_use(anyhow::Error::from(e)))?;
        let url = embedded.addrs.url(ServiceKind::Gateway);
        let started = async {
            let mut gateway = connect(&url, None).await?;
            if let Some(until) = until {
                up::index(&mut gateway, "", (false, until), false).await?;
            }
            anyhow::Ok(gateway)
        };
        let gateway = match started.await {
            Ok(gateway) => gateway,
            Err(e) => return Err(in_use(up::why_stopped(embedded, e).await)),
        };
        Ok(Self {
            gateway,
            embedded: Some(embedded),
            provider,
            indexed: until.is_some(),
            local_root: workspace,
            remote: None,
            named: target.server_workspace.clone(),
            served: None,
        })
    }

    /// The workspace this command works in, as requests name it: the one named with
    /// --server-workspace; with a shared gateway, the served workspace this checkout stands
    /// for (asked once; an error when it cannot be told, naming the candidates); else empty,
    /// the default of services serving this checkout.
    pub(crate) async fn workspace_root(&mut self) -> anyhow::Result<String> {
        if self.remote.is_none() && self.named.is_none() {
            return Ok(String::new());
        }
        if let Some(served) = &self.served {
            return Ok(served.clone());
        }
        let (root, chosen) = ploke_client::checkout::served_workspace(
            &mut self.gateway,
            &self.local_root,
            self.named.as_deref(),
        )
        .await?;
        if matches!(chosen, Chosen::GitRemote(_) | Chosen::DirName) {
            eprintln!("(workspace {root}: {})", chosen.why());
        }
        self.served = Some(root.clone());
        Ok(root)
    }

    /// This checkout and the served workspace it stands for (approved edits of that workspace
    /// are written into it): with a shared gateway, the one [`Self::workspace_root`] finds;
    /// else the checkout itself, which the services here serve.
    pub(crate) async fn checkout(&mut self) -> anyhow::Result<ploke_client::checkout::Checkout> {
        let workspace_root = match self.remote {
            Some(_) => self.workspace_root().await?,
            None => self.local_root.display().to_string(),
        };
        Ok(ploke_client::checkout::Checkout {
            root: self.local_root.clone(),
            workspace_root,
        })
    }

    /// [`Self::checkout`], when sessions also carry its changes (no --no-overlay).
    pub(crate) async fn overlay_checkout(
        &mut self,
    ) -> anyhow::Result<Option<ploke_client::checkout::Checkout>> {
        if !self.remote.as_ref().is_some_and(|r| r.overlays) {
            return Ok(None);
        }
        let checkout = self.checkout().await?;
        // A gateway serving this very checkout (its own `ploke up`) needs none of its changes.
        Ok((Path::new(&checkout.workspace_root) != checkout.root).then_some(checkout))
    }

    /// Whether the services are a gateway named with --gateway (shared, serving other trees).
    pub(crate) fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Whether the services run in this process (started for this command).
    pub(crate) fn in_process(&self) -> bool {
        self.embedded.is_some()
    }

    /// Stops services this process started.
    pub(crate) async fn close(self) -> anyhow::Result<()> {
        if let Some(e) = self.embedded {
            e.stop().await?;
        }
        Ok(())
    }
}

/// Awaits `stopping` (services draining); says `stopping…` when that takes long enough for a
/// user to wonder.
pub(crate) async fn stop_visibly<T>(stopping: impl std::future::Future<Output = T>) -> T {
    tokio::pin!(stopping);
    tokio::select! {
        done = &mut stopping => done,
        () = tokio::time::sleep(Duration::from_millis(300)) => {
            eprintln!("stopping…");
            stopping.await
        }
    }
}

/// Logging for a command that draws a TUI: into `WORKSPACE/.ploke/logs` (rotated daily),
/// never onto the terminal; warnings and errors also come back as notices for the TUI.
pub(crate) fn tui_logging(
    workspace: &std::path::Path,
    telemetry: &ploke_runtime::config::TelemetryConfig,
) -> anyhow::Result<(
    ploke_runtime::telemetry::TelemetryGuard,
    tokio::sync::mpsc::UnboundedReceiver<String>,
    PathBuf,
)> {
    let dir = workspace.join(".ploke").join("logs");
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
    up::ignored_by_git(&workspace.join(".ploke"));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let sink = ploke_runtime::telemetry::LogSink {
        dir: dir.clone(),
        notices: Some(tx),
    };
    let guard = ploke_runtime::telemetry::init_to("ploke", telemetry, Some(sink))?;
    Ok((guard, rx, dir))
}

#[cfg(test)]
mod tests {
    #[test]
    fn another_commands_lock_on_the_workspace_is_said_for_a_person() {
        let locked = anyhow::anyhow!(
            "bm25 index /w/.ploke/bm25 is locked by another process; each rag-search needs a data dir of its own"
        )
        .context("starting rag-search");
        let said = super::in_use(locked);
        assert_eq!(
            said.to_string(),
            "another ploke command is using this workspace's index right now; wait for it to \
             end, or start `ploke up` here once: every command then uses it"
        );
        let other = super::in_use(anyhow::anyhow!("no such file"));
        assert_eq!(other.to_string(), "no such file");
    }
}
