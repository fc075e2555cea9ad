//! Short words for what the services send: enum values without their prefix, a typed tool
//! call as its arguments JSON, why a turn failed, search hits. Shared by `ask`, `search`,
//! `edits`, `up` and the TUI.

use ploke_proto::common::v1::ItemKind;
use ploke_proto::rag::v1::SearchResponse;
use ploke_proto::session::v1::{Session, SessionState, TurnFailureReason};
use ploke_proto::tools::v1::ToolCall;

/// An error with its causes on one line, each said once.
pub(crate) fn error(e: &anyhow::Error) -> String {
    ploke_runtime::text::with_causes(e.chain())
}

/// `ITEM_KIND_FUNCTION` with prefix `ITEM_KIND_` → `function`.
pub(crate) fn lower(full: &str, prefix: &str) -> String {
    full.trim_start_matches(prefix).to_lowercase()
}

/// The arguments JSON of a typed call, as the model wrote them; empty if it cannot be shown.
pub(crate) fn call_args(call: Option<&ToolCall>) -> String {
    call.and_then(|c| {
        ploke_proto::registry::ToolRegistry::global()
            .ok()?
            .render_call(c)
    })
    .map(|(_, json)| json)
    .unwrap_or_default()
}

/// `text` on one line in at most `cols` terminal cells: a wide character (CJK, most emoji)
/// takes two, so counting characters overran the line by up to twice its width. A cut text
/// ends in `…`; control characters show as `?`.
pub(crate) fn fit(text: &str, cols: usize) -> String {
    use unicode_width::UnicodeWidthChar as _;
    let shown = |c: char| if c.is_control() { '?' } else { c };
    if width(text) <= cols {
        return text.chars().map(shown).collect();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars().map(shown) {
        let w = c.width().unwrap_or(0);
        // One cell is kept for the `…`.
        if used + w + 1 > cols {
            break;
        }
        used += w;
        out.push(c);
    }
    if cols > 0 {
        out.push('…');
    }
    out
}

/// The terminal cells `text` takes on one line (a control character counts as its `?`).
pub(crate) fn width(text: &str) -> usize {
    use unicode_width::UnicodeWidthChar as _;
    text.chars()
        .map(|c| {
            if c.is_control() {
                1
            } else {
                c.width().unwrap_or(0)
            }
        })
        .sum()
}

/// One line about a session: short id, model, when, size, title, and why its last turn
/// failed.
pub(crate) fn session_line(s: &Session) -> String {
    let short: String = s.session_id.chars().take(13).collect();
    let usage = s.usage.unwrap_or_default();
    let when = ploke_client::sessions::last_used(s);
    let title = if s.title.is_empty() {
        String::new()
    } else {
        format!("  {}", s.title)
    };
    let failure = last_failure(s);
    let failure = if failure.is_empty() {
        failure
    } else {
        format!("  ({failure})")
    };
    format!(
        "{short}  {}/{}  {when:>8}  {} events  {} tokens{title}{failure}",
        s.provider,
        s.model,
        s.last_seq,
        usage.input_tokens + usage.output_tokens
    )
}

/// Why the session's newest ended turn did not complete, on one line ("last turn failed,
/// provider: …", "last turn cancelled: …"); empty when it completed, when none has ended, and
/// while a turn runs.
pub(crate) fn last_failure(s: &Session) -> String {
    let Some(failed) = &s.last_failure else {
        return String::new();
    };
    if s.state() == SessionState::Running {
        return String::new();
    }
    let how = match failed.reason() {
        TurnFailureReason::Cancelled => "cancelled".to_owned(),
        TurnFailureReason::Interrupted => "interrupted".to_owned(),
        _ => format!("failed, {}", turn_failure(failed.reason)),
    };
    let message = fit(failed.message.trim(), FAILURE_CELLS);
    if message.is_empty() {
        format!("last turn {how}")
    } else {
        format!("last turn {how}: {message}")
    }
}

/// Terminal cells of a failed turn's message in a session's line.
const FAILURE_CELLS: usize = 100;

/// Why a turn failed: `cancelled`, `provider`, `max_rounds`, …
pub(crate) fn turn_failure(reason: i32) -> String {
    TurnFailureReason::try_from(reason)
        .map(|r| lower(r.as_str_name(), "TURN_FAILURE_REASON_"))
        .unwrap_or_default()
}

/// Why a search asked for dense retrieval (`dense_asked`) answered with keywords only, with
/// the service's reason; none when it did not.
pub(crate) fn search_note(found: &SearchResponse, dense_asked: bool) -> Option<String> {
    (dense_asked && !found.dense_used)
        .then(|| format!("(keywords only: {})", found.dense_unavailable_reason))
}

/// Search hits as `ploke search` prints them and the TUI's `/search` shows them: each hit's
/// rank, file and lines, canonical path and kind, score, then its first line of code (doc
/// comments, attributes and decorators skipped: [`signature_line`]); `no matches` when there are
/// none.
pub(crate) fn search_hits(found: &SearchResponse) -> Vec<String> {
    let mut lines = Vec::new();
    let indexing = found.index_state == ploke_proto::rag::v1::IndexState::Indexing as i32;
    if found.hits.is_empty() {
        lines.push(
            if indexing {
                "no matches yet: the index is still being built (try again when it is ready)"
            } else {
                "no matches"
            }
            .to_owned(),
        );
    } else if indexing {
        lines.push(
            "(the index is still being built: these are the files indexed so far)".to_owned(),
        );
    }
    for (i, hit) in found.hits.iter().enumerate() {
        let part = hit.part.clone().unwrap_or_default();
        let span = part.span.unwrap_or_default();
        let kind = ItemKind::try_from(part.kind)
            .map(|k| lower(k.as_str_name(), "ITEM_KIND_"))
            .unwrap_or_default();
        let name = if part.canon_path.is_empty() {
            kind.clone()
        } else {
            format!("{} ({kind})", part.canon_path)
        };
        lines.push(format!(
            "{:>3}. {}:{}-{}  {name}  score {:.3}",
            i + 1,
            part.file_path,
            span.line_start,
            span.line_end,
            hit.score
        ));
        let first = if part.canon_path.is_empty() {
            part.snippet.lines().find(|l| !l.trim().is_empty())
        } else {
            signature_line(&part.snippet)
        };
        if let Some(first) = first {
            lines.push(format!("       {}", preview(first)));
        }
    }
    lines
}

/// Terminal cells of a hit's line shown as its preview.
const PREVIEW_CELLS: usize = 160;

/// A line of a file as a terminal may show it: trimmed, cut to [`PREVIEW_CELLS`] cells (a
/// minified file's one line printed a megabyte per hit; a line in Chinese takes two cells a
/// character) with its length in bytes, control characters (an escape sequence in the file
/// would drive the terminal) shown as `?`.
fn preview(line: &str) -> String {
    let line = line.trim();
    let shown = fit(line, PREVIEW_CELLS);
    if width(line) > PREVIEW_CELLS {
        format!("{shown}({} bytes)", line.len())
    } else {
        shown
    }
}

/// An item's first line of code: past its doc comments (`///`, `//`, `/** … */`), attributes,
/// annotations and decorators (`#[…]`, `@…`, over several lines too) and comments (`#`), so the
/// signature shows rather than `#[derive(Debug)]`. A snippet of nothing else shows its first
/// line.
fn signature_line(snippet: &str) -> Option<&str> {
    let mut depth = 0i32;
    let mut in_block = false;
    let mut first = None;
    for line in snippet.lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        first.get_or_insert(line);
        if in_block {
            in_block = !t.contains("*/");
            continue;
        }
        if depth > 0 {
            depth += nesting(t);
            continue;
        }
        if t.starts_with("/*") {
            in_block = !t.contains("*/");
            continue;
        }
        if t.starts_with("#[") || t.starts_with("#![") || t.starts_with('@') {
            depth = nesting(t).max(0);
            continue;
        }
        if t.starts_with("//") || t.starts_with('#') {
            continue;
        }
        return Some(line);
    }
    first
}

