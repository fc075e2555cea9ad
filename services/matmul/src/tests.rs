//! Tests of the packed layers: against a plain product in f64, across tile sizes, layouts
//! and instruction sets.

use super::*;

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

fn reference(x: &[f32], w: &[f32], bias: &[f32], k: usize) -> Vec<f32> {
    let outs = bias.len();
    let rows = x.len() / k;
    let mut y = vec![0f32; rows * outs];
    for r in 0..rows {
        for o in 0..outs {
            let dot: f64 = (0..k)
                .map(|i| f64::from(x[r * k + i]) * f64::from(w[o * k + i]))
                .sum();
            y[r * outs + o] = (dot + f64::from(bias[o])) as f32;
        }
    }
    y
}

/// The weights as the panels hold them: each rounded to the nearest bf16.
fn rounded(w: &[f32]) -> Vec<f32> {
    w.iter().map(|v| bf16::from_f32(*v).to_f32()).collect()
}

#[test]
fn bf16_weights_stay_within_their_rounding_of_the_f32_product() {
    // A bf16 keeps 8 bits of mantissa: each weight moves by at most 2^-9 of itself, so a
    // sum of k products moves by at most 2^-9 of the sum of their magnitudes.
    let (k, outs, rows) = (384, 70, 16);
    let x = values(rows * k, 1);
    let w = values(outs * k, 2);
    let b = values(outs, 3);
    let got = PackedLinear::new(&w, &b, k).unwrap().forward(&x).unwrap();
    let want = reference(&x, &w, &b, k);
    for r in 0..rows {
        for o in 0..outs {
            let magnitude: f32 = (0..k).map(|i| (x[r * k + i] * w[o * k + i]).abs()).sum();
            let off = (got[r * outs + o] - want[r * outs + o]).abs();
            assert!(
                off <= magnitude / 512.0 + 1e-4,
                "row {r} out {o}: off by {off} of {magnitude}"
            );
        }
    }
    // Not the f32 product itself: the rounding is there to see.
    assert_ne!(got, want);
    // Weights that are bf16 already give the f32 product.
    let exact = rounded(&w);
    let got = PackedLinear::new(&exact, &b, k)
        .unwrap()
        .forward(&x)
        .unwrap();
    let want = reference(&x, &exact, &b, k);
    let worst = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst < 1e-4, "off by {worst}");
}

/// The instruction sets this machine can run: what `pulp` picks, plain code, and on x86-64
/// AVX2+FMA and AVX-512 when the CPU has them.
type Runner = Box<dyn Fn(Task<'_>) + Sync>;

fn instruction_sets() -> Vec<(&'static str, Runner)> {
    let mut sets: Vec<(&'static str, Runner)> = vec![
        ("dispatched", Box::new(|t| pulp::Arch::new().dispatch(t))),
        ("scalar", Box::new(|t| t.with_simd(pulp::Scalar::new()))),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(v3) = pulp::x86::V3::try_new() {
            sets.push(("avx2", Box::new(move |t| Simd::vectorize(v3, t))));
        }
        if let Some(v4) = pulp::x86::V4::try_new() {
            sets.push(("avx512", Box::new(move |t| Simd::vectorize(v4, t))));
        }
    }
    sets
}

#[test]
fn equals_the_plain_product_for_every_edge() {
    // Inputs shorter and longer than a pass (KC), a multiple of it or not; outputs that
    // fill panels and tasks or leave some over; rows in every tile size, one block of rows
    // and more than one (ROW_BLOCK).
    let shapes = [
        (384, 384),
        (600, 131),
        (512, 64),
        (16, 4),
        (5, 3),
        (1, 70),
        (3, 65),
    ];
    for (name, run) in instruction_sets() {
        for ((k, outs), tiles) in shapes
            .into_iter()
            .flat_map(|s| [(s, &TILE_ROWS[..]), (s, &TILE_ROWS_AVX512[..])])
        {
            for (rows, layout) in [1, 2, 3, 4, 5, 6, 7, 9, 11, 13, 16, 17, 29, 96, 97, 200]
                .into_iter()
                .flat_map(|r| [(r, Layout::Pairs), (r, Layout::Wide)])
            {
                let x = values(rows * k, 1);
                let w = values(outs * k, 2);
                let b = values(outs, 3);
                let packed = PackedLinear::with_layout(&w, &b, k, layout, tiles).unwrap();
                let got = packed.forward_by(&x, tiles, &*run);
                let want = reference(&x, &rounded(&w), &b, k);
                assert_eq!(got.len(), rows * outs);
                let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
                let worst = got
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(
                    worst < 1e-5 * scale,
                    "{name} {layout:?} {tiles:?}: k {k} outs {outs} rows {rows}: off by {worst} of {scale}"
                );
            }
        }
    }
}

#[test]
fn tiles_of_any_size_give_the_same_bits() {
    // Each sum adds its products in input order whatever tile holds it, so the AVX-512
    // tiles change no embedding (rankings stay byte-identical across hosts' tile sizes).
    let (k, outs) = (384, 131);
    let w = values(outs * k, 2);
    let b = values(outs, 3);
    let sets = || instruction_sets().into_iter();
    let runs = sets()
        .map(|set| (set, Layout::Pairs))
        .chain(sets().map(|set| (set, Layout::Wide)));
    for ((name, run), layout) in runs {
        let packed = PackedLinear::with_layout(&w, &b, k, layout, &TILE_ROWS).unwrap();
        for rows in [1, 7, 16, 18, 97] {
            let x = values(rows * k, 1);
            let narrow = packed.forward_by(&x, &TILE_ROWS, &*run);
            let wide = packed.forward_by(&x, &TILE_ROWS_AVX512, &*run);
            assert!(
                narrow
                    .iter()
                    .zip(&wide)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name} {layout:?}: rows {rows}"
            );
        }
    }
}

