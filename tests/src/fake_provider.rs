//! A fake OpenAI chat-completions provider: a real HTTP/1.1 server on 127.0.0.1:0 that answers
//! each request with the next scripted reply. Streams are sent exactly as OpenAI sends them —
//! chunked transfer encoding, `data: {json}\n\n` events, a role chunk first, tool-call
//! arguments split mid-string and interleaved by index, usage in the last chunk, `data: [DONE]`
//! — and replies can be error statuses (404, 429 with Retry-After, 500), slow, held open until
//! the client goes away, cut off mid-stream, paused until the test resumes them, or endless
//! (deltas or `: keep-alive` comments until the client leaves).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ploke_runtime::config::{ModelConfig, ProviderConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A 200 SSE stream of these event payloads (JSON text or `[DONE]`).
    Stream {
        /// Event payloads in order.
        events: Vec<String>,
        /// Pause before each event.
        delay: Duration,
        /// After this many events, keep the connection open and send nothing more until
        /// the client goes away.
        hold_after: Option<usize>,
        /// After this many events, close the connection mid-stream.
        cut_after: Option<usize>,
        /// After this many events, wait for [`FakeProvider::resume`] before sending the rest.
        pause_after: Option<usize>,
    },
    /// A 200 SSE stream that never ends: a role chunk, then every `every` either a text
    /// delta (`delta`) or, without one, a `: keep-alive` comment (as OpenRouter sends while
    /// it waits), until the client goes away.
    Endless {
        /// Text of each delta; `None` = comments only.
        delta: Option<String>,
        /// Pause between writes (the fake's pace, not a test's synchronisation).
        every: Duration,
    },
    /// An error status with headers and a body.
    Status {
        /// HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// Body.
        body: String,
    },
}

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// `Authorization` header, if any.
    pub authorization: Option<String>,
    /// Every header, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Value,
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<Reply>,
    received: Vec<Received>,
    timeline: Vec<(Moment, std::time::Instant)>,
}

/// A point in the fake's life, for latency measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// A request's body was read.
    Request,
    /// A stream's first event was written.
    FirstByte,
    /// A stream's last event was written.
    StreamEnd,
}

/// The running fake.
#[derive(Debug, Clone)]
pub struct FakeProvider {
    url: String,
    state: Arc<Mutex<State>>,
    disconnected: Arc<Notify>,
    first_byte: Arc<Notify>,
    resume: Arc<Notify>,
}

/// The model id the fake serves by default.
pub const MODEL: &str = "fake-model";

fn chunk(choice: Value) -> String {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [choice],
    })
    .to_string()
}

fn usage_chunk(prompt: u32, completion: u32) -> String {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    })
    .to_string()
}

impl Reply {
    fn stream(events: Vec<String>) -> Self {
        Reply::Stream {
            events,
            delay: Duration::ZERO,
            hold_after: None,
            cut_after: None,
            pause_after: None,
        }
    }

    /// A 200 SSE stream of exactly these event payloads (what some other server sends).
    pub fn events(payloads: &[&str]) -> Self {
        Self::stream(payloads.iter().map(|p| (*p).to_owned()).collect())
    }

    /// Text streamed in the given pieces, then `stop`.
    pub fn text(pieces: &[&str]) -> Self {
        Self::text_with_finish(pieces, "stop")
    }

