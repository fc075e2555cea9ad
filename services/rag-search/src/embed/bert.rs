//! Dense embeddings with candle: a BERT-family sentence model from a local directory
//! (config.json, tokenizer.json, model.safetensors), mean pooling over the attention mask,
//! L2-normalised. Batches are formed from texts of similar length and spread over worker
//! threads that share one model.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

/// Tokens per text the model sees; longer texts are truncated.
pub const MAX_TOKENS: usize = 128;
/// Texts per forward pass.
const BATCH: usize = 16;

/// Vectors with the input positions they belong to.
type Indexed = Vec<(usize, Vec<f32>)>;

/// The model could not be loaded or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("embedding model: {0}")]
pub struct EmbedError(pub String);

fn err(context: &str) -> impl FnOnce(String) -> EmbedError + '_ {
    move |e| EmbedError(format!("{context}: {e}"))
}

/// A loaded embedding model.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dims: usize,
    name: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("name", &self.name)
            .field("dims", &self.dims)
            .finish()
    }
}

impl Embedder {
    /// Loads the model in `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let file = |name: &str| -> Result<PathBuf, EmbedError> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(EmbedError(format!("{} is missing", p.display())))
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
            BertModel::load(vb, &config).map_err(|e| err("building the model")(e.to_string()))?;
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
        })
    }

    /// Vector length.
    pub fn dims(&self) -> usize {
        self.dims
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

    /// Embeds one batch in one forward pass.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| err("tokenizing")(e.to_string()))?;
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
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let input = Tensor::from_vec(ids, (n, len), &self.device)?;
            let types = input.zeros_like()?;
            let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
            let hidden = self.model.forward(&input, &types, Some(&mask))?;
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
            mean.broadcast_div(&norm)?.to_vec2::<f32>()
        };
        run().map_err(|e| err("running the model")(e.to_string()))
    }

    /// Embeds `texts` (any number) on `threads` threads, batching texts of similar length;
    /// `progress(done)` is called after each batch. Output order matches input order.
    pub fn embed_all(
        &self,
        texts: &[String],
        threads: usize,
        progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|i| texts[*i].len());
        let batches: Vec<&[usize]> = order.chunks(BATCH).collect();
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let results: Vec<Result<Indexed, EmbedError>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads.max(1))
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::new();
                        loop {
                            let b = next.fetch_add(1, Ordering::Relaxed);
                            let Some(batch) = batches.get(b) else {
                                return Ok(out);
                            };
                            let slice: Vec<&str> =
                                batch.iter().map(|i| texts[*i].as_str()).collect();
                            let vectors = self.embed_batch(&slice)?;
                            out.extend(batch.iter().copied().zip(vectors));
                            let d = done.fetch_add(batch.len(), Ordering::Relaxed) + batch.len();
                            progress(d);
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join()
                        .unwrap_or_else(|_| Err(EmbedError("an embedding thread panicked".into())))
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
}

/// The text embedded for an item: a compact description rather than the whole body (canonical
/// path as words, signature, doc comment, then the head of the body), which the model
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
    fn a_missing_model_directory_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = Embedder::load(dir.path()).unwrap_err();
        assert!(e.0.ends_with("config.json is missing"), "{e}");
    }
}
