use std::path::Path;

use super::*;
use crate::parse::Kind;

fn cand(file: &str, lines: (u32, u32), bytes: (usize, usize), text: &str, score: f32) -> Candidate {
    Candidate {
        file: file.into(),
        canon_path: format!("crate::{file}::{}", lines.0),
        kind: Kind::Function,
        language: "rust".into(),
        byte_start: bytes.0,
        byte_end: bytes.1,
        line_start: lines.0,
        line_end: lines.1,
        text: text.into(),
        score,
        file_hash: "h".into(),
        crate_name: String::new(),
        name: String::new(),
    }
}

fn body(n: usize, word: &str) -> String {
    (0..n)
        .map(|i| format!("    let {word}_{i} = compute_{word}({i});\n"))
        .collect()
}

#[test]
fn defaults_fill_zero_fields() {
    assert_eq!(
        Budget::with_defaults(0, 0, 0),
        Budget {
            max_total: 4000,
            per_file_max: 2000,
            per_part_max: 1500
        }
    );
    assert_eq!(
        Budget::with_defaults(300, 0, 0),
        Budget {
            max_total: 300,
            per_file_max: 150,
            per_part_max: 150
        }
    );
}

#[test]
fn renders_the_ploke_code_snippet_format() {
    assert_eq!(
        render(Path::new("/ws"), "src/lib.rs", 10, 24, "fn main() {}"),
        "<code=\"/ws/src/lib.rs\" #10:24>\nfn main() {}\n</code>\n"
    );
}

#[test]
fn the_cumulative_total_is_never_exceeded() {
    let root = Path::new("/ws");
    for max_total in [50u32, 120, 400, 900, 2500] {
        let candidates: Vec<Candidate> = (0..12)
            .map(|i| {
                let text = body(20 + i * 3, &format!("v{i}"));
                cand(
                    &format!("f{}.rs", i % 4),
                    (1 + 1000 * i as u32, 1000 * i as u32 + 40),
                    (10_000 * i, 10_000 * i + text.len()),
                    &text,
                    1.0 - i as f32 / 20.0,
                )
            })
            .collect();
        let budget = Budget::with_defaults(max_total, 0, 0);
        let out = assemble(root, candidates, budget, &mut |_, _| None);
        let sum: u32 = out.parts.iter().map(|p| p.tokens).sum();
        assert_eq!(sum, out.total_tokens);
        assert!(
            out.total_tokens <= max_total,
            "{} > {max_total}",
            out.total_tokens
        );
        let mut per_file: HashMap<&str, u32> = HashMap::new();
        for p in &out.parts {
            assert!(p.tokens <= budget.per_part_max);
            assert_eq!(p.tokens, tokens::count(&p.rendered));
            *per_file.entry(p.candidate.file.as_str()).or_default() += p.tokens;
        }
        assert!(per_file.values().all(|t| *t <= budget.per_file_max));
        // Every candidate is accounted for: included whole, or listed as cut.
        assert!(out.parts.len() + out.cuts.iter().filter(|c| c.tokens_after == 0).count() >= 1);
    }
}

#[test]
fn truncation_keeps_whole_lines_and_updates_spans() {
    let root = Path::new("/ws");
    let text = body(200, "x");
    let c = cand("a.rs", (1, 200), (0, text.len()), &text, 1.0);
    let out = assemble(
        root,
        vec![c],
        Budget::with_defaults(300, 300, 300),
        &mut |_, _| None,
    );
    let part = &out.parts[0];
    assert!(part.tokens <= 300);
    assert!(part.candidate.line_end < 200);
    assert!(text.starts_with(&part.candidate.text));
    assert!(part.candidate.text.ends_with('\n'));
    assert_eq!(part.candidate.byte_end, part.candidate.text.len());
    assert_eq!(out.cuts[0].reason, Cut::PerPart);
}

#[test]
fn contained_spans_are_duplicates_and_adjacent_spans_are_stitched() {
    let root = Path::new("/ws");
    let file = "fn a() {}\nfn b() {}\nfn c() {}\n";
    let a = cand("x.rs", (1, 1), (0, 9), "fn a() {}", 0.9);
    let b = cand("x.rs", (2, 2), (10, 19), "fn b() {}", 0.8);
    let a_again = cand("x.rs", (1, 1), (0, 9), "fn a() {}", 0.5);
    let other = cand("y.rs", (1, 1), (0, 9), "fn z() {}", 0.4);
    let out = assemble(
        root,
        vec![a, b, a_again, other],
        Budget::with_defaults(0, 0, 0),
        &mut |f, _| (f == "x.rs").then(|| file.to_owned()),
    );
    let spans: Vec<(&str, usize, usize)> = out
        .parts
        .iter()
        .map(|p| {
            (
                p.candidate.file.as_str(),
                p.candidate.byte_start,
                p.candidate.byte_end,
            )
        })
        .collect();
    assert_eq!(spans, vec![("x.rs", 0, 19), ("y.rs", 0, 9)]);
    assert_eq!(out.parts[0].candidate.text, "fn a() {}\nfn b() {}");
    let reasons: Vec<Cut> = out.cuts.iter().map(|c| c.reason).collect();
    assert_eq!(reasons, vec![Cut::Stitched, Cut::Duplicate]);
}

