//! A fake OpenAI-compatible embeddings endpoint: a real HTTP/1.1 server on 127.0.0.1:0 that
//! answers `POST /v1/embeddings` exactly as OpenAI does (`{"object":"list","data":[{"object":
//! "embedding","index":i,"embedding":[...]}],"model","usage"}`). Vectors are a hashing-trick bag
//! of words (each lowercase word adds ±1 to one dimension), so texts sharing words are close and
//! search results are meaningful. Failures can be scripted (the next answers are statuses) or
//! made permanent (`set_down`).

use std::collections::VecDeque;
use std::hash::Hasher as _;
use std::sync::{Arc, Mutex};

use ploke_runtime::config::EmbeddingConfig;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

use crate::fake_provider::{read_request, respond_status};

/// Model id the fake reports.
pub const MODEL: &str = "fake-embed";

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedRequest {
    /// The Authorization header, if any.
    pub authorization: Option<String>,
    /// The `model` field.
    pub model: String,
    /// The `input` texts.
    pub input: Vec<String>,
}

/// A scripted answer: status, extra headers, body.
pub type Answer = (u16, Vec<(String, String)>, String);

#[derive(Debug, Default)]
struct State {
    received: Vec<EmbedRequest>,
    script: VecDeque<Answer>,
    down: bool,
    refuse: Option<String>,
    /// Requests seen so far, and from which one on they are held ([`FakeEmbeddings::hold_after`]).
    seen: usize,
    hold_from: Option<usize>,
}

/// The fake endpoint.
#[derive(Debug, Clone)]
pub struct FakeEmbeddings {
    url: String,
    dims: usize,
    state: Arc<Mutex<State>>,
    /// While true, requests wait before they are answered.
    hold: Arc<tokio::sync::watch::Sender<bool>>,
    /// Signalled when a request starts waiting on `hold`.
    waiting: Arc<tokio::sync::Notify>,
}

/// The fake's vector of `text`: a ±1 per lowercase word, hashed into `dims` dimensions.
pub fn bag_of_words(text: &str, dims: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; dims];
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut h = std::hash::DefaultHasher::new();
        h.write(word.to_ascii_lowercase().as_bytes());
        let h = h.finish();
        let slot = usize::try_from(h >> 1).unwrap_or(0) % dims;
        v[slot] += if h & 1 == 0 { 1.0 } else { -1.0 };
    }
    v
}

impl FakeEmbeddings {
    /// Starts the server; vectors have `dims` dimensions.
    pub async fn start(dims: usize) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let fake = Self {
            url: format!("http://{}/v1", listener.local_addr()?),
            dims,
            state: Arc::default(),
            hold: Arc::new(tokio::sync::watch::channel(false).0),
            waiting: Arc::default(),
        };
        let server = fake.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let server = server.clone();
                tokio::spawn(async move { server.connection(socket).await });
            }
        });
        Ok(fake)
    }

    /// An `[embedding]` section pointing at this fake (no key, fast retries are the caller's).
    pub fn config(&self) -> EmbeddingConfig {
        EmbeddingConfig::new(self.url.clone(), MODEL)
    }

    /// The base URL (`http://127.0.0.1:PORT/v1`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The next answers are these statuses (with headers and body), then vectors again.
    pub fn fail_next(
        &self,
        answers: impl IntoIterator<Item = (u16, Vec<(String, String)>, String)>,
    ) {
        if let Ok(mut s) = self.state.lock() {
            s.script.extend(answers);
        }
    }

    /// A request with an input containing `marker` gets 413, as a server does for an input
    /// over its model's length.
    pub fn refuse_inputs_containing(&self, marker: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.refuse = Some(marker.to_owned());
        }
    }

    /// While down, every request gets 503.
    pub fn set_down(&self, down: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.down = down;
        }
    }

    /// From now on requests wait, unanswered, until [`Self::release`].
    pub fn hold(&self) {
        self.hold.send_replace(true);
    }

    /// Answers the first `answered` requests (from now on), then holds the rest until
    /// [`Self::release`] (a client's probe answered, its work held).
    pub fn hold_after(&self, answered: usize) {
        if let Ok(mut s) = self.state.lock() {
            s.hold_from = Some(s.seen + answered);
        }
    }

    /// Answers the held requests and stops holding.
    pub fn release(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.hold_from = None;
            self.hold.send_replace(false);
        }
    }

    /// Resolves once a request is waiting on [`Self::hold`] (at once if one already was).
    pub async fn held_request(&self) {
        self.waiting.notified().await;
    }

    /// Requests received so far.
    pub fn received(&self) -> Vec<EmbedRequest> {
        self.state
            .lock()
            .map(|s| s.received.clone())
            .unwrap_or_default()
    }

    /// Texts embedded so far (over every request).
    pub fn texts_embedded(&self) -> usize {
        self.received().iter().map(|r| r.input.len()).sum()
    }

    async fn connection(&self, mut socket: TcpStream) {
        let mut buf = Vec::new();
        while let Some((head, body)) = read_request(&mut socket, &mut buf).await {
            let authorization = head.lines().skip(1).find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("authorization")
                    .then(|| v.trim().to_owned())
            });
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let input: Vec<String> = match &body["input"] {
                Value::String(s) => vec![s.clone()],
                Value::Array(a) => a
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            };
            if let Ok(mut s) = self.state.lock() {
                if s.hold_from.is_some_and(|from| s.seen >= from) {
                    self.hold.send_replace(true);
                }
                s.seen += 1;
            }
            let mut held = self.hold.subscribe();
            if *held.borrow_and_update() {
                self.waiting.notify_one();
                let _ = held.wait_for(|h| !*h).await;
            }
            let request = EmbedRequest {
                authorization,
                model: body["model"].as_str().unwrap_or_default().to_owned(),
                input,
            };
            let scripted = {
                let Ok(mut s) = self.state.lock() else { return };
                s.received.push(request.clone());
                let refused = s
                    .refuse
                    .as_deref()
                    .is_some_and(|m| request.input.iter().any(|t| t.contains(m)));
                match s.script.pop_front() {
                    Some(answer) => Some(answer),
                    None if s.down => {
                        Some((503, Vec::new(), r#"{"error":{"message":"down"}}"#.into()))
                    }
                    None if refused => Some((
                        413,
                        Vec::new(),
                        r#"{"error":{"message":"input too long"}}"#.into(),
                    )),
                    None => None,
                }
            };
            let keep = match scripted {
                Some((status, headers, body)) => {
                    respond_status(&mut socket, status, &headers, &body).await
                }
                None => {
                    let data: Vec<Value> = request
                        .input
                        .iter()
                        .enumerate()
                        .map(|(i, t)| {
                            json!({"object": "embedding", "index": i, "embedding": bag_of_words(t, self.dims)})
                        })
                        .collect();
                    let tokens: usize = request
                        .input
                        .iter()
                        .map(|t| t.split_whitespace().count())
                        .sum();
                    let answer = json!({
                        "object": "list",
                        "data": data,
                        "model": request.model,
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                    });
                    respond_status(&mut socket, 200, &[], &answer.to_string()).await
                }
            };
            if !keep {
                return;
            }
        }
    }
}
