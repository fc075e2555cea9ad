//! Keeping what an MCP client receives under its cap (`[gateway] mcp_max_result_tokens`, about
//! four characters a token): a result's text is cut on a line boundary and says so, and its
//! structured content is shrunk — the longest strings cut, the longest lists shortened — so it
//! still matches the tool's output schema.

use serde_json::Value;

/// Characters counted per token.
pub const CHARS_PER_TOKEN: usize = 4;

/// A result made to fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The text content.
    pub text: String,
    /// The structured content.
    pub structured: Option<Value>,
    /// Whether anything was cut.
    pub cut: bool,
}

/// The note a cut text ends with.
pub fn cut_note(max_tokens: u32) -> String {
    format!(
        "\n[cut: the whole result is over this server's MCP cap of {max_tokens} tokens; ask for less (a line range, a smaller token_budget or max_entries)]\n"
    )
}

/// Fits `text` and `structured` together into `max_tokens`. When the structure was cut and
/// its schema has a top-level `truncated` flag (`truncated_flag`), the flag is set.
pub fn fit(
    text: String,
    structured: Option<Value>,
    max_tokens: u32,
    truncated_flag: bool,
) -> Fitted {
    let max = max_tokens as usize * CHARS_PER_TOKEN;
    let s_len = structured.as_ref().map_or(0, json_len);
    let t_len = text.len();
    if t_len + s_len <= max {
        return Fitted {
            text,
            structured,
            cut: false,
        };
    }
    let half = max / 2;
    let (text_budget, struct_budget) = match &structured {
        None => (max, 0),
        Some(_) if s_len <= half => (max - s_len, s_len),
        Some(_) if t_len <= half => (t_len, max - t_len),
        Some(_) => (half, max - half),
    };
    let text = cut_text(text, text_budget, &cut_note(max_tokens));
    let structured = structured.map(|mut v| {
        if json_len(&v) > struct_budget {
            shrink(&mut v, struct_budget);
            if truncated_flag && let Some(o) = v.as_object_mut() {
                o.insert("truncated".to_owned(), Value::Bool(true));
            }
        }
        v
    });
    Fitted {
        text,
        structured,
        cut: true,
    }
}

/// `text` cut to at most `budget` bytes (the note included), on a line boundary when one is
/// near, ending with `note`.
pub fn cut_text(text: String, budget: usize, note: &str) -> String {
    if text.len() <= budget {
        return text;
    }
    let keep = text.floor_char_boundary(budget.saturating_sub(note.len()));
    let keep = match text[..keep].rfind('\n') {
        Some(nl) if nl + 1 >= keep - keep / 4 => nl + 1,
        _ => keep,
    };
    let mut out = String::with_capacity(keep + note.len());
    out.push_str(&text[..keep]);
    out.push_str(note);
    out
}

fn json_len(v: &Value) -> usize {
    serde_json::to_string(v).map_or(0, |s| s.len())
}

