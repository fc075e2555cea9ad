//! Approved edits of a session on a shared workspace land in the session's overlay on the
//! server and are delivered here: the client writes them into the developer's checkout with
//! the guarantees of tool-executor's own apply (the same code: path policy, each file only over
//! the content the proposal was made against, an undo record, temp + fsync + rename, all files
//! or none). A file already holding the delivered content is left alone, so a delivery seen
//! twice is written once. A file the developer changed since is not overwritten: the delivered
//! content is kept in the client's state directory, and the caller is told.
//!
//! What the server sends is not trusted: the proposal id must be one tool-executor makes, and
//! every path must resolve inside the checkout by the path policy (no `..`, no absolute path,
//! no symlink out, never `.git` or `.ploke`) before anything is read or written. Undo records
//! and saved contents live outside the checkout (a checkout may hold files anyone committed).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ploke_proto::tools::v1::{EditProposal, FileDelivery, GetEditDeliveryRequest};
use ploke_runtime::path_policy;
use ploke_tool_executor::edits::{ApplyError, WholeFile};

use crate::checkout::Checkout;
use crate::gateway::Gateway;

/// What became of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Written (relative paths).
    Written(Vec<String>),
    /// Every file already had the delivered content.
    AlreadyThere,
    /// Nothing written: a local file changed since the proposal was made, or is read-only;
    /// the delivered contents are saved in `saved`.
    Stale {
        /// Why, naming the file.
        reason: String,
        /// Where the delivered contents are.
        saved: PathBuf,
    },
    /// Nothing written: the proposal is over another workspace than the checkout's (why).
    Elsewhere(String),
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
            Delivered::Elsewhere(why) => write!(
                f,
                "not written here: {why} (`ploke edits fetch ID` in a checkout of that workspace writes it)"
            ),
        }
    }
}

fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The client's own state for the checkout at `root` (undo records, saved deliveries):
/// `$XDG_STATE_HOME/ploke/<checkout key>`, else `~/.local/state/ploke/<checkout key>`.
pub fn state_dir(root: &Path) -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .context("neither XDG_STATE_HOME nor HOME is set: nowhere to keep undo records")?,
        )
        .join(".local/state"),
    };
    let key = &hash(root.as_os_str().as_encoded_bytes())[..16];
    Ok(base.join("ploke").join(key))
}

