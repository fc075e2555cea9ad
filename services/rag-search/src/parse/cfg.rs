//! `#[cfg(...)]` predicates evaluated for the host, as rust-analyzer does by default: the
//! target's architecture, OS and family (`target_arch = "wasm32"` is false on a Linux server,
//! `unix` true); everything else (features, `test`, `docsrs`, custom cfgs) is unknown and
//! counts as true. Only a predicate that is false for certain leaves code out: reqwest's
//! `pub use self::wasm::Client` under `cfg(target_arch = "wasm32")` does not make the wasm
//! client `reqwest::Client` on the machine a team's server runs on.

/// What a predicate says on this host: `Some(true)`, `Some(false)`, or `None` when it depends
/// on something not known here (a feature).
fn eval(predicate: &str) -> Option<bool> {
    eval_at(predicate, 0)
}

/// Deepest nesting of `all`/`any`/`not` read (a file nobody chose may nest thousands deep):
/// below it, unknown.
const MAX_NESTING: usize = 32;

fn eval_at(predicate: &str, depth: usize) -> Option<bool> {
    if depth > MAX_NESTING {
        return None;
    }
    // `cfg(unix,)` is `cfg(unix)`.
    let predicate = predicate.trim();
    let predicate = predicate.strip_suffix(',').unwrap_or(predicate).trim_end();
    if let Some((op, args)) = call(predicate) {
        let args = split_args(args);
        return match op {
            "not" => match args.as_slice() {
                [one] => eval_at(one, depth + 1).map(|b| !b),
                _ => None,
            },
            "all" => combine(&args, false, depth),
            "any" => combine(&args, true, depth),
            _ => None,
        };
    }
    match predicate.split_once('=') {
        Some((key, value)) => {
            // Only a plain string literal is read (`r"…"` and the like are unknown).
            let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
            let host = match key.trim() {
                "target_arch" => std::env::consts::ARCH,
                "target_os" => std::env::consts::OS,
                "target_family" => std::env::consts::FAMILY,
                "target_pointer_width" => return Some(value == usize::BITS.to_string()),
                "target_endian" => {
                    let host = if cfg!(target_endian = "little") {
                        "little"
                    } else {
                        "big"
                    };
                    return Some(value == host);
                }
                _ => return None,
            };
            Some(value == host)
        }
        None => match predicate {
            "unix" | "windows" => Some(std::env::consts::FAMILY == predicate),
            _ => None,
        },
    }
}

/// `all(..)` (`decisive` false) or `any(..)` (`decisive` true): a value equal to `decisive`
/// decides; otherwise the other one when every value is known, unknown when not.
fn combine(args: &[&str], decisive: bool, depth: usize) -> Option<bool> {
    let values: Vec<Option<bool>> = args.iter().map(|a| eval_at(a, depth + 1)).collect();
    if values.contains(&Some(decisive)) {
        Some(decisive)
    } else if values.iter().all(Option::is_some) {
        Some(!decisive)
    } else {
        None
    }
}

/// `op(args)` split into `op` and `args`.
fn call(text: &str) -> Option<(&str, &str)> {
    let (op, rest) = text.split_once('(')?;
    let args = rest.trim_end().strip_suffix(')')?;
    let op = op.trim();
    op.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some((op, args))
}

