//! tool-executor's domain: the tool catalogue (from the typed registry), tool execution and
//! edit proposals. Running tools and the edit lifecycle are the capability of the
//! tool-executor issue; the catalogue is complete.

use ploke_proto::registry::ToolRegistry;
use ploke_proto::tools::v1::{ToolCall, ToolDefinition};
use ploke_runtime::client::TracedChannel;
use ploke_runtime::workspaces::Workspaces;

use crate::error::ToolError;

/// The tool-executor domain service.
#[derive(Debug, Clone)]
pub struct ToolService {
    workspaces: Workspaces,
    registry: &'static ToolRegistry,
    /// Channel to rag-search (request_code_context, code_item_lookup, refresh after apply).
    #[allow(dead_code)]
    rag: TracedChannel,
}

impl ToolService {
    /// A service over `workspaces` calling rag-search through `rag`.
    pub fn new(
        workspaces: Workspaces,
        registry: &'static ToolRegistry,
        rag: TracedChannel,
    ) -> Self {
        Self {
            workspaces,
            registry,
            rag,
        }
    }

    /// Every tool.
    pub fn tools(&self) -> Vec<ToolDefinition> {
        self.registry.definitions()
    }

    /// Run one call.
    pub fn execute(&self, workspace_root: &str, _call: &ToolCall) -> Result<(), ToolError> {
        self.workspaces.resolve(workspace_root)?;
        Err(ToolError::NotYet("tool execution"))
    }

    /// List proposals.
    pub fn list_edits(&self) -> Result<(), ToolError> {
        Err(ToolError::NotYet("edit proposals"))
    }

    /// Decide a proposal.
    pub fn decide(&self, proposal_id: &str) -> Result<(), ToolError> {
        Err(ToolError::NoSuchProposal(proposal_id.to_owned()))
    }
}
