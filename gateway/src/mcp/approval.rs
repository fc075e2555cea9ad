//! A person approves every edit an MCP client's model proposes. The proposal is the same one
//! `ploke edits` and the TUI show; besides, the MCP client's own user is asked by elicitation
//! when the client supports it — inline over a session (protocol versions up to 2025-11-25),
//! or as an `input_required` result the client answers and retries (2026-07-28, stateless,
//! so the retry may reach any gateway replica). Without elicitation the call waits, sending
//! progress that says how to decide.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ploke_proto::tools::v1::{DecideEditRequest, Decision, EditProposal};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest,
    InputRequests, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tonic::Status;

use super::backend::{Backend, Caller};

/// The key of the one input an edit asks for.
pub const DECISION_KEY: &str = "decision";

/// How the MCP client's user can be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// An `input_required` result (2026-07-28 and later).
    InputRequired,
    /// An `elicitation/create` request over the session.
    Inline,
    /// Not at all: wait for `ploke edits` or the TUI.
    Wait,
}

/// How `ctx`'s client can be asked: by form elicitation if it declared it.
pub fn how_to_ask(ctx: &RequestContext<RoleServer>) -> Ask {
    let form = ctx
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !form {
        return Ask::Wait;
    }
    match ctx.protocol_version() {
        Some(v) if !v.has_initialize() => Ask::InputRequired,
        Some(_) => Ask::Inline,
        // No version known: a legacy session negotiated before versions were recorded.
        None if ProtocolVersion::LATEST.has_initialize() => Ask::InputRequired,
        None => Ask::Inline,
    }
}

/// What the client echoes back with its answer: which call to resume. Not trusted: the ids
/// name the caller's own proposal or none (a proposal id covers its owner).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    /// The call's request id.
    pub request_id: String,
    /// The call's id.
    pub call_id: String,
    /// The proposal awaiting the answer.
    pub proposal_id: String,
}

impl Resume {
    /// The `requestState` text.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a `requestState`.
    pub fn decode(state: &str) -> Result<Self, ErrorData> {
        serde_json::from_str(state).map_err(|e| {
            ErrorData::invalid_params(format!("requestState is not this server's: {e}"), None)
        })
    }
}

/// The form the user answers.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "description": "approve applies the edit; deny tells the model it was refused",
                "enum": ["approve", "deny"],
                "default": "approve",
            },
            "reason": {
                "type": "string",
                "title": "Reason",
                "description": "Optional words for the model (why it was denied, what to do instead)",
            },
        },
        "required": ["decision"],
    })
}

/// Most characters of diff shown in the question.
const MAX_DIFF_CHARS: usize = 6_000;

/// The question about `p`.
pub fn message(p: &EditProposal) -> String {
    let files: Vec<&str> = p.files.iter().map(|f| f.file_path.as_str()).collect();
    let mut m = format!(
        "The assistant wants to {} {} ({}).\n\n",
        if p.tool_name == "create_file" {
            "create or overwrite"
        } else {
            "edit"
        },
        files.join(", "),
        p.edits
            .iter()
            .map(|e| e.summary.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    );
    let mut diff = String::new();
    for f in &p.files {
        diff.push_str(&f.unified_diff);
    }
    if diff.len() > MAX_DIFF_CHARS {
        let keep = diff.floor_char_boundary(MAX_DIFF_CHARS);
        diff.truncate(keep);
        diff.push_str("\n… (the whole diff: `ploke edits`)\n");
    }
    m.push_str(&diff);
    let _ = write!(
        m,
        "\nProposal {} — also decidable with `ploke edits approve {}` or `ploke edits deny {}`.",
        p.proposal_id, p.proposal_id, p.proposal_id
    );
    m
}

/// The elicitation request about `p`.
pub fn elicitation(p: &EditProposal) -> Result<ElicitRequestParams, ErrorData> {
    let requested_schema = serde_json::from_value(schema())
        .map_err(|e| ErrorData::internal_error(format!("elicitation schema: {e}"), None))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(p),
        requested_schema,
    })
}

/// The `input_required` result asking about `p`.
pub fn input_required(p: &EditProposal, resume: &Resume) -> Result<InputRequiredResult, ErrorData> {
    let mut requests = InputRequests::new();
    requests.insert(
        DECISION_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(elicitation(p)?)),
    );
    Ok(InputRequiredResult::new(
        Some(requests),
        Some(resume.encode()),
    ))
}

/// What the user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Apply the edits.
    Approve,
    /// Refuse them, with the words for the model.
    Deny(String),
    /// No answer: the proposal stays pending for `ploke edits`.
    Undecided,
}