/// Whether `id` is a proposal id tool-executor makes (`edit-` and 20 hex digits).
fn valid_proposal_id(id: &str) -> bool {
    id.strip_prefix("edit-")
        .is_some_and(|h| h.len() == 20 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `rel` resolved for writing inside `root` under its own name (no symlink on the way), or
/// why not.
fn checked(root: &Path, rel: &str) -> anyhow::Result<PathBuf> {
    if Path::new(rel).is_absolute() {
        anyhow::bail!("the server sent an absolute path ({rel}); nothing was written");
    }
    let resolved = path_policy::resolve(root, rel).map_err(|e| {
        anyhow::anyhow!("the server sent a path that {e} ({rel}); nothing was written")
    })?;
    let asked: Vec<&str> = rel
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if resolved.rel != asked.join("/") || resolved.rel.is_empty() {
        anyhow::bail!(
            "the server sent a path that does not name a file of the checkout by itself ({rel}); nothing was written"
        );
    }
    Ok(resolved.abs)
}

/// Writes the delivery of `proposal_id` into the checkout at `root`, keeping undo records and
/// saved contents under `state` ([`state_dir`]) (blocking).
pub fn write(
    root: &Path,
    state: &Path,
    proposal_id: &str,
    files: &[FileDelivery],
) -> anyhow::Result<Delivered> {
    if !valid_proposal_id(proposal_id) {
        anyhow::bail!(
            "the server sent a delivery for `{proposal_id}`, which is not a proposal id; nothing was written"
        );
    }
    let mut todo = Vec::new();
    for f in files {
        let abs = checked(root, &f.file_path)?;
        let local = path_policy::read_regular(&abs, u64::MAX).ok();
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
    let record = undo.join(format!("{proposal_id}.json"));
    match ploke_tool_executor::edits::write_whole(root, &todo, &record) {
        Ok(()) => Ok(Delivered::Written(
            todo.into_iter().map(|f| f.rel).collect(),
        )),
        // Not written, but nothing lost: the approved contents are kept for the developer.
        Err(e @ (ApplyError::Stale { .. } | ApplyError::ReadOnly { .. })) => {
            let saved = state.join("deliveries").join(proposal_id);
            for f in files {
                // Checked above: relative, inside, normal components only.
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

/// Writes an approved proposal's delivered files into `checkout` — only when the proposal is
/// over the workspace the checkout stands for: another repository's edits are never written
/// here, whatever paths they name.
pub async fn deliver(
    checkout: &Checkout,
    proposal: &EditProposal,
    files: Vec<FileDelivery>,
) -> anyhow::Result<Delivered> {
    let Some(root) = checkout.for_workspace(&proposal.workspace_root) else {
        return Ok(Delivered::Elsewhere(
            checkout.elsewhere(&proposal.workspace_root),
        ));
    };
    let state = state_dir(root)?;
    let (root, id) = (root.to_owned(), proposal.proposal_id.clone());
    tokio::task::spawn_blocking(move || write(&root, &state, &id, &files))
        .await
        .context("writing the approved files")?
}

/// Fetches the delivery of `proposal_id` and writes it into `checkout` ([`deliver`]); `None`
/// when the proposal delivers nothing (not applied, or applied to the workspace itself).
pub async fn fetch_and_write(
    gateway: &mut Gateway,
    checkout: &Checkout,
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
    let proposal = got.proposal.unwrap_or_else(|| EditProposal {
        proposal_id: proposal_id.to_owned(),
        ..Default::default()
    });
    deliver(checkout, &proposal, got.deliveries).await.map(Some)
}

/// Rolls back any delivery a crash interrupted, from the undo records under `state` (the
/// client's own directory, never the checkout).
pub fn recover(state: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(state.join("undo")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| {
            ploke_tool_executor::edits::recover_write(&e.path())
                .ok()
                .filter(|restored| *restored)
                .map(|_| e.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(path: &str, content: &[u8]) -> FileDelivery {
        FileDelivery {
            file_path: path.into(),
            base_hash: String::new(),
            hash: hash(content),
            content: content.to_vec(),
        }
    }

    #[test]
    fn what_a_server_sends_is_checked_before_anything_is_read_or_written() {
        let outside = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let state = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
        let id = "edit-0123456789abcdef0123";
        let victim = outside.path().join("victim");
        for (proposal, path) in [
            (id, victim.display().to_string()),
            (id, "../victim".to_owned()),
            (id, "link/victim".to_owned()),
            (id, ".git/hooks/pre-commit".to_owned()),
            (id, ".ploke/x".to_owned()),
            ("../../etc", "src/a.rs".to_owned()),
            ("edit-1", "src/a.rs".to_owned()),
        ] {
            let e = write(
                &root,
                state.path(),
                proposal,
                &[delivery(&path, b"pwned\n")],
            );
            assert!(e.is_err(), "{proposal} {path}");
        }
        assert!(!victim.exists());
        assert!(!root.join(".git").exists() && !root.join(".ploke").exists());
        assert!(!root.join("src").exists());
        // A sound delivery is written; seen again it is already there.
        let ok = [delivery("src/a.rs", b"fn a() {}\n")];
        assert_eq!(
            write(&root, state.path(), id, &ok).unwrap(),
            Delivered::Written(vec!["src/a.rs".into()])
        );
        assert_eq!(
            write(&root, state.path(), id, &ok).unwrap(),
            Delivered::AlreadyThere
        );
    }

    #[test]
    fn a_read_only_file_is_not_written_and_the_approved_content_is_kept() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let state = tempfile::tempdir().unwrap();
        let file = root.join("gen.rs");
        std::fs::write(&file, "old\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
        let id = "edit-0123456789abcdef0123";
        let mut d = delivery("gen.rs", b"new\n");
        d.base_hash = hash(b"old\n");
        let got = write(&root, state.path(), id, &[d]).unwrap();
        let saved = state.path().join("deliveries").join(id);
        assert_eq!(
            got,
            Delivered::Stale {
                reason: "gen.rs is read-only (mode 444); nothing was written: make it writable \
                         (chmod u+w) to edit it"
                    .into(),
                saved: saved.clone(),
            }
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n");
        assert_eq!(
            std::fs::read_to_string(saved.join("gen.rs")).unwrap(),
            "new\n"
        );
    }
}