/// Brackets `line` opens less those it closes.
fn nesting(line: &str) -> i32 {
    line.chars()
        .map(|c| match c {
            '(' | '[' | '{' => 1,
            ')' | ']' | '}' => -1,
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use ploke_proto::common::v1::{CodeSpan, ContextPart, ItemKind};
    use ploke_proto::rag::v1::{SearchHit, SearchResponse};

    use super::{fit, search_hits, search_note, width};

    #[test]
    fn a_line_is_fitted_by_the_cells_it_takes() {
        // Chinese takes two cells a character: ten cells hold four and the `…`.
        assert_eq!(
            [fit("查找函数定义并返回结果", 10), fit("查找函数定义", 12)],
            ["查找函数…".to_owned(), "查找函数定义".to_owned()]
        );
        assert_eq!(width(&fit("查找函数定义并返回结果", 10)), 9);
        // A wide character that would straddle the edge is left out whole.
        assert_eq!(fit("a查找", 4), "a查…");
        assert_eq!(
            [
                fit("{\"file\":\"src/lib.rs\"}", 12),
                fit("abc", 3),
                fit("abcd", 0)
            ],
            [
                "{\"file\":\"sr…".to_owned(),
                "abc".to_owned(),
                String::new()
            ]
        );
        assert_eq!(fit("a\x1b[2Jb", 10), "a?[2Jb");
        assert_eq!(
            [width("漢字"), width("ab"), width("🦀"), width("\t")],
            [4, 2, 2, 1]
        );
    }

    #[test]
    fn names_lose_their_prefix() {
        assert_eq!(
            super::lower("ITEM_KIND_TYPE_ALIAS", "ITEM_KIND_"),
            "type_alias"
        );
        assert_eq!(super::turn_failure(3), "max_rounds");
        assert_eq!(super::call_args(None), "");
    }

    fn hit(file: &str, canon: &str, (start, end): (u32, u32), snippet: &str) -> SearchHit {
        SearchHit {
            part: Some(ContextPart {
                file_path: file.into(),
                canon_path: canon.into(),
                kind: ItemKind::Function as i32,
                span: Some(CodeSpan {
                    line_start: start,
                    line_end: end,
                    ..Default::default()
                }),
                snippet: snippet.into(),
                ..Default::default()
            }),
            score: 0.25,
            ..Default::default()
        }
    }

    #[test]
    fn hits_show_place_path_kind_score_and_first_line_of_code() {
        let found = SearchResponse {
            hits: vec![
                hit(
                    "src/lib.rs",
                    "crate::add",
                    (1, 4),
                    "/// Adds.\n\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}",
                ),
                hit("README.md", "", (1, 40), "# Demo"),
            ],
            dense_used: false,
            dense_unavailable_reason: "no embedding model configured".into(),
            ..Default::default()
        };
        assert_eq!(
            search_note(&found, true)
                .into_iter()
                .chain(search_hits(&found))
                .collect::<Vec<_>>(),
            [
                "(keywords only: no embedding model configured)",
                "  1. src/lib.rs:1-4  crate::add (function)  score 0.250",
                "       pub fn add(a: i32, b: i32) -> i32 {",
                "  2. README.md:1-40  function  score 0.250",
                "       # Demo",
            ]
        );
        // BM25 asked: no note; nothing found: said so.
        let none = SearchResponse::default();
        assert_eq!(search_note(&found, false), None);
        assert_eq!(search_note(&none, false), None);
        assert_eq!(search_hits(&none), ["no matches"]);
        // Attributes, decorators and annotations, on one line or several, are not the code.
        for (snippet, first) in [
            (
                "/// A config.\n#[derive(Debug,\n    Clone)]\n#[serde(rename_all = \"snake_case\")]\npub struct Config {",
                "pub struct Config {",
            ),
            (
                "@app.route(\"/x\",\n           methods=[\"GET\"])\n@login_required\ndef view(request):",
                "def view(request):",
            ),
            (
                "/**\n * Loads it.\n */\n@Override\npublic String toString() {",
                "public String toString() {",
            ),
            (
                "// Serve runs.\nfunc Serve() error {",
                "func Serve() error {",
            ),
            ("#[test]", "#[test]"),
        ] {
            assert_eq!(super::signature_line(snippet), Some(first), "{snippet}");
        }
        assert_eq!(
            search_hits(&found)[0],
            "  1. src/lib.rs:1-4  crate::add (function)  score 0.250"
        );
    }

    #[test]
    fn a_preview_is_one_short_line_that_cannot_drive_the_terminal() {
        let long = format!("const data = [{}];", "1, ".repeat(100_000));
        let found = SearchResponse {
            hits: vec![hit("src/min.js", "", (1, 1), &long)],
            ..Default::default()
        };
        let preview = &search_hits(&found)[1];
        assert!(preview.chars().count() < 200, "{preview}");
        assert!(preview.ends_with("…(300016 bytes)"), "{preview}");
        let found = SearchResponse {
            hits: vec![hit("a.rs", "", (1, 1), "let s = \"\u{1b}]0;PWNED\u{7}\";")],
            ..Default::default()
        };
        assert_eq!(search_hits(&found)[1], "       let s = \"?]0;PWNED?\";");
        // Chinese takes two cells a character: a line of it is cut at half the characters.
        let chinese = format!("/// {}", "用中文问候用户".repeat(40));
        let found = SearchResponse {
            hits: vec![hit("src/lib.rs", "", (1, 1), &chinese)],
            ..Default::default()
        };
        let preview = &search_hits(&found)[1];
        assert!(
            width(preview) < 200 && preview.ends_with(&format!("…({} bytes)", chinese.len())),
            "{preview}"
        );
        // While the index is being built, an empty answer says so.
        let indexing = SearchResponse {
            index_state: ploke_proto::rag::v1::IndexState::Indexing as i32,
            ..Default::default()
        };
        assert_eq!(
            search_hits(&indexing),
            ["no matches yet: the index is still being built (try again when it is ready)"]
        );
    }
}

#[cfg(test)]
mod session_tests {
    use ploke_proto::session::v1::{Session, SessionState, TurnFailed, TurnFailureReason};

    use super::last_failure;

    fn failed(reason: TurnFailureReason, message: &str) -> Session {
        Session {
            last_failure: Some(TurnFailed {
                reason: reason as i32,
                message: message.into(),
            }),
            ..Session::default()
        }
    }

    #[test]
    fn a_session_says_how_its_last_turn_failed_on_one_line() {
        let said: Vec<String> = [
            failed(
                TurnFailureReason::Provider,
                "429 Too Many Requests\nretry later",
            ),
            failed(TurnFailureReason::MaxRounds, ""),
            failed(
                TurnFailureReason::Cancelled,
                "cancelled with Ctrl-C in `ploke ask`",
            ),
            failed(
                TurnFailureReason::Interrupted,
                "llm-session restarted while the turn ran",
            ),
            Session::default(),
        ]
        .iter()
        .map(last_failure)
        .collect();
        assert_eq!(
            said,
            [
                "last turn failed, provider: 429 Too Many Requests?retry later",
                "last turn failed, max_rounds",
                "last turn cancelled: cancelled with Ctrl-C in `ploke ask`",
                "last turn interrupted: llm-session restarted while the turn ran",
                "",
            ]
        );
        // A long reason is cut; while a turn runs the last one's failure is old news.
        let long = last_failure(&failed(TurnFailureReason::Provider, &"x".repeat(500)));
        assert_eq!(
            super::width(&long),
            "last turn failed, provider: ".len() + 100
        );
        let mut running = failed(TurnFailureReason::Provider, "boom");
        running.set_state(SessionState::Running);
        assert_eq!(last_failure(&running), "");
    }
}