impl Answer {
    /// Reads an elicitation result.
    pub fn from_result(r: &ElicitResult, client: &str) -> Self {
        match r.action {
            ElicitationAction::Accept => {
                let content = r.content.clone().unwrap_or_default();
                let reason = content
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                match content.get("decision").and_then(Value::as_str) {
                    Some("deny") => Answer::Deny(if reason.is_empty() {
                        format!("denied in {client}")
                    } else {
                        reason
                    }),
                    Some("approve") => Answer::Approve,
                    _ => Answer::Undecided,
                }
            }
            ElicitationAction::Decline => Answer::Deny(format!("declined in {client}")),
            // Dismissed: the model learns that and the call ends, rather than hanging until
            // the proposal expires.
            ElicitationAction::Cancel => Answer::Deny(format!("dismissed in {client}")),
            // An action newer than this server: no decision; `ploke edits` still can.
            _ => Answer::Undecided,
        }
    }

    /// Reads the answer among `inputResponses`.
    pub fn from_responses(responses: &BTreeMap<String, Value>, client: &str) -> Self {
        responses
            .get(DECISION_KEY)
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok())
            .map_or(Answer::Undecided, |r| Self::from_result(&r, client))
    }
}

/// Sends the answer to tool-executor. A proposal that was decided meanwhile (in `ploke edits`)
/// keeps that decision.
pub async fn decide(
    backend: &dyn Backend,
    caller: &Caller,
    proposal_id: &str,
    answer: Answer,
) -> Result<(), Status> {
    let (decision, reason) = match answer {
        Answer::Approve => (Decision::Approve, String::new()),
        Answer::Deny(reason) => (Decision::Deny, reason),
        Answer::Undecided => return Ok(()),
    };
    let request = DecideEditRequest {
        proposal_id: proposal_id.to_owned(),
        decision: decision as i32,
        edit_indices: Vec::new(),
        reason,
    };
    match backend.decide_edit(caller, request).await {
        Ok(_) => Ok(()),
        Err(s) if s.code() == tonic::Code::FailedPrecondition => {
            tracing::info!(proposal_id, reason = s.message(), "edit already decided");
            Ok(())
        }
        Err(s) => Err(s),
    }
}

#[cfg(test)]
mod tests {
    use ploke_proto::tools::v1::{FileDiff, ProposedEdit};

    use super::*;

    #[test]
    fn answers_read_as_decisions() {
        let accept = |c: Value| ElicitResult::new(ElicitationAction::Accept).with_content(c);
        let cases = [
            (accept(json!({"decision": "approve"})), Answer::Approve),
            (
                accept(json!({"decision": "deny", "reason": "use a Vec"})),
                Answer::Deny("use a Vec".into()),
            ),
            (
                accept(json!({"decision": "deny"})),
                Answer::Deny("denied in Claude Code".into()),
            ),
            (accept(json!({"decision": "maybe"})), Answer::Undecided),
            (
                ElicitResult::new(ElicitationAction::Decline),
                Answer::Deny("declined in Claude Code".into()),
            ),
            (
                ElicitResult::new(ElicitationAction::Cancel),
                Answer::Deny("dismissed in Claude Code".into()),
            ),
        ];
        for (result, answer) in cases {
            assert_eq!(Answer::from_result(&result, "Claude Code"), answer);
        }
        let responses = BTreeMap::from([(
            DECISION_KEY.to_owned(),
            json!({"action": "accept", "content": {"decision": "approve"}}),
        )]);
        assert_eq!(Answer::from_responses(&responses, "x"), Answer::Approve);
        assert_eq!(
            Answer::from_responses(&BTreeMap::new(), "x"),
            Answer::Undecided
        );
    }

    #[test]
    fn the_question_shows_the_diff_and_how_else_to_decide() {
        let p = EditProposal {
            proposal_id: "p1".into(),
            tool_name: "apply_code_edit".into(),
            edits: vec![ProposedEdit {
                summary: "replace fn add".into(),
                ..Default::default()
            }],
            files: vec![FileDiff {
                file_path: "src/lib.rs".into(),
                unified_diff: "-a\n+b\n".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            message(&p),
            "The assistant wants to edit src/lib.rs (replace fn add).\n\n-a\n+b\n\nProposal p1 — also decidable with `ploke edits approve p1` or `ploke edits deny p1`."
        );
        let state = Resume {
            request_id: "r".into(),
            call_id: "c".into(),
            proposal_id: "p1".into(),
        };
        assert_eq!(Resume::decode(&state.encode()).unwrap(), state);
        assert!(Resume::decode("garbage").is_err());
    }
}
