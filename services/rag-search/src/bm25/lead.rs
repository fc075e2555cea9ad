//! The verb a change is told with: a commit message or a release note leads with what was done
//! ("Remove unneeded lifetimes from pointer signatures", "fix(client): add …", "Fixed a
//! panic …"), and its words then say what it was done to. An item named for the verb
//! (`Map::remove`) is not what such a message is about, so the verb weighs less in BM25: not
//! at all in the fields that hold names (the canonical path), half in the source text.
//! Imperative and past forms only: a doc sentence's third person ("Removes the entry") names
//! what its item does, and stays as written.

/// What the lead verb weighs in the source text, and in every other field, against 1 for the
/// query's other words (docs/RETRIEVAL.md, "The lead verb").
pub(super) const IN_BODY: f32 = 0.5;
pub(super) const ELSEWHERE: f32 = 0.0;

/// The verbs a change is told with, imperative and past.
const VERBS: [&str; 64] = [
    "add",
    "added",
    "allow",
    "allowed",
    "avoid",
    "avoided",
    "bump",
    "bumped",
    "change",
    "changed",
    "deprecate",
    "deprecated",
    "disable",
    "disabled",
    "drop",
    "dropped",
    "enable",
    "enabled",
    "ensure",
    "ensured",
    "expose",
    "exposed",
    "fix",
    "fixed",
    "handle",
    "handled",
    "implement",
    "implemented",
    "improve",
    "improved",
    "introduce",
    "introduced",
    "make",
    "made",
    "move",
    "moved",
    "optimize",
    "optimized",
    "prevent",
    "prevented",
    "provide",
    "provided",
    "refactor",
    "refactored",
    "remove",
    "removed",
    "rename",
    "renamed",
    "reorder",
    "reordered",
    "replace",
    "replaced",
    "revert",
    "reverted",
    "simplify",
    "simplified",
    "support",
    "supported",
    "update",
    "updated",
    "use",
    "used",
    "switch",
    "switched",
];

/// The query tokens of the word the query leads with (after a conventional-commit prefix),
/// when it is one of [`VERBS`] written as a word, not as code (`` `add` ``, `remove(..)`,
/// `use_x`); none otherwise.
pub(super) fn verb_tokens(query: &str) -> Vec<String> {
    let text = crate::names::strip_commit_prefix(query).trim_start();
    let word_len = text
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (word, after) = text.split_at(word_len);
    let ident = crate::tokenize::is_ident_char;
    let as_code = match after.chars().next() {
        Some(c) if ident(c) || matches!(c, '(' | '`' | ':' | '!') => true,
        Some('.') => after[1..].starts_with(ident),
        _ => false,
    };
    let lower = word.to_ascii_lowercase();
    if word.is_empty() || as_code || !VERBS.contains(&lower.as_str()) {
        return Vec::new();
    }
    crate::tokenize::code_tokens(word)
}

#[cfg(test)]
mod tests {
    use super::verb_tokens;

    #[test]
    fn the_lead_verb_is_a_word_of_the_list_in_its_imperative_or_past_form() {
        assert_eq!(
            verb_tokens("Remove unneeded lifetimes"),
            ["remove", "remov"]
        );
        assert_eq!(verb_tokens("fix(client): add a timeout"), ["add"]);
        assert_eq!(verb_tokens("Fixed a panic. Then more"), ["fixed", "fix"]);
        assert_eq!(verb_tokens("Use."), ["use"]);
        // Third person (a doc sentence), code, another first word, nothing.
        for query in [
            "Removes the entry",
            "`add` a layer",
            "remove(key) panics",
            "add_header is slow",
            "Display for Error",
            "",
            "   ",
        ] {
            assert!(verb_tokens(query).is_empty(), "{query}");
        }
    }
}
