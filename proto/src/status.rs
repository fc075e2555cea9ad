//! Error-code mapping helpers shared by every gRPC adapter: field-level `INVALID_ARGUMENT`
//! with `google.rpc.BadRequest` details, the other codes with consistent wording, and a failed
//! call as the typed tool error a model reads.

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

/// The `PreconditionFailure` violation type of a SyncOverlay whose manifest is not a checkout
/// of the overlay's workspace (a subdirectory of it, another tree); clients name their own
/// directory and what to do instead.
pub const CHECKOUT_MISALIGNED: &str = "CHECKOUT_MISALIGNED";

/// `FAILED_PRECONDITION` with a `google.rpc.PreconditionFailure` violation of type `kind`
/// about `subject`, so that clients can tell this refusal from another without parsing the
/// message.
pub fn failed_precondition(kind: &str, subject: &str, message: impl std::fmt::Display) -> Status {
    let message = message.to_string();
    Status::with_error_details(
        Code::FailedPrecondition,
        message.clone(),
        ErrorDetails::with_precondition_failure_violation(kind, subject, message),
    )
}

/// Whether a status is a `FAILED_PRECONDITION` carrying a violation of type `kind`.
pub fn is_precondition(status: &Status, kind: &str) -> bool {
    status.code() == Code::FailedPrecondition
        && status
            .get_details_precondition_failure()
            .is_some_and(|p| p.violations.iter().any(|v| v.r#type == kind))
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
    fn failed_precondition_carries_its_kind() {
        let s = failed_precondition(CHECKOUT_MISALIGNED, "manifest", "not a checkout");
        assert_eq!(
            (s.code(), s.message()),
            (Code::FailedPrecondition, "not a checkout")
        );
        assert!(is_precondition(&s, CHECKOUT_MISALIGNED));
        assert!(!is_precondition(&s, "OTHER"));
        assert!(!is_precondition(
            &Status::failed_precondition("not a checkout"),
            CHECKOUT_MISALIGNED
        ));
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
