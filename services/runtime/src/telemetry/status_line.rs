//! A status line on stderr (a progress bar redrawn with `\r`, no newline yet; drawn only when
//! stderr is a terminal) and the log lines written to the same stderr: a log line first ends
//! the open status line by clearing it, so the two never share a line. The status line is
//! drawn again by its next update. Drawing, ending and each log line take stderr's lock, so
//! the flag and the terminal always agree.

use std::io::{IsTerminal as _, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::fmt::MakeWriter;

/// Whether a status line is open on stderr.
static OPEN: AtomicBool = AtomicBool::new(false);

/// Draws `text` as the status line (it starts with `\r` to redraw in place; no newline); on a
/// stderr that is no terminal (a pipe, a CI log) nothing: redrawn lines would pile up there.
pub fn draw(text: &str) {
    let mut err = std::io::stderr().lock();
    if !err.is_terminal() {
        return;
    }
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
    OPEN.store(true, Ordering::Relaxed);
}

/// Ends the open status line with a newline (nothing when none is open).
pub fn end() {
    let mut err = std::io::stderr().lock();
    if OPEN.swap(false, Ordering::Relaxed) {
        let _ = err.write_all(b"\n");
    }
}

/// Ends the status line when dropped: an early return leaves none open.
#[derive(Debug)]
pub struct Drawing;

impl Drop for Drawing {
    fn drop(&mut self) {
        end();
    }
}

/// Stderr for log lines, each of which ends an open status line first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = LogLine;

    fn make_writer(&'a self) -> Self::Writer {
        LogLine
    }
}

/// One log line's writer: what ends the status line goes before its bytes, under one lock.
#[derive(Debug)]
pub struct LogLine;

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut err = std::io::stderr().lock();
        if OPEN.swap(false, Ordering::Relaxed) {
            let end: &[u8] = if err.is_terminal() {
                b"\r\x1b[K"
            } else {
                b"\n"
            };
            err.write_all(end)?;
        }
        err.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_is_ended_once_by_whoever_comes_first() {
        OPEN.store(true, Ordering::Relaxed);
        // A log line ends it (its write takes the flag), and ending it again writes nothing.
        assert!(OPEN.swap(false, Ordering::Relaxed));
        end();
        assert!(!OPEN.load(Ordering::Relaxed));
        // A guard dropped on an early return ends one still open.
        OPEN.store(true, Ordering::Relaxed);
        drop(Drawing);
        assert!(!OPEN.load(Ordering::Relaxed));
    }
}
