//! Errors of the tool registry: building it, and parsing a model's arguments.

use crate::tools::v1::{ToolError, ToolErrorCode};

/// The embedded descriptors do not describe a usable registry (a build defect).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RegistryError {
    /// The descriptor set does not decode.
    #[error("decoding the descriptor set: {0}")]
    Descriptor(String),
    /// A message or extension the registry needs is missing.
    #[error("descriptor `{0}` is missing")]
    Missing(&'static str),
    /// A `ToolCall` field is not a message.
    #[error("ToolCall field `{0}` is not a message")]
    NotAMessage(String),
    /// An `*Args` message lacks the `(ploke.tools.v1.tool)` option.
    #[error("`{0}` has no (ploke.tools.v1.tool) option")]
    NoToolSpec(String),
    /// A tool has no message field of the same name in `ToolResult`.
    #[error("tool `{0}` has no result field in ToolResult")]
    NoResult(String),
}

/// What is wrong with a model's tool arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgErrorKind {
    /// The arguments are not valid JSON (or not a JSON object).
    BadJson,
    /// No tool has that name.
    UnknownTool,
    /// A field is not part of the schema.
    UnknownField,
    /// A field has the wrong JSON type.
    WrongType,
    /// A required field is missing.
    MissingField,
    /// A value is outside its range or length limits.
    OutOfRange,
    /// Well-formed but not acceptable (e.g. two exclusive fields).
    Invalid,
    /// The registry failed (a bug).
    Internal,
}

/// A typed error about tool arguments, naming the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ArgError {
    /// Category.
    pub kind: ArgErrorKind,
    /// JSON path of the field at fault (`edits[1].search_replace.search`); empty for the whole.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ArgError {
    pub(crate) fn new(kind: ArgErrorKind, field: &str, message: impl Into<String>) -> Self {
        Self {
            kind,
            field: field.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn unknown_tool(name: &str, registry: &super::ToolRegistry) -> Self {
        let names: Vec<&str> = registry.tools().iter().map(|t| t.name()).collect();
        Self::new(
            ArgErrorKind::UnknownTool,
            "",
            format!(
                "no tool is named `{name}`; the tools are: {}",
                names.join(", ")
            ),
        )
    }

    pub(crate) fn internal(message: String) -> Self {
        Self::new(ArgErrorKind::Internal, "", message)
    }

    fn describe(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("`{}`: {}", self.field, self.message)
        }
    }

    /// The wire error code for this kind.
    pub fn code(&self) -> ToolErrorCode {
        match self.kind {
            ArgErrorKind::BadJson => ToolErrorCode::BadJson,
            ArgErrorKind::UnknownTool => ToolErrorCode::UnknownTool,
            ArgErrorKind::UnknownField => ToolErrorCode::UnknownField,
            ArgErrorKind::WrongType => ToolErrorCode::WrongType,
            ArgErrorKind::MissingField => ToolErrorCode::MissingField,
            ArgErrorKind::OutOfRange => ToolErrorCode::OutOfRange,
            ArgErrorKind::Invalid => ToolErrorCode::InvalidArgument,
            ArgErrorKind::Internal => ToolErrorCode::Internal,
        }
    }

    /// The typed error the model receives.
    pub fn to_tool_error(&self) -> ToolError {
        let retry_hint = match self.kind {
            ArgErrorKind::Internal => String::new(),
            ArgErrorKind::UnknownTool => "call one of the listed tools".to_owned(),
            _ => "fix the arguments to match the tool's JSON Schema and call again".to_owned(),
        };
        ToolError {
            code: self.code() as i32,
            field: self.field.clone(),
            message: self.message.clone(),
            retry_hint,
        }
    }
}

impl From<ArgError> for ToolError {
    fn from(e: ArgError) -> Self {
        e.to_tool_error()
    }
}
