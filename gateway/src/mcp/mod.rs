//! The MCP front door: the same typed tools, approval flow, audit trail and trace as the gRPC
//! API, for MCP clients (Claude Code, codex, VS Code, …). Served by the gateway over
//! Streamable HTTP at `/mcp` ([`http`]) and over stdio by `ploke mcp`; built on the official
//! Rust SDK (`rmcp`), which negotiates the protocol version (2024-11-05 … 2026-07-28).
//!
//! Tools come from the registry ([`tools`]); a call runs through the gateway's `ExecuteTool`
//! ([`call`]); edits wait for a person ([`approval`]); indexed files and the index status are
//! resources ([`resources`]). docs/MCP.md is the user's guide.

pub mod approval;
pub mod backend;
mod call;
pub mod http;
mod resources;
pub mod size;
pub mod tools;
pub mod uri;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode,
    Implementation, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tonic::Status;

pub use backend::{Backend, Caller, InProcess};

/// The header an MCP client may name its workspace with (as `?workspace=` does).
pub const WORKSPACE_HEADER: &str = "x-ploke-workspace";

/// How the MCP server answers.
#[derive(Debug, Clone)]
pub struct Options {
    /// Largest result, in tokens (`[gateway] mcp_max_result_tokens`).
    pub max_result_tokens: u32,
    /// The workspace of callers that name none (a name or a root); `None` = the server's
    /// default workspace.
    pub workspace: Option<String>,
    /// Every request must come with an authenticated principal (the HTTP endpoint).
    pub authenticated: bool,
}

/// One MCP server: per HTTP request or session, or for a `ploke mcp` process.
#[derive(Clone)]
pub struct McpServer {
    backend: Arc<dyn Backend>,
    options: Arc<Options>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("options", &self.options)
            .finish()
    }
}

fn parts(ctx: &RequestContext<RoleServer>) -> Option<&::http::request::Parts> {
    ctx.extensions.get::<::http::request::Parts>()
}

impl McpServer {
    /// A server calling `backend`.
    pub fn new(backend: Arc<dyn Backend>, options: Arc<Options>) -> Self {
        Self { backend, options }
    }

    /// Who the request is from and the trace it continues.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
        let principal = parts(ctx).and_then(|p| {
            p.extensions
                .get::<ploke_runtime::principal::Principal>()
                .cloned()
        });
        if self.options.authenticated && principal.is_none() {
            return Err(ErrorData::internal_error(
                "the request reached the MCP server without a principal",
                None,
            ));
        }
        Ok(Caller {
            principal,
            traceparent: ctx.meta.get_traceparent().map(str::to_owned),
            tracestate: ctx.meta.get_tracestate().map(str::to_owned),
        })
    }

    /// The workspace the client named (`?workspace=` or the header), else the configured one.
    fn requested_workspace(&self, ctx: &RequestContext<RoleServer>) -> Option<String> {
        let p = parts(ctx);
        p.and_then(|p| p.uri.query())
            .and_then(|q| uri::query_param(q, "workspace"))
            .or_else(|| {
                p.and_then(|p| p.headers.get(WORKSPACE_HEADER))
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
            })
            .or_else(|| self.options.workspace.clone())
    }

    /// The root of the workspace `requested` names among the caller's (empty = the server's
    /// default workspace).
    async fn workspace_root(
        &self,
        caller: &Caller,
        requested: Option<&str>,
    ) -> Result<String, Status> {
        let Some(w) = requested else {
            return Ok(String::new());
        };
        let mine = self.backend.list_workspaces(caller).await?;
        if let Some(found) = mine.iter().find(|x| x.name == w || x.workspace_root == w) {
            return Ok(found.workspace_root.clone());
        }
        let names: Vec<&str> = mine.iter().map(|x| x.name.as_str()).collect();
        Err(Status::not_found(format!(
            "no workspace `{w}` among yours ({}); name one in the MCP URL's ?workspace=",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        )))
    }
}

