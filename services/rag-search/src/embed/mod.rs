//! Dense embeddings behind one interface with two backends: a local BERT or MPNet model run with
//! candle ([`local`]) or an OpenAI-compatible `/v1/embeddings` endpoint ([`remote`]); plus the
//! compact text an item is embedded from.

mod encoder;
pub mod local;
pub mod remote;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ploke_runtime::config::EmbeddingConfig;

pub use local::MAX_TOKENS;

/// Texts per forward pass of the local model.
const LOCAL_BATCH: usize = 16;

/// Vectors with the input positions they belong to.
type Indexed = Vec<(usize, Vec<f32>)>;

/// Why embedding failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    /// The local model could not be loaded or run, or an endpoint answered something that is
    /// not a list of vectors.
    #[error("embedding model: {0}")]
    Model(String),
    /// The `[embedding]` settings are unusable.
    #[error("[embedding]: {0}")]
    Config(String),
    /// The endpoint could not be reached or stayed busy (408, 429, 5xx) through every try.
    #[error("embedding endpoint unavailable: {0}")]
    Unavailable(String),
    /// The endpoint refused the request (401, 403, 404, 400, ...).
    #[error("embedding endpoint refused the request: {0}")]
    Refused(String),
}

/// A loaded embedding backend.
#[derive(Debug)]
pub enum Embedder {
    /// A local model directory, run with candle.
    Local(Box<local::LocalModel>),
    /// An OpenAI-compatible endpoint.
    Remote(remote::Remote),
}

impl Embedder {
    /// Loads the local model in `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        local::LocalModel::load(dir).map(|m| Self::Local(Box::new(m)))
    }

    /// A local model embeds at most `tokens` of a query (an endpoint gets the whole query).
    pub fn with_query_tokens(self, tokens: usize) -> Self {
        match self {
            Self::Local(m) => Self::Local(Box::new(m.with_query_tokens(tokens))),
            Self::Remote(r) => Self::Remote(r),
        }
    }

    /// Connects to an endpoint; one probe request learns the vector length.
    pub async fn remote(config: &EmbeddingConfig) -> Result<Self, EmbedError> {
        remote::Remote::connect(config).await.map(Self::Remote)
    }

    /// Vector length.
    pub fn dims(&self) -> usize {
        match self {
            Self::Local(m) => m.dims(),
            Self::Remote(r) => r.dims(),
        }
    }

    /// Model name (the local directory's name, or the endpoint's model id).
    pub fn name(&self) -> &str {
        match self {
            Self::Local(m) => m.name(),
            Self::Remote(r) => r.model(),
        }
    }

    /// Tokens `text` becomes for the local model (after truncation); `None` for an endpoint,
    /// whose tokenizer is not known here.
    pub fn token_count(&self, text: &str) -> Option<usize> {
        match self {
            Self::Local(m) => Some(m.token_count(text)),
            Self::Remote(_) => None,
        }
    }

    /// Embeds a few texts in one batch (one forward pass, or one request). Blocking: call it
    /// from a blocking thread, never from async code.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self {
            Self::Local(m) => m.embed_batch(texts),
            Self::Remote(r) => r.embed_blocking(texts),
        }
    }

    /// Embeds a search query (blocking). An endpoint gets fewer tries and a shorter timeout
    /// than indexing gives it: a user is waiting.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        match self {
            Self::Local(m) => m.embed_query(query),
            Self::Remote(r) => r.embed_query_blocking(query),
        }
    }

    /// Stops waiting on an endpoint (the service is stopping); a local model needs nothing.
    pub fn stop(&self) {
        match self {
            Self::Local(_) => {}
            Self::Remote(r) => r.stop(),
        }
    }

    /// Whether the vectors come from a remote endpoint (seconds, not milliseconds, when slow).
    pub fn is_remote(&self) -> bool {
        matches!(self, Self::Remote(_))
    }

    /// Embeds `texts` (any number): the local model on `threads` threads with batches of
    /// similar length, an endpoint with its configured batch size and concurrency.
    /// `progress(done)` is called after each batch. Output order matches input order; an input
    /// an endpoint refused on its own has an empty vector.
    pub fn embed_all(
        &self,
        texts: &[String],
        threads: usize,
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self {
            Self::Local(m) => embed_local(m, texts, threads, progress),
            Self::Remote(r) => r.embed_all_blocking(texts, progress),
        }
    }
}

/// [`Embedder::embed_all`] on a scoped thread, calling `progress(done)` on this thread after
/// each batch (so it may be `FnMut` and need not be `Sync`).
pub fn embed_with_progress(
    embedder: &Embedder,
    texts: &[String],
    threads: usize,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let (tx, rx) = std::sync::mpsc::channel::<usize>();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let tx = std::sync::Mutex::new(tx);
            embedder.embed_all(texts, threads, &|done| {
                if let Ok(tx) = tx.lock() {
                    let _ = tx.send(done);
                }
            })
        });
        for done in rx.iter() {
            progress(done);
        }
        worker
            .join()
            .unwrap_or_else(|_| Err(EmbedError::Model("the embedding thread panicked".into())))
    })
}

