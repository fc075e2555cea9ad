//! The developer's own changes for a session on a shared workspace: the client sends the
//! manifest of its checkout (path and blake3 of every file the index would hold, by the same
//! scan rules as rag-search), the gateway answers which contents the server lacks, and only
//! those are uploaded, in batches under the message limit. Files the developer deleted are the
//! base's files missing from the manifest. Run before every message, so the model sees the
//! developer's tree as it is when they ask.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ploke_proto::rag::v1::{
    IndexPhase, IndexState, IndexStatusRequest, IndexStatusResponse, ManifestEntry, OverlayFile,
    PutOverlayFilesRequest, SyncOverlayRequest,
};
use ploke_proto::status::{
    BASE_INCOMPLETE, CHECKOUT_MISALIGNED, checkout_misaligned, precondition,
};

use crate::gateway::Gateway;

/// Bytes of content sent per PutOverlayFiles (well under the 16 MiB message limit).
const BATCH_BYTES: usize = 4 * 1024 * 1024;

/// How often [`sync_when_parsed`] asks where the served workspace's first index run stands.
const FIRST_RUN_POLL: Duration = Duration::from_millis(500);

/// The served workspace's first index run has not read every file yet, so there is no tree
/// to send changes against; they can be sent once it has ([`sync_when_parsed`] waits).
#[derive(Debug, thiserror::Error)]
#[error(
    "the server is reading {root} for the first time ({state}); your changes can go once it has read every file: send again in a moment"
)]
pub struct FirstRunReading {
    /// The served workspace.
    root: String,
    /// Where its first run stands.
    state: String,
}

/// What one sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Synced {
    /// Files that differ from the server's base (changed or new).
    pub changed: u64,
    /// Base files the developer does not have.
    pub deleted: u64,
    /// Files uploaded now (the others the server had already).
    pub uploaded: u64,
    /// Bytes uploaded now.
    pub uploaded_bytes: u64,
    /// The overlay's version afterwards.
    pub version: u64,
    /// Time taken.
    pub took: Duration,
}

impl std::fmt::Display for Synced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "your changes: {} changed, {} deleted file(s); {} uploaded ({} KiB) in {} ms",
            self.changed,
            self.deleted,
            self.uploaded,
            self.uploaded_bytes.div_ceil(1024),
            self.took.as_millis()
        )
    }
}

/// Path and blake3 of every file under `root` the index would hold, with where each is
/// (blocking).
pub fn manifest(root: &Path) -> Vec<(ManifestEntry, PathBuf)> {
    let (files, _) = ploke_rag_search::scan::scan(root);
    files
        .into_iter()
        .filter_map(|f| {
            // Read as the index reads: the path policy, the size cap, text only.
            let bytes = ploke_runtime::path_policy::read_regular(
                &f.abs,
                ploke_rag_search::scan::MAX_FILE_BYTES,
            )
            .ok()?;
            let hash = blake3::hash(&bytes).to_hex().to_string();
            ploke_rag_search::scan::read_text(bytes)?;
            Some((ManifestEntry { path: f.rel, hash }, f.abs))
        })
        .collect()
}

/// Not one path of `root`'s the served tree's, and the served tree's files missing: `root` is
/// not where the checkout has the served workspace's root (a subdirectory of it, a directory
/// above it, another tree). Its paths would not be the server's, nor would approved edits land
/// where they belong.
fn misaligned(root: &Path, sent: &str, missing: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{} does not line up with the served workspace: none of the {sent} file(s) here has a path of the served tree, and all {missing} of its file(s) are missing here; run from the directory of your checkout that is the served workspace's root, or name it with --workspace DIR (--no-overlay sends no changes); nothing was uploaded",
        root.display()
    )
}

