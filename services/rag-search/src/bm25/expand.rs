//! Words a query writes out that code abbreviates: "receive" finds `recv`, "increments" finds
//! `inc_num_streams`, "configuration" finds `cfg`. Each query word with abbreviations adds
//! them as terms of their own, weighing [`WEIGHT`] of the word.

use std::sync::LazyLock;

use rustc_hash::FxHashMap;

/// Weight of an abbreviation's terms against the query word's.
pub const WEIGHT: f32 = 0.5;

/// Words and the abbreviations code writes for them (both stemmed when the table is built, as
/// query words and indexed identifier parts are).
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
    ("error", &["err"]),
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

/// The table keyed by each word's stem.
static BY_STEM: LazyLock<FxHashMap<String, Vec<String>>> = LazyLock::new(|| {
    let mut map: FxHashMap<String, Vec<String>> = FxHashMap::default();
    for (word, short) in TABLE {
        let Some(stem) = crate::tokenize::word_parts(word).pop() else {
            continue;
        };
        let entry = map.entry(stem).or_default();
        for s in short
            .iter()
            .filter_map(|s| crate::tokenize::word_parts(s).pop())
        {
            if !entry.contains(&s) {
                entry.push(s);
            }
        }
    }
    map
});

/// The abbreviations of a query token (a stemmed word), if code writes it shorter.
pub fn abbreviations(token: &str) -> &'static [String] {
    BY_STEM.get(token).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_find_the_abbreviations_code_writes() {
        let of = |word: &str| -> Vec<String> {
            crate::tokenize::word_parts(word)
                .iter()
                .flat_map(|t| abbreviations(t).iter().cloned())
                .collect()
        };
        assert_eq!(of("Increments"), ["inc", "incr"]);
        assert_eq!(of("receive"), ["recv", "rx"]);
        assert_eq!(of("configuration"), ["config", "cfg", "conf"]);
        assert_eq!(of("initialized"), ["init"]);
        assert!(of("streams").is_empty());
    }
}
