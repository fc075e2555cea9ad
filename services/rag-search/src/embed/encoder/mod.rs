//! The encoder forward pass for sentence embeddings, on candle tensors and candle-nn layers:
//! BERT (MiniLM) and MPNet (relative position buckets added to every layer's attention),
//! leaner than `candle_transformers::models::bert` for inference: the query is scaled before
//! `Q·Kᵀ`, the attention softmax is candle's fused last-dimension kernel, and the padding mask
//! is added only when a batch has padding (texts are batched by length, so most have none).
//! Those three fewer full-size `[batch, heads, tokens, tokens]` tensors per layer are most of
//! its gain; `tests::matches_the_reference_implementation` holds it to the reference.

use candle_core::{D, DType, Module as _, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder, embedding, layer_norm};
use candle_transformers::models::bert::HiddenAct;
use serde::Deserialize;

use gelu::GeluErf;
use ploke_matmul::PackedLinear;

/// A dense layer, its weight packed for [`ploke_matmul`] (candle's copy is not kept).
struct Linear(PackedLinear);

fn linear(input: usize, output: usize, vb: VarBuilder) -> Result<Linear> {
    let weight = vb.get((output, input), "weight")?;
    let bias = vb.get(output, "bias")?.to_vec1::<f32>()?;
    let packed = PackedLinear::new(&weight.flatten_all()?.to_vec1::<f32>()?, &bias, input)
        .ok_or_else(|| {
            candle_core::Error::Msg(format!(
                "dense layer: weight of {output} × {input} with a bias of {}",
                bias.len()
            ))
        })?;
    Ok(Linear(packed))
}

impl Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (batch, tokens, input) = x.dims3()?;
        let wrong = || {
            candle_core::Error::Msg(format!(
                "dense layer: {input} inputs for a weight of {} inputs and {} outputs",
                self.0.inputs(),
                self.0.outs()
            ))
        };
        if input != self.0.inputs() {
            return Err(wrong());
        }
        let rows = x.flatten_all()?.to_vec1::<f32>()?;
        let y = self.0.forward(&rows).ok_or_else(wrong)?;
        Tensor::from_vec(y, (batch, tokens, self.0.outs()), x.device())
    }
}

/// What the encoder reads of a model's `config.json` (other keys are ignored).
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Config {
    /// `bert` (the default) or `mpnet`.
    #[serde(default = "bert")]
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: HiddenAct,
    pub max_position_embeddings: usize,
    #[serde(default = "two")]
    pub type_vocab_size: usize,
    #[serde(default = "bert_eps")]
    pub layer_norm_eps: f64,
    /// MPNet: the padding token, whose id + 1 is the first position.
    #[serde(default = "one")]
    pub pad_token_id: usize,
    /// MPNet: buckets of relative positions.
    #[serde(default = "buckets")]
    pub relative_attention_num_buckets: usize,
}

fn bert() -> String {
    "bert".into()
}
fn two() -> usize {
    2
}
fn one() -> usize {
    1
}
fn bert_eps() -> f64 {
    1e-12
}
fn buckets() -> usize {
    32
}

/// The model families the encoder runs.
#[derive(Debug, Clone, Copy)]
enum Family {
    Bert,
    MpNet,
}

/// MPNet's attention bias by relative position: one value per head and bucket, shared by
/// every layer.
struct RelativeBias {
    table: Embedding,
    buckets: usize,
}

/// Relative distances beyond which every distance shares one bucket (MPNet's, as T5's).
const MAX_DISTANCE: f64 = 128.0;

impl RelativeBias {
    /// The bucket of a key at `key` seen from a query at `query`: half the buckets for keys
    /// at or before the query, half for keys after; exact distances below a quarter of the
    /// buckets, logarithmic ones up to [`MAX_DISTANCE`] (in f32, as the reference computes
    /// them, so that distances on a bucket's edge fall the same way).
    fn bucket(&self, query: usize, key: usize) -> u32 {
        let half = self.buckets / 2;
        let exact = half / 2;
        let offset = if key > query { half } else { 0 };
        let n = query.abs_diff(key);
        let within = if n < exact {
            n
        } else {
            let ratio = (n as f32 / exact as f32).ln() / (MAX_DISTANCE / exact as f64).ln() as f32;
            (exact + (ratio * (half - exact) as f32) as usize).min(half - 1)
        };
        (offset + within) as u32
    }