fn embed_local(
    model: &local::LocalModel,
    texts: &[String],
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|i| texts[*i].len());
    let batches: Vec<&[usize]> = order.chunks(LOCAL_BATCH).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let workers = threads.max(1);
    // A worker that fails stops the others at their next batch.
    let failed = AtomicBool::new(false);
    let work = || -> Result<Indexed, EmbedError> {
        let mut out = Vec::new();
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            let Some(batch) = batches.get(b) else {
                return Ok(out);
            };
            if failed.load(Ordering::Relaxed) {
                return Ok(out);
            }
            let slice: Vec<&str> = batch.iter().map(|i| texts[*i].as_str()).collect();
            let vectors = model.embed_batch(&slice).inspect_err(|_| {
                failed.store(true, Ordering::Relaxed);
            })?;
            out.extend(batch.iter().copied().zip(vectors));
            let d = done.fetch_add(batch.len(), Ordering::Relaxed) + batch.len();
            progress(d);
        }
    };
    let results: Vec<Result<Indexed, EmbedError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    if workers == 1 {
                        return work();
                    }
                    // Each worker runs the shared model single-threaded, one worker per core:
                    // candle's matrix products run on the current rayon pool, so a private
                    // one-thread pool keeps a worker on its own core (1.3x one worker using
                    // both cores; docs/PERFORMANCE.md).
                    match rayon::ThreadPoolBuilder::new().num_threads(1).build() {
                        Ok(pool) => pool.install(work),
                        Err(_) => work(),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|w| {
                w.join().unwrap_or_else(|_| {
                    Err(EmbedError::Model("an embedding thread panicked".into()))
                })
            })
            .collect()
    });
    let mut vectors = vec![Vec::new(); texts.len()];
    for part in results {
        for (i, v) in part? {
            vectors[i] = v;
        }
    }
    Ok(vectors)
}

/// The text embedded for an item: a compact description rather than the whole body (canonical
/// path as words, signature, doc comment, then the head of the body), which the local model
/// truncates at [`MAX_TOKENS`].
pub fn item_text(canon_path: &str, signature: &str, doc: &str, body: &str) -> String {
    let path_words = canon_path.replace("::", " ").replace(['<', '>'], " ");
    let mut text = String::with_capacity(512);
    text.push_str(&path_words);
    text.push('\n');
    if !doc.is_empty() {
        text.push_str(doc);
        text.push('\n');
    }
    text.push_str(signature);
    text.push('\n');
    let head: String = body.lines().skip(1).take(12).collect::<Vec<_>>().join("\n");
    text.push_str(&head);
    text
}

/// Cosine similarity of two L2-normalised vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `v` scaled to unit length (left as it is when it is all zeros).
pub(crate) fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The real model (scripts/test fetches it; PLOKE_EMBED_MODEL names it).
    pub(crate) fn model() -> &'static Embedder {
        static MODEL: std::sync::OnceLock<Embedder> = std::sync::OnceLock::new();
        MODEL.get_or_init(|| {
            let dir = std::env::var("PLOKE_EMBED_MODEL").expect(
                "PLOKE_EMBED_MODEL must name the model directory: run ./scripts/test, or \
                 export PLOKE_EMBED_MODEL=$(scripts/fetch-model)",
            );
            Embedder::load(Path::new(&dir)).unwrap()
        })
    }

    #[test]
    fn vectors_are_normalised_and_meaningful() {
        let m = model();
        assert_eq!(m.dims(), 384);
        let v = m
            .embed_batch(&[
                "parse the configuration file",
                "read settings from a config file",
                "the cat sat on the mat",
            ])
            .unwrap();
        for x in &v {
            assert_eq!(x.len(), 384);
            let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        }
        assert!(cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]) + 0.2);
    }

    #[test]
    fn padding_and_threads_do_not_change_results() {
        let m = model();
        let texts: Vec<String> = (0..40)
            .map(|i| format!("fn handler_{i}() {{ {} }}", "x + ".repeat(i)))
            .collect();
        let alone = m.embed_batch(&[texts[3].as_str()]).unwrap().remove(0);
        let all = m.embed_all(&texts, 2, &|_| {}).unwrap();
        assert_eq!(all.len(), 40);
        assert!(cosine(&alone, &all[3]) > 0.9999);
        let single = m.embed_all(&texts, 1, &|_| {}).unwrap();
        for (a, b) in all.iter().zip(&single) {
            assert!(cosine(a, b) > 0.9999);
        }
    }

    #[test]
    fn a_query_past_its_token_limit_is_embedded_as_its_first_tokens() {
        let dir = std::env::var("PLOKE_EMBED_MODEL").unwrap();
        let limited = Embedder::load(Path::new(&dir))
            .unwrap()
            .with_query_tokens(8);
        let long = "handle the connection reset ".repeat(20);
        // Eight tokens: [CLS], six words, [SEP].
        let head = model()
            .embed_batch(&["handle the connection reset handle the"])
            .unwrap()
            .remove(0);
        let q = limited.embed_query(&long).unwrap();
        assert!(cosine(&q, &head) > 0.99999, "{}", cosine(&q, &head));
        let whole = model().embed_query(&long).unwrap();
        assert!(cosine(&q, &whole) < 0.9999);
    }

    #[test]
    fn a_query_is_embedded_as_a_document_of_the_same_text_would_be() {
        // Queries run on the query pool, their rows in one pass over the weights; the three
        // documents form one padded batch on one thread, its rows (3 × the long text's
        // tokens) in three passes of at most 96.
        let m = model();
        let short = "retry a request after a rate limit";
        let long = "handle the connection reset ".repeat(20);
        assert!((65..=96).contains(&m.token_count(&long).unwrap()));
        let docs = m
            .embed_all(
                &[short.to_owned(), long.clone(), "padding".into()],
                1,
                &|_| {},
            )
            .unwrap();
        for (query, doc) in [short, long.as_str()].into_iter().zip(&docs) {
            let q = m.embed_query(query).unwrap();
            assert_eq!(q.len(), 384);
            assert!(cosine(&q, doc) > 0.99999, "{query}: {}", cosine(&q, doc));
        }
    }

    #[test]
    fn a_missing_model_directory_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = Embedder::load(dir.path()).unwrap_err();
        assert!(e.to_string().ends_with("config.json is missing"), "{e}");
    }
}