#[test]
fn a_class_holding_a_better_method_is_left_out() {
    let root = Path::new("/ws");
    let file = "class Cart:\n    def add(self):\n        pass\n    def drop(self):\n        pass\n";
    let mut method = cand("c.py", (2, 3), (12, 44), &file[12..44], 0.9);
    method.canon_path = "shop.Cart.add".into();
    method.name = "add".into();
    method.kind = Kind::Method;
    let mut class = cand("c.py", (1, 5), (0, file.len()), file, 0.5);
    class.canon_path = "shop.Cart".into();
    class.name = "Cart".into();
    class.kind = Kind::Class;
    let out = assemble(
        root,
        vec![method, class],
        Budget::with_defaults(0, 0, 0),
        &mut |_, _| Some(file.to_owned()),
    );
    // The method answers alone, named as it is (not stitched into a whole class that would
    // carry its name).
    let parts: Vec<(&str, &str, u32, u32)> = out
        .parts
        .iter()
        .map(|p| {
            let c = &p.candidate;
            (
                c.canon_path.as_str(),
                c.name.as_str(),
                c.line_start,
                c.line_end,
            )
        })
        .collect();
    assert_eq!(parts, vec![("shop.Cart.add", "add", 2, 3)]);
    let cuts: Vec<(&str, Cut)> = out
        .cuts
        .iter()
        .map(|c| (c.canon_path.as_str(), c.reason))
        .collect();
    assert_eq!(cuts, vec![("shop.Cart", Cut::Duplicate)]);
}

#[test]
fn a_best_hit_of_one_long_line_is_cut_inside_the_line() {
    // A generated table on one line, 60 kB: it was dropped whole, leaving the model nothing
    // of the best hit.
    let root = Path::new("/ws");
    let values: Vec<String> = (0..12_000).map(|i| (i % 251).to_string()).collect();
    let line = format!("pub static TABLE: [u8; 12000] = [{}];", values.join(", "));
    let long = cand("src/table.rs", (3, 3), (40, 40 + line.len()), &line, 1.0);
    let next_text = body(5, "next");
    let next = cand("src/next.rs", (1, 5), (0, next_text.len()), &next_text, 0.5);
    let out = assemble(
        root,
        vec![long, next],
        Budget::with_defaults(0, 0, 0),
        &mut |_, _| None,
    );
    let first = &out.parts[0].candidate;
    assert_eq!(
        (
            first.file.as_str(),
            first.line_start,
            first.line_end,
            first.byte_start
        ),
        ("src/table.rs", 3, 3, 40)
    );
    assert!(line.starts_with(&first.text) && first.text.len() < line.len());
    assert_eq!(first.byte_end, 40 + first.text.len());
    assert!(
        out.parts[0].tokens <= 1500 && out.parts[0].tokens > 1000,
        "{}",
        out.parts[0].tokens
    );
    assert_eq!(out.parts[1].candidate.file, "src/next.rs");
    assert_eq!(out.cuts[0].reason, Cut::PerPart);
    // The byte range says where the cut ends.
    assert!(
        out.parts[0].rendered.starts_with(&format!(
            "<code=\"/ws/src/table.rs\" #40:{}>",
            first.byte_end
        )),
        "{}",
        &out.parts[0].rendered[..80]
    );
}

#[test]
fn a_line_cut_keeps_whole_characters() {
    let root = Path::new("/ws");
    let line = "// 漢字のコメント ".repeat(2_000);
    let c = cand("src/jp.rs", (1, 1), (0, line.len()), &line, 1.0);
    let (cut, _, tokens) = truncate(root, &c, 200).expect("a part fits");
    assert!((MIN_USEFUL_TOKENS..=200).contains(&tokens), "{tokens}");
    assert!(line.starts_with(&cut.text) && !cut.text.is_empty());
}

#[test]
fn items_side_by_side_on_one_line_are_parts_of_their_own() {
    // A minified file: every function on line 1. The best hit is the one named, not a window
    // of the line starting at another.
    let root = Path::new("/ws");
    let line: String = (0..400)
        .map(|i| format!("function f{i}(a,b){{return a*{i}+b}}"))
        .collect();
    let at = |i: usize| {
        let name = format!("function f{i}(");
        let start = line.find(&name).unwrap();
        let end = start + line[start..].find('}').unwrap() + 1;
        cand(
            "min.js",
            (1, 1),
            (start, end),
            &line[start..end],
            1.0 - i as f32 / 1000.0,
        )
    };
    let out = assemble(
        root,
        vec![at(310), at(17), at(312)],
        Budget::with_defaults(0, 0, 0),
        &mut |_, _| Some(line.clone()),
    );
    let texts: Vec<&str> = out
        .parts
        .iter()
        .map(|p| p.candidate.text.as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "function f310(a,b){return a*310+b}",
            "function f17(a,b){return a*17+b}",
            "function f312(a,b){return a*312+b}"
        ]
    );
    // Meeting bytes on one line are still one stretch.
    let out = assemble(
        root,
        vec![at(5), at(6)],
        Budget::with_defaults(0, 0, 0),
        &mut |_, _| Some(line.clone()),
    );
    assert_eq!(
        out.parts
            .iter()
            .map(|p| p.candidate.text.as_str())
            .collect::<Vec<_>>(),
        ["function f5(a,b){return a*5+b}function f6(a,b){return a*6+b}"]
    );
}
