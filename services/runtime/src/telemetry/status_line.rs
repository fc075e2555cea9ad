//! A status line on stderr (a progress bar redrawn with `\r`, no newline yet) and the log lines
//! written to the same stderr: a log line first ends the open status line — on a terminal by
//! clearing it, elsewhere with a newline — so the two never share a line. The status line is
//! drawn again by its next update.

use std::io::{IsTerminal as _, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::fmt::MakeWriter;

/// Whether a status line is open on stderr.
static OPEN: AtomicBool = AtomicBool::new(false);

/// Says that a status line is open on stderr (`true`, after drawing it without a newline) or
/// ended (`false`, after its newline).
pub fn set_open(open: bool) {
    OPEN.store(open, Ordering::Relaxed);
}

/// Stderr for log lines, each of which ends an open status line first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = LogLine;

    fn make_writer(&'a self) -> Self::Writer {
        LogLine {
            pending: OPEN.swap(false, Ordering::Relaxed),
        }
    }
}

/// One log line's writer: what ends the status line goes before its first bytes.
#[derive(Debug)]
pub struct LogLine {
    pending: bool,
}

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut err = std::io::stderr().lock();
        if std::mem::take(&mut self.pending) {
            let end: &[u8] = if err.is_terminal() {
                b"\r\x1b[K"
            } else {
                b"\n"
            };
            err.write_all(end)?;
        }
        err.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_ends_an_open_status_line_once() {
        set_open(true);
        assert!(Stderr.make_writer().pending);
        // Ended by that line: the next one writes as is, until a status line opens again.
        assert!(!Stderr.make_writer().pending);
        set_open(true);
        set_open(false);
        assert!(!Stderr.make_writer().pending);
    }
}
