//! Dense layers for a few rows (one query's tokens): `y = x·Wᵀ + b` as dot products of `x`'s
//! rows with `W`'s rows, both read in place. A general matrix product first copies (packs) the
//! transposed weight into its own layout on every call, which for a 19-token query cost as much
//! as the product itself; here each weight row streams through once and the few input rows stay
//! in L1. Vectorised with `pulp`, which picks AVX-512, AVX2+FMA or plain code when it runs.
//! Above [`MAX_ROWS`] rows the packing pays for itself and candle's matmul is used instead.

use pulp::{Simd, WithSimd};
use rayon::prelude::*;

/// Rows up to which [`linear`] is faster than candle's matmul here, on a 2-thread pool (the
/// three layer shapes of MiniLM: 0.4–0.7x candle's time at 19 rows, even at 64–96, slower
/// beyond; docs/PERFORMANCE.md).
pub const MAX_ROWS: usize = 64;

/// Output features one parallel task computes.
const BLOCK: usize = 64;

/// `x` (`rows × k`, row-major) times `weight` (`outs × k`, row-major) transposed, plus `bias`
/// (`outs`): `rows × outs`, row-major. Output blocks are spread over the current rayon pool.
/// `None` when the lengths do not agree with `k` and `bias.len()`.
pub fn linear(x: &[f32], weight: &[f32], bias: &[f32], k: usize) -> Option<Vec<f32>> {
    if k == 0 || !x.len().is_multiple_of(k) || weight.len() != bias.len() * k {
        return None;
    }
    let arch = pulp::Arch::new();
    Some(linear_by(x, weight, bias, k, &|block| arch.dispatch(block)))
}

/// [`linear`] with each block computed by `run` (the instruction set picked at run time, or one
/// chosen by a test).
fn linear_by(
    x: &[f32],
    weight: &[f32],
    bias: &[f32],
    k: usize,
    run: &(dyn Fn(Block<'_>) + Sync),
) -> Vec<f32> {
    let rows = x.len() / k;
    let outs = bias.len();
    // Computed transposed (`outs × rows`) so each task writes one contiguous block.
    let mut yt = vec![0f32; outs * rows];
    if rows == 0 {
        return yt;
    }
    yt.par_chunks_mut(BLOCK * rows)
        .zip(weight.par_chunks(BLOCK * k))
        .zip(bias.par_chunks(BLOCK))
        .for_each(|((y, w), b)| {
            run(Block {
                x,
                w,
                bias: b,
                y,
                k,
            });
        });
    let mut y = vec![0f32; rows * outs];
    for (o, column) in yt.chunks_exact(rows).enumerate() {
        for (r, v) in column.iter().enumerate() {
            y[r * outs + o] = *v;
        }
    }
    y
}

/// One block of output features for every row.
struct Block<'a> {
    x: &'a [f32],
    w: &'a [f32],
    bias: &'a [f32],
    /// `outs × rows` for this block.
    y: &'a mut [f32],
    k: usize,
}

impl WithSimd for Block<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(mut self, simd: S) {
        let k = self.k;
        let rows = self.x.len() / k;
        let x: Vec<&[f32]> = self.x.chunks_exact(k).collect();
        let w: Vec<&[f32]> = self.w.chunks_exact(k).collect();
        let mut o = 0;
        // Tiles of 4 weight rows × 4 input rows (16 accumulators) where the registers hold
        // them (AVX-512 has 32), × 2 input rows otherwise (AVX2 has 16), then the edges.
        let wide = std::mem::size_of::<S::f32s>() >= 64;
        while o + 4 <= w.len() {
            let wo = [w[o], w[o + 1], w[o + 2], w[o + 3]];
            let mut r = 0;
            while wide && r + 4 <= rows {
                let d = tile(simd, &wo, &[x[r], x[r + 1], x[r + 2], x[r + 3]]);
                self.store(o, r, &d);
                r += 4;
            }
            while r + 2 <= rows {
                self.store(o, r, &tile(simd, &wo, &[x[r], x[r + 1]]));
                r += 2;
            }
            if r < rows {
                self.store(o, r, &tile(simd, &wo, &[x[r]]));
            }
            o += 4;
        }
        while o < w.len() {
            for (r, xr) in x.iter().enumerate() {
                let d = tile(simd, &[w[o]], &[xr]);
                self.store(o, r, &d);
            }
            o += 1;
        }
    }
}

impl Block<'_> {
    /// Writes `d[i][j]` (weight row `o + i`, input row `r + j`) plus the bias.
    #[inline(always)]
    fn store<const R: usize, const C: usize>(&mut self, o: usize, r: usize, d: &[[f32; C]; R]) {
        let rows = self.x.len() / self.k;
        for (i, line) in d.iter().enumerate() {
            let b = self.bias[o + i];
            for (j, v) in line.iter().enumerate() {
                self.y[(o + i) * rows + r + j] = v + b;
            }
        }
    }
}

