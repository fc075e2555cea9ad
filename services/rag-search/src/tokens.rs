//! Token counting for context budgets with a real tokenizer (tiktoken's `cl100k_base`, the
//! encoding of the GPT-4 family; counts for other models are close enough for budgeting).

/// Name reported in `ContextStats.tokenizer`.
pub const TOKENIZER_NAME: &str = "cl100k_base";

/// Tokens of `text`.
pub fn count(text: &str) -> u32 {
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
}
