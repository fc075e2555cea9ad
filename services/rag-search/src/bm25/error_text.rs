//! tantivy's errors in words: several of its messages print the IO error inside with `{:?}`
//! (`IoError 'Os { code: 28, kind: StorageFull, message: "No space left on device" }' while
//! opening file for write: …`), which an operator then reads in a status or a log line.

use std::io;
use std::path::Path;

use tantivy::TantivyError;
use tantivy::directory::error::{OpenDirectoryError, OpenReadError, OpenWriteError};

/// `e` as a sentence: the file and the IO error's own text where tantivy has them.
pub(super) fn tantivy(e: &TantivyError) -> String {
    match e {
        TantivyError::OpenWriteError(OpenWriteError::IoError { io_error, filepath }) => {
            io_on("writing", filepath, io_error)
        }
        TantivyError::OpenReadError(OpenReadError::IoError { io_error, filepath }) => {
            io_on("reading", filepath, io_error)
        }
        TantivyError::OpenReadError(OpenReadError::FileDoesNotExist(path)) => {
            format!("{} does not exist", path.display())
        }
        TantivyError::OpenDirectoryError(e) => directory(e),
        TantivyError::IoError(e) => e.to_string(),
        TantivyError::DataCorruption(c) => format!("{c:?}"),
        other => other.to_string(),
    }
}

/// An error opening the index directory, as a sentence.
pub(super) fn directory(e: &OpenDirectoryError) -> String {
    match e {
        OpenDirectoryError::IoError {
            io_error,
            directory_path,
        } => io_on("opening", directory_path, io_error),
        OpenDirectoryError::FailedToCreateTempDir(io_error) => {
            format!("creating a temporary directory: {io_error}")
        }
        OpenDirectoryError::DoesNotExist(_) | OpenDirectoryError::NotADirectory(_) => e.to_string(),
    }
}

fn io_on(doing: &str, path: &Path, e: &io::Error) -> String {
    format!("{doing} {}: {e}", path.display())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn io_errors_read_as_words_with_their_file() {
        let full = TantivyError::OpenWriteError(OpenWriteError::IoError {
            io_error: Arc::new(io::Error::from_raw_os_error(28)),
            filepath: PathBuf::from("/data/index/x/bm25/abc.idx"),
        });
        assert_eq!(
            tantivy(&full),
            "writing /data/index/x/bm25/abc.idx: No space left on device (os error 28)"
        );
        let gone = TantivyError::OpenReadError(OpenReadError::FileDoesNotExist(PathBuf::from(
            "meta.json",
        )));
        assert_eq!(tantivy(&gone), "meta.json does not exist");
        let dir = OpenDirectoryError::IoError {
            io_error: Arc::new(io::Error::from_raw_os_error(13)),
            directory_path: PathBuf::from("/data/index/x/bm25"),
        };
        assert_eq!(
            directory(&dir),
            "opening /data/index/x/bm25: Permission denied (os error 13)"
        );
        // What tantivy already says in words stays as it is.
        assert_eq!(
            tantivy(&TantivyError::InvalidArgument("x".into())),
            "An invalid argument was passed: 'x'"
        );
    }
}