    /// Text streamed in pieces, ending with `finish_reason`.
    pub fn text_with_finish(pieces: &[&str], finish_reason: &str) -> Self {
        let mut events = vec![chunk(
            json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}),
        )];
        for p in pieces {
            events.push(chunk(
                json!({"index": 0, "delta": {"content": p}, "finish_reason": null}),
            ));
        }
        events.push(chunk(
            json!({"index": 0, "delta": {}, "finish_reason": finish_reason}),
        ));
        events.push(usage_chunk(100, pieces.len() as u32));
        events.push("[DONE]".to_owned());
        Self::stream(events)
    }

    /// Tool calls `(id, name, arguments JSON)`: ids and names first, then the arguments in
    /// 7-character pieces (split mid-string), interleaved by index; `tool_calls`, usage, DONE.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Self {
        let mut events = vec![chunk(
            json!({"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}),
        )];
        for (i, (id, name, _)) in calls.iter().enumerate() {
            events.push(chunk(json!({"index": 0, "delta": {"tool_calls": [
                {"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
            ]}, "finish_reason": null})));
        }
        let pieces: Vec<Vec<String>> = calls
            .iter()
            .map(|(_, _, args)| {
                args.chars()
                    .collect::<Vec<_>>()
                    .chunks(7)
                    .map(|c| c.iter().collect())
                    .collect()
            })
            .collect();
        let longest = pieces.iter().map(Vec::len).max().unwrap_or(0);
        for round in 0..longest {
            for (i, p) in pieces.iter().enumerate() {
                if let Some(piece) = p.get(round) {
                    events.push(chunk(json!({"index": 0, "delta": {"tool_calls": [
                        {"index": i, "function": {"arguments": piece}}
                    ]}, "finish_reason": null})));
                }
            }
        }
        events.push(chunk(
            json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}),
        ));
        events.push(usage_chunk(200, 20));
        events.push("[DONE]".to_owned());
        Self::stream(events)
    }

    /// An error status.
    pub fn status(status: u16, body: &str) -> Self {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }

    /// 429 with `Retry-After: secs`.
    pub fn rate_limited(secs: u32) -> Self {
        Reply::Status {
            status: 429,
            headers: vec![("Retry-After".into(), secs.to_string())],
            body: json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}).to_string(),
        }
    }

    /// Sends `n` events, then holds the connection open until the client leaves.
    pub fn hold_after(mut self, n: usize) -> Self {
        if let Reply::Stream { hold_after, .. } = &mut self {
            *hold_after = Some(n);
        }
        self
    }

    /// Sends `n` events, then closes the connection mid-stream.
    pub fn cut_after(mut self, n: usize) -> Self {
        if let Reply::Stream { cut_after, .. } = &mut self {
            *cut_after = Some(n);
        }
        self
    }

    /// Sends `n` events, then waits for [`FakeProvider::resume`] before the rest.
    pub fn pause_after(mut self, n: usize) -> Self {
        if let Reply::Stream { pause_after, .. } = &mut self {
            *pause_after = Some(n);
        }
        self
    }

    /// Keep-alive comments every `every`, forever (no content).
    pub fn keep_alive_forever(every: Duration) -> Self {
        Reply::Endless { delta: None, every }
    }

    /// The text `delta` every `every`, forever.
    pub fn deltas_forever(delta: &str, every: Duration) -> Self {
        Reply::Endless {
            delta: Some(delta.to_owned()),
            every,
        }
    }

    /// Pauses before each event.
    pub fn slow(mut self, pause: Duration) -> Self {
        if let Reply::Stream { delay, .. } = &mut self {
            *delay = pause;
        }
        self
    }
}

