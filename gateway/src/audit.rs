//! The audit trail: one structured log line per gateway call (target `ploke::audit`) with the
//! principal, its role, the method, the session, proposal and workspace it named, the outcome
//! and the time taken. Refused credentials are logged by the auth layer with the peer.

use std::future::Future;
use std::time::Instant;

use ploke_runtime::principal;
use tonic::Status;

/// The `tracing` target of audit lines (filter with `PLOKE_LOG=ploke::audit=info`).
pub const TARGET: &str = "ploke::audit";

/// What a call named.
#[derive(Debug, Clone, Copy, Default)]
pub struct Subject<'a> {
    /// Session id.
    pub session_id: &'a str,
    /// Proposal id.
    pub proposal_id: &'a str,
    /// Workspace root as requested (empty = the default).
    pub workspace: &'a str,
}

impl<'a> Subject<'a> {
    /// A call about a session.
    pub fn session(session_id: &'a str) -> Self {
        Self {
            session_id,
            ..Self::default()
        }
    }

    /// A call about a proposal.
    pub fn proposal(proposal_id: &'a str) -> Self {
        Self {
            proposal_id,
            ..Self::default()
        }
    }

    /// A call about a workspace.
    pub fn workspace(workspace: &'a str) -> Self {
        Self {
            workspace,
            ..Self::default()
        }
    }
}

/// Runs `call` and writes its audit line.
pub async fn audited<T>(
    method: &'static str,
    subject: Subject<'_>,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    let started = Instant::now();
    let outcome = call.await;
    let (name, role) = match principal::current() {
        Some(p) => (p.name, p.role.as_str()),
        None => (String::new(), ""),
    };
    let code = match &outcome {
        Ok(_) => tonic::Code::Ok,
        Err(s) => s.code(),
    };
    tracing::info!(
        target: TARGET,
        principal = %name,
        role,
        method,
        session_id = subject.session_id,
        proposal_id = subject.proposal_id,
        workspace = %ploke_runtime::text::shown(subject.workspace),
        code = ?code,
        ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "gateway call"
    );
    outcome
}
