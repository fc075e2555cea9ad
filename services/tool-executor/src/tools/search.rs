//! `search_code`: ripgrep's own crates (grep-regex, grep-searcher and the `ignore` walker) over
//! the workspace, .gitignore honoured, matches capped, cancellable between and within files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ploke_proto::tools::v1::{
    CodeMatch, SearchCodeArgs, SearchCodeResult, SkippedFile, ToolErrorCode,
};
use tokio_util::sync::CancellationToken;

use ploke_proto::rag::v1::OverlayEntryState;

use super::Progress;
use crate::failure::ToolFailure;
use crate::overlay::{Shadow, View};
use crate::paths::resolve;

const MATCHES_DEFAULT: u32 = 100;
const MATCHES_MAX: u32 = 1000;
const CONTEXT_MAX: u32 = 10;
/// Longest line returned; longer ones (minified code) are cut with `…`.
const LINE_MAX: usize = 400;
/// Most memory one search holds for the lines it looks at: a file with a longer line (one
/// 200 MB line of generated data) is skipped instead of read whole into memory.
const LINE_BUFFER_MAX: usize = 4 * 1024 * 1024;
/// Most files skipped that a result names.
const SKIPPED_NAMED_MAX: usize = 20;
/// Files between progress reports.
const PROGRESS_EVERY: u64 = 250;

/// One file to search: the workspace's own, or the developer's version from the overlay.
enum Source {
    Base(PathBuf),
    Overlay(Arc<Vec<u8>>),
}

/// Runs `search_code`; stops with CANCELLED as soon as `cancel` fires. Through a session's
/// overlay, the developer's files are searched instead of the workspace's (the overlay's
/// contents must have been fetched: [`View::fetch_all`]).
pub(super) fn search_code(
    root: &Path,
    args: &SearchCodeArgs,
    cancel: &CancellationToken,
    progress: &Progress,
    view: Option<&View>,
) -> Result<SearchCodeResult, ToolFailure> {
    if args.pattern.is_empty() {
        return Err(ToolFailure::new(
            ToolErrorCode::MissingField,
            "pattern",
            "must be set",
        ));
    }
    let max = args.max_matches.unwrap_or(MATCHES_DEFAULT);
    if !(1..=MATCHES_MAX).contains(&max) {
        return Err(ToolFailure::out_of_range(
            "max_matches",
            format!("must be between 1 and {MATCHES_MAX}, got {max}"),
        ));
    }
    let context = args.context_lines.unwrap_or(0);
    if context > CONTEXT_MAX {
        return Err(ToolFailure::out_of_range(
            "context_lines",
            format!("must be between 0 and {CONTEXT_MAX}, got {context}"),
        ));
    }
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive.unwrap_or(false))
        .fixed_strings(args.literal.unwrap_or(false))
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|e| {
            ToolFailure::invalid("pattern", format!("not a valid regular expression: {e}"))
                .hint("fix the regex, or set literal to true to search for the text as is")
        })?;
    let start = resolve(root, "path", args.path.as_deref().unwrap_or(""))?;
    let in_overlay = view.is_some_and(|v| {
        v.entries().any(|(p, e)| {
            e.state == OverlayEntryState::Changed
                && (start.rel.is_empty()
                    || *p == start.rel
                    || p.starts_with(&format!("{}/", start.rel)))
        })
    });
    if !start.abs.exists() && !in_overlay
        || view.is_some_and(|v| matches!(v.shadow(&start.rel), Ok(Shadow::Deleted)))
    {
        return Err(
            ToolFailure::not_found("path", format!("{} does not exist", start.rel))
                .hint("use list_dir to see what exists"),
        );
    }
    // A path naming a FIFO, a socket or a device is refused as read_file refuses it (a walk
    // would pass over it and answer with nothing).
    if let Ok(meta) = std::fs::symlink_metadata(&start.abs)
        && !meta.is_dir()
        && !in_overlay
    {
        ploke_runtime::path_policy::open_regular(&start.abs)
            .map_err(|e| crate::paths::unreadable("path", &start.rel, e))?;
    }
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .before_context(context as usize)
        .after_context(context as usize)
        .binary_detection(BinaryDetection::quit(0))
        .heap_limit(Some(LINE_BUFFER_MAX))
        .build();
    let walk = start.abs.exists().then(|| {
        ploke_runtime::path_policy::ignores::walker(root, &start.abs)
            .sort_by_file_path(|a, b| a.cmp(b))
            .build()
    });
    let mut collector = Collector {
        max: max as usize,
        matches: Vec::new(),
        pending_before: Vec::new(),
        file: String::new(),
        truncated: false,
        cancel: cancel.clone(),
    };
    let base = walk.into_iter().flatten().filter_map(|entry| {
        let entry = entry.ok()?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return None;
        }
        // A path that is not UTF-8 could not be named back in any call: left out.
        let rel = entry
            .path()
            .strip_prefix(root)
            .ok()?
            .to_str()?
            .replace('\\', "/");
        Some((rel, Source::Base(entry.into_path())))
    });
    let sources: Box<dyn Iterator<Item = (String, Source)>> = match view {
        None => Box::new(base),
        Some(v) => Box::new(merged(base, v, &start.rel)?.into_iter()),
    };
    let mut files_searched = 0u64;
    let mut skipped = Vec::new();
    let mut files_skipped = 0u64;
    for (rel, source) in sources {
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        collector.file = rel;
        collector.pending_before.clear();
        // An unreadable file is skipped, as ripgrep does, and named in the result; it is
        // opened by the path policy, so a file swapped for a FIFO or a symlink since the walk
        // is skipped.
        let outcome = match source {
            Source::Base(path) => match ploke_runtime::path_policy::open_regular(&path) {
                Ok((file, _)) => searcher
                    .search_file(&matcher, &file, &mut collector)
                    .map_err(|e| skip_reason(&e)),
                // "is a FIFO, not a regular file", "does not exist" (gone since the walk).
                Err(e) => Err(e.to_string()),
            },
            Source::Overlay(bytes) => searcher
                .search_slice(&matcher, &bytes, &mut collector)
                .map_err(|e| skip_reason(&e)),
        };
        if let Err(reason) = outcome {
            files_skipped += 1;
            if skipped.len() < SKIPPED_NAMED_MAX {
                skipped.push(SkippedFile {
                    file_path: collector.file.clone(),
                    reason,
                });
            }
            continue;
        }
        files_searched += 1;
        if files_searched.is_multiple_of(PROGRESS_EVERY) {
            progress.report(
                format!("searched {files_searched} files"),
                files_searched,
                0,
            );
        }
        if cancel.is_cancelled() {
            return Err(cancelled());
        }
        if collector.truncated {
            break;
        }
    }
    Ok(SearchCodeResult {
        matches: collector.matches,
        files_searched,
        truncated: collector.truncated,
        skipped,
        files_skipped,
    })
}

