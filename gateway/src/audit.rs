//! The audit trail: one structured log line per gateway call (target `ploke::audit`) with the
//! principal, its role, the method, the session, proposal, workspace and tool it named, a tool
//! call's request and call ids, the outcome and the time taken (MCP calls are audited as the
//! gateway calls they make, with the session id their principal's edits are staged under).
//! Refused credentials are logged by the auth layer with the peer.

use std::future::Future;
use std::time::Instant;

use ploke_runtime::principal;
use tonic::Status;

/// The `tracing` target of audit lines (filter with `PLOKE_LOG=ploke::audit=info`).
pub const TARGET: &str = "ploke::audit";

/// What a call named.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Subject<'a> {
    /// Session id.
    pub session_id: &'a str,
    /// Proposal id.
    pub proposal_id: &'a str,
    /// Workspace root as requested (empty = the default).
    pub workspace: &'a str,
    /// Tool run (ExecuteTool).
    pub tool: &'a str,
    /// The tool call's id (ExecuteTool): the one tool-executor logs and a proposal records.
    pub call_id: &'a str,
    /// The request id of a tool call (ExecuteTool).
    pub request_id: &'a str,
}

impl<'a> Subject<'a> {
    /// A call about a session.
    pub(crate) fn session(session_id: &'a str) -> Self {
        Self {
            session_id,
            ..Self::default()
        }
    }

    /// A call about a proposal.
    pub(crate) fn proposal(proposal_id: &'a str) -> Self {
        Self {
            proposal_id,
            ..Self::default()
        }
    }

    /// A call about a workspace.
    pub(crate) fn workspace(workspace: &'a str) -> Self {
        Self {
            workspace,
            ..Self::default()
        }
    }
}

/// Runs `call` and, when `enabled`, writes its audit line.
pub(crate) async fn audited<T>(
    enabled: bool,
    method: &'static str,
    subject: Subject<'_>,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    let started = Instant::now();
    let outcome = call.await;
    if !enabled {
        return outcome;
    }
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
        session_id = %ploke_runtime::text::shown(subject.session_id),
        proposal_id = %ploke_runtime::text::shown(subject.proposal_id),
        workspace = %ploke_runtime::text::shown(subject.workspace),
        tool = subject.tool,
        call_id = %ploke_runtime::text::shown(subject.call_id),
        request_id = %ploke_runtime::text::shown(subject.request_id),
        code = ?code,
        ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "gateway call"
    );
    outcome
}

#[cfg(test)]
mod tests {
    use ploke_runtime::principal::{Principal, Role};
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    #[tokio::test]
    async fn every_call_is_one_line_with_who_what_which_and_how_it_ended() {
        let lines = ploke_runtime::testing::Captured::default();
        let writer = lines.clone();
        // A second live dispatcher: callsites are then asked of every dispatcher, this one
        // included, whichever thread registers them first.
        let _anchor = tracing::Dispatch::new(tracing_subscriber::registry());
        let _guard = tracing::subscriber::set_default(
            tracing_subscriber::registry().with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(move || writer.clone()),
            ),
        );
        tracing::callsite::rebuild_interest_cache();
        let alice = Principal {
            name: "alice".into(),
            role: Role::User,
            workspaces: vec!["*".into()],
            read_only: false,
        };
        let refused = principal::scope(
            Some(alice),
            audited(true, "DecideEdit", Subject::proposal("edit-1"), async {
                Err::<(), _>(Status::not_found("proposal edit-1"))
            }),
        )
        .await;
        assert_eq!(refused.unwrap_err().code(), tonic::Code::NotFound);
        let text = lines.text();
        let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let field = |k: &str| line[k].as_str().unwrap_or_default().to_owned();
        assert_eq!(
            [
                field("target"),
                field("message"),
                field("principal"),
                field("role"),
                field("method"),
                field("proposal_id"),
                field("session_id"),
                field("tool"),
                field("code"),
            ],
            [
                TARGET,
                "gateway call",
                "alice",
                "user",
                "DecideEdit",
                "edit-1",
                "",
                "",
                "NotFound"
            ]
            .map(str::to_owned)
        );
    }
}
