//! Token counting for context budgets with a real tokenizer (tiktoken's `cl100k_base`, the
//! encoding of the GPT-4 family; counts for other models are close enough for budgeting).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

/// Name reported in `ContextStats.tokenizer`.
pub const TOKENIZER_NAME: &str = "cl100k_base";

/// Texts shorter than this are counted every time (cheaper than hashing and looking up).
const MEMO_MIN_BYTES: usize = 512;

/// Counts remembered at most; the memo starts over when full (~3 MB).
const MEMO_MAX_ENTRIES: usize = 65_536;

/// Counts of long texts already seen, by their blake3 hash: a server assembles the same items
/// into context again and again, and counting is most of assembly's time. Exact, since a
/// count depends on the text alone.
static MEMO: LazyLock<Mutex<HashMap<[u8; 32], u32>>> = LazyLock::new(Mutex::default);

/// Tokens of `text`.
pub fn count(text: &str) -> u32 {
    if text.len() < MEMO_MIN_BYTES {
        return count_now(text);
    }
    let key = *blake3::hash(text.as_bytes()).as_bytes();
    let memo = || MEMO.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(n) = memo().get(&key) {
        return *n;
    }
    let n = count_now(text);
    let mut memo = memo();
    if memo.len() >= MEMO_MAX_ENTRIES {
        memo.clear();
    }
    memo.insert(key, n);
    n
}

fn count_now(text: &str) -> u32 {
    let n = tiktoken_rs::cl100k_base_singleton()
        .encode_ordinary(text)
        .len();
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_real_tokens() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("hello world"), 2);
        assert!(super::count("fn parse_config(path: &Path) -> Result<Config>") > 8);
    }

    #[test]
    fn remembered_counts_are_the_counts() {
        let long = "fn handler(request: Request) -> Response { respond(request) }\n".repeat(20);
        assert!(long.len() >= super::MEMO_MIN_BYTES);
        let fresh = super::count_now(&long);
        assert_eq!(super::count(&long), fresh);
        assert_eq!(super::count(&long), fresh);
        // One more line is another text with its own count.
        let longer = format!("{long}fn more() {{}}\n");
        assert_eq!(super::count(&longer), super::count_now(&longer));
        assert!(super::count(&longer) > fresh);
    }
}
