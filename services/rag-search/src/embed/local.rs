//! The local embedding backend: a sentence model (BERT, MPNet) run with candle from a
//! directory (config.json, tokenizer.json, model.safetensors), mean pooling over the attention
//! mask, L2-normalised. Batches are formed from texts of similar length and spread over worker
//! threads that share one model.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::{Tokenizer, TruncationParams};

use super::EmbedError;
use super::encoder::{self, Config, Encoder};

/// Tokens per text the model sees; longer texts are truncated.
pub const MAX_TOKENS: usize = 128;

/// Query lanes at most (one per core up to this).
const QUERY_LANES: usize = 4;

fn err(context: &str) -> impl FnOnce(String) -> EmbedError + '_ {
    move |e| EmbedError::Model(format!("{context}: {e}"))
}

/// A loaded local model.
pub struct LocalModel {
    model: Encoder,
    tokenizer: Tokenizer,
    device: Device,
    dims: usize,
    name: String,
    /// Where queries run (see [`LocalModel::embed_query`]).
    lanes: QueryLanes,
    /// Tokens of a query embedded, [CLS] and [SEP] included.
    query_tokens: usize,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("name", &self.name)
            .field("dims", &self.dims)
            .finish()
    }
}

impl LocalModel {
    /// Loads the model in `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let file = |name: &str| -> Result<PathBuf, EmbedError> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(EmbedError::Model(format!("{} is missing", p.display())))
            }
        };
        let config_text = std::fs::read_to_string(file("config.json")?)
            .map_err(|e| err("reading config.json")(e.to_string()))?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|e| err("parsing config.json")(e.to_string()))?;
        let mut tokenizer = Tokenizer::from_file(file("tokenizer.json")?)
            .map_err(|e| err("loading tokenizer.json")(e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| err("configuring truncation")(e.to_string()))?;
        tokenizer.with_padding(None);
        let weights = std::fs::read(file("model.safetensors")?)
            .map_err(|e| err("reading model.safetensors")(e.to_string()))?;
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| err("loading weights")(e.to_string()))?;
        let model =
            Encoder::load(vb, &config).map_err(|e| err("building the model")(e.to_string()))?;
        let name = dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Ok(Self {
            model,
            tokenizer,
            device,
            dims: config.hidden_size,
            name,
            lanes: QueryLanes::new(),
            query_tokens: MAX_TOKENS,
        })
    }

    /// Vector length.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Embeds at most `tokens` of a query ([CLS] and [SEP] included; 3 to [`MAX_TOKENS`]).
    pub fn with_query_tokens(mut self, tokens: usize) -> Self {
        self.query_tokens = tokens.clamp(3, MAX_TOKENS);
        self
    }

    /// Model name (its directory name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Tokens `text` becomes (after truncation).
    pub fn token_count(&self, text: &str) -> usize {
        self.tokenizer
            .encode(text, true)
            .map(|e| e.get_ids().len())
            .unwrap_or(0)
    }

    /// Embeds one query on a lane of its own (see [`QueryLanes`]).
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        let mut encoding = self
            .tokenizer
            .encode(query, false)
            .map_err(|e| err("tokenizing")(e.to_string()))?;
        // Its first tokens, then [CLS] … [SEP] around them.
        encoding.truncate(
            self.query_tokens.saturating_sub(2),
            0,
            tokenizers::TruncationDirection::Right,
        );
        let encoding = self
            .tokenizer
            .post_process(encoding, None, true)
            .map_err(|e| err("tokenizing")(e.to_string()))?;
        self.lanes
            .run(|| self.forward(vec![encoding]))?
            .pop()
            .ok_or_else(|| EmbedError::Model("no vector for the query".into()))
    }

    /// Embeds one batch in one forward pass.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| err("tokenizing")(e.to_string()))?;
        self.forward(encodings)
    }

    /// One forward pass over tokenized texts.
    fn forward(&self, encodings: Vec<tokenizers::Encoding>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let len = encodings
            .iter()
            .map(|e| e.get_ids().len())
            .max()
            .unwrap_or(1)
            .max(1);
        let n = encodings.len();
        let mut ids = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (row, e) in encodings.iter().enumerate() {
            for (col, (id, m)) in e.get_ids().iter().zip(e.get_attention_mask()).enumerate() {
                ids[row * len + col] = *id;
                mask[row * len + col] = *m;
            }
        }
        // Texts are batched by length: most batches (and every single query) have no padding.
        let padded = mask.contains(&0);
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let input = Tensor::from_vec(ids, (n, len), &self.device)?;
            let mask = if padded {
                Some(Tensor::from_vec(mask, (n, len), &self.device)?)
            } else {
                None
            };
            let hidden = self.model.forward(&input, mask.as_ref())?;
            encoder::mean_pool_normalised(&hidden, mask.as_ref())?.to_vec2::<f32>()
        };
        run().map_err(|e| err("running the model")(e.to_string()))
    }
}