impl FakeProvider {
    /// Starts the server.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let fake = Self {
            url,
            state: Arc::default(),
            disconnected: Arc::default(),
            first_byte: Arc::default(),
            resume: Arc::default(),
        };
        let server = fake.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                // As a real server does: no Nagle delay between small SSE writes.
                let _ = socket.set_nodelay(true);
                let server = server.clone();
                tokio::spawn(async move { server.connection(socket).await });
            }
        });
        Ok(fake)
    }

    /// A provider entry for `ploke.toml` that points at this fake (model `fake-model`, no key;
    /// with a context window, the model is listed as supporting tools).
    pub fn provider_config(&self, context_window: Option<u32>) -> ProviderConfig {
        ProviderConfig {
            base_url: self.url.clone(),
            api_key_env: None,
            default_model: Some(MODEL.into()),
            headers: Default::default(),
            models: context_window
                .map(|w| ModelConfig {
                    id: MODEL.into(),
                    context_window: Some(w),
                    supports_tools: Some(true),
                })
                .into_iter()
                .collect(),
            preferences: None,
        }
    }

    /// The base URL (`http://127.0.0.1:PORT/v1`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Queues replies, answered in order.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        if let Ok(mut s) = self.state.lock() {
            s.script.extend(replies);
        }
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.state
            .lock()
            .map(|s| s.received.clone())
            .unwrap_or_default()
    }

    /// Drops what was recorded so far (requests and timeline), for long runs: every request
    /// carries the whole history, so keeping them all grows with the square of the turns.
    pub fn forget(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.received.clear();
            s.timeline.clear();
        }
    }

    /// When each request arrived and each stream started and ended.
    pub fn timeline(&self) -> Vec<(Moment, std::time::Instant)> {
        self.state
            .lock()
            .map(|s| s.timeline.clone())
            .unwrap_or_default()
    }

    fn mark(&self, moment: Moment) {
        if let Ok(mut s) = self.state.lock() {
            s.timeline.push((moment, std::time::Instant::now()));
        }
    }

    /// Resolves when a held stream's client has gone away.
    pub async fn disconnected(&self) {
        self.disconnected.notified().await;
    }

    /// Lets a stream paused by [`Reply::pause_after`] go on.
    pub fn resume(&self) {
        self.resume.notify_one();
    }

    /// Resolves when the next stream has sent its first event.
    pub fn first_byte(&self) -> Arc<Notify> {
        self.first_byte.clone()
    }

    async fn connection(&self, mut socket: TcpStream) {
        let mut buf = Vec::new();
        loop {
            let Some((head, body)) = read_request(&mut socket, &mut buf).await else {
                return;
            };
            let headers: Vec<(String, String)> = head
                .lines()
                .skip(1)
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                .collect();
            let authorization = headers
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v.clone());
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            self.mark(Moment::Request);
            let reply = {
                let Ok(mut s) = self.state.lock() else { return };
                s.received.push(Received {
                    authorization,
                    headers,
                    body,
                });
                s.script.pop_front()
            };
            let keep = match reply {
                None => {
                    respond_status(
                        &mut socket,
                        500,
                        &[],
                        "fake provider: no scripted reply left",
                    )
                    .await
                }
                Some(Reply::Status {
                    status,
                    headers,
                    body,
                }) => respond_status(&mut socket, status, &headers, &body).await,
                Some(Reply::Stream {
                    events,
                    delay,
                    hold_after,
                    cut_after,
                    pause_after,
                }) => {
                    self.respond_stream(
                        &mut socket,
                        &events,
                        delay,
                        [hold_after, cut_after, pause_after],
                    )
                    .await
                }
                Some(Reply::Endless { delta, every }) => {
                    self.respond_endless(&mut socket, delta.as_deref(), every)
                        .await
                }
            };
            if !keep {
                return;
            }
        }
    }

    async fn respond_stream(
        &self,
        socket: &mut TcpStream,
        events: &[String],
        delay: Duration,
        [hold_after, cut_after, pause_after]: [Option<usize>; 3],
    ) -> bool {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
        if socket.write_all(head.as_bytes()).await.is_err() {
            return false;
        }
        for (i, e) in events.iter().enumerate() {
            if pause_after == Some(i) {
                self.resume.notified().await;
            }
            if hold_after == Some(i) {
                let mut scratch = [0u8; 64];
                // The client sends nothing more on this connection; a read ends when it leaves.
                while let Ok(n) = socket.read(&mut scratch).await {
                    if n == 0 {
                        break;
                    }
                }
                self.disconnected.notify_one();
                return false;
            }
            if cut_after == Some(i) {
                let _ = socket.write_all(b"5\r\ndata:").await;
                let _ = socket.shutdown().await;
                return false;
            }
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let data = format!("data: {e}\n\n");
            let framed = format!("{:x}\r\n{data}\r\n", data.len());
            if socket.write_all(framed.as_bytes()).await.is_err() {
                return false;
            }
            let _ = socket.flush().await;
            if i == 0 {
                self.mark(Moment::FirstByte);
                self.first_byte.notify_one();
            }
        }
        let ended = socket.write_all(b"0\r\n\r\n").await.is_ok();
        self.mark(Moment::StreamEnd);
        ended
    }
}

impl FakeProvider {
    async fn respond_endless(
        &self,
        socket: &mut TcpStream,
        delta: Option<&str>,
        every: Duration,
    ) -> bool {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
        if socket.write_all(head.as_bytes()).await.is_err() {
            return false;
        }
        let role = chunk(
            json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}),
        );
        let next = match delta {
            Some(d) => format!(
                "data: {}\n\n",
                chunk(json!({"index": 0, "delta": {"content": d}, "finish_reason": null}))
            ),
            None => ": keep-alive\n\n".to_owned(),
        };
        let mut data = format!("data: {role}\n\n");
        let mut first = true;
        loop {
            let framed = format!("{:x}\r\n{data}\r\n", data.len());
            if socket.write_all(framed.as_bytes()).await.is_err() || socket.flush().await.is_err() {
                // The client went away: what an endless stream waits for.
                self.disconnected.notify_one();
                return false;
            }
            if first {
                first = false;
                self.mark(Moment::FirstByte);
                self.first_byte.notify_one();
            }
            data.clone_from(&next);
            tokio::time::sleep(every).await;
        }
    }
}

pub(crate) async fn respond_status(
    socket: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &str,
) -> bool {
    let mut head = format!(
        "HTTP/1.1 {status} Fake\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await.is_ok()
        && socket.write_all(body.as_bytes()).await.is_ok()
}

/// Reads one request (head and Content-Length body) from `socket`, keeping extra bytes in `buf`.
pub(crate) async fn read_request(
    socket: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(String, Vec<u8>)> {
    let mut scratch = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut scratch).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&scratch[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = socket.read(&mut scratch).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&scratch[..n]);
    }
    let body = buf[head_end..head_end + length].to_vec();
    buf.drain(..head_end + length);
    Some((head, body))
}
