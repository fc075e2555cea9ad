//! User input repeated in error messages: never more than a short prefix of it. A megabyte of
//! input echoed into a status message makes the error itself too large for gRPC's metadata
//! limits, and the client sees RESOURCE_EXHAUSTED or INTERNAL instead of the real error. And
//! the one rule every search text meets ([`has_word`]), so that each service says it alike.
//! And URLs shown without the user and password they may carry ([`url_without_credentials`]).
//! And an error with its causes on one line, each said once ([`with_causes`]).

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

/// The user and password part of a URL with a scheme (`https://user:token@host/…`), if any.
pub fn url_userinfo(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority.rsplit_once('@').map(|(userinfo, _)| userinfo)
}

/// `url` as it may be shown, logged or listed: without the user and password of a URL with a
/// scheme (`https://ci:ghp_…@host/org/repo` → `https://host/org/repo`), nor a password written
/// before the host of anything else (`user:token@host:org/repo` → `host:org/repo`). An
/// scp-like `git@host:path` names an ssh user, not a secret, and stays as it is.
pub fn url_without_credentials(url: &str) -> Cow<'_, str> {
    if let (Some((scheme, rest)), Some(userinfo)) = (url.split_once("://"), url_userinfo(url)) {
        let after = &rest[userinfo.len() + 1..];
        return Cow::Owned(format!("{scheme}://{after}"));
    }
    let head = url.split('/').next().unwrap_or(url);
    match head.rsplit_once('@') {
        Some((userinfo, _)) if !url.contains("://") && userinfo.contains(':') => {
            Cow::Owned(url[userinfo.len() + 1..].to_owned())
        }
        _ => Cow::Borrowed(url),
    }
}

/// `text` (a program's message) with every `scheme://user:password@` in it reduced to
/// `scheme://`: what git says about a URL is never shown with the credentials it carried.
pub fn text_without_credentials(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '/' | '?' | '#' | '\'' | '"'))
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rsplit_once('@') {
            Some((_, host)) => out.push_str(host),
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Why a search text without a word is refused ([`has_word`]).
pub const NO_WORD: &str = "holds no word to search for (no letter or digit)";

/// Whether a search text holds a word: punctuation alone (`?`, `"`) finds nothing by its words
/// and only noise by meaning.
pub fn has_word(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric)
}

/// An error and its causes joined with `: `, a cause whose text the line already ends with left
/// out: hyper and tonic wrap an error in one that prints the same words ("tcp connect error:
/// tcp connect error: Connection refused").
pub fn with_causes<'a, E>(chain: impl IntoIterator<Item = &'a E>) -> String
where
    E: std::fmt::Display + ?Sized + 'a,
{
    let mut line = String::new();
    for cause in chain {
        let text = cause.to_string();
        if text.is_empty() || line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// `e`, then its causes (`source()` after `source()`).
pub fn chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |e| e.source())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_shows_each_cause_once() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let refused = E(
            "transport error",
            Some(Box::new(E(
                "tcp connect error",
                Some(Box::new(E(
                    "tcp connect error",
                    Some(Box::new(E("Connection refused (os error 111)", None))),
                ))),
            ))),
        );
        assert_eq!(
            with_causes(chain(&refused)),
            "transport error: tcp connect error: Connection refused (os error 111)"
        );
        // A cause the error already ends with (reqwest writes its cause into its own text).
        let said = E(
            "error sending request: timed out",
            Some(Box::new(E("timed out", None))),
        );
        assert_eq!(
            with_causes(chain(&said)),
            "error sending request: timed out"
        );
    }

    #[test]
    fn urls_lose_their_user_and_password_when_shown() {
        for (url, shown) in [
            (
                "https://ci:ghp_secret@github.com/org/repo.git",
                "https://github.com/org/repo.git",
            ),
            (
                "https://ghp_token@github.com/org/repo",
                "https://github.com/org/repo",
            ),
            ("ssh://git@host:22/org/repo", "ssh://host:22/org/repo"),
            ("https://host/path/with@sign", "https://host/path/with@sign"),
            ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
            ("file:///srv/git/repo", "file:///srv/git/repo"),
            ("/srv/git/repo", "/srv/git/repo"),
        ] {
            assert_eq!(url_without_credentials(url), shown, "{url}");
        }
        assert_eq!(url_userinfo("https://a:b@h/x"), Some("a:b"));
        assert_eq!(url_userinfo("https://h/x@y"), None);
        assert_eq!(url_userinfo("https://h?x=a@b"), None);
        // Not URLs rag-search takes, but never logged with their password either.
        assert_eq!(
            url_without_credentials("user:tok@host:org/repo"),
            "host:org/repo"
        );
        assert_eq!(url_without_credentials("https:user:tok@host/x"), "host/x");
        assert_eq!(
            text_without_credentials(
                "fatal: unable to access 'https://ci:ghp_x@git.example.com/team/s.git/': 403"
            ),
            "fatal: unable to access 'https://git.example.com/team/s.git/': 403"
        );
        assert_eq!(text_without_credentials("no url here"), "no url here");
    }

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