/// Single-thread rayon pools a query's forward pass runs on, the least busy taken: the pass
/// stays on one thread (its products run serially in `ploke_matmul`, and candle's softmax and
/// layer norm split over a pool's threads, whose waking, parking and spinning cost a fifth
/// of a query's CPU on a pool of two, and more from outside any pool: docs/PERFORMANCE.md),
/// while queries in flight together take a lane, and a core, each. When no pool can be made
/// the query runs on its caller's thread.
struct QueryLanes {
    lanes: Vec<(rayon::ThreadPool, std::sync::atomic::AtomicUsize)>,
}

impl QueryLanes {
    fn new() -> Self {
        Self::with(std::thread::available_parallelism().map_or(1, |n| n.get().min(QUERY_LANES)))
    }

    fn with(count: usize) -> Self {
        let lanes = (0..count)
            .filter_map(|lane| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(move |_| format!("query-embed-{lane}"))
                    .build()
                    .inspect_err(|e| tracing::warn!(error = %e, lane, "no query lane"))
                    .ok()
            })
            .map(|pool| (pool, AtomicUsize::new(0)))
            .collect();
        Self { lanes }
    }

    /// Runs `work` on the lane with the fewest queries in it (claimed at the count seen, so
    /// two queries arriving together take two lanes).
    fn run<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        loop {
            let Some((pool, busy)) = self
                .lanes
                .iter()
                .min_by_key(|(_, busy)| busy.load(Ordering::Acquire))
            else {
                return work();
            };
            let seen = busy.load(Ordering::Acquire);
            if busy
                .compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                let _leaving = Leaving(busy);
                return pool.install(work);
            }
        }
    }
}

/// Counts a query out of its lane however it ends.
struct Leaving<'a>(&'a AtomicUsize);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::QueryLanes;

    /// Runs on a lane, tells the other query it is there and waits to hear the same of it:
    /// two queries on one lane would run one after the other and the first would hear nothing.
    fn meet(
        lanes: &QueryLanes,
        tell: mpsc::Sender<()>,
        hear: mpsc::Receiver<()>,
    ) -> Option<String> {
        lanes.run(move || {
            tell.send(()).ok()?;
            hear.recv_timeout(Duration::from_secs(30)).ok()?;
            std::thread::current().name().map(str::to_owned)
        })
    }

    #[test]
    fn queries_in_flight_together_take_lanes_of_their_own() {
        let lanes = QueryLanes::with(2);
        let (to_a, at_a) = mpsc::channel();
        let (to_b, at_b) = mpsc::channel();
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| meet(&lanes, to_b, at_a));
            let b = s.spawn(|| meet(&lanes, to_a, at_b));
            (a.join().unwrap(), b.join().unwrap())
        });
        let mut names = [a.unwrap(), b.unwrap()];
        names.sort();
        assert_eq!(names, ["query-embed-0", "query-embed-1"]);
        // Both counted out again: the next query takes lane 0.
        assert_eq!(
            lanes.run(|| std::thread::current().name().map(str::to_owned)),
            Some("query-embed-0".to_owned())
        );
    }

    #[test]
    fn without_lanes_a_query_runs_on_its_caller() {
        let lanes = QueryLanes::with(0);
        let caller = std::thread::current().id();
        assert_eq!(lanes.run(|| std::thread::current().id()), caller);
    }
}
