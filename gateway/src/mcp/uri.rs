//! The URIs of ploke's MCP resources (`ploke://workspace/NAME/PATH`, `ploke://index_status`)
//! and the `?workspace=` of the endpoint's URL: percent-encoding of the few characters a path
//! may hold that a URI may not.

/// The index status resource.
pub const INDEX_STATUS: &str = "ploke://index_status";

/// The prefix of a workspace file's URI.
pub const WORKSPACE_PREFIX: &str = "ploke://workspace/";

/// The template of workspace files' URIs (RFC 6570; `+` keeps the path's slashes).
pub const WORKSPACE_TEMPLATE: &str = "ploke://workspace/{workspace}/{+path}";

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `s` percent-encoded, `/` kept when `keep_slash`.
fn encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if unreserved(b) || (keep_slash && b == b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes percent-escapes (and, in a query, `+` as a space); `None` when the result is not
/// UTF-8 or an escape is malformed.
pub fn decode(s: &str, plus_is_space: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The URI of `path` in workspace `name`.
pub fn file(name: &str, path: &str) -> String {
    format!(
        "{WORKSPACE_PREFIX}{}/{}",
        encode(name, false),
        encode(path, true)
    )
}

/// The workspace name and path a file URI names.
pub fn parse_file(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix(WORKSPACE_PREFIX)?;
    let (name, path) = rest.split_once('/')?;
    let (name, path) = (decode(name, false)?, decode(path, false)?);
    (!name.is_empty() && !path.is_empty()).then_some((name, path))
}

/// The value of `key` in a URL query.
pub fn query_param(query: &str, key: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| decode(v, true))
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_round_trip_odd_paths() {
        for (name, path) in [
            ("repo", "src/lib.rs"),
            ("my repo", "docs/a b#c?.md"),
            ("r", "ünïcode/ファイル.rs"),
            ("r", "100%/x+y.rs"),
        ] {
            let uri = file(name, path);
            assert!(uri.is_ascii() && !uri.contains(' '), "{uri}");
            assert_eq!(parse_file(&uri), Some((name.to_owned(), path.to_owned())));
        }
        assert_eq!(
            file("repo", "src/a b.rs"),
            "ploke://workspace/repo/src/a%20b.rs"
        );
        assert_eq!(parse_file("ploke://workspace/repo"), None);
        assert_eq!(parse_file("ploke://workspace/repo/%zz"), None);
        assert_eq!(parse_file("file:///etc/passwd"), None);
    }

    #[test]
    fn query_params_decode() {
        assert_eq!(
            query_param("a=1&workspace=my+repo", "workspace").as_deref(),
            Some("my repo")
        );
        assert_eq!(
            query_param("workspace=%2Fsrv%2Frepo", "workspace").as_deref(),
            Some("/srv/repo")
        );
        assert_eq!(query_param("workspace=", "workspace"), None);
        assert_eq!(query_param("other", "workspace"), None);
    }
}