#[test]
fn every_instruction_set_gives_the_same_bits() {
    // Fused multiply-adds in input order on every path, plain code included, and in both
    // layouts: a vector embedded on a host with AVX-512 (pairs) ranks as it would on one
    // without (wide).
    let (k, outs) = (383, 70);
    let w = values(outs * k, 2);
    let b = values(outs, 3);
    for rows in [1, 16, 97] {
        let x = values(rows * k, 1);
        let mut results: Vec<(String, Vec<u32>)> = Vec::new();
        for layout in [Layout::Pairs, Layout::Wide] {
            let packed = PackedLinear::with_layout(&w, &b, k, layout, &TILE_ROWS).unwrap();
            for (name, run) in instruction_sets() {
                let y = packed.forward_by(&x, &TILE_ROWS, &*run);
                let bits = y.iter().map(|v| v.to_bits()).collect();
                results.push((format!("{name} {layout:?}"), bits));
            }
        }
        assert!(results.len() >= 4);
        for (name, bits) in &results[1..] {
            assert!(
                *bits == results[0].1,
                "{name} against {}: rows {rows}",
                results[0].0
            );
        }
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn the_vector_paths_are_tested_where_the_cpu_has_them() {
    // pulp's AVX2 level (x86-64-v3) also wants BMI1/2, LZCNT and POPCNT.
    use std::arch::is_x86_feature_detected as has;
    let v3 = has!("avx2")
        && has!("fma")
        && has!("bmi1")
        && has!("bmi2")
        && has!("lzcnt")
        && has!("popcnt");
    let v4 = v3 && has!("avx512f") && has!("avx512bw") && has!("avx512cd") && has!("avx512dq");
    let names: Vec<&str> = instruction_sets().iter().map(|(n, _)| *n).collect();
    assert_eq!(
        (names.contains(&"avx2"), names.contains(&"avx512")),
        (v3, v4)
    );
    // Pairs where AVX-512 runs, the wide layout elsewhere.
    let want = if v4 {
        (Layout::Pairs, &TILE_ROWS_AVX512[..])
    } else {
        (Layout::Wide, &TILE_ROWS[..])
    };
    assert_eq!(for_this_cpu(), want);
}

#[test]
fn lengths_that_do_not_agree_are_refused() {
    let packed = PackedLinear::new(&[1.0, 2.0], &[0.5], 2).unwrap();
    assert_eq!((packed.inputs(), packed.outs()), (2, 1));
    assert_eq!(packed.forward(&[]), Some(vec![]));
    assert_eq!(packed.forward(&[1.0, 1.0]), Some(vec![3.5]));
    // An input row cut short.
    assert_eq!(packed.forward(&[1.0, 1.0, 1.0]), None);
    // k of zero, a weight with a row more or less than the bias.
    assert!(PackedLinear::new(&[1.0], &[0.0], 0).is_none());
    assert!(PackedLinear::new(&[1.0, 2.0, 3.0, 4.0], &[0.0], 2).is_none());
    assert!(PackedLinear::new(&[1.0, 2.0], &[0.0, 0.0], 2).is_none());
}