/// Why a file could not be searched to its end, in words a model can act on.
fn skip_reason(e: &std::io::Error) -> String {
    let message = e.to_string();
    // grep-searcher's error when a line would take more than its heap limit.
    if message.contains("allocation limit") {
        format!(
            "has a line over {} MiB long, more than a search holds",
            LINE_BUFFER_MAX / (1024 * 1024)
        )
    } else {
        format!("could not be read: {message}")
    }
}

/// The workspace's files under `start` with the overlay applied: those it hides left out,
/// the developer's changed files under `start` in, all in path order.
fn merged(
    base: impl Iterator<Item = (String, Source)>,
    view: &View,
    start: &str,
) -> Result<Vec<(String, Source)>, ToolFailure> {
    let mut all: Vec<(String, Source)> = base.filter(|(rel, _)| !view.hides(rel)).collect();
    let under = |p: &str| start.is_empty() || p == start || p.starts_with(&format!("{start}/"));
    for (path, entry) in view.entries() {
        if entry.state != OverlayEntryState::Changed || !under(path) {
            continue;
        }
        if let Shadow::Changed(bytes, _) = view.shadow(path)? {
            all.push((path.clone(), Source::Overlay(bytes)));
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(all)
}

fn cancelled() -> ToolFailure {
    ToolFailure::new(ToolErrorCode::Cancelled, "", "the search was cancelled")
}

struct Collector {
    max: usize,
    matches: Vec<CodeMatch>,
    pending_before: Vec<String>,
    file: String,
    truncated: bool,
    cancel: CancellationToken,
}

fn line_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    if text.len() <= LINE_MAX {
        return text.to_owned();
    }
    let mut cut = LINE_MAX;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

impl Sink for Collector {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.cancel.is_cancelled() {
            return Ok(false);
        }
        if self.matches.len() >= self.max {
            self.truncated = true;
            return Ok(false);
        }
        self.matches.push(CodeMatch {
            file_path: self.file.clone(),
            line_number: u32::try_from(m.line_number().unwrap_or(0)).unwrap_or(u32::MAX),
            line: line_text(m.bytes()),
            before: std::mem::take(&mut self.pending_before),
            after: Vec::new(),
        });
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        match c.kind() {
            SinkContextKind::Before => self.pending_before.push(line_text(c.bytes())),
            SinkContextKind::After | SinkContextKind::Other => {
                if let Some(last) = self.matches.last_mut()
                    && last.file_path == self.file
                {
                    last.after.push(line_text(c.bytes()));
                }
            }
        }
        Ok(!self.cancel.is_cancelled())
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        self.pending_before.clear();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolEvent;

    #[tokio::test]
    async fn cancelling_stops_a_long_search_midway() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for i in 0..5000 {
            let sub = root.join(format!("d{}", i % 50));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join(format!("f{i}.rs")), "fn x() {}\n".repeat(100)).unwrap();
        }
        // Room for every report a whole search makes, so that the count below can fail.
        let whole = (5000 / PROGRESS_EVERY) as usize;
        let (tx, mut rx) = tokio::sync::mpsc::channel(2 * whole);
        let progress = Progress::new(tx);
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let args = SearchCodeArgs {
            pattern: "nothing(at)+all".into(),
            ..Default::default()
        };
        let search =
            tokio::task::spawn_blocking(move || search_code(&root, &args, &token, &progress, None));
        // The first progress report proves the search is under way; cancel it there.
        let Some(ToolEvent::Progress(p)) = rx.recv().await else {
            panic!("no progress")
        };
        assert_eq!(p.done, PROGRESS_EVERY);
        cancel.cancel();
        let e = search.await.unwrap().unwrap_err();
        assert_eq!(e.code, ToolErrorCode::Cancelled);
        // It stopped before the end: fewer reports than a whole search makes.
        let mut reports = 1;
        while rx.try_recv().is_ok() {
            reports += 1;
        }
        assert!(reports < whole, "{reports} reports");
    }

    #[test]
    fn a_file_with_a_line_too_long_to_hold_is_skipped_and_a_fifo_named_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let mut huge = "needle ".repeat(LINE_BUFFER_MAX / 4);
        huge.push('\n');
        std::fs::write(root.join("a_generated.json"), huge).unwrap();
        std::fs::write(root.join("b.rs"), "// needle here\n").unwrap();
        let fifo = root.join("pipe.rs");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let (tx, _rx) = tokio::sync::mpsc::channel(8);
        let progress = Progress::new(tx);
        let search = |path: Option<&str>| {
            let args = SearchCodeArgs {
                pattern: "needle".into(),
                path: path.map(str::to_owned),
                ..Default::default()
            };
            search_code(&root, &args, &CancellationToken::new(), &progress, None)
        };
        let found = search(None).unwrap();
        assert_eq!(
            found
                .matches
                .iter()
                .map(|m| (m.file_path.as_str(), m.line_number))
                .collect::<Vec<_>>(),
            vec![("b.rs", 1)]
        );
        // The file passed over is named, with the reason.
        assert_eq!(
            (found.skipped, found.files_skipped, found.files_searched),
            (
                vec![SkippedFile {
                    file_path: "a_generated.json".into(),
                    reason: "has a line over 4 MiB long, more than a search holds".into(),
                }],
                1,
                1
            )
        );
        let e = search(Some("pipe.rs")).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_str(), e.message.as_str()),
            (
                ToolErrorCode::InvalidArgument,
                "path",
                "pipe.rs is a FIFO, not a regular file"
            )
        );
    }

    #[tokio::test]
    async fn a_search_cancelled_before_it_starts_reads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.rs"), "fn a() {}\n").unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (tx, _rx) = tokio::sync::mpsc::channel(8);
        let cancel = CancellationToken::new();
        cancel.cancel();
        let args = SearchCodeArgs {
            pattern: "fn".into(),
            ..Default::default()
        };
        let e = search_code(&root, &args, &cancel, &Progress::new(tx), None).unwrap_err();
        assert_eq!(e.code, ToolErrorCode::Cancelled);
    }
}
