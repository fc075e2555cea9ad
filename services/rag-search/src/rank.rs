//! Ranking beyond the raw BM25 score or cosine similarity: every candidate's score is
//! multiplied by a prior before the final order is taken. Two priors, both measured on
//! `../shared/eval` (docs/RETRIEVAL.md): test code is halved, and longer items gain a little
//! (`lines^exponent`), which offsets BM25's length normalisation — the code people ask about
//! and change is more often a long function than a one-line accessor.

use crate::parse::Kind;
use crate::record::ItemRecord;

/// Score factor for test code (items inside `mod tests` / `mod test`): tests repeat the words
/// of the code they test and crowd it out of the top ranks. They stay findable.
pub const TEST_CODE_FACTOR: f32 = 0.5;

/// Candidates taken from each retriever before the priors re-order them, at least.
const WINDOW_MIN: usize = 100;

/// Length prior: a hit's score is multiplied by `lines ^ exponent`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LengthPrior {
    /// Exponent for functions and methods.
    pub function: f32,
    /// Exponent for every other item (types, impls, modules, text windows).
    pub other: f32,
}

impl Default for LengthPrior {
    fn default() -> Self {
        // Tuned on ../shared/eval (docs/RETRIEVAL.md): 0.2 / 0.1 raised BM25 R@10 from 0.48 to
        // 0.59 on the main split and kept the easy split (queries naming the function).
        Self {
            function: 0.2,
            other: 0.1,
        }
    }
}

impl LengthPrior {
    /// The prior for a dense ranking: the same for the list HYBRID fuses, its exponents scaled
    /// by [`DENSE_ALONE_PRIOR_SCALE`] for a DENSE search answered alone.
    pub fn for_dense(self, alone: bool) -> Self {
        if !alone {
            return self;
        }
        Self {
            function: self.function * DENSE_ALONE_PRIOR_SCALE,
            other: self.other * DENSE_ALONE_PRIOR_SCALE,
        }
    }
}

/// How much of the length prior a DENSE search answered alone keeps. Its scores, `(1 + cos) /
/// 2`, lie close together (0.6–0.8 for a query's first hundred), so the full prior (a 32-line
/// function ×2) ranked the longest of the nearest first rather than the nearest: a quarter of
/// it took DENSE R@10 / MRR on ../shared/eval `main` from 0.362 / 0.177 to 0.407 / 0.230 and
/// on `easy` from 0.522 / 0.246 to 0.677 / 0.412, and helped on every other set
/// (docs/RETRIEVAL.md). HYBRID's dense list keeps the full prior: there the Python commit
/// messages lose with less of it.
pub const DENSE_ALONE_PRIOR_SCALE: f32 = 0.25;

/// Whether an item is test code: by its attributes ([`crate::parse::ParsedItem::test`]:
/// `#[test]`, `#[cfg(test)]`), inside Rust's `mod tests` / `mod test`, or in a file other
/// languages keep tests in (`*_test.go`, `test_*.py`, `*_test.py`, `*.test.ts`, `*.spec.js`,
/// `__tests__/`, Maven's `src/test/`).
pub fn is_test_code(record: &ItemRecord) -> bool {
    if record.item.test {
        return true;
    }
    let p = &record.item.canon_path;
    // One scan for the common case (no `::test` anywhere), then the exact forms.
    let rust_test = p.contains("::test")
        && (p.contains("::tests::")
            || p.ends_with("::tests")
            || p.contains("::test::")
            || p.ends_with("::test"));
    rust_test || is_test_file(&record.file)
}

/// A file of tests by another language's convention (Rust's are found by module). Runs for
/// every ranked candidate: a Rust file (the common case) is answered without a scan.
fn is_test_file(file: &str) -> bool {
    if file.ends_with(".rs") {
        return false;
    }
    let name = file.rsplit('/').next().unwrap_or(file);
    name.ends_with("_test.go")
        || name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
        || name.contains(".test.")
        || name.contains(".spec.")
        || file.starts_with("__tests__/")
        || file.contains("/__tests__/")
        || file.starts_with("src/test/")
        || file.contains("/src/test/")
}

