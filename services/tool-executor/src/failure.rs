//! The typed error a tool call ends with: a code, the argument at fault, what went wrong and
//! what to change. The model reads it; nothing here is a transport error.

use ploke_proto::tools::v1::{ToolError as PbToolError, ToolErrorCode};

/// Why one tool call failed, in terms the model can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// Category.
    pub code: ToolErrorCode,
    /// The argument at fault as a JSON path; empty if none.
    pub field: String,
    /// What went wrong.
    pub message: String,
    /// What to change before retrying; empty when retrying will not help.
    pub retry_hint: String,
}

impl ToolFailure {
    /// A failure with `code`, naming `field`.
    pub fn new(code: ToolErrorCode, field: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            field: field.to_owned(),
            message: message.into(),
            retry_hint: String::new(),
        }
    }

    /// Adds what to change before retrying.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.retry_hint = hint.into();
        self
    }

    /// An acceptable-shaped argument with an unacceptable value.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::InvalidArgument, field, message)
    }

    /// A value outside its allowed range.
    pub fn out_of_range(field: &str, message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::OutOfRange, field, message)
    }

    /// A file, directory or item that does not exist.
    pub fn not_found(field: &str, message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::NotFound, field, message)
    }

    /// A bug or unexpected failure on the server.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::Internal, "", message)
    }

    /// A service the tool needs is unavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::Unavailable, "", message).hint("retry in a moment")
    }

    /// An I/O failure on `path`, classified.
    pub fn io(field: &str, path: &str, e: &std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => {
                Self::not_found(field, format!("{path} does not exist"))
                    .hint("use list_dir or search_code to find the right path")
            }
            std::io::ErrorKind::PermissionDenied => Self::new(
                ToolErrorCode::PermissionDenied,
                field,
                format!("{path}: permission denied"),
            ),
            std::io::ErrorKind::InvalidFilename => Self::invalid(field, format!("{path}: {e}")),
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::ReadOnlyFilesystem => {
                Self::new(ToolErrorCode::Unavailable, field, format!("{path}: {e}"))
                    .hint("the server's disk cannot take the write; retry later")
            }
            _ => Self::new(ToolErrorCode::Internal, field, format!("{path}: {e}")),
        }
    }
}

impl std::fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = self.code.as_str_name();
        if self.field.is_empty() {
            write!(f, "{code}: {}", self.message)
        } else {
            write!(f, "{code} ({}): {}", self.field, self.message)
        }
    }
}

impl From<ToolFailure> for PbToolError {
    fn from(f: ToolFailure) -> Self {
        PbToolError {
            code: f.code as i32,
            field: f.field,
            message: f.message,
            retry_hint: f.retry_hint,
        }
    }
}
