//! Approved edits of a session on a shared workspace land in the session's overlay on the
//! server and are delivered here: the client writes them into the developer's checkout with
//! the guarantees of tool-executor's own apply (the same code: path policy, each file only over
//! the content the proposal was made against, an undo record, temp + fsync + rename, all files
//! or none). A file already holding the delivered content is left alone, so a delivery seen
//! twice (the deciding client and the TUI following the session) is written once. A file the
//! developer changed since is not overwritten: the delivered content is kept beside it, under
//! `.ploke/deliveries/<proposal>/`, and the caller is told.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ploke_proto::tools::v1::{FileDelivery, GetEditDeliveryRequest};
use ploke_tool_executor::edits::{ApplyError, WholeFile};

use crate::gateway::Gateway;

/// What became of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Written (relative paths).
    Written(Vec<String>),
    /// Every file already had the delivered content.
    AlreadyThere,
    /// Nothing written: a local file changed since the proposal was made; the delivered
    /// contents are saved in `saved`.
    Stale {
        /// Why, naming the file.
        reason: String,
        /// Where the delivered contents are.
        saved: PathBuf,
    },
}

impl std::fmt::Display for Delivered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Delivered::Written(files) => write!(f, "wrote {}", files.join(", ")),
            Delivered::AlreadyThere => f.write_str("your files already hold these changes"),
            Delivered::Stale { reason, saved } => write!(
                f,
                "not written: {reason}; the approved files are in {}",
                saved.display()
            ),
        }
    }
}

fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Writes the delivery of `proposal_id` into the checkout at `root` (blocking).
pub fn write(root: &Path, proposal_id: &str, files: &[FileDelivery]) -> anyhow::Result<Delivered> {
    let state = root.join(".ploke");
    let mut todo = Vec::new();
    for f in files {
        let local = std::fs::read(root.join(&f.file_path)).ok();
        if local.as_deref().map(hash).as_deref() == Some(f.hash.as_str()) {
            continue;
        }
        let content = String::from_utf8(f.content.clone())
            .with_context(|| format!("the delivered {} is not UTF-8", f.file_path))?;
        todo.push(WholeFile {
            rel: f.file_path.clone(),
            base_hash: (!f.base_hash.is_empty()).then(|| f.base_hash.clone()),
            content,
        });
    }
    if todo.is_empty() {
        return Ok(Delivered::AlreadyThere);
    }
    let undo = state.join("undo");
    std::fs::create_dir_all(&undo).with_context(|| format!("creating {}", undo.display()))?;
    let record = undo.join(format!("{proposal_id}.delivery.json"));
    match ploke_tool_executor::edits::write_whole(root, &todo, &record) {
        Ok(()) => Ok(Delivered::Written(
            todo.into_iter().map(|f| f.rel).collect(),
        )),
        Err(e @ ApplyError::Stale { .. }) => {
            let saved = state.join("deliveries").join(proposal_id);
            for f in files {
                let path = saved.join(&f.file_path);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&path, &f.content)
                    .with_context(|| format!("saving {}", path.display()))?;
            }
            Ok(Delivered::Stale {
                reason: e.to_string(),
                saved,
            })
        }
        Err(e) => Err(anyhow::anyhow!("{e}")),
    }
}

/// Fetches the delivery of `proposal_id` and writes it into `root`; `None` when the proposal
/// delivers nothing (not applied, or applied to the workspace itself).
pub async fn fetch_and_write(
    gateway: &mut Gateway,
    root: &Path,
    proposal_id: &str,
) -> anyhow::Result<Option<Delivered>> {
    let got = gateway
        .get_edit_delivery(GetEditDeliveryRequest {
            proposal_id: proposal_id.to_owned(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("fetching the approved files: {}", s.message()))?
        .into_inner();
    if got.deliveries.is_empty() {
        return Ok(None);
    }
    let (root, id) = (root.to_owned(), proposal_id.to_owned());
    tokio::task::spawn_blocking(move || write(&root, &id, &got.deliveries).map(Some))
        .await
        .context("writing the approved files")?
}

/// Rolls back any delivery a crash interrupted in the checkout at `root`.
pub fn recover(root: &Path) -> Vec<String> {
    let undo = root.join(".ploke").join("undo");
    let Ok(entries) = std::fs::read_dir(&undo) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".delivery.json"))
        .filter_map(|e| {
            ploke_tool_executor::edits::recover_write(&e.path())
                .ok()
                .filter(|restored| *restored)
                .map(|_| e.file_name().to_string_lossy().into_owned())
        })
        .collect()
}
