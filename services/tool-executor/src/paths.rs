//! A tool's path argument resolved by the one path policy of every service
//! ([`ploke_runtime::path_policy`]), its refusals turned into typed tool errors naming the
//! argument, and files opened the same way.

use std::path::Path;

use ploke_proto::tools::v1::ToolErrorCode;
pub use ploke_runtime::path_policy::Resolved;
use ploke_runtime::path_policy::{self as policy, FileError, PathError};
use ploke_runtime::text::shown;

use crate::failure::ToolFailure;

/// The tool error for a path the policy refused.
pub fn refused(field: &str, input: &str, e: &PathError) -> ToolFailure {
    let message = format!("`{}` {e}", shown(input));
    match e {
        PathError::AbsoluteOutside
        | PathError::Climbs
        | PathError::SymlinkEscape
        | PathError::Dangling => ToolFailure::new(ToolErrorCode::OutsideWorkspace, field, message)
            .hint("use a path relative to the workspace root, without `..` that leaves it"),
        PathError::Protected(_) | PathError::Denied => {
            ToolFailure::new(ToolErrorCode::PermissionDenied, field, message)
        }
        PathError::Nul
        | PathError::Control(_)
        | PathError::TooLong(_)
        | PathError::NameTooLong
        | PathError::Loop
        | PathError::ThroughFile => ToolFailure::invalid(field, message),
        PathError::Io(_) => ToolFailure::new(ToolErrorCode::Internal, field, message),
    }
}

/// Resolves `input` (relative to `root`, or absolute inside it), to read or to write. `root`
/// must be canonical. An empty input means the root.
pub fn resolve(root: &Path, field: &str, input: &str) -> Result<Resolved, ToolFailure> {
    policy::resolve(root, input).map_err(|e| refused(field, input, &e))
}

/// The tool error for a file that could not be opened or read; `shown` is its relative path.
pub fn unreadable(field: &str, shown: &str, e: FileError) -> ToolFailure {
    // The root itself is `.` to the model (its relative path is empty).
    let shown = if shown.is_empty() { "." } else { shown };
    match e {
        FileError::NotFound => ToolFailure::not_found(field, format!("{shown} does not exist"))
            .hint("use list_dir or search_code to find the right path"),
        FileError::NotRegular("a directory") => {
            ToolFailure::invalid(field, format!("{shown} is a directory"))
                .hint("use list_dir for directories")
        }
        FileError::NotRegular(kind) => {
            ToolFailure::invalid(field, format!("{shown} is {kind}, not a regular file"))
        }
        FileError::TooLarge { size, limit } => ToolFailure::new(
            ToolErrorCode::TooLarge,
            field,
            format!("{shown} is {size} bytes; the limit is {limit}"),
        )
        .hint("use search_code to find the lines you need"),
        FileError::Cancelled => ToolFailure::new(
            ToolErrorCode::Timeout,
            field,
            format!("reading {shown} was abandoned"),
        ),
        FileError::Io(e) => ToolFailure::io(field, shown, &e),
    }
}

/// The whole regular file at `abs`, at most `max_bytes`, as a tool reads it.
pub fn read(abs: &Path, field: &str, shown: &str, max_bytes: u64) -> Result<Vec<u8>, ToolFailure> {
    policy::read_regular(abs, max_bytes).map_err(|e| unreadable(field, shown, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_typed_tool_errors_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let code = |input: &str| resolve(&root, "file", input).unwrap_err();
        let e = code("../x");
        assert_eq!(
            (e.code, e.field.as_str(), e.message.as_str()),
            (
                ToolErrorCode::OutsideWorkspace,
                "file",
                "`../x` climbs out of the workspace root"
            )
        );
        assert_eq!(code(".GIT/config").code, ToolErrorCode::PermissionDenied);
        let long = "x/".repeat(3000);
        let e = code(&long);
        assert_eq!(
            (e.code, e.field.as_str()),
            (ToolErrorCode::InvalidArgument, "file")
        );
        assert!(e.message.len() < 400, "{} bytes echoed", e.message.len());
        assert!(e.message.contains("(6000 bytes)"), "{}", e.message);
    }

    #[test]
    fn sockets_files_taken_for_directories_and_the_root_are_named_in_invalid_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
        let _listening = std::os::unix::net::UnixListener::bind(root.join("sock.rs")).unwrap();
        let failure = |e: ToolFailure| (e.code, e.field, e.message);
        let read = |input: &str| {
            let resolved = resolve(&root, "file", input)?;
            read(&resolved.abs, "file", &resolved.rel, 1 << 20)
        };
        assert_eq!(
            failure(read("sock.rs").unwrap_err()),
            (
                ToolErrorCode::InvalidArgument,
                "file".to_owned(),
                "sock.rs is a socket, not a regular file".to_owned()
            )
        );
        assert_eq!(
            failure(read("src/lib.rs/x").unwrap_err()),
            (
                ToolErrorCode::InvalidArgument,
                "file".to_owned(),
                "`src/lib.rs/x` goes through a file as if it were a directory".to_owned()
            )
        );
        assert_eq!(
            failure(read(".").unwrap_err()),
            (
                ToolErrorCode::InvalidArgument,
                "file".to_owned(),
                ". is a directory".to_owned()
            )
        );
    }
}