/// The session every MCP call acts in: one per principal (the gateway tags it with the
/// principal), whichever MCP session or stateless request it comes from. Its overlay holds
/// every edit the principal approved over MCP; one per MCP session (and per request, for a
/// stateless client) used up the principal's overlays within a day, after which the
/// developer's own `ploke ask` could not send their changes.
const MCP_SESSION: &str = "mcp-edits";

/// The client's name for messages ("declined in Claude Code").
fn client_name(ctx: &RequestContext<RoleServer>) -> String {
    ctx.client_info()
        .map(|i| i.title.clone().unwrap_or(i.name))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "the MCP client".to_owned())
}

const INSTRUCTIONS: &str = "ploke serves a team's indexed repositories. Start with request_code_context (hybrid BM25 + dense search over whole code items) or search_code for exact text; read_file and list_dir read the workspace; code_item_lookup finds an item by path. apply_code_edit and create_file stage an edit that a person approves before any file changes.";

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        );
        info.server_info = Implementation::new("ploke", env!("CARGO_PKG_VERSION"))
            .with_title("ploke: typed code-context tools");
        info.instructions = Some(INSTRUCTIONS.to_owned());
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        let defs = self
            .backend
            .list_tools(&caller)
            .await
            .map_err(|s| ErrorData::internal_error(s.message().to_owned(), None))?;
        Ok(ListToolsResult::with_all_items(
            defs.iter().map(tools::tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        call::call_tool(self, request, ctx).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        resources::list(self, request.and_then(|r| r.cursor), &ctx).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        resources::read(self, &request.uri, &ctx).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(unreadable(&request))
    }
}

/// What is wrong with a request that reached the server as a custom one. rmcp reads a request
/// whose params do not fit its method (`tools/call` with `arguments` sent as a string) as a
/// method of its own: the client is told which param is wrong (JSON-RPC's -32602), not that
/// `tools/call` does not exist.
fn unreadable(request: &CustomRequest) -> ErrorData {
    let method = request.method.as_str();
    let problem = match method {
        "tools/call" => tool_call_problem(request.params.as_ref()).or_else(|| {
            request
                .params_as::<CallToolRequestParams>()
                .err()
                .map(|e| e.to_string())
        }),
        "resources/read" => match request.params_as::<ReadResourceRequestParams>() {
            Ok(Some(_)) => None,
            Ok(None) => Some("params are missing: send {\"uri\": …}".to_owned()),
            Err(e) => Some(e.to_string()),
        },
        "tools/list" | "resources/list" | "resources/templates/list" => request
            .params_as::<PaginatedRequestParams>()
            .err()
            .map(|e| e.to_string()),
        _ => {
            return ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("no method `{method}`: this server serves tools and resources"),
                None,
            );
        }
    };
    let reason = problem.unwrap_or_else(|| "they do not fit the method".to_owned());
    ErrorData::invalid_params(format!("invalid params of {method}: {reason}"), None)
}

/// The param of a `tools/call` that is not what the specification says it is.
fn tool_call_problem(params: Option<&serde_json::Value>) -> Option<String> {
    let Some(params) = params else {
        return Some("params are missing: send {\"name\": …, \"arguments\": {…}}".to_owned());
    };
    let Some(params) = params.as_object() else {
        return Some(format!(
            "params must be an object, not {}",
            json_kind(params)
        ));
    };
    match params.get("name") {
        Some(serde_json::Value::String(_)) => {}
        Some(other) => return Some(format!("`name` must be a string, not {}", json_kind(other))),
        None => return Some("`name` is missing: the tool to call".to_owned()),
    }
    match params.get("arguments") {
        None | Some(serde_json::Value::Null | serde_json::Value::Object(_)) => None,
        Some(other) => Some(format!(
            "`arguments` must be a JSON object of the tool's arguments, not {}",
            json_kind(other)
        )),
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
