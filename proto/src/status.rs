//! Error-code mapping helpers shared by every gRPC adapter: field-level `INVALID_ARGUMENT`
//! with `google.rpc.BadRequest` details, a `FAILED_PRECONDITION` a client must tell apart with
//! `google.rpc.ErrorInfo` (its reason and figures), the other codes with consistent wording,
//! and a failed call as the typed tool error a model reads.

use std::collections::HashMap;

use tonic::{Code, Status};

use crate::tools::v1::{ToolError, ToolErrorCode};
use tonic_types::{ErrorDetails, StatusExt};

/// `INVALID_ARGUMENT` naming the field and the reason, with a `BadRequest` field violation so
/// that clients can read both without parsing the message.
pub fn invalid_argument(field: &str, reason: impl std::fmt::Display) -> Status {
    let reason = reason.to_string();
    Status::with_error_details(
        Code::InvalidArgument,
        format!("{field}: {reason}"),
        ErrorDetails::with_bad_request_violation(field, reason),
    )
}

/// The `ErrorInfo` reason of a SyncOverlay refused because its manifest is not the overlay's
/// workspace as a checkout has it (a subdirectory of it, a directory above it, another tree);
/// the metadata has `sent` (files in the manifest) and `missing` (workspace files it lacks).
pub const CHECKOUT_MISALIGNED: &str = "CHECKOUT_MISALIGNED";

/// `ErrorInfo` reason of a SyncOverlay refused because the workspace's first index run has
/// not parsed every file yet: a client may wait for IndexStatus to leave the walk and the parse,
/// then send the changes again. The metadata has `root` (the workspace) and `state` (where its
/// run stands, in words).
pub const BASE_INCOMPLETE: &str = "BASE_INCOMPLETE";

/// Whether a SyncOverlay manifest is not the workspace as a checkout has it: none of its
/// paths is the workspace's (`unchanged` 0, every changed path `added`) while the workspace's
/// files are missing from it (`deleted` > 0). rag-search refuses it with
/// [`CHECKOUT_MISALIGNED`]; a client checks an older server's answer with it.
pub fn checkout_misaligned(unchanged: u64, changed: u64, added: u64, deleted: u64) -> bool {
    unchanged == 0 && added == changed && deleted > 0
}

/// Domain of the `ErrorInfo` reasons ploke sets.
const DOMAIN: &str = "ploke.dev";

/// `FAILED_PRECONDITION` with a `google.rpc.ErrorInfo` of `reason` and `metadata`, so that
/// clients can tell this refusal from another, and read its figures, without parsing the
/// message.
pub fn failed_precondition<'a>(
    reason: &str,
    message: impl std::fmt::Display,
    metadata: impl IntoIterator<Item = (&'a str, String)>,
) -> Status {
    let metadata: HashMap<String, String> = metadata
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    Status::with_error_details(
        Code::FailedPrecondition,
        message.to_string(),
        ErrorDetails::with_error_info(reason, DOMAIN, metadata),
    )
}

/// The metadata of a `FAILED_PRECONDITION` whose `ErrorInfo` has `reason`; none for any other
/// status.
pub fn precondition(status: &Status, reason: &str) -> Option<HashMap<String, String>> {
    if status.code() != Code::FailedPrecondition {
        return None;
    }
    status
        .get_details_error_info()
        .filter(|i| i.reason == reason)
        .map(|i| i.metadata)
}

/// Longest id a service takes (`session_id`, `proposal_id`): ids are UUIDs, or a client's
/// own of about that size; anything longer is refused before it reaches a lookup or a message.
pub const MAX_ID_BYTES: usize = 128;

/// An id field, trimmed: `INVALID_ARGUMENT` when it is empty, longer than [`MAX_ID_BYTES`]
/// (an error repeating a 20 kB id would not fit in a reply's header) or holds a control
/// character.
pub fn id<'a>(field: &str, value: &'a str) -> Result<&'a str, Status> {
    let value = value.trim();
    if value.is_empty() {
        return Err(invalid_argument(field, "must not be empty"));
    }
    id_text(field, value, MAX_ID_BYTES)?;
    Ok(value)
}

/// `INVALID_ARGUMENT` when an id-like field (empty allowed) is longer than `max` bytes or holds
/// a control character: an id is looked up and stored as text, and PostgreSQL refuses a NUL
/// in text (the caller got INTERNAL with the database's own words).
pub fn id_text(field: &str, value: &str, max: usize) -> Result<(), Status> {
    at_most(field, value, max)?;
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(invalid_argument(
            field,
            format!(
                "must not contain control characters, found U+{:04X}",
                u32::from(c)
            ),
        ));
    }
    Ok(())
}

/// `INVALID_ARGUMENT` when a text field is longer than `max` bytes.
pub fn at_most(field: &str, value: &str, max: usize) -> Result<(), Status> {
    if value.len() > max {
        return Err(invalid_argument(
            field,
            format!("must be at most {max} bytes, got {}", value.len()),
        ));
    }
    Ok(())
}