/// Sends the developer's checkout at `root` as the overlay of `session_id`.
pub async fn sync(gateway: &mut Gateway, session_id: &str, root: &Path) -> anyhow::Result<Synced> {
    let started = Instant::now();
    let scan_root = root.to_owned();
    let scanned = tokio::task::spawn_blocking(move || manifest(&scan_root))
        .await
        .context("scanning the checkout")?;
    // Only files of the manifest are ever sent, whatever the server asks for.
    let sendable: HashMap<String, PathBuf> = scanned
        .iter()
        .map(|(e, abs)| (e.path.clone(), abs.clone()))
        .collect();
    let files = scanned.into_iter().map(|(e, _)| e).collect();
    let planned = gateway
        .sync_overlay(SyncOverlayRequest {
            session_id: session_id.to_owned(),
            workspace_root: String::new(),
            files,
        })
        .await
        .map_err(|s| match precondition(&s, CHECKOUT_MISALIGNED) {
            Some(figures) => {
                let figure = |k: &str| figures.get(k).cloned().unwrap_or_else(|| "?".into());
                misaligned(root, &figure("sent"), &figure("missing"))
            }
            None => match precondition(&s, BASE_INCOMPLETE) {
                Some(mut figures) => FirstRunReading {
                    root: figures.remove("root").unwrap_or_default(),
                    state: figures.remove("state").unwrap_or_default(),
                }
                .into(),
                None => anyhow::anyhow!("sending your changes: {}", s.message()),
            },
        })?
        .into_inner();
    // A server that counts `added` but does not refuse such a manifest itself (before
    // CHECKOUT_MISALIGNED) has taken it; nothing is uploaded or sent on it.
    if checkout_misaligned(
        planned.unchanged,
        planned.changed,
        planned.added,
        planned.deleted,
    ) {
        return Err(misaligned(
            root,
            &planned.changed.to_string(),
            &planned.deleted.to_string(),
        ));
    }
    let mut synced = Synced {
        changed: planned.changed,
        deleted: planned.deleted,
        version: planned.version,
        ..Synced::default()
    };
    let mut batch: Vec<OverlayFile> = Vec::new();
    let mut batch_bytes = 0usize;
    for path in planned.need {
        let Some(abs) = sendable.get(&path) else {
            anyhow::bail!(
                "the server asked for {}, which is not a file this checkout sent; nothing more was sent",
                ploke_runtime::text::shown(&path)
            );
        };
        let content =
            ploke_runtime::path_policy::read_regular(abs, ploke_rag_search::scan::MAX_FILE_BYTES)
                .with_context(|| format!("reading {path}"))?;
        if !batch.is_empty() && batch_bytes + content.len() > BATCH_BYTES {
            synced.version = put(gateway, session_id, std::mem::take(&mut batch)).await?;
            batch_bytes = 0;
        }
        batch_bytes += content.len();
        synced.uploaded += 1;
        synced.uploaded_bytes += content.len() as u64;
        batch.push(OverlayFile {
            path,
            content,
            expected_hash: String::new(),
        });
    }
    if !batch.is_empty() {
        synced.version = put(gateway, session_id, batch).await?;
    }
    synced.took = started.elapsed();
    Ok(synced)
}

/// [`sync`], first waiting while the served workspace's first index run reads its files
/// (a workspace just added to a shared deployment): `waiting` is given the run's status each
/// time it is looked at. A run that fails ends the wait with its reason.
pub async fn sync_when_parsed(
    gateway: &mut Gateway,
    (session_id, workspace_root): (&str, &str),
    root: &Path,
    mut waiting: impl FnMut(&IndexStatusResponse),
) -> anyhow::Result<Synced> {
    // Refusals while IndexStatus said every file was read: a server that disagrees with itself
    // is not waited on for ever.
    let mut refused_when_read = 0;
    loop {
        match sync(gateway, session_id, root).await {
            Err(e) if e.is::<FirstRunReading>() && refused_when_read < 10 => {}
            done => return done,
        }
        for looked in 0u64.. {
            let status = gateway
                .index_status(IndexStatusRequest {
                    workspace_root: workspace_root.to_owned(),
                })
                .await
                .map_err(|s| anyhow::anyhow!("waiting for the first index run: {}", s.message()))?
                .into_inner();
            if status.state == IndexState::Failed as i32 {
                anyhow::bail!(
                    "the first index run of {workspace_root} failed: {}",
                    status.message
                );
            }
            let parsed = status.state == IndexState::Ready as i32
                || status
                    .progress
                    .as_ref()
                    .is_some_and(|p| p.phase >= IndexPhase::Embedding as i32);
            if parsed {
                // Refused though the run had parsed already: asked again after a pause, not
                // in a spin.
                if looked == 0 {
                    refused_when_read += 1;
                    tokio::time::sleep(FIRST_RUN_POLL).await;
                }
                break;
            }
            waiting(&status);
            tokio::time::sleep(FIRST_RUN_POLL).await;
        }
    }
}

async fn put(
    gateway: &mut Gateway,
    session_id: &str,
    files: Vec<OverlayFile>,
) -> anyhow::Result<u64> {
    Ok(gateway
        .put_overlay_files(PutOverlayFilesRequest {
            session_id: session_id.to_owned(),
            files,
            workspace_root: String::new(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("uploading your changes: {}", s.message()))?
        .into_inner()
        .version)
}
