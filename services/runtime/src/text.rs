//! User input repeated in error messages: never more than a short prefix of it. A megabyte of
//! input echoed into a status message makes the error itself too large for gRPC's metadata
//! limits, and the client sees RESOURCE_EXHAUSTED or INTERNAL instead of the real error. And
//! the one rule every search text meets ([`has_word`]), so that each service says it alike.

use std::borrow::Cow;

/// How many characters of user input an error message repeats.
pub const SHOWN_CHARS: usize = 200;

/// `input` cut to at most `max_chars` characters, on a character boundary; a cut text ends with
/// `…(N bytes)`, N being the length of the whole input.
pub fn clip(input: &str, max_chars: usize) -> Cow<'_, str> {
    // No character is shorter than a byte: short inputs need no counting.
    if input.len() <= max_chars {
        return Cow::Borrowed(input);
    }
    match input.char_indices().nth(max_chars) {
        Some((cut, _)) => Cow::Owned(format!("{}…({} bytes)", &input[..cut], input.len())),
        None => Cow::Borrowed(input),
    }
}

/// `input` as an error message shows it: [`clip`] to [`SHOWN_CHARS`].
pub fn shown(input: &str) -> Cow<'_, str> {
    clip(input, SHOWN_CHARS)
}

/// Why a search text without a word is refused ([`has_word`]).
pub const NO_WORD: &str = "holds no word to search for (no letter or digit)";

/// Whether a search text holds a word: punctuation alone (`?`, `"`) finds nothing by its words
/// and only noise by meaning.
pub fn has_word(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_a_letter_or_a_digit_in_any_script() {
        for text in ["x", "404", "\"é\"", "日本", " a "] {
            assert!(has_word(text), "{text}");
        }
        for text in ["", "?!", "\"\"", "` `", "—…", "🚀"] {
            assert!(!has_word(text), "{text}");
        }
    }

    #[test]
    fn short_input_is_kept_long_input_is_cut_on_a_char_boundary() {
        assert_eq!(clip("abc", 3), Cow::Borrowed("abc"));
        assert_eq!(clip("abcd", 3), "abc…(4 bytes)");
        // Three 2-byte characters: 6 bytes, more than 3, but only 3 characters.
        assert_eq!(clip("ééé", 3), Cow::Borrowed("ééé"));
        assert_eq!(clip("éééé", 3), "ééé…(8 bytes)");
        assert_eq!(clip("", 0), "");
        assert_eq!(clip("x", 0), "…(1 bytes)");
        let long = "/".repeat(1 << 20);
        let s = shown(&long);
        assert_eq!(s, format!("{}…(1048576 bytes)", "/".repeat(SHOWN_CHARS)));
    }
}
