//! Several `ploke up`s at once, one per repository: the ports each runs on (the defaults,
//! `--port-base`, or free ones when the defaults are taken), the record of them in
//! `WORKSPACE/.ploke/up.json` that the other commands read to find it, and the refusal to
//! serve a workspace twice.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ploke_proto::gateway::v1::gateway_client::GatewayClient;
use ploke_proto::rag::v1::IndexStatusRequest;
use ploke_runtime::{PlokeConfig, ServiceKind};
use serde::{Deserialize, Serialize};
use tonic::transport::Endpoint;

use super::{DEFAULT_GATEWAY, Gateway, auth};

const SERVICES: [ServiceKind; 4] = [
    ServiceKind::Gateway,
    ServiceKind::LlmSession,
    ServiceKind::ToolExecutor,
    ServiceKind::RagSearch,
];

/// What a running `ploke up` records about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Its process.
    pub pid: u32,
    /// The workspace it serves.
    pub workspace: PathBuf,
    /// Its gateway, `http://HOST:PORT`.
    pub gateway: String,
    /// Its MCP endpoint, if it serves one.
    pub mcp: Option<String>,
}

/// Where the record of `workspace`'s `ploke up` lives.
pub(crate) fn record_path(workspace: &Path) -> PathBuf {
    workspace.join(".ploke").join("up.json")
}

impl Record {
    /// Writes the record (replacing a stale one).
    pub(crate) fn write(&self, workspace: &Path) -> anyhow::Result<()> {
        let path = record_path(workspace);
        let text = serde_json::to_string_pretty(self)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
    }

