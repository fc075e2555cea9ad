//! Short words for what the services send: enum values without their prefix, a typed tool
//! call as its arguments JSON, why a turn failed. Shared by `ask`, `search`, `edits`, `up`
//! and the TUI.

use ploke_proto::session::v1::TurnFailureReason;
use ploke_proto::tools::v1::ToolCall;

/// `ITEM_KIND_FUNCTION` with prefix `ITEM_KIND_` → `function`.
pub fn lower(full: &str, prefix: &str) -> String {
    full.trim_start_matches(prefix).to_lowercase()
}

/// The arguments JSON of a typed call, as the model wrote them; empty if it cannot be shown.
pub fn call_args(call: Option<&ToolCall>) -> String {
    call.and_then(|c| {
        ploke_proto::registry::ToolRegistry::global()
            .ok()?
            .render_call(c)
    })
    .map(|(_, json)| json)
    .unwrap_or_default()
}

/// Why a turn failed: `cancelled`, `provider`, `max_rounds`, …
pub fn turn_failure(reason: i32) -> String {
    TurnFailureReason::try_from(reason)
        .map(|r| lower(r.as_str_name(), "TURN_FAILURE_REASON_"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_lose_their_prefix() {
        assert_eq!(
            super::lower("ITEM_KIND_TYPE_ALIAS", "ITEM_KIND_"),
            "type_alias"
        );
        assert_eq!(super::turn_failure(3), "max_rounds");
        assert_eq!(super::call_args(None), "");
    }
}
