//! The BERT encoder forward pass for sentence embeddings, on candle tensors and candle-nn layers,
//! leaner than `candle_transformers::models::bert` for inference: the query is scaled before
//! `Q·Kᵀ`, the attention softmax is candle's fused last-dimension kernel, and the padding mask
//! is added only when a batch has padding (texts are batched by length, so most have none).
//! Those three fewer full-size `[batch, heads, tokens, tokens]` tensors per layer are most of
//! its gain; `tests::matches_the_reference_implementation` holds it to the reference.

use candle_core::{D, DType, Module as _, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder, embedding, layer_norm};
use candle_transformers::models::bert::{Config, HiddenAct};

use super::small_matmul;

/// A dense layer: candle's matmul for batches, [`small_matmul`] for a few rows (a query).
struct Linear {
    inner: candle_nn::Linear,
    /// The weight `[out, in]`, contiguous.
    weight: Tensor,
    bias: Vec<f32>,
}

fn linear(input: usize, output: usize, vb: VarBuilder) -> Result<Linear> {
    Linear::new(candle_nn::linear(input, output, vb)?)
}

impl Linear {
    fn new(inner: candle_nn::Linear) -> Result<Self> {
        let weight = inner.weight().contiguous()?;
        let bias = match inner.bias() {
            Some(b) => b.to_vec1::<f32>()?,
            None => vec![0.0; weight.dim(0)?],
        };
        Ok(Self {
            inner,
            weight,
            bias,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (batch, tokens, input) = x.dims3()?;
        if batch * tokens > small_matmul::MAX_ROWS {
            return self.inner.forward(x);
        }
        let rows = x.flatten_all()?.to_vec1::<f32>()?;
        let (storage, layout) = self.weight.storage_and_layout();
        let candle_core::Storage::Cpu(cpu) = &*storage else {
            candle_core::bail!("the small-batch dense layer runs on the CPU only");
        };
        let weight = cpu
            .as_slice::<f32>()?
            .get(layout.start_offset()..layout.start_offset() + layout.shape().elem_count())
            .ok_or_else(|| {
                candle_core::Error::Msg("weight storage shorter than its shape".into())
            })?;
        let y = small_matmul::linear(&rows, weight, &self.bias, input).ok_or_else(|| {
            candle_core::Error::Msg(format!(
                "dense layer: weight of {} values for {input} inputs and {} outputs",
                weight.len(),
                self.bias.len()
            ))
        })?;
        drop(storage);
        Tensor::from_vec(y, (batch, tokens, self.bias.len()), x.device())
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

/// A loaded BERT encoder.
pub struct Encoder {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_size: usize,
    act: HiddenAct,
}

impl Encoder {
    /// Loads the weights (`embeddings.*`, `encoder.layer.N.*`, with or without a `bert.`
    /// prefix).
    pub fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
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
                Ok(Layer {
                    query: linear(h, h, a.pp("self.query"))?,
                    key: linear(h, h, a.pp("self.key"))?,
                    value: linear(h, h, a.pp("self.value"))?,
                    attention_out: linear(h, h, a.pp("output.dense"))?,
                    attention_norm: layer_norm(h, c.layer_norm_eps, a.pp("output.LayerNorm"))?,
                    intermediate: linear(h, c.intermediate_size, l.pp("intermediate.dense"))?,
                    output: linear(c.intermediate_size, h, l.pp("output.dense"))?,
                    output_norm: layer_norm(h, c.layer_norm_eps, l.pp("output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            words: embedding(c.vocab_size, h, e.pp("word_embeddings"))?,
            positions: embedding(c.max_position_embeddings, h, e.pp("position_embeddings"))?,
            token_types: embedding(c.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            embeddings_norm: layer_norm(h, c.layer_norm_eps, e.pp("LayerNorm"))?,
            layers,
            heads: c.num_attention_heads,
            head_size: h / c.num_attention_heads.max(1),
            act: c.hidden_act,
        })
    }

    /// Hidden states `[batch, tokens, hidden]` for token ids `[batch, tokens]` (token type 0);
    /// `mask` `[batch, tokens]` (1 = token, 0 = padding) when the batch has padding.
    pub fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (_, tokens) = ids.dims2()?;
        let positions = Tensor::arange(0u32, tokens as u32, ids.device())?;
        let types = Tensor::zeros(1, DType::U32, ids.device())?;
        let x = self
            .words
            .forward(ids)?
            .broadcast_add(&self.positions.forward(&positions)?)?
            .broadcast_add(&self.token_types.forward(&types)?)?;
        let mut x = self.embeddings_norm.forward(&x)?;
        // Padding gets a large negative score before the softmax: [batch, 1, 1, tokens].
        let bias = match mask {
            Some(m) => Some(
                ((m.to_dtype(DType::F32)? - 1.0)? * 1e9)?
                    .unsqueeze(1)?
                    .unsqueeze(1)?,
            ),
            None => None,
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

/// GELU with the exact (erf) form, evaluated with a rational approximation of erf that the
/// compiler vectorises (candle's scalar `erf` was ~8 % of embedding time). Max error of erf
/// 3.4e-7 in f32 (`tests::erf_is_accurate`), below the model's own f32 noise.
struct GeluErf;

/// erf(x) ≈ x·P(x²)/Q(x²) on [-4, 4] (|erf| > 1 − 2e-8 beyond); coefficients fitted here by
/// iterated weighted least squares (Sanathanan–Koerner) against the exact function.
const ERF_P: [f32; 7] = [
    std::f32::consts::FRAC_2_SQRT_PI,
    0.184_642_1,
    0.054_329_68,
    0.003_837_569_5,
    0.000_382_903_4,
    4.787_448e-6,
    -1.369_569_7e-8,
];
const ERF_Q: [f32; 6] = [
    1.0,
    0.496_968_37,
    0.113_803_53,
    0.015_450_294,
    0.001_309_471_5,
    6.407_6e-5,
];

fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let z = x * x;
    let p = ERF_P.iter().rev().fold(0.0f32, |acc, c| acc * z + c);
    let q = ERF_Q.iter().rev().fold(0.0f32, |acc, c| acc * z + c);
    x * p / q
}

fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

impl candle_core::CustomOp1 for GeluErf {
    fn name(&self) -> &'static str {
        "gelu-erf-rational"
    }

    fn cpu_fwd(
        &self,
        storage: &candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> Result<(candle_core::CpuStorage, candle_core::Shape)> {
        let (candle_core::CpuStorage::F32(data), Some((start, end))) =
            (storage, layout.contiguous_offsets())
        else {
            candle_core::bail!("gelu-erf-rational takes a contiguous f32 tensor");
        };
        let out: Vec<f32> = data[start..end].iter().map(|x| gelu_erf(*x)).collect();
        Ok((candle_core::CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// Mean of the hidden states over real tokens, L2-normalised: `[batch, hidden]`.
pub fn mean_pool_normalised(hidden: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use candle_core::Device;
    use candle_transformers::models::bert::BertModel;

    use super::*;

    fn pooled_reference(m: &BertModel, ids: &Tensor, mask: &Tensor) -> Vec<Vec<f32>> {
        let hidden = m
            .forward(ids, &ids.zeros_like().unwrap(), Some(mask))
            .unwrap();
        mean_pool_normalised(&hidden, Some(mask))
            .unwrap()
            .to_vec2()
            .unwrap()
    }

    #[test]
    fn a_few_rows_give_what_candles_linear_gives() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (96, 40), &dev).unwrap();
        let b = Tensor::randn(0f32, 1.0, 96, &dev).unwrap();
        let l = Linear::new(candle_nn::Linear::new(w, Some(b))).unwrap();
        let values = |t: Tensor| -> Vec<f32> { t.flatten_all().unwrap().to_vec1().unwrap() };
        // Largest difference between our layer and candle's on `x`, and the output length.
        let compare = |x: &Tensor| -> (f32, usize) {
            let ours = values(l.forward(x).unwrap());
            let theirs = values(l.inner.forward(x).unwrap());
            let worst = ours
                .iter()
                .zip(&theirs)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            (worst, ours.len())
        };
        // 7, 10 and 64 rows take small_matmul; 80 take candle's path on both sides.
        for (batch, tokens) in [(1, 7), (2, 5), (1, 64), (2, 40)] {
            let x = Tensor::randn(0f32, 1.0, (batch, tokens, 40), &dev).unwrap();
            let (worst, len) = compare(&x);
            assert_eq!(len, batch * tokens * 96);
            assert!(worst < 1e-4, "{batch}x{tokens}: off by {worst}");
        }
        // A non-contiguous input (a transposed view) is read in its logical order.
        let x = Tensor::randn(0f32, 1.0, (1, 40, 6), &dev)
            .unwrap()
            .transpose(1, 2)
            .unwrap();
        let (worst, len) = compare(&x);
        assert!(
            worst < 1e-4 && len == 6 * 96,
            "off by {worst}, {len} values"
        );
        // Inputs of the wrong width are an error, not a panic or a wrong answer.
        let bad = Tensor::randn(0f32, 1.0, (1, 3, 39), &dev).unwrap();
        let e = l.forward(&bad).unwrap_err();
        assert!(e.to_string().contains("39 inputs"), "{e}");
    }

    #[test]
    fn erf_is_accurate() {
        // Against the Maclaurin series of erf summed in f64 (accurate to ~1e-9 on [-4, 4]):
        // erf(x) = 2/√π Σ (−1)^n x^(2n+1) / (n! (2n+1)).
        fn exact(x: f64) -> f64 {
            let (mut term, mut sum, mut n) = (x, x, 0.0);
            while term.abs() > 1e-17 * sum.abs().max(1e-300) {
                n += 1.0;
                term *= -x * x / n;
                sum += term / (2.0 * n + 1.0);
                if n > 200.0 {
                    break;
                }
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        }
        let mut worst = 0.0f64;
        for i in -4000..=4000 {
            let x = f64::from(i) / 1000.0;
            worst = worst.max((f64::from(erf(x as f32)) - exact(x)).abs());
        }
        assert!(worst < 5e-7, "max error {worst}");
        assert!((erf(9.0) - 1.0).abs() < 1e-6 && (erf(-9.0) + 1.0).abs() < 1e-6);
        assert_eq!(gelu_erf(0.0), 0.0);
    }

    #[test]
    fn matches_the_reference_implementation() {
        let dir = PathBuf::from(
            std::env::var("PLOKE_EMBED_MODEL").expect("PLOKE_EMBED_MODEL names the model"),
        );
        let config: Config =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu).unwrap();
        let ours = Encoder::load(vb.clone(), &config).unwrap();
        let reference = BertModel::load(vb, &config).unwrap();

        // "[CLS] parse the config file [SEP]" and a shorter text padded to its length.
        let ids = Tensor::new(
            &[
                [101u32, 11968, 1996, 9530, 5371, 102],
                [101, 3191, 4275, 102, 0, 0],
            ],
            &Device::Cpu,
        )
        .unwrap();
        let mask = Tensor::new(&[[1u32, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], &Device::Cpu).unwrap();
        let want = pooled_reference(&reference, &ids, &mask);
        let got: Vec<Vec<f32>> =
            mean_pool_normalised(&ours.forward(&ids, Some(&mask)).unwrap(), Some(&mask))
                .unwrap()
                .to_vec2()
                .unwrap();
        // Without padding the mask is skipped: the first text alone.
        let one = ids.narrow(0, 0, 1).unwrap();
        let alone: Vec<Vec<f32>> = mean_pool_normalised(&ours.forward(&one, None).unwrap(), None)
            .unwrap()
            .to_vec2()
            .unwrap();
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5);
        assert_eq!(got.len(), 2);
        assert!(close(&got[0], &want[0]) && close(&got[1], &want[1]));
        assert!(close(&alone[0], &want[0]));
        // And the two texts are not the same vector.
        assert!(!close(&got[0], &got[1]));
    }
}