    /// The record of `workspace`, if one was written and still parses.
    pub(crate) fn read(workspace: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(record_path(workspace)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Whether its process has certainly ended (known on Linux only: `/proc`).
    pub(crate) fn process_is_gone(&self) -> bool {
        let proc = Path::new("/proc");
        proc.join("self").exists() && !proc.join(self.pid.to_string()).exists()
    }

    /// Removes the record if it is still this one's.
    pub(crate) fn remove(&self, workspace: &Path) {
        if Self::read(workspace).is_some_and(|r| r.pid == self.pid) {
            let _ = std::fs::remove_file(record_path(workspace));
        }
    }
}

/// A gateway at `url` that answers for `workspace` within a moment, if there is one. Only
/// this question has a deadline: the calls made on the gateway returned have none of it (an
/// approval that re-indexes a large file takes longer than any such deadline).
pub(crate) async fn answering(
    url: &str,
    workspace: &Path,
    token: Option<String>,
) -> Option<Gateway> {
    let channel = Endpoint::from_shared(url.to_owned())
        .ok()?
        .connect_timeout(Duration::from_millis(300))
        .connect()
        .await
        .ok()?;
    let mut gateway = GatewayClient::with_interceptor(channel, auth(token).ok()?)
        .max_decoding_message_size(ploke_client::gateway::MAX_REPLY_BYTES);
    let asked = gateway.index_status(IndexStatusRequest {
        workspace_root: workspace.display().to_string(),
    });
    let status = tokio::time::timeout(Duration::from_secs(2), asked)
        .await
        .ok()?
        .ok()?;
    (status.into_inner().workspace_root == workspace.display().to_string()).then_some(gateway)
}

/// The `ploke up` serving `workspace`: the one its record names, else one on the default
/// port.
/// A record whose process is gone (a `ploke up` killed with SIGKILL) is removed.
pub(crate) async fn find(workspace: &Path, token: Option<String>) -> Option<Gateway> {
    if let Some(r) = Record::read(workspace) {
        if let Some(g) = answering(&r.gateway, workspace, token.clone()).await {
            return Some(g);
        }
        if r.process_is_gone() {
            r.remove(workspace);
        }
    }
    answering(DEFAULT_GATEWAY, workspace, token).await
}

/// The gateway URL of the `ploke up` serving the current directory or the nearest one above it
/// (by its record; whether it answers is the caller's to find), else the default.
pub(crate) fn gateway_here() -> String {
    let Ok(here) = std::env::current_dir().and_then(std::fs::canonicalize) else {
        return DEFAULT_GATEWAY.to_owned();
    };
    Record::read(&here)
        .filter(|r| r.workspace == here)
        .or_else(|| served_above(&here).next().map(|(_, r)| r))
        .map_or_else(|| DEFAULT_GATEWAY.to_owned(), |r| r.gateway)
}

/// The directories above `dir` whose record names a `ploke up` serving them, nearest first,
/// with their records (whether it still answers is not asked).
pub(crate) fn served_above(dir: &Path) -> impl Iterator<Item = (&Path, Record)> {
    dir.ancestors()
        .skip(1)
        .filter_map(|above| Some((above, Record::read(above)?)))
        .filter(|(above, r)| r.workspace == *above)
}

/// The `ploke up` serving the nearest directory above `dir` that has one (a command run in a
/// subdirectory of its workspace), with that directory. Only records are looked at: no port is
/// tried for each directory above.
pub(crate) async fn find_above(dir: &Path, token: Option<String>) -> Option<(Gateway, PathBuf)> {
    for (above, r) in served_above(dir) {
        if let Some(g) = answering(&r.gateway, above, token.clone()).await {
            return Some((g, above.to_path_buf()));
        }
    }
    None
}

/// Listens on `base`, `base+1`, … (gateway, llm-session, tool-executor, rag-search, MCP).
pub(crate) fn use_port_base(cfg: &mut PlokeConfig, base: u16) -> anyhow::Result<()> {
    if base > u16::MAX - 4 {
        anyhow::bail!("--port-base {base}: the five ports must stay below 65536");
    }
    // 0 would be one free port and then ports 1-4, which are not what anyone means.
    if base == 0 {
        anyhow::bail!(
            "--port-base 0: give the first of five ports (leave --port-base out for the \
             defaults, or free ports when they are taken)"
        );
    }
    for (i, kind) in SERVICES.into_iter().enumerate() {
        let ip = cfg.listen(kind).ip();
        cfg.set_listen(kind, SocketAddr::new(ip, base + i as u16));
    }
    let ip = cfg
        .gateway
        .mcp_listen
        .map_or(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), |a| a.ip());
    cfg.gateway.mcp_listen = Some(SocketAddr::new(ip, base + 4));
    Ok(())
}

/// Whether every port is the default (nothing chosen by the user): then, when they are
/// taken, any free ports will do.
pub(crate) fn on_default_ports(cfg: &PlokeConfig, default_mcp: SocketAddr) -> bool {
    SERVICES
        .into_iter()
        .all(|k| cfg.listen(k).port() == k.default_port())
        && cfg.gateway.mcp_listen == Some(default_mcp)
}

/// Any free loopback ports.
pub(crate) fn use_free_ports(cfg: &mut PlokeConfig) {
    for kind in SERVICES {
        let ip = cfg.listen(kind).ip();
        cfg.set_listen(kind, SocketAddr::new(ip, 0));
    }
    if let Some(mcp) = cfg.gateway.mcp_listen {
        cfg.gateway.mcp_listen = Some(SocketAddr::new(mcp.ip(), 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_record_of_a_killed_up_is_removed_and_a_live_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path();
        std::fs::create_dir_all(workspace.join(".ploke")).unwrap();
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        let dead = ended.id();
        ended.wait().unwrap();
        // Nothing answers on port 9 (discard), like the gateway of a killed `ploke up`.
        let mut record = Record {
            pid: std::process::id(),
            workspace: workspace.to_owned(),
            gateway: "http://127.0.0.1:9".into(),
            mcp: None,
        };
        record.write(workspace).unwrap();
        assert!(find(workspace, None).await.is_none());
        // Its process runs (a ploke up still starting): the record stays.
        assert_eq!(Record::read(workspace), Some(record.clone()));
        record.pid = dead;
        record.write(workspace).unwrap();
        assert!(record.process_is_gone());
        assert!(find(workspace, None).await.is_none());
        assert_eq!(Record::read(workspace), None);
    }

    #[test]
    fn the_directories_served_above_are_nearest_first_and_only_by_their_own_records() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (inner, middle, deep) = (root.join("a"), root.join("a/b"), root.join("a/b/c"));
        std::fs::create_dir_all(&deep).unwrap();
        let record = |ws: &Path| Record {
            pid: 1,
            workspace: ws.to_owned(),
            gateway: "http://127.0.0.1:9".into(),
            mcp: None,
        };
        for ws in [&root, &inner] {
            std::fs::create_dir_all(ws.join(".ploke")).unwrap();
            record(ws).write(ws).unwrap();
        }
        // A record copied along with a tree names its own directory, not this one.
        std::fs::create_dir_all(middle.join(".ploke")).unwrap();
        record(&root.join("elsewhere")).write(&middle).unwrap();
        let found: Vec<&Path> = served_above(&deep)
            .map(|(d, _)| d)
            .filter(|d| d.starts_with(&root))
            .collect();
        assert_eq!(found, [inner.as_path(), root.as_path()]);
        // The directory's own record is not above it.
        let found: Vec<&Path> = served_above(&inner)
            .map(|(d, _)| d)
            .filter(|d| d.starts_with(&root))
            .collect();
        assert_eq!(found, [root.as_path()]);
    }

    #[test]
    fn a_port_base_gives_five_consecutive_ports() {
        let mut cfg = PlokeConfig::default();
        use_port_base(&mut cfg, 41000).unwrap();
        let ports: Vec<u16> = SERVICES.iter().map(|k| cfg.listen(*k).port()).collect();
        assert_eq!(ports, vec![41000, 41001, 41002, 41003]);
        assert_eq!(cfg.gateway.mcp_listen.map(|a| a.port()), Some(41004));
        assert!(use_port_base(&mut cfg, 65533).is_err());
        assert_eq!(
            use_port_base(&mut cfg, 0).unwrap_err().to_string(),
            "--port-base 0: give the first of five ports (leave --port-base out for the \
             defaults, or free ports when they are taken)"
        );
        assert!(use_port_base(&mut cfg, 1024).is_ok());
    }

    #[test]
    fn a_record_round_trips_and_is_removed_only_by_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".ploke")).unwrap();
        let mine = Record {
            pid: 7,
            workspace: dir.path().to_owned(),
            gateway: "http://127.0.0.1:41000".into(),
            mcp: Some("http://127.0.0.1:41004/mcp".into()),
        };
        mine.write(dir.path()).unwrap();
        assert_eq!(Record::read(dir.path()), Some(mine.clone()));
        let other = Record {
            pid: 8,
            ..mine.clone()
        };
        other.remove(dir.path());
        assert!(Record::read(dir.path()).is_some());
        mine.remove(dir.path());
        assert!(Record::read(dir.path()).is_none());
    }
}
