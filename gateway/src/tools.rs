//! Running tools through the gateway for clients that are not a session's model (MCP clients,
//! scripts): read-only principals see and run only tools without side effects, every call gets
//! the ids a proposal needs, and a call naming a session names one of the caller's own.

use ploke_proto::registry::{ToolRegistry, args_tool_name};
use ploke_proto::tools::v1::{ExecuteToolRequest, SideEffect, ToolDefinition};
use ploke_runtime::principal;
use tonic::Status;

/// Sessions of MCP clients (`mcp-…`) are not llm-session sessions: what they touch is owned by
/// the caller through the principal, so they are not looked up. Each principal's are its own:
/// the gateway writes the principal into the id ([`own_mcp_session`]), so that another caller
/// who learns an MCP session's id cannot take its overlay first.
pub const MCP_SESSION_PREFIX: &str = "mcp-";

/// `mcp-<rest>` as `mcp-<tag>-<rest>`, the tag being the first 8 bytes of the principal's name
/// hashed: one principal's MCP sessions never meet another's.
fn own_mcp_session(id: &str, principal: &str) -> String {
    use sha2::Digest as _;
    let tag = sha2::Sha256::digest(principal.as_bytes());
    let rest = id.strip_prefix(MCP_SESSION_PREFIX).unwrap_or(id);
    format!("{MCP_SESSION_PREFIX}{}-{rest}", hex::encode(&tag[..4]))
}

/// Leaves out the tools a read-only principal may not run.
pub fn visible(tools: &mut Vec<ToolDefinition>) {
    if principal::current().is_some_and(|p| p.read_only) {
        tools.retain(|t| t.side_effect() == SideEffect::ReadOnly);
    }
}

/// Checks a call before it is forwarded and fills in the ids it lacks; whether its session
/// must be looked up (the caller's own llm-session).
pub fn admit(request: &mut ExecuteToolRequest) -> Result<bool, Status> {
    let Some(args) = request.call.as_ref().and_then(|c| c.args.as_ref()) else {
        return Err(ploke_proto::status::invalid_argument(
            "call",
            "must hold one tool's arguments",
        ));
    };
    let name = args_tool_name(args);
    let side_effect = ToolRegistry::global()
        .ok()
        .and_then(|r| r.get(name).map(|t| t.side_effect()))
        .unwrap_or(SideEffect::Unspecified);
    if let Some(p) = principal::current()
        && p.read_only
        && side_effect != SideEffect::ReadOnly
    {
        return Err(Status::permission_denied(format!(
            "{name} changes files; {} may run read-only tools only",
            p.name
        )));
    }
    let c = request.correlation.get_or_insert_default();
    for id in [&mut c.request_id, &mut c.call_id] {
        if id.is_empty() {
            *id = uuid::Uuid::now_v7().to_string();
        }
    }
    if c.session_id.starts_with(MCP_SESSION_PREFIX) {
        if let Some(p) = principal::current() {
            c.session_id = own_mcp_session(&c.session_id, &p.name);
        }
        return Ok(false);
    }
    Ok(!c.session_id.is_empty())
}

#[cfg(test)]
mod tests {
    use ploke_proto::tools::v1::{ReadFileArgs, ToolCall, tool_call};
    use ploke_runtime::principal::{Principal, Role};

    use super::*;

    fn read_only() -> Principal {
        Principal {
            read_only: true,
            ..Principal::everywhere("reader", Role::User)
        }
    }

    #[tokio::test]
    async fn read_only_principals_see_and_run_read_only_tools_only() {
        let mut tools = ToolRegistry::global().unwrap().definitions();
        let all = tools.len();
        principal::scope(Some(read_only()), async { visible(&mut tools) }).await;
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert!(
            names.len() < all && !names.contains(&"apply_code_edit"),
            "{names:?}"
        );
        assert!(names.contains(&"read_file"));
        let edit = ExecuteToolRequest {
            call: Some(ToolCall {
                args: Some(tool_call::Args::CreateFile(Default::default())),
            }),
            ..Default::default()
        };
        let refused = principal::scope(Some(read_only()), async {
            admit(&mut edit.clone()).unwrap_err()
        })
        .await;
        assert_eq!(
            (refused.code(), refused.message()),
            (
                tonic::Code::PermissionDenied,
                "create_file changes files; reader may run read-only tools only"
            )
        );
        let mut read = ExecuteToolRequest {
            call: Some(ToolCall {
                args: Some(tool_call::Args::ReadFile(ReadFileArgs::default())),
            }),
            ..Default::default()
        };
        let look_up =
            principal::scope(Some(read_only()), async { admit(&mut read).unwrap() }).await;
        let c = read.correlation.unwrap();
        assert!(!look_up && !c.request_id.is_empty() && !c.call_id.is_empty());
    }

    #[tokio::test]
    async fn an_mcp_session_is_its_principals_own() {
        let call = |who: &'static str| async move {
            let mut r = ExecuteToolRequest {
                call: Some(ToolCall {
                    args: Some(tool_call::Args::ReadFile(ReadFileArgs::default())),
                }),
                correlation: Some(ploke_proto::common::v1::Correlation {
                    session_id: "mcp-s1".into(),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let principal = Principal::everywhere(who, Role::User);
            let look_up = principal::scope(Some(principal), async { admit(&mut r).unwrap() }).await;
            (look_up, r.correlation.unwrap().session_id)
        };
        let (alice, again, bob) = (call("alice").await, call("alice").await, call("bob").await);
        assert!(!alice.0 && !bob.0, "MCP sessions are not llm-session's");
        assert_eq!(alice, again);
        assert_ne!(alice.1, bob.1);
        assert!(
            alice.1.starts_with(MCP_SESSION_PREFIX) && alice.1.ends_with("-s1"),
            "{}",
            alice.1
        );
    }
}