/// `NOT_FOUND` for a named thing (`workspace /x`, `session 0193…`).
pub fn not_found(what: impl std::fmt::Display) -> Status {
    Status::not_found(format!("{what} not found"))
}

/// The field violations of a status, as `(field, description)` pairs.
pub fn field_violations(status: &Status) -> Vec<(String, String)> {
    status
        .get_details_bad_request()
        .map(|b| {
            b.field_violations
                .into_iter()
                .map(|v| (v.field, v.description))
                .collect()
        })
        .unwrap_or_default()
}

/// The typed error a failed or refused call is for a model: the gRPC code as the nearest
/// `ToolErrorCode` (an INVALID_ARGUMENT stays a fault of the arguments, not an outage), the
/// message, and what to do. Shared by llm-session (its calls to tool-executor) and the
/// gateway's MCP front door.
pub fn tool_error(s: &Status) -> ToolError {
    let (code, hint) = match s.code() {
        Code::InvalidArgument | Code::OutOfRange => (
            ToolErrorCode::InvalidArgument,
            "fix the arguments and call again",
        ),
        Code::NotFound => (ToolErrorCode::NotFound, ""),
        Code::PermissionDenied | Code::Unauthenticated => (
            ToolErrorCode::PermissionDenied,
            "this token may not do that; ask the team's ploke operator",
        ),
        Code::DeadlineExceeded => (ToolErrorCode::Timeout, "call again, or ask for less"),
        Code::Cancelled => (ToolErrorCode::Cancelled, ""),
        Code::Unavailable | Code::ResourceExhausted | Code::Aborted => {
            (ToolErrorCode::Unavailable, "call again in a moment")
        }
        Code::FailedPrecondition => (ToolErrorCode::InvalidArgument, ""),
        Code::Ok
        | Code::Unknown
        | Code::AlreadyExists
        | Code::Unimplemented
        | Code::Internal
        | Code::DataLoss => (ToolErrorCode::Internal, ""),
    };
    ToolError {
        code: code as i32,
        field: String::new(),
        message: s.message().to_owned(),
        retry_hint: hint.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_precondition_carries_its_reason_and_figures() {
        let s = failed_precondition(
            CHECKOUT_MISALIGNED,
            "not a checkout",
            [("sent", "2".to_owned())],
        );
        assert_eq!(
            (s.code(), s.message()),
            (Code::FailedPrecondition, "not a checkout")
        );
        assert_eq!(
            precondition(&s, CHECKOUT_MISALIGNED),
            Some(HashMap::from([("sent".to_owned(), "2".to_owned())]))
        );
        assert_eq!(precondition(&s, "OTHER"), None);
        assert_eq!(
            precondition(
                &Status::failed_precondition("not a checkout"),
                CHECKOUT_MISALIGNED
            ),
            None
        );
    }

    #[test]
    fn ids_with_control_characters_are_refused_with_the_character() {
        let refused = id("session_id", "a\0b").unwrap_err();
        assert_eq!(
            (refused.code(), refused.message()),
            (
                Code::InvalidArgument,
                "session_id: must not contain control characters, found U+0000"
            )
        );
        assert_eq!(id("session_id", " s-1 ").unwrap(), "s-1");
        assert!(id_text("client_request_id", "", 10).is_ok());
        assert_eq!(
            id_text("client_request_id", "r\u{1b}[2J", 10)
                .unwrap_err()
                .message(),
            "client_request_id: must not contain control characters, found U+001B"
        );
    }

    #[test]
    fn invalid_argument_carries_field_violation() {
        let status = invalid_argument("top_k", "must be 1..=1000, got 0");
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(status.message(), "top_k: must be 1..=1000, got 0");
        assert_eq!(
            field_violations(&status),
            vec![("top_k".to_owned(), "must be 1..=1000, got 0".to_owned())]
        );
    }

    #[test]
    fn a_failed_call_keeps_its_meaning_for_the_model() {
        let code = |s: Status| tool_error(&s).code();
        assert_eq!(
            code(Status::invalid_argument("x")),
            ToolErrorCode::InvalidArgument
        );
        assert_eq!(code(Status::not_found("x")), ToolErrorCode::NotFound);
        assert_eq!(
            code(Status::unauthenticated("x")),
            ToolErrorCode::PermissionDenied
        );
        assert_eq!(code(Status::deadline_exceeded("x")), ToolErrorCode::Timeout);
        assert_eq!(code(Status::internal("x")), ToolErrorCode::Internal);
        let down = tool_error(&Status::unavailable("connection refused"));
        assert_eq!(
            (down.code(), down.message.as_str(), down.retry_hint.as_str()),
            (
                ToolErrorCode::Unavailable,
                "connection refused",
                "call again in a moment"
            )
        );
    }
}