    /// The bias `[1, heads, tokens, tokens]`.
    fn forward(&self, tokens: usize, device: &candle_core::Device) -> Result<Tensor> {
        // A bucket depends on the signed distance alone: one per distance, then laid out.
        let last = tokens.saturating_sub(1);
        let by_distance: Vec<u32> = (0..2 * last + 1).map(|d| self.bucket(last, d)).collect();
        let mut ids = Vec::with_capacity(tokens * tokens);
        for q in 0..tokens {
            ids.extend_from_slice(&by_distance[last - q..last - q + tokens]);
        }
        let ids = Tensor::from_vec(ids, (tokens, tokens), device)?;
        self.table
            .forward(&ids)?
            .permute((2, 0, 1))?
            .unsqueeze(0)?
            .contiguous()
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// A loaded encoder (BERT or MPNet).
pub(super) struct Encoder {
    words: Embedding,
    positions: Embedding,
    /// BERT's token types (all 0 here); MPNet has none.
    token_types: Option<Embedding>,
    /// The position of the first token: 0 for BERT, the padding id + 1 for MPNet.
    first_position: u32,
    relative: Option<RelativeBias>,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_size: usize,
    act: HiddenAct,
}

impl Encoder {
    /// Loads the weights: BERT's (`embeddings.*`, `encoder.layer.N.attention.self.*`, with or
    /// without a `bert.` prefix) or MPNet's (`encoder.layer.N.attention.attn.*`,
    /// `encoder.relative_attention_bias`), as `config.model_type` says.
    pub(super) fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        let family = match c.model_type.as_str() {
            "bert" => Family::Bert,
            "mpnet" => Family::MpNet,
            // Not `bail!`: its backtrace would end up in the message a user reads.
            other => {
                return Err(candle_core::Error::Msg(format!(
                    "model type {other:?} is not supported (bert, mpnet)"
                )));
            }
        };
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
            vb.pp("bert")
        } else {
            vb
        };
        let h = c.hidden_size;
        let e = vb.pp("embeddings");
        let layers = (0..c.num_hidden_layers)
            .map(|i| {
                let l = vb.pp(format!("encoder.layer.{i}"));
                let a = l.pp("attention");
                let (q, k, v, out, norm) = match family {
                    Family::Bert => (
                        "self.query",
                        "self.key",
                        "self.value",
                        "output.dense",
                        "output.LayerNorm",
                    ),
                    Family::MpNet => ("attn.q", "attn.k", "attn.v", "attn.o", "LayerNorm"),
                };
                Ok(Layer {
                    query: linear(h, h, a.pp(q))?,
                    key: linear(h, h, a.pp(k))?,
                    value: linear(h, h, a.pp(v))?,
                    attention_out: linear(h, h, a.pp(out))?,
                    attention_norm: layer_norm(h, c.layer_norm_eps, a.pp(norm))?,
                    intermediate: linear(h, c.intermediate_size, l.pp("intermediate.dense"))?,
                    output: linear(c.intermediate_size, h, l.pp("output.dense"))?,
                    output_norm: layer_norm(h, c.layer_norm_eps, l.pp("output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let (token_types, first_position, relative) = match family {
            Family::Bert => (
                Some(embedding(
                    c.type_vocab_size,
                    h,
                    e.pp("token_type_embeddings"),
                )?),
                0,
                None,
            ),
            Family::MpNet => (
                None,
                u32::try_from(c.pad_token_id + 1)
                    .map_err(|_| candle_core::Error::Msg("pad_token_id is too large".into()))?,
                Some(RelativeBias {
                    table: embedding(
                        c.relative_attention_num_buckets,
                        c.num_attention_heads,
                        vb.pp("encoder.relative_attention_bias"),
                    )?,
                    buckets: c.relative_attention_num_buckets,
                }),
            ),
        };
        Ok(Self {
            words: embedding(c.vocab_size, h, e.pp("word_embeddings"))?,
            positions: embedding(c.max_position_embeddings, h, e.pp("position_embeddings"))?,
            token_types,
            first_position,
            relative,
            embeddings_norm: layer_norm(h, c.layer_norm_eps, e.pp("LayerNorm"))?,
            layers,
            heads: c.num_attention_heads,
            head_size: h / c.num_attention_heads.max(1),
            act: c.hidden_act,
        })
    }

    /// Hidden states `[batch, tokens, hidden]` for token ids `[batch, tokens]` (token type 0);
    /// `mask` `[batch, tokens]` (1 = token, 0 = padding) when the batch has padding.
    pub(super) fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (_, tokens) = ids.dims2()?;
        // Texts are padded at their end, so every text's tokens take the same positions.
        let positions = Tensor::arange(
            self.first_position,
            self.first_position + tokens as u32,
            ids.device(),
        )?;
        let mut x = self
            .words
            .forward(ids)?
            .broadcast_add(&self.positions.forward(&positions)?)?;
        if let Some(types) = &self.token_types {
            x = x.broadcast_add(&types.forward(&Tensor::zeros(1, DType::U32, ids.device())?)?)?;
        }
        let mut x = self.embeddings_norm.forward(&x)?;
        // Padding gets a large negative score before the softmax: [batch, 1, 1, tokens]; MPNet
        // adds its relative positions' bias, [1, heads, tokens, tokens].
        let padding = match mask {
            Some(m) => Some(
                ((m.to_dtype(DType::F32)? - 1.0)? * 1e9)?
                    .unsqueeze(1)?
                    .unsqueeze(1)?,
            ),
            None => None,
        };
        let bias = match (&self.relative, padding) {
            (Some(r), Some(p)) => Some(r.forward(tokens, ids.device())?.broadcast_add(&p)?),
            (Some(r), None) => Some(r.forward(tokens, ids.device())?),
            (None, p) => p,
        };
        for layer in &self.layers {
            x = self.layer(layer, &x, bias.as_ref())?;
        }
        Ok(x)
    }

    fn layer(&self, l: &Layer, x: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (batch, tokens, hidden) = x.dims3()?;
        let split = |t: Tensor| -> Result<Tensor> {
            t.reshape((batch, tokens, self.heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()
        };
        let scale = 1.0 / (self.head_size as f64).sqrt();
        let q = split(l.query.forward(x)?.affine(scale, 0.0)?)?;
        let k = split(l.key.forward(x)?)?;
        let v = split(l.value.forward(x)?)?;
        let mut scores = q.matmul(&k.t()?)?;
        if let Some(b) = bias {
            scores = scores.broadcast_add(b)?;
        }
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((batch, tokens, hidden))?;
        let x = l
            .attention_norm
            .forward(&(l.attention_out.forward(&context)? + x)?)?;
        let inner = l.intermediate.forward(&x)?;
        let inner = match self.act {
            HiddenAct::Gelu => inner.apply_op1_no_bwd(&GeluErf)?,
            HiddenAct::GeluApproximate => inner.gelu()?,
            HiddenAct::Relu => inner.relu()?,
        };
        l.output_norm.forward(&(l.output.forward(&inner)? + x)?)
    }
}

/// Mean of the hidden states over real tokens, L2-normalised: `[batch, hidden]`.
pub(super) fn mean_pool_normalised(hidden: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    let mean = match mask {
        Some(m) => {
            let m = m.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&m)?.sum(1)?;
            let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
            summed.broadcast_div(&counts)?
        }
        None => hidden.mean(1)?,
    };
    let norm = mean
        .sqr()?
        .sum_keepdim(D::Minus1)?
        .sqrt()?
        .clamp(1e-12, f64::MAX)?;
    mean.broadcast_div(&norm)
}

mod gelu;
#[cfg(test)]
mod tests;