/// Where the longest string and the longest list of `v` are (JSON pointers), with their sizes.
#[derive(Default)]
struct Largest {
    string: Option<(String, usize)>,
    array: Option<(String, usize, usize)>,
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn survey(v: &Value, at: &str, out: &mut Largest) {
    match v {
        Value::String(s) => {
            if out.string.as_ref().is_none_or(|(_, l)| s.len() > *l) {
                out.string = Some((at.to_owned(), s.len()));
            }
        }
        Value::Array(items) => {
            let len = json_len(v);
            if !items.is_empty() && out.array.as_ref().is_none_or(|(_, l, _)| len > *l) {
                out.array = Some((at.to_owned(), len, items.len()));
            }
            for (i, item) in items.iter().enumerate() {
                survey(item, &format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                survey(item, &format!("{at}/{}", escape(k)), out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Marks the end of a string that was cut.
const ELLIPSIS: &str = "…";

/// Cuts the longest strings and shortens the longest lists of `v` until it serializes to at
/// most `budget` bytes (or nothing is left to cut).
fn shrink(v: &mut Value, budget: usize) {
    for _ in 0..256 {
        let len = json_len(v);
        if len <= budget {
            return;
        }
        let over = len - budget;
        let mut largest = Largest::default();
        survey(v, "", &mut largest);
        let string = largest.string.filter(|(_, l)| *l > 64);
        let cut_string = match (&string, &largest.array) {
            (Some((_, l)), Some((_, a, _))) => l >= a || *l > over + 16,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if cut_string && let Some((at, l)) = string {
            if let Some(Value::String(s)) = v.pointer_mut(&at) {
                let keep = s.floor_char_boundary(l.saturating_sub(over + 16).max(l / 4));
                s.truncate(keep);
                s.push_str(ELLIPSIS);
            }
            continue;
        }
        match largest.array {
            Some((at, _, n)) => {
                if let Some(Value::Array(items)) = v.pointer_mut(&at) {
                    // Drop from the end just enough elements (each with its comma).
                    let mut freed = 0;
                    let mut keep = n;
                    while keep > 0 && freed < over {
                        keep -= 1;
                        freed += json_len(&items[keep]) + 1;
                    }
                    items.truncate(keep);
                }
            }
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_result_under_the_cap_is_left_alone() {
        let f = fit(
            "short".into(),
            Some(json!({"content": "short"})),
            1000,
            true,
        );
        assert_eq!(
            f,
            Fitted {
                text: "short".into(),
                structured: Some(json!({"content": "short"})),
                cut: false
            }
        );
    }

    #[test]
    fn a_long_file_is_cut_on_a_line_and_its_structure_still_fits() {
        let line = "let x = 1; // some code\n";
        let content = line.repeat(2_000);
        let structured = json!({
            "file_path": "src/lib.rs",
            "content": content.clone(),
            "total_lines": 2000,
        });
        let f = fit(content.clone(), Some(structured), 2_000, true);
        assert!(f.cut);
        let max = 2_000 * CHARS_PER_TOKEN;
        let s = f.structured.unwrap();
        let total = f.text.len() + serde_json::to_string(&s).unwrap().len();
        assert!(total <= max, "{total} > {max}");
        // The text keeps whole lines, then says why it stops.
        let note = cut_note(2_000);
        let kept = f.text.strip_suffix(&note).unwrap();
        assert!(kept.ends_with('\n') && content.starts_with(kept));
        assert!(kept.len() > max / 3, "{}", kept.len());
        // Same shape, fields kept, the long string cut and marked, the flag set.
        assert_eq!(s["file_path"], "src/lib.rs");
        assert_eq!(s["total_lines"], 2000);
        assert_eq!(s["truncated"], true);
        let cut = s["content"].as_str().unwrap();
        assert!(cut.ends_with(ELLIPSIS) && content.starts_with(cut.trim_end_matches(ELLIPSIS)));
    }

    #[test]
    fn long_lists_are_shortened_from_the_end() {
        let entries: Vec<Value> = (0..5_000)
            .map(|i| json!({"name": format!("file{i}.rs"), "kind": "file", "size_bytes": i}))
            .collect();
        let structured = json!({"path": "", "entries": entries});
        let f = fit("listing".into(), Some(structured), 1_000, false);
        let s = f.structured.unwrap();
        assert!(serde_json::to_string(&s).unwrap().len() <= 1_000 * CHARS_PER_TOKEN);
        assert_eq!(s.get("truncated"), None);
        let kept = s["entries"].as_array().unwrap();
        assert!(kept.len() > 50 && kept.len() < 5_000, "{}", kept.len());
        assert_eq!(kept[0]["name"], "file0.rs");
        assert_eq!(
            kept[kept.len() - 1]["name"],
            format!("file{}.rs", kept.len() - 1)
        );
    }

    #[test]
    fn text_alone_is_cut_to_the_whole_cap() {
        let text = "é".repeat(10_000);
        let f = fit(text, None, 1_000, false);
        assert!(f.cut && f.text.len() <= 1_000 * CHARS_PER_TOKEN);
        assert!(f.text.ends_with(&cut_note(1_000)));
    }
}