/// The `R × C` dot products of `w`'s and `x`'s rows (all of one length). Plain loops only:
/// a closure here would not inherit the SIMD target features and its intrinsics would become
/// calls.
#[inline(always)]
fn tile<S: Simd, const R: usize, const C: usize>(
    simd: S,
    w: &[&[f32]; R],
    x: &[&[f32]; C],
) -> [[f32; C]; R] {
    let zero = simd.splat_f32s(0.0);
    let mut ws: [&[S::f32s]; R] = [&[]; R];
    let mut wt: [&[f32]; R] = [&[]; R];
    for i in 0..R {
        (ws[i], wt[i]) = S::as_simd_f32s(w[i]);
    }
    let mut xs: [&[S::f32s]; C] = [&[]; C];
    let mut xt: [&[f32]; C] = [&[]; C];
    for j in 0..C {
        (xs[j], xt[j]) = S::as_simd_f32s(x[j]);
    }
    let steps = ws.iter().chain(&xs).map(|v| v.len()).min().unwrap_or(0);
    let mut acc = [[zero; C]; R];
    for step in 0..steps {
        let mut wv = [zero; R];
        for i in 0..R {
            wv[i] = ws[i][step];
        }
        for j in 0..C {
            let xv = xs[j][step];
            for i in 0..R {
                acc[i][j] = simd.mul_add_f32s(wv[i], xv, acc[i][j]);
            }
        }
    }
    let mut out = [[0f32; C]; R];
    for i in 0..R {
        for j in 0..C {
            let mut sum = simd.reduce_sum_f32s(acc[i][j]);
            for t in 0..wt[i].len().min(xt[j].len()) {
                sum += wt[i][t] * xt[j][t];
            }
            out[i][j] = sum;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0 - 1.0)
            .collect()
    }

    /// The instruction sets this machine can run: what `pulp` picks, plain code, and on x86-64
    /// AVX2+FMA and AVX-512 when the CPU has them.
    type Runner = Box<dyn Fn(Block<'_>) + Sync>;

    fn instruction_sets() -> Vec<(&'static str, Runner)> {
        let mut sets: Vec<(&'static str, Runner)> = vec![
            ("dispatched", Box::new(|b| pulp::Arch::new().dispatch(b))),
            ("scalar", Box::new(|b| b.with_simd(pulp::Scalar::new()))),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(v3) = pulp::x86::V3::try_new() {
                sets.push(("avx2", Box::new(move |b| Simd::vectorize(v3, b))));
            }
            if let Some(v4) = pulp::x86::V4::try_new() {
                sets.push(("avx512", Box::new(move |b| Simd::vectorize(v4, b))));
            }
        }
        sets
    }

    #[test]
    fn equals_the_plain_product_for_every_edge() {
        // Lengths that are and are not multiples of the vector width; weight rows that fill
        // tiles of 4 and leave 1–3 over; 1 to 9 input rows; more than one parallel block.
        for (name, run) in instruction_sets() {
            for (k, outs) in [(384, 384), (37, 131), (16, 4), (5, 3), (1, 70)] {
                for rows in [1, 2, 3, 4, 5, 6, 7, 9] {
                    let x = values(rows * k, 1);
                    let w = values(outs * k, 2);
                    let b = values(outs, 3);
                    let got = linear_by(&x, &w, &b, k, &*run);
                    let want = reference(&x, &w, &b, k);
                    assert_eq!(got.len(), rows * outs);
                    let worst = got
                        .iter()
                        .zip(&want)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0f32, f32::max);
                    assert!(
                        worst < 1e-4,
                        "{name}: k {k} outs {outs} rows {rows}: off by {worst}"
                    );
                }
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
    }

    #[test]
    fn lengths_that_do_not_agree_are_refused() {
        assert_eq!(linear(&[], &[1.0, 2.0], &[0.5], 2), Some(vec![]));
        assert_eq!(linear(&[1.0, 1.0], &[1.0, 2.0], &[0.5], 2), Some(vec![3.5]));
        // k of zero, an input row cut short, a weight with a row more or less than the bias.
        assert_eq!(linear(&[1.0], &[1.0], &[0.0], 0), None);
        assert_eq!(linear(&[1.0, 1.0, 1.0], &[1.0, 2.0], &[0.0], 2), None);
        assert_eq!(linear(&[1.0, 1.0], &[1.0, 2.0, 3.0, 4.0], &[0.0], 2), None);
        assert_eq!(linear(&[1.0, 1.0], &[1.0, 2.0], &[0.0, 0.0], 2), None);
    }
}