/// The factor a hit's score is multiplied by before ranking.
pub fn factor(record: &ItemRecord, prior: LengthPrior) -> f32 {
    let lines = record.item.line_end.saturating_sub(record.item.line_start) + 1;
    let exponent = match record.item.kind {
        Kind::Function | Kind::Method => prior.function,
        _ => prior.other,
    };
    let length = (lines as f32).powf(exponent);
    let test = if is_test_code(record) {
        TEST_CODE_FACTOR
    } else {
        1.0
    };
    length * test
}

/// How many candidates to take from a retriever so that `limit` survive re-ranking well.
pub fn window(limit: usize) -> usize {
    limit.saturating_mul(2).max(WINDOW_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::ParsedItem;

    fn record(canon_path: &str, kind: Kind, line_start: u32, line_end: u32) -> ItemRecord {
        ItemRecord {
            id: 1,
            file: "src/lib.rs".into(),
            language: "rust".into(),
            file_hash: String::new(),
            item: ParsedItem {
                canon_path: canon_path.into(),
                name: String::new(),
                qualname: String::new(),
                kind,
                byte_start: 0,
                byte_end: 0,
                line_start,
                line_end,
                signature: String::new(),
                doc: String::new(),
                crate_name: String::new(),
                test: false,
            },
            embed_hash: String::new(),
        }
    }

    #[test]
    fn long_functions_gain_test_code_loses() {
        let p = LengthPrior::default();
        let close = |a: f32, b: f32| (a - b).abs() < 1e-4;
        // One line: no gain; 32 lines: 32^0.2 = 2 for a function, 32^0.1 = 1.414 otherwise.
        assert!(close(
            factor(&record("crate::f", Kind::Function, 7, 7), p),
            1.0
        ));
        assert!(close(
            factor(&record("crate::T::m", Kind::Method, 1, 32), p),
            2.0
        ));
        assert!(close(
            factor(&record("crate::T", Kind::Struct, 1, 32), p),
            2f32.sqrt()
        ));
        assert!(close(
            factor(&record("crate::tests::t", Kind::Function, 1, 32), p),
            1.0
        ));
        assert!(close(
            factor(&record("crate::tests", Kind::Module, 3, 3), p),
            0.5
        ));
        // DENSE answered alone keeps a quarter of the prior; HYBRID's dense list all of it.
        assert_eq!(p.for_dense(false), p);
        let alone = p.for_dense(true);
        assert!(close(alone.function, 0.05) && close(alone.other, 0.025));
        // A `#[test]` beside the code it tests, known by its attribute, not its path.
        let mut beside = record("crate::parses_headers", Kind::Function, 1, 32);
        assert!(close(factor(&beside, p), 2.0));
        beside.item.test = true;
        assert!(close(factor(&beside, p), 1.0));
        // Exponents of zero leave only the test-code factor.
        let flat = LengthPrior {
            function: 0.0,
            other: 0.0,
        };
        assert!(close(
            factor(&record("crate::T::m", Kind::Method, 1, 900), flat),
            1.0
        ));
    }

    #[test]
    fn test_files_of_every_language_are_test_code() {
        let tests = [
            "cmd/root_test.go",
            "tests/test_api.py",
            "pkg/util_test.py",
            "src/map.test.ts",
            "lib/parse.spec.js",
            "src/__tests__/client.tsx",
            "core/src/test/java/com/acme/ParserTest.java",
        ];
        let code = [
            "src/lib.rs",
            "tests/it.rs",
            "cmd/root.go",
            "requests/testing.py",
            "src/latest.ts",
            "src/main/java/com/acme/Test.java",
        ];
        let in_file = |file: &str| {
            let mut r = record("x", Kind::Function, 1, 1);
            r.file = file.into();
            is_test_code(&r)
        };
        assert_eq!(
            (tests.map(in_file), code.map(in_file)),
            ([true; 7], [false; 6])
        );
    }

    #[test]
    fn the_window_is_wide_enough_to_reorder() {
        assert_eq!(window(1), 100);
        assert_eq!(window(10), 100);
        assert_eq!(window(300), 600);
        assert_eq!(window(usize::MAX), usize::MAX);
    }
}
