//! The error enum of rag-search's domain.

use ploke_runtime::text::shown;
use ploke_runtime::workspaces::WorkspaceError;

use crate::index::IndexError;

/// Why a rag-search operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RagError {
    /// The request's workspace could not be resolved.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The workspace has never been indexed.
    #[error("workspace {0} is not indexed yet; call IndexWorkspace first")]
    NotIndexed(String),
    /// The index run this call joined failed; the last committed index stays.
    #[error("the index run failed: {0}; searches answer from the last committed index")]
    RunFailed(String),
    /// Dense retrieval was asked for but is unavailable.
    #[error("dense retrieval is unavailable: {0}")]
    DenseUnavailable(String),
    /// The query could not be embedded.
    #[error(transparent)]
    Embedding(crate::embed::EmbedError),
    /// A path in the request is not a relative path inside the workspace (shown clipped).
    #[error("`{}` {reason}", shown(path))]
    BadPath {
        /// Request field.
        field: String,
        /// The path.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// The index failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The index could not be written (its storage failed); the last committed index stays.
    /// `disk` says when the data dir's file system is full (tantivy's own error may only say
    /// that its writer was killed), else is empty.
    #[error("index storage unavailable: {disk}{error}")]
    IndexStorage {
        /// The failed write.
        error: IndexError,
        /// "no space left …; " when the file system is full.
        disk: String,
    },
    /// The blocking pool could not take the work (saturated) or the work panicked.
    #[error(transparent)]
    Blocking(#[from] ploke_runtime::blocking::BlockingError),
    /// A git workspace could not be cloned or updated, or its URL or branch is not valid.
    #[error(transparent)]
    Git(crate::git::GitError),
    /// A workspace to add is not acceptable.
    #[error("{field}: {reason}")]
    BadWorkspace {
        /// Request field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The workspace is served already (by this name, or as another name of its directory:
    /// a link to it, the tree a served link points at).
    #[error("workspace {asked} is served already{}", as_other(.served, .asked))]
    WorkspaceExists {
        /// The root asked for.
        asked: String,
        /// The served root that is the same directory.
        served: String,
    },
    /// A configured workspace cannot be removed at run time.
    #[error(
        "workspace {0} is configured (--workspace, PLOKE_WORKSPACES or ploke.toml); remove it there and restart"
    )]
    ConfiguredWorkspace(String),
    /// The list of added workspaces could not be written; nothing changed.
    #[error("the workspace list could not be saved: {0}")]
    Registry(String),
    /// The calling principal may not do this (an admin-only call, a workspace it may not use).
    #[error(transparent)]
    Denied(#[from] ploke_runtime::principal::Denied),
    /// A request field is not acceptable.
    #[error("{field}: {reason}")]
    Invalid {
        /// Request field.
        field: String,
        /// Why.
        reason: String,
    },
    /// The session has no overlay (or one the caller may not act on: the same answer).
    #[error("session {} has no overlay", shown(.0))]
    NoOverlay(String),
    /// A sync or put would take an overlay past a limit; nothing changed.
    #[error(
        "overlay of session {session} would hold {would} {unit}, over the limit of {limit}; commit and push, or raise [rag_search] {key}"
    )]
    OverlayFull {
        /// The session.
        session: String,
        /// What it would hold.
        would: u64,
        /// The limit.
        limit: u64,
        /// `bytes` or `files`.
        unit: &'static str,
        /// The config key of the limit.
        key: &'static str,
    },
    /// The principal holds as many overlays as it may; nothing was made.
    #[error(
        "{owner} already has {limit} sessions carrying their own changes on this server, the limit ([rag_search] overlay_max_per_principal); they are dropped after [rag_search] overlay_idle_secs without use"
    )]
    TooManyOverlays {
        /// The principal.
        owner: String,
        /// The limit.
        limit: u64,
    },
    /// A compare-and-set put found another version of the file; nothing was written.
    #[error(
        "{field}: `{}` is at {current} in the overlay of session {session}, not {expected}; nothing was written",
        shown(path)
    )]
    OverlayConflict {
        /// Request field.
        field: String,
        /// The file.
        path: String,
        /// The session.
        session: String,
        /// The hash the request expected.
        expected: String,
        /// The hash the session sees (`no file` when it has none).
        current: String,
    },
    /// A sync named another workspace than its session's overlay lies over.
    #[error(
        "the overlay of session {session} lies over workspace {root}; drop it first to sync another workspace"
    )]
    OverlayWorkspace {
        /// The session.
        session: String,
        /// The overlay's workspace.
        root: String,
    },
    /// An overlay is a difference from the whole tree, which the workspace's first index run
    /// has not read yet (it may be sent once every file is parsed).
    #[error(
        "workspace {root} is being indexed for the first time ({state}); a session's changes can be sent once every file is parsed (IndexStatus at the embedding phase, or READY)"
    )]
    BaseIncomplete {
        /// The workspace.
        root: String,
        /// Where its first run stands.
        state: String,
    },
    /// A sync's manifest shares no path with the workspace while every file of the workspace
    /// is missing from it (or it is empty): a subdirectory of a checkout, a directory above the
    /// workspace's place in it, or another tree. Taken as the overlay it would delete every
    /// file of the workspace; nothing changed.
    #[error(
        "none of the {sent} file(s) sent has a path of workspace {root}, and all {missing} of its file(s) are missing from them: the directory sent is not where the checkout has that workspace's root (it is a subdirectory of it, a directory above it, or another tree); the overlay is unchanged"
    )]
    CheckoutMisaligned {
        /// The overlay's workspace.
        root: String,
        /// Files the manifest lists.
        sent: u64,
        /// Files of the workspace the manifest lacks.
        missing: u64,
    },
    /// An overlay's files could not be read or written; what was answered before stays.
    #[error("overlay storage unavailable: {0}")]
    OverlayStorage(String),
    /// A background task failed (a bug).
    #[error("internal: {0}")]
    Internal(String),
}

/// How a served root is told apart from the name a request used, when they differ.
fn as_other(served: &str, asked: &str) -> String {
    if served == asked {
        String::new()
    } else {
        format!(" as {served} (the same directory)")
    }
}
