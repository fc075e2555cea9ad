//! The read-only tools and what they share: limits, the progress channel and dispatch. The two
//! edit tools live in [`crate::edits`] because they wait for a decision.

mod context;
pub mod files;
mod search;

use ploke_proto::tools::v1::{EditProposal, ToolProgress, ToolResult, tool_call, tool_result};
use ploke_runtime::blocking::{BlockingError, BlockingPool};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::failure::ToolFailure;
use crate::rag::Rag;

/// Size limits of the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file a tool reads whole or edits, in bytes.
    pub max_file_bytes: u64,
    /// Most bytes `read_file` returns.
    pub read_max_bytes: usize,
    /// Token budget of `request_code_context` when the model gives none.
    pub default_token_budget: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_file_bytes: 4 * 1024 * 1024,
            read_max_bytes: 64 * 1024,
            default_token_budget: 4000,
        }
    }
}

/// What a running tool call reports: progress and proposals, then exactly one outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEvent {
    /// Work in progress.
    Progress(ToolProgress),
    /// An edit proposal was staged.
    EditProposed(Box<EditProposal>),
    /// The call ended (last event).
    Finished(Box<Result<ToolResult, ToolFailure>>),
}

/// Where a tool reports progress; reports are dropped, never awaited, when the reader lags.
#[derive(Debug, Clone)]
pub struct Progress {
    tx: mpsc::Sender<ToolEvent>,
}

impl Progress {
    /// Reports into `tx`.
    pub fn new(tx: mpsc::Sender<ToolEvent>) -> Self {
        Self { tx }
    }

    /// One progress report.
    pub fn report(&self, message: impl Into<String>, done: u64, total: u64) {
        let _ = self.tx.try_send(ToolEvent::Progress(ToolProgress {
            message: message.into(),
            done,
            total,
        }));
    }

    /// Reports a staged proposal; it is awaited, not dropped. False when the reader is gone.
    pub async fn proposed(&self, proposal: EditProposal) -> bool {
        self.tx
            .send(ToolEvent::EditProposed(Box::new(proposal)))
            .await
            .is_ok()
    }
}

/// Everything a read-only tool call needs.
#[derive(Debug, Clone)]
pub struct ReadContext {
    /// Canonical workspace root.
    pub root: std::path::PathBuf,
    /// Limits.
    pub limits: Limits,
    /// rag-search.
    pub rag: Rag,
    /// The turn's user message.
    pub user_message: String,
    /// Fires when the call is abandoned.
    pub cancel: CancellationToken,
    /// Progress reports.
    pub progress: Progress,
    /// Where file work runs.
    pub pool: BlockingPool,
    /// The session of the call (empty for a call outside a session): retrieval answers as it
    /// sees the workspace.
    pub session: String,
    /// The session's overlay, when it has one: every file is read through it.
    pub view: Option<crate::overlay::View>,
}

/// Fetches the overlay's content of the file `input` names, before blocking work reads it.
async fn prefetch(ctx: &ReadContext, field: &str, input: &str) -> Result<(), ToolFailure> {
    let Some(view) = &ctx.view else {
        return Ok(());
    };
    let path = crate::paths::resolve(&ctx.root, field, input)?;
    view.fetch(vec![path.rel]).await
}

/// Runs a read-only call. `call` must not be an edit tool.
pub async fn run_read_only(
    ctx: ReadContext,
    call: tool_call::Args,
) -> Result<ToolResult, ToolFailure> {
    use tool_call::Args;
    use tool_result::Result as R;
    let result = match call {
        Args::RequestCodeContext(a) => {
            R::RequestCodeContext(context::request_code_context(&ctx, &a).await?)
        }
        Args::CodeItemLookup(a) => R::CodeItemLookup(context::code_item_lookup(&ctx, &a).await?),
        Args::GetFileMetadata(a) => {
            prefetch(&ctx, "file_path", &a.file_path).await?;
            let (root, cancel, view) = (ctx.root.clone(), ctx.cancel.clone(), ctx.view.clone());
            let mut meta = blocking(&ctx.pool, move || {
                files::file_metadata(&root, &a, &|| cancel.is_cancelled(), view.as_ref())
            })
            .await?;
            if meta.exists && !meta.is_dir {
                meta.indexed_items = context::indexed_items(&ctx, &meta.file_path).await;
            }
            R::GetFileMetadata(meta)
        }
        Args::ReadFile(a) => {
            prefetch(&ctx, "file", &a.file).await?;
            let (root, limits, view) = (ctx.root.clone(), ctx.limits, ctx.view.clone());
            R::ReadFile(
                blocking(&ctx.pool, move || {
                    files::read_file(&root, &limits, &a, view.as_ref())
                })
                .await?,
            )
        }
        Args::ListDir(a) => {
            let (root, view) = (ctx.root.clone(), ctx.view.clone());
            R::ListDir(
                blocking(&ctx.pool, move || files::list_dir(&root, &a, view.as_ref())).await?,
            )
        }
        Args::SearchCode(a) => {
            if let Some(v) = &ctx.view {
                v.fetch_all().await?;
            }
            let (root, cancel, progress, view) = (
                ctx.root.clone(),
                ctx.cancel.clone(),
                ctx.progress.clone(),
                ctx.view.clone(),
            );
            R::SearchCode(
                blocking(&ctx.pool, move || {
                    search::search_code(&root, &a, &cancel, &progress, view.as_ref())
                })
                .await?,
            )
        }
        Args::ApplyCodeEdit(_) | Args::CreateFile(_) => {
            return Err(ToolFailure::internal(
                "an edit tool was run as a read-only tool",
            ));
        }
    };
    Ok(ToolResult {
        result: Some(result),
    })
}

/// Runs file work on the bounded pool; a saturated pool is a retryable `UNAVAILABLE`.
async fn blocking<T: Send + 'static>(
    pool: &BlockingPool,
    f: impl FnOnce() -> Result<T, ToolFailure> + Send + 'static,
) -> Result<T, ToolFailure> {
    match pool.run(f).await {
        Ok(r) => r,
        Err(e @ BlockingError::Saturated { .. }) => Err(ToolFailure::unavailable(e.to_string())),
        Err(e @ BlockingError::Panicked(_)) => Err(ToolFailure::internal(e.to_string())),
    }
}
