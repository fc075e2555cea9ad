//! A deterministic mutation test of the two decoders a caller controls: the model's JSON
//! arguments (`parse_call`) and protobuf bytes of a typed call (what a direct `ExecuteTool`
//! sends). Tens of thousands of mutated inputs from valid seeds: neither may panic, and what
//! the JSON parser accepts the typed check must accept too (one set of rules, two doors).

use prost::Message as _;

use super::*;

/// xorshift64*: the same inputs on every run, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One valid call of each tool.
pub(super) const SEEDS: [(&str, &str); 8] = [
    (
        "apply_code_edit",
        r#"{"edits": [{"replace_item": {"canon_path": "crate::a::f", "new_code": "fn f() {}"}}, {"search_replace": {"file_path": "b.rs", "search": "1", "replace": "2"}}]}"#,
    ),
    (
        "code_item_lookup",
        r#"{"canon_path": "crate::x::Y", "kind": "struct"}"#,
    ),
    (
        "create_file",
        r#"{"file_path": "n.rs", "content": "x", "on_exists": "overwrite"}"#,
    ),
    (
        "list_dir",
        r#"{"path": "src", "include_hidden": true, "max_entries": 3}"#,
    ),
    (
        "search_code",
        r#"{"pattern": "fn \\w+", "literal": false, "case_insensitive": true, "path": "src", "context_lines": 2, "max_matches": 7}"#,
    ),
    ("get_file_metadata", r#"{"file_path": "Cargo.toml"}"#),
    (
        "request_code_context",
        r#"{"search_term": "config loading", "token_budget": 2000}"#,
    ),
    ("read_file", r#"{"file": "README.md", "start_line": 1}"#),
];

/// Pieces a mutation may splice in: JSON syntax, edge numbers, odd strings.
const PIECES: [&str; 24] = [
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "null",
    "true",
    "-1",
    "0",
    "4294967296",
    "1e309",
    "-0.5",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"..\"",
    "\"/etc/passwd\"",
    "[[[[[[[[",
    "{\"a\":",
    "\"replace_item\"",
    "\"edits\"",
    "\"é\"",
    "99999999999999999999",
];

fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut text = seed.to_owned();
    for _ in 0..=rng.below(4) {
        let mut at = rng.below(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        match rng.below(4) {
            0 => text.insert_str(at, PIECES[rng.below(PIECES.len())]),
            1 => {
                let mut end = (at + 1 + rng.below(8)).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                text.replace_range(at..end, "");
            }
            2 => text.truncate(at),
            _ => {
                let piece = PIECES[rng.below(PIECES.len())];
                text = text.replacen("\"", piece, 1 + rng.below(2));
            }
        }
    }
    text
}

#[test]
fn mutated_json_arguments_never_panic_and_both_doors_agree() {
    let registry = ToolRegistry::global().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut accepted, mut refused) = (0, 0);
    for i in 0..20_000 {
        let (name, seed) = SEEDS[i % SEEDS.len()];
        let input = mutate(&mut rng, seed);
        match registry.parse_call(name, &input) {
            Ok(call) => {
                accepted += 1;
                assert_eq!(registry.check_call(&call), Ok(()), "{name}: {input}");
                assert!(registry.render_call(&call).is_some(), "{name}: {input}");
            }
            Err(_) => refused += 1,
        }
    }
    // Both outcomes were exercised, not only one.
    assert!(accepted > 500 && refused > 500, "{accepted} / {refused}");
}

#[test]
fn mutated_protobuf_calls_never_panic() {
    let registry = ToolRegistry::global().unwrap();
    let seeds: Vec<Vec<u8>> = SEEDS
        .iter()
        .map(|(name, args)| registry.parse_call(name, args).unwrap().encode_to_vec())
        .collect();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut decoded = 0;
    for i in 0..20_000 {
        let mut bytes = seeds[i % seeds.len()].clone();
        for _ in 0..=rng.below(4) {
            let at = rng.below(bytes.len() + 1);
            match rng.below(3) {
                0 => bytes.insert(at, rng.next() as u8),
                1 if at < bytes.len() => {
                    bytes[at] ^= 1 << rng.below(8);
                }
                _ => bytes.truncate(at),
            }
        }
        if let Ok(call) = ToolCall::decode(bytes.as_slice()) {
            decoded += 1;
            let _ = registry.check_call(&call);
            let _ = registry.render_call(&call);
        }
    }
    assert!(decoded > 1000, "{decoded}");
}
