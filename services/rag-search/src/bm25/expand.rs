//! Words a query writes out that code abbreviates: "receive" finds `recv`, "increments" finds
//! `inc_num_streams`, "configuration" finds `cfg`. A word of the table, as written or inflected
//! (`-s`, `-es`, `-d`, `-ed`, `-ing`; never by stem, which would also take "specific" for
//! `spec`), adds its abbreviations as terms of their own that together weigh [`WEIGHT`] of the
//! word.

use std::sync::LazyLock;

use rustc_hash::FxHashMap;

/// Weight of a word's abbreviations, together, against the word's own terms.
pub(super) const WEIGHT: f32 = 0.5;

/// Words (lowercase, uninflected) and the abbreviations code writes for them.
const TABLE: &[(&str, &[&str])] = &[
    ("address", &["addr"]),
    ("allocate", &["alloc"]),
    ("allocation", &["alloc"]),
    ("application", &["app"]),
    ("argument", &["arg"]),
    ("arguments", &["args"]),
    ("asynchronous", &["async"]),
    ("attribute", &["attr"]),
    ("attributes", &["attrs"]),
    ("authentication", &["auth"]),
    ("authorization", &["auth"]),
    ("boolean", &["bool"]),
    ("buffer", &["buf"]),
    ("calculate", &["calc"]),
    ("capacity", &["cap"]),
    ("certificate", &["cert"]),
    ("channel", &["chan"]),
    ("character", &["char"]),
    ("command", &["cmd"]),
    ("compare", &["cmp"]),
    ("configuration", &["config", "cfg", "conf"]),
    ("connection", &["conn"]),
    ("context", &["ctx", "cx"]),
    ("current", &["cur", "curr"]),
    ("database", &["db"]),
    ("decrement", &["dec", "decr"]),
    ("definition", &["def"]),
    ("description", &["desc"]),
    ("destination", &["dst", "dest"]),
    ("directory", &["dir"]),
    ("document", &["doc"]),
    ("documentation", &["doc", "docs"]),
    ("environment", &["env"]),
    ("execute", &["exec"]),
    ("expression", &["expr"]),
    ("extension", &["ext"]),
    ("format", &["fmt"]),
    ("function", &["func", "fn"]),
    ("generate", &["gen"]),
    ("header", &["hdr"]),
    ("identifier", &["id", "ident"]),
    ("implementation", &["impl"]),
    ("increment", &["inc", "incr"]),
    ("index", &["idx"]),
    ("information", &["info"]),
    ("initialize", &["init"]),
    ("initialise", &["init"]),
    ("initialization", &["init"]),
    ("integer", &["int"]),
    ("iterator", &["iter"]),
    ("language", &["lang"]),
    ("length", &["len"]),
    ("library", &["lib"]),
    ("manager", &["mgr"]),
    ("maximum", &["max"]),
    ("memory", &["mem"]),
    ("message", &["msg"]),
    ("milliseconds", &["ms"]),
    ("minimum", &["min"]),
    ("number", &["num"]),
    ("object", &["obj"]),
    ("operation", &["op"]),
    ("option", &["opt"]),
    ("optional", &["opt"]),
    ("package", &["pkg"]),
    ("parameter", &["param"]),
    ("parameters", &["params"]),
    ("pointer", &["ptr"]),
    ("position", &["pos"]),
    ("previous", &["prev"]),
    ("property", &["prop"]),
    ("receive", &["recv", "rx"]),
    ("receiver", &["rx"]),
    ("reference", &["ref"]),
    ("request", &["req"]),
    ("response", &["resp", "res"]),
    ("sequence", &["seq"]),
    ("signal", &["sig"]),
    ("source", &["src"]),
    ("specification", &["spec"]),
    ("statistics", &["stats"]),
    ("string", &["str"]),
    ("synchronize", &["sync"]),
    ("synchronous", &["sync"]),
    ("temporary", &["tmp", "temp"]),
    ("transaction", &["tx", "txn"]),
    ("transmit", &["tx"]),
    ("utility", &["util"]),
    ("utilities", &["util"]),
    ("value", &["val"]),
    ("variable", &["var"]),
];

/// The table by word.
static BY_WORD: LazyLock<FxHashMap<&'static str, &'static [&'static str]>> =
    LazyLock::new(|| TABLE.iter().copied().collect());

/// The table's entry for a word as written, inflected or not.
fn entry(word: &str) -> Option<&'static [&'static str]> {
    let get = |base: &str| BY_WORD.get(base).copied();
    let stripped = [
        Some(word),
        word.strip_suffix('s'),
        word.strip_suffix("es"),
        word.strip_suffix('d'),
        word.strip_suffix("ed"),
        word.strip_suffix("ing"),
    ];
    stripped.into_iter().flatten().find_map(get).or_else(|| {
        // `receiving` → `receive`: the one form that needs a letter back.
        word.strip_suffix("ing").and_then(|w| get(&format!("{w}e")))
    })
}

/// The abbreviation terms of the words `query` writes (stemmed as the index's identifier parts
/// are), each with its weight; a word's abbreviations share [`WEIGHT`].
pub(super) fn abbreviations(query: &str) -> Vec<(String, f32)> {
    let mut out: Vec<(String, f32)> = Vec::new();
    for word in crate::tokenize::identifiers(query).flat_map(crate::tokenize::split_identifier) {
        // The table's words are ASCII, 5 to 14 letters, 17 with an inflection.
        if !(5..=17).contains(&word.len()) || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
            continue;
        }
        let Some(short) = entry(&word.to_ascii_lowercase()) else {
            continue;
        };
        let weight = WEIGHT / short.len() as f32;
        for term in short
            .iter()
            .filter_map(|s| crate::tokenize::word_parts(s).pop())
        {
            if !out.iter().any(|(t, _)| *t == term) {
                out.push((term, weight));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_words_find_the_abbreviations_code_writes_and_stems_do_not() {
        let terms = |query: &str| -> Vec<String> {
            abbreviations(query).into_iter().map(|(t, _)| t).collect()
        };
        assert_eq!(terms("Increments"), ["inc", "incr"]);
        assert_eq!(terms("receiving"), ["recv", "rx"]);
        assert_eq!(terms("initialized"), ["init"]);
        assert_eq!(
            terms("the configuration's values"),
            ["config", "cfg", "conf", "val"]
        );
        // Words that only share a stem with one of the table's are not it.
        assert_eq!(
            terms("specific responsible positive identifies"),
            Vec::<String>::new()
        );
        assert!(terms("streams").is_empty());
        // A word's abbreviations share its weight.
        let weights: Vec<f32> = abbreviations("configuration")
            .into_iter()
            .map(|(_, w)| w)
            .collect();
        assert_eq!(weights, [WEIGHT / 3.0; 3]);
    }
}