/// The comma-separated arguments of a call, nested calls kept whole.
fn split_args(args: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start, mut quoted) = (0usize, 0usize, false);
    for (i, c) in args.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth = depth.saturating_sub(1),
            ',' if !quoted && depth == 0 => {
                out.push(&args[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&args[start..]);
    out.retain(|a| !a.trim().is_empty());
    out
}

/// Whether code under `predicate` (the inside of `#[cfg(...)]`) is left out on this host:
/// only when the predicate is false for certain.
pub(super) fn left_out(predicate: &str) -> bool {
    eval(predicate) == Some(false)
}

/// Whether code under `predicate` is compiled only for tests: `test`, or `all(..)` with `test`
/// among its arguments (not `not(test)`, nor `any(test, ..)`).
pub(super) fn test_only(predicate: &str) -> bool {
    let predicate = predicate.trim();
    if predicate == "test" {
        return true;
    }
    match call(predicate) {
        Some(("all", args)) => split_args(args).iter().any(|a| test_only(a)),
        _ => false,
    }
}

/// The predicate of an attribute's text if it is a `cfg` (`#[cfg(unix)]` → `unix`).
pub(super) fn predicate_of(attribute: &str) -> Option<&str> {
    let inner = attribute
        .trim()
        .strip_prefix("#[")?
        .strip_suffix(']')?
        .trim();
    let (op, args) = call(inner)?;
    (op == "cfg").then_some(args)
}

/// The predicate a `macro_rules!` wraps every item it is given in, from its text
/// (`($($item:item)*) => {$( #[cfg(PRED)] $item )*}`, as reqwest's `if_wasm!`); none for any
/// other macro.
pub(super) fn wrapping_predicate(definition: &str) -> Option<&str> {
    let start = definition.find("#[cfg(")?;
    let rest = &definition[start..];
    // The attribute ends at its `]`; a second `#[cfg(` would be a choice this does not read.
    let end = rest.find(']')?;
    if rest[end..].contains("#[cfg(") {
        return None;
    }
    // What follows it is a variable the macro declares as an item (`$item` of `$item:item`).
    let after = rest[end + 1..].trim_start().strip_prefix('$')?;
    let variable: String = after
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let declared = definition[..start]
        .split(&format!("${variable}"))
        .skip(1)
        .any(|after| {
            after
                .trim_start()
                .strip_prefix(':')
                .is_some_and(|k| k.trim_start().starts_with("item"))
        });
    if variable.is_empty() || !declared {
        return None;
    }
    predicate_of(&rest[..=end])
}

/// The branches of a `cfg_if!` body (`if #[cfg(A)] { .. } else if #[cfg(B)] { .. } else { ..
/// }`), in order: each one's predicate (none for `else`) and the bytes of its body inside its
/// braces; none when the text is not of that shape.
pub(super) fn if_branches(body: &str) -> Option<Vec<(Option<&str>, std::ops::Range<usize>)>> {
    // After `word` at `at` (and the space after it), if it is there.
    let after = |at: usize, word: &str| {
        body.get(at..)?
            .strip_prefix(word)
            .map(|rest| skip_space(body, body.len() - rest.len()))
    };
    let mut out = Vec::new();
    let mut at = after(skip_space(body, 0), "if")?;
    loop {
        // `if` read: its `#[cfg(..)]`, then its body.
        if !body.get(at..)?.starts_with("#[") {
            return None;
        }
        let end = closing(body, at + 1, '[', ']')?;
        let predicate = predicate_of(body.get(at..=end)?)?;
        at = skip_space(body, end + 1);
        if !body.get(at..)?.starts_with('{') {
            return None;
        }
        let end = closing(body, at, '{', '}')?;
        out.push((Some(predicate), at + 1..end));
        at = skip_space(body, end + 1);
        if at >= body.len() {
            return Some(out);
        }
        // An `if` branch is followed by `else if` or `else`, or nothing.
        at = after(at, "else")?;
        if let Some(next) = after(at, "if") {
            at = next;
        } else if body.get(at..)?.starts_with('{') {
            let end = closing(body, at, '{', '}')?;
            out.push((None, at + 1..end));
            return (skip_space(body, end + 1) >= body.len()).then_some(out);
        } else {
            return None;
        }
    }
}

/// The first byte at or after `at` that is neither white space nor in a comment.
fn skip_space(text: &str, at: usize) -> usize {
    let mut rest = text.get(at..).unwrap_or("");
    loop {
        rest = rest.trim_start();
        if let Some(comment) = rest.strip_prefix("//") {
            rest = comment.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(comment) = rest.strip_prefix("/*") {
            rest = comment.split_once("*/").map_or("", |(_, after)| after);
        } else {
            return text.len() - rest.len();
        }
    }
}

/// The byte of the bracket closing the one `open` at `at` (nested pairs, string, raw string
/// and char literals and comments skipped); none when it is not closed.
fn closing(text: &str, at: usize, open: char, close: char) -> Option<usize> {
    let bytes = text.as_bytes();
    let (open, close) = (open as u8, close as u8);
    let mut depth = 0usize;
    let mut i = at;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' => i = char_literal_end(text, i).unwrap_or(i),
            b'r' if raw_string_start(bytes, i) => i = raw_string_end(bytes, i)?,
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b if b == open => depth += 1,
            b if b == close => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Where the char literal opened by the `'` at `at` closes (`'}'`, `'\''`, `'\u{7d}'`); none
/// for a lifetime (`'a`).
fn char_literal_end(text: &str, at: usize) -> Option<usize> {
    let rest = text.get(at + 1..)?;
    if let Some(escaped) = rest.strip_prefix('\\') {
        // `\'` or `\\` first, then anything up to the closing quote (`\u{..}`, `\x7d`).
        let skip = escaped.chars().next()?.len_utf8();
        let close = escaped.get(skip..)?.find('\'')?;
        return Some(at + 2 + skip + close);
    }
    let c = rest.chars().next()?;
    (rest.get(c.len_utf8()..)?.starts_with('\'')).then_some(at + 1 + c.len_utf8())
}

/// Whether the `r` at `at` opens a raw string (`r"…"`, `r#"…"#`, `br"…"`), not an identifier.
fn raw_string_start(bytes: &[u8], at: usize) -> bool {
    let ident = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let before = at.checked_sub(1).and_then(|i| bytes.get(i));
    let starts = match before {
        Some(b'b') => !at
            .checked_sub(2)
            .and_then(|i| bytes.get(i))
            .is_some_and(ident),
        Some(b) => !ident(b),
        None => true,
    };
    let after = bytes.get(at + 1..).unwrap_or_default();
    let hashes = after.iter().take_while(|b| **b == b'#').count();
    starts && after.get(hashes) == Some(&b'"')
}

/// The last byte of the raw string whose `r` is at `at`; none when it does not close.
fn raw_string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let hashes = bytes
        .get(at + 1..)?
        .iter()
        .take_while(|b| **b == b'#')
        .count();
    let body = at + 2 + hashes;
    (body..bytes.len()).find_map(|i| {
        let closes = bytes.get(i) == Some(&b'"')
            && bytes.get(i + 1..i + 1 + hashes)?.iter().all(|b| *b == b'#');
        closes.then_some(i + hashes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicates_are_evaluated_for_the_host_and_unknowns_count_as_true() {
        let host_os = std::env::consts::OS;
        let host_arch = std::env::consts::ARCH;
        assert!(!left_out(&format!("target_os = \"{host_os}\"")));
        assert!(left_out("target_arch = \"wasm32\"") || host_arch == "wasm32");
        assert!(!left_out("feature = \"blocking\""));
        assert!(!left_out("not(feature = \"blocking\")"));
        assert!(!left_out("all(feature = \"x\", any(test, docsrs))"));
        // reqwest's two macros: the wasm one is out, the hyper one in.
        let wasm =
            "all(target_arch = \"wasm32\", any(target_os = \"unknown\", target_os = \"none\"))";
        assert!(left_out(wasm));
        assert!(!left_out(&format!("not({wasm})")));
        assert!(left_out("all(feature = \"x\", target_os = \"none\")"));
        assert!(!left_out("any(feature = \"x\", target_os = \"none\")"));
        // Rust's empty lists, a trailing comma, and what is not a plain literal.
        assert!(!left_out("all()"));
        assert!(left_out("any()"));
        assert!(!left_out("not(any())"));
        assert!(!left_out(&format!("target_os = \"{host_os}\",")));
        assert!(!left_out(&format!("all(target_os = \"{host_os}\",)")));
        assert!(!left_out("target_os = r\"none\""));
        // Nested past what is read: unknown, and no stack overflow.
        let deep = format!("{}unix{}", "not(".repeat(100_000), ")".repeat(100_000));
        assert!(!left_out(&deep));
        assert_eq!(
            left_out("windows"),
            std::env::consts::FAMILY != "windows",
            "windows is a family"
        );
    }

    #[test]
    fn cfg_if_bodies_are_read_as_branches() {
        let body = " if #[cfg(unix)] { mod unix; pub use self::unix::*; }\n else if #[cfg(windows)] {\n pub use self::windows::{A, B}; } else { const S: &str = \"}\"; }\n";
        let branches = if_branches(body).unwrap();
        let shown: Vec<(Option<&str>, &str)> = branches
            .iter()
            .map(|(p, r)| (*p, body[r.clone()].trim()))
            .collect();
        assert_eq!(
            shown,
            [
                (Some("unix"), "mod unix; pub use self::unix::*;"),
                (Some("windows"), "pub use self::windows::{A, B};"),
                (None, "const S: &str = \"}\";"),
            ]
        );
        assert_eq!(
            if_branches(" if #[cfg(unix)] { a } ").map(|b| b.len()),
            Some(1)
        );
        // Char literals, lifetimes and raw strings holding brackets.
        let body = "if #[cfg(unix)] { const C: char = '}'; const E: char = '\\''; fn f<'a>(x: &'a str) {} const R: &str = r#\"}\"#; } else { b }";
        let branches = if_branches(body).unwrap();
        assert_eq!(branches.len(), 2, "{branches:?}");
        assert!(body[branches[0].1.clone()].ends_with("r#\"}\"#; "));
        // Comments between branches and inside them.
        assert_eq!(
            if_branches("if #[cfg(unix)] { /* } */ a } // unix\n else /* or */ { b }")
                .map(|b| b.len()),
            Some(2)
        );
        // Not that shape: no branches.
        for other in [
            "pub use a::B;",
            "if #[cfg(unix)] { a",
            "if #[cfg(unix)] { a } else { b } else { c }",
            "if #[derive(Debug)] { a }",
            "if #[cfg(unix)] { a } otherwise",
            "if { a }",
        ] {
            assert_eq!(if_branches(other), None, "{other}");
        }
    }

    #[test]
    fn cfg_attributes_and_wrapping_macros_are_read() {
        assert_eq!(predicate_of("#[cfg(unix)]"), Some("unix"));
        assert_eq!(
            predicate_of("#[cfg(not(feature = \"x\"))]"),
            Some("not(feature = \"x\")")
        );
        assert_eq!(predicate_of("#[cfg_attr(docsrs, doc(cfg(unix)))]"), None);
        assert_eq!(predicate_of("#[derive(Debug)]"), None);
        let if_wasm = "macro_rules! if_wasm {\n    ($($item:item)*) => {$(\n        \
                       #[cfg(target_arch = \"wasm32\")]\n        $item\n    )*}\n}";
        assert_eq!(
            wrapping_predicate(if_wasm),
            Some("target_arch = \"wasm32\"")
        );
        // A macro choosing between two cfgs, or not wrapping items, wraps in none.
        assert_eq!(
            wrapping_predicate(
                "macro_rules! m { ($i:item) => { #[cfg(unix)] $i #[cfg(windows)] $i } }"
            ),
            None
        );
        assert_eq!(
            wrapping_predicate("macro_rules! m { ($e:expr) => { #[cfg(unix)] $e } }"),
            None
        );
        // An `expr` arm's cfg beside a plain `item` arm wraps nothing.
        assert_eq!(
            wrapping_predicate(
                "macro_rules! m { ($($i:item)*) => { $($i)* }; ($e:expr) => { #[cfg(windows)] $e } }"
            ),
            None
        );
    }
}
