//! What a provider says when it fails, made fit to show: an error response's body read within a
//! size and time bound (a stalled or endless body must not hold a turn or fill memory), its
//! message taken out of JSON or HTML, the API key and control characters never echoed; and an
//! error the provider reports inside a stream.

use std::time::Duration;

use futures::StreamExt as _;

/// Most bytes of an error response's body read.
const BODY_MAX_BYTES: usize = 64 * 1024;
/// Longest error message shown.
const SHOWN_MAX_CHARS: usize = 300;

/// The body of an error response: at most [`BODY_MAX_BYTES`], each read within `idle`; what
/// arrived before a stall or the bound is kept.
pub(super) async fn error_body(response: reqwest::Response, idle: Duration) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while body.len() < BODY_MAX_BYTES {
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(Ok(bytes))) => body.extend_from_slice(&bytes),
            Ok(Some(Err(_)) | None) | Err(_) => break,
        }
    }
    body.truncate(BODY_MAX_BYTES);
    String::from_utf8_lossy(&body).into_owned()
}

/// What a user is shown of an error `body`: the `error.message` (or `message`, or `error`
/// text) of a JSON body, the text of an HTML page, else the body; the key's value redacted,
/// control characters and runs of white space as one space, at most [`SHOWN_MAX_CHARS`].
pub(super) fn shown(body: &str, key: Option<&str>) -> String {
    let text = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => json_message(&v).unwrap_or_else(|| body.to_owned()),
        Err(_) if looks_like_html(body) => html_text(body),
        Err(_) => body.to_owned(),
    };
    let text = match key.filter(|k| k.len() >= 4) {
        Some(k) => text.replace(k, "[redacted]"),
        None => text,
    };
    let mut out = String::new();
    for word in text.split(|c: char| c.is_whitespace() || c.is_control()) {
        if word.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.chars().count() > SHOWN_MAX_CHARS {
        out = out.chars().take(SHOWN_MAX_CHARS).collect();
        out.push('…');
    }
    out
}

/// The message of an error the provider reported in a chunk (`error` of the chunk or of a
/// choice), and whether trying again may help: not for a 4xx code other than 429.
pub(super) fn in_stream(error: &serde_json::Value, key: Option<&str>) -> (String, bool) {
    let message = error
        .get("message")
        .or(Some(error))
        .and_then(|m| m.as_str())
        .or_else(|| error.get("type").and_then(|t| t.as_str()))
        .filter(|m| !m.trim().is_empty())
        .unwrap_or("no message");
    let code = error
        .get("code")
        .and_then(|c| c.as_u64().or_else(|| c.as_str()?.parse().ok()));
    let retryable = !code.is_some_and(|c| (400..500).contains(&c) && c != 429);
    let shown = match code {
        Some(c) => format!("{} (code {c})", shown(message, key)),
        None => shown(message, key),
    };
    (shown, retryable)
}

/// `error.message`, `message`, or an `error` that is text.
fn json_message(v: &serde_json::Value) -> Option<String> {
    let error = v.get("error");
    error
        .and_then(|e| e.get("message"))
        .or_else(|| v.get("message"))
        .or(error)
        .and_then(|m| m.as_str())
        .map(str::to_owned)
}

fn looks_like_html(body: &str) -> bool {
    let start = body
        .trim_start()
        .get(..15)
        .unwrap_or("")
        .to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html") || start.starts_with("<head")
}

/// The text of an HTML page: its `<title>` and the text outside tags, scripts and styles.
fn html_text(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        out.push(' ');
        let tag = &rest[open..];
        let lower = tag.get(..8).unwrap_or(tag).to_ascii_lowercase();
        // Skip a script's or style's content with its tags.
        let skip_to = if lower.starts_with("<script") {
            tag.to_ascii_lowercase().find("</script>").map(|i| i + 9)
        } else if lower.starts_with("<style") {
            tag.to_ascii_lowercase().find("</style>").map(|i| i + 8)
        } else {
            tag.find('>').map(|i| i + 1)
        };
        match skip_to {
            Some(n) => rest = &tag[n..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_shown_by_their_message_without_the_key() {
        let key = "sk-live-0123456789";
        assert_eq!(
            shown(
                r#"{"error":{"message":"Incorrect API key provided: sk-live-0123456789.","type":"invalid_request_error"}}"#,
                Some(key)
            ),
            "Incorrect API key provided: [redacted]."
        );
        assert_eq!(
            shown(r#"{"message":"rate\nlimited"}"#, None),
            "rate limited"
        );
        assert_eq!(
            shown(r#"{"error":"model not found"}"#, None),
            "model not found"
        );
        assert_eq!(
            shown(
                "<!DOCTYPE html><html><head><title>502 Bad Gateway</title><style>b{}</style>\
                 </head><body><h1>Bad&nbsp;Gateway</h1><script>x()</script>nginx</body></html>",
                None
            ),
            "502 Bad Gateway Bad Gateway nginx"
        );
        assert_eq!(shown("plain \x1b[31mtext\x07", None), "plain [31mtext");
        let long = shown(&"word ".repeat(200), None);
        assert_eq!(long.chars().count(), SHOWN_MAX_CHARS + 1);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn errors_in_a_stream_say_whether_to_try_again() {
        let (m, retry) = in_stream(
            &serde_json::json!({"message": "upstream overloaded", "code": 502}),
            None,
        );
        assert_eq!(
            (m.as_str(), retry),
            ("upstream overloaded (code 502)", true)
        );
        let (m, retry) = in_stream(
            &serde_json::json!({"message": "context too long", "code": "400"}),
            None,
        );
        assert_eq!((m.as_str(), retry), ("context too long (code 400)", false));
        let (m, retry) = in_stream(&serde_json::json!({"type": "server_error"}), None);
        assert_eq!((m.as_str(), retry), ("server_error", true));
        let (m, retry) = in_stream(&serde_json::json!({}), None);
        assert_eq!((m.as_str(), retry), ("no message", true));
    }

    /// A server answering 500 with `head` of a body announced as `announced` bytes, then
    /// either silence (`endless` false) or bytes without end.
    async fn erroring(head: &'static str, announced: usize, endless: bool) -> String {
        use tokio::io::AsyncWriteExt as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut request).await;
            let header = format!("HTTP/1.1 500 Oops\r\nContent-Length: {announced}\r\n\r\n{head}");
            socket.write_all(header.as_bytes()).await.unwrap();
            let block = vec![b'x'; 16 * 1024];
            while endless && socket.write_all(&block).await.is_ok() {}
            // Silent until the client leaves.
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut request).await;
        });
        format!("http://{addr}/")
    }

    #[tokio::test]
    async fn an_error_body_that_stalls_or_never_ends_is_read_within_bounds() {
        let idle = Duration::from_millis(300);
        let url = erroring("partial", 1000, false).await;
        let response = reqwest::get(url).await.unwrap();
        assert_eq!(error_body(response, idle).await, "partial");
        let url = erroring("", 1 << 30, true).await;
        let response = reqwest::get(url).await.unwrap();
        assert_eq!(error_body(response, idle).await.len(), BODY_MAX_BYTES);
    }
}
