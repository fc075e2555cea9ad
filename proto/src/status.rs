//! Error-code mapping helpers shared by every gRPC adapter: field-level `INVALID_ARGUMENT`
//! with `google.rpc.BadRequest` details, and the other codes with consistent wording.

use tonic::{Code, Status};
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
