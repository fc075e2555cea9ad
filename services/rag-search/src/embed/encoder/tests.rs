//! Tests of the encoder: against candle's BERT, an independent MPNet, and its parts.

use std::path::PathBuf;

use candle_core::Device;
use candle_transformers::models::bert::BertModel;

use super::gelu::{erf, gelu_erf};
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

/// `t` with each value rounded to the nearest bf16, as the dense layers hold their weights.
fn bf16_rounded(t: &Tensor) -> Tensor {
    t.to_dtype(DType::BF16)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn a_dense_layer_gives_what_candles_linear_gives() {
    let dev = Device::Cpu;
    let w = Tensor::randn(0f32, 1.0, (96, 40), &dev).unwrap();
    let b = Tensor::randn(0f32, 1.0, 96, &dev).unwrap();
    let tensors = std::collections::HashMap::from([
        ("weight".to_owned(), w.clone()),
        ("bias".to_owned(), b.clone()),
    ]);
    let l = linear(40, 96, VarBuilder::from_tensors(tensors, DType::F32, &dev)).unwrap();
    // The packed layer holds its weight in bf16 (ploke_matmul): the reference gets the same.
    let reference = candle_nn::Linear::new(bf16_rounded(&w), Some(b));
    let values = |t: Tensor| -> Vec<f32> { t.flatten_all().unwrap().to_vec1().unwrap() };
    // Largest difference between our layer and candle's on `x`, and the output length.
    let compare = |x: &Tensor| -> (f32, usize) {
        let ours = values(l.forward(x).unwrap());
        let theirs = values(reference.forward(x).unwrap());
        let worst = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        (worst, ours.len())
    };
    // A query's few rows, one block of rows, and rows over two blocks (96 a pass).
    for (batch, tokens) in [(1, 7), (2, 5), (1, 64), (2, 40), (3, 70)] {
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
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let config: Config = serde_json::from_str(&text).unwrap();
    let tensors =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    let vb = VarBuilder::from_tensors(tensors.clone(), DType::F32, &Device::Cpu);
    let ours = Encoder::load(vb.clone(), &config).unwrap();
    // The reference with the dense layers' weights in bf16, as ours holds them (embedding
    // tables and layer norms stay f32 in both).
    let dense: std::collections::HashMap<String, Tensor> = tensors
        .into_iter()
        .map(|(name, t)| {
            let is_dense = name.ends_with(".weight")
                && t.rank() == 2
                && !name.contains("embeddings")
                && !name.contains("LayerNorm");
            let t = if is_dense { bf16_rounded(&t) } else { t };
            (name, t)
        })
        .collect();
    let config_json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let reference = BertModel::load(
        VarBuilder::from_tensors(dense, DType::F32, &Device::Cpu),
        &serde_json::from_value(config_json.clone()).unwrap(),
    )
    .unwrap();
    let exact = BertModel::load(vb, &serde_json::from_value(config_json).unwrap()).unwrap();

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
    // What bf16 weights cost against the model's f32 ones: a direction within 0.9995.
    let f32_model = pooled_reference(&exact, &ids, &mask);
    for (ours, theirs) in got.iter().zip(&f32_model) {
        let c = cosine(ours, theirs);
        assert!(c > 0.9995 && !close(ours, theirs), "cosine {c}");
    }
}

/// A two-layer MPNet of 8 dimensions whose every weight is `sin(0.37·i + seed)/2` (layer
/// norms' weights `1 + 0.2·that`, the relative bias 6 times it, to make positions matter),
/// each tensor's seed 1.3 times its place in this list.
fn tiny_mpnet() -> Encoder {
    let dev = Device::Cpu;
    let mut names: Vec<(String, Vec<usize>)> = vec![
        ("embeddings.word_embeddings.weight".into(), vec![20, 8]),
        ("embeddings.position_embeddings.weight".into(), vec![40, 8]),
        ("embeddings.LayerNorm.weight".into(), vec![8]),
        ("embeddings.LayerNorm.bias".into(), vec![8]),
    ];
    for l in 0..2 {
        let p = format!("encoder.layer.{l}.");
        for n in ["q", "k", "v", "o"] {
            names.push((format!("{p}attention.attn.{n}.weight"), vec![8, 8]));
            names.push((format!("{p}attention.attn.{n}.bias"), vec![8]));
        }
        for (n, shape) in [
            ("attention.LayerNorm.weight", vec![8]),
            ("attention.LayerNorm.bias", vec![8]),
            ("intermediate.dense.weight", vec![16, 8]),
            ("intermediate.dense.bias", vec![16]),
            ("output.dense.weight", vec![8, 16]),
            ("output.dense.bias", vec![8]),
            ("output.LayerNorm.weight", vec![8]),
            ("output.LayerNorm.bias", vec![8]),
        ] {
            names.push((format!("{p}{n}"), shape));
        }
    }
    names.push(("encoder.relative_attention_bias.weight".into(), vec![32, 2]));
    let tensors = names
        .iter()
        .enumerate()
        .map(|(place, (name, shape))| {
            let seed = place as f64 * 1.3;
            let n: usize = shape.iter().product();
            let values: Vec<f32> = (0..n)
                .map(|i| {
                    let x = ((0.37 * i as f64 + seed).sin() * 0.5) as f32;
                    if name.contains("LayerNorm.weight") {
                        1.0 + 0.2 * x
                    } else if name.contains("relative_attention_bias") {
                        6.0 * x
                    } else {
                        x
                    }
                })
                .collect();
            let t = Tensor::from_vec(values, shape.as_slice(), &dev).unwrap();
            (name.clone(), t)
        })
        .collect();
    let vb = VarBuilder::from_tensors(tensors, DType::F32, &dev);
    let config: Config = serde_json::from_value(serde_json::json!({
        "model_type": "mpnet", "vocab_size": 20, "hidden_size": 8, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu",
        "max_position_embeddings": 40, "layer_norm_eps": 1e-5, "pad_token_id": 1,
        "relative_attention_num_buckets": 32
    }))
    .unwrap();
    Encoder::load(vb, &config).unwrap()
}

#[test]
fn mpnet_matches_an_independent_implementation() {
    // Expected vectors from `mpnet_reference.py` beside this file: the reference MPNet forward
    // pass (positions from the padding id + 1, T5-style relative buckets, post-norm layers,
    // mean pooling) in f64, plain Python, on the same weights with the dense layers' rounded
    // to bf16 as ploke_matmul holds them (`--f32` gives the f32 weights' vectors, 0.015785 …
    // and -0.071411 …). With the relative bias's direction reversed the first value would be
    // -0.0714; with positions from 0, 0.0284.
    let ids: Vec<u32> = std::iter::once(0)
        .chain((0..22).map(|i| (3 * i + 5) % 20))
        .chain(std::iter::once(2))
        .collect();
    let long = [
        0.016595, 0.029933, 0.427471, 0.114760, 0.494141, -0.167691, 0.156138, -0.711514,
    ];
    let short = [
        -0.070674, -0.016736, 0.390041, 0.113367, 0.538484, -0.124143, 0.245547, -0.681228,
    ];
    let m = tiny_mpnet();
    let dev = Device::Cpu;
    let pooled = |ids: &Tensor, mask: Option<&Tensor>| -> Vec<Vec<f32>> {
        mean_pool_normalised(&m.forward(ids, mask).unwrap(), mask)
            .unwrap()
            .to_vec2()
            .unwrap()
    };
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4);
    let alone = pooled(
        &Tensor::new(ids.as_slice(), &dev)
            .unwrap()
            .unsqueeze(0)
            .unwrap(),
        None,
    );
    assert!(close(&alone[0], &long), "{:?}", alone[0]);
    // In one batch with its first six tokens, padded: each row as alone.
    let mut rows = ids.clone();
    rows.extend(ids[..6].iter().copied().chain(std::iter::repeat_n(1, 18)));
    let mask: Vec<u32> = std::iter::repeat_n(1, 30)
        .chain(std::iter::repeat_n(0, 18))
        .collect();
    let both = pooled(
        &Tensor::from_vec(rows, (2, 24), &dev).unwrap(),
        Some(&Tensor::from_vec(mask, (2, 24), &dev).unwrap()),
    );
    assert!(close(&both[0], &long), "{:?}", both[0]);
    assert!(close(&both[1], &short), "{:?}", both[1]);
}

#[test]
fn relative_buckets_are_the_references() {
    let m = tiny_mpnet();
    let Some(r) = &m.relative else {
        panic!("an MPNet has a relative bias")
    };
    // key − query → bucket, from the reference's formula.
    let want = [
        (0, 0),
        (1, 17),
        (-1, 1),
        (7, 23),
        (-7, 7),
        (8, 24),
        (-8, 8),
        (15, 25),
        (16, 26),
        (-16, 10),
        (20, 26),
        (-20, 10),
        (31, 27),
        (32, 28),
        (64, 30),
        (100, 31),
        (127, 31),
        (128, 31),
        (200, 31),
    ];
    let got: Vec<(i64, u32)> = want
        .iter()
        .map(|(d, _)| {
            let (q, k) = if *d >= 0 {
                (0, *d as usize)
            } else {
                ((-d) as usize, 0)
            };
            (*d, r.bucket(q, k))
        })
        .collect();
    assert_eq!(got, want.iter().map(|(d, b)| (*d, *b)).collect::<Vec<_>>());
}

#[test]
fn an_unknown_model_type_is_a_clear_error() {
    let config: Config = serde_json::from_value(serde_json::json!({
        "model_type": "roberta", "vocab_size": 20, "hidden_size": 8, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu",
        "max_position_embeddings": 40
    }))
    .unwrap();
    let vb = VarBuilder::zeros(DType::F32, &Device::Cpu);
    let e = Encoder::load(vb, &config).err().map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("model type \"roberta\" is not supported (bert, mpnet)")
    );
}
