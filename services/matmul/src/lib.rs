//! The encoder's dense layers (`y = x·Wᵀ + b`), for a query's few rows and for indexing batches
//! alike, from weights packed once at load: the weight `W` (`outs × k`) is laid out as panels of
//! [`PANEL`] outputs, each panel `k × PANEL` (for every input feature, the weights of the
//! panel's outputs side by side). A product holds a tile of rows × [`PANEL`] outputs in
//! registers and adds `x[r][i] · panel[i]` for every input feature `i`: one broadcast and one
//! fused multiply-add per vector, no horizontal sums and no packing per call (candle's matmul
//! packs both operands on every call, which for a query's 16 rows costs as much as the
//! product). Vectorised with `pulp` (AVX-512, AVX2+FMA or plain code, picked when it runs).

use pulp::{Simd, WithSimd};
use rayon::prelude::*;

/// Rows multiplied per pass over the weights: their tiles (96 × 256 inputs, 96 KiB) stay in
/// L2 while every panel passes (docs/PERFORMANCE.md: as fast as candle's matmul on batches of
/// thousands of rows, 1.2–1.9× faster on a query's few).
const ROW_BLOCK: usize = 96;

/// Outputs per panel: two AVX2 vectors, one AVX-512 vector.
const PANEL: usize = 16;

/// Panels one parallel task computes.
const PANELS_PER_TASK: usize = 4;

/// Products of at most this many rows (one text's: a query of up to 128 tokens) run on the
/// calling thread. Split over two threads, a query's 40–200 µs products spent a fifth of its
/// CPU on waking and parking them (perf, docs/PERFORMANCE.md); queries in flight together
/// still use every core, each on its caller's thread. Batches of texts are split.
const SERIAL_ROWS: usize = 128;

/// A weight packed into panels, with its bias.
pub struct PackedLinear {
    /// `panels × k × PANEL`; outputs past `outs` in the last panel are zero.
    panels: Vec<f32>,
    bias: Vec<f32>,
    k: usize,
    /// Row tiles for the instruction set this CPU runs (picked once, when packed).
    tiles: &'static [usize],
}

impl PackedLinear {
    /// Packs `weight` (`outs × k`, row-major) and `bias` (`outs`). `None` when the lengths do
    /// not agree or `k` is zero.
    pub fn new(weight: &[f32], bias: &[f32], k: usize) -> Option<Self> {
        let outs = bias.len();
        if k == 0 || weight.len() != outs * k {
            return None;
        }
        let count = outs.div_ceil(PANEL);
        let mut panels = vec![0f32; count * k * PANEL];
        for (o, row) in weight.chunks_exact(k).enumerate() {
            let panel = &mut panels[(o / PANEL) * k * PANEL..][..k * PANEL];
            for (i, w) in row.iter().enumerate() {
                panel[i * PANEL + o % PANEL] = *w;
            }
        }
        Some(Self {
            panels,
            bias: bias.to_vec(),
            k,
            tiles: tile_rows(),
        })
    }

    /// Input features.
    pub fn inputs(&self) -> usize {
        self.k
    }

    /// Output features.
    pub fn outs(&self) -> usize {
        self.bias.len()
    }

    /// `x` (`rows × k`, row-major) times the weight transposed, plus the bias: `rows × outs`,
    /// row-major. Groups of panels are spread over the current rayon pool when `x` has more
    /// than [`SERIAL_ROWS`] rows. `None` when `x`'s length is not a multiple of `k`.
    pub fn forward(&self, x: &[f32]) -> Option<Vec<f32>> {
        if !x.len().is_multiple_of(self.k) {
            return None;
        }
        let arch = pulp::Arch::new();
        Some(self.forward_by(x, self.tiles, &|task| arch.dispatch(task)))
    }

    /// [`PackedLinear::forward`] with rows in tiles of `tiles` rows (largest first, ending
    /// with one) and each task computed by `run` (the instruction set picked at run time, or
    /// one chosen by a test).
    fn forward_by(&self, x: &[f32], tiles: &[usize], run: &(dyn Fn(Task<'_>) + Sync)) -> Vec<f32> {
        let k = self.k;
        let rows = x.len() / k;
        let outs = self.outs();
        let mut y = vec![0f32; rows * outs];
        if rows == 0 || outs == 0 {
            return y;
        }
        let width = PANELS_PER_TASK * PANEL;
        // Rows a block at a time (their tiles stay in L2 while every panel passes), panels a
        // group at a time: one parallel task per block and group, each filling `block rows ×
        // width` of its own, copied into `y`'s columns after.
        let split = |block: &[f32]| RowTile::split(block, k, tiles);
        let groups: Vec<&[f32]> = self.panels.chunks(PANELS_PER_TASK * k * PANEL).collect();
        let compute = |blocks: &[Vec<RowTile>], task: usize| {
            let tiles = &blocks[task / groups.len()];
            let rows = tiles.iter().map(|t| t.size).sum::<usize>();
            let mut out = vec![0f32; rows * width];
            run(Task {
                tiles,
                panels: groups[task % groups.len()],
                k,
                out: &mut out,
                width,
            });
            out
        };
        let parts: Vec<Vec<f32>> = if rows <= SERIAL_ROWS {
            let blocks: Vec<Vec<RowTile>> = x.chunks(ROW_BLOCK * k).map(split).collect();
            (0..blocks.len() * groups.len())
                .map(|task| compute(&blocks, task))
                .collect()
        } else {
            let blocks: Vec<Vec<RowTile>> = x.par_chunks(ROW_BLOCK * k).map(split).collect();
            (0..blocks.len() * groups.len())
                .into_par_iter()
                .map(|task| compute(&blocks, task))
                .collect()
        };
        for (task, part) in parts.iter().enumerate() {
            let first_row = (task / groups.len()) * ROW_BLOCK;
            let first = (task % groups.len()) * width;
            let cols = width.min(outs - first);
            let bias = &self.bias[first..first + cols];
            let rows = part.len() / width;
            let y = &mut y[first_row * outs..][..rows * outs];
            for (dst, src) in y.chunks_exact_mut(outs).zip(part.chunks_exact(width)) {
                for ((d, s), b) in dst[first..first + cols].iter_mut().zip(src).zip(bias) {
                    *d = s + b;
                }
            }
        }
        y
    }
}

/// Rows the registers hold accumulators for: 6 × 2 vectors of 8 on AVX2 (12 of its 16
/// registers); the rows left over go in tiles of 4, 2 and 1.
const TILE_ROWS: [usize; 4] = [6, 4, 2, 1];

/// AVX-512 has 32 registers and a panel is one vector: 16 rows of sums (a whole query of 16
/// tokens in one tile) keep both multiply-add units busy where 6 wait on each sum's latency
/// (docs/PERFORMANCE.md). Sums add in the same order whatever the tile, so results are alike.
const TILE_ROWS_AVX512: [usize; 7] = [16, 12, 8, 6, 4, 2, 1];

/// The tile sizes for the instruction set `pulp` picks on this CPU.
fn tile_rows() -> &'static [usize] {
    #[cfg(target_arch = "x86_64")]
    if pulp::x86::V4::try_new().is_some() {
        return &TILE_ROWS_AVX512;
    }
    &TILE_ROWS
}

/// Input features multiplied per pass over a panel's rows: a panel's `KC × PANEL` weights
/// (16 KiB) stay in L1 while every row tile takes them.
const KC: usize = 256;

/// Consecutive input rows, interleaved: `x[i * size + j]` is row `first + j`'s feature `i`.
struct RowTile {
    first: usize,
    size: usize,
    x: Vec<f32>,
}

impl RowTile {
    fn split(x: &[f32], k: usize, sizes: &[usize]) -> Vec<RowTile> {
        let rows = x.len() / k;
        let mut tiles = Vec::new();
        let mut first = 0;
        while first < rows {
            let size = sizes
                .iter()
                .copied()
                .find(|n| first + n <= rows)
                .unwrap_or(1);
            let mut t = vec![0f32; k * size];
            for (j, row) in x[first * k..(first + size) * k].chunks_exact(k).enumerate() {
                for (i, v) in row.iter().enumerate() {
                    t[i * size + j] = *v;
                }
            }
            tiles.push(RowTile { first, size, x: t });
            first += size;
        }
        tiles
    }
}

/// One group of panels for every row: `out` is `rows × width`.
struct Task<'a> {
    tiles: &'a [RowTile],
    panels: &'a [f32],
    k: usize,
    out: &'a mut [f32],
    width: usize,
}

impl WithSimd for Task<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(mut self, simd: S) {
        let k = self.k;
        let tiles = self.tiles;
        for (p, panel) in self.panels.chunks_exact(k * PANEL).enumerate() {
            for (c, weights) in panel.chunks(KC * PANEL).enumerate() {
                let from = c * KC;
                let to = from + weights.len() / PANEL;
                for t in tiles {
                    let x = &t.x[from * t.size..to * t.size];
                    match t.size {
                        16 => self.tile::<S, 16>(simd, weights, x, t.first, p, c == 0),
                        12 => self.tile::<S, 12>(simd, weights, x, t.first, p, c == 0),
                        8 => self.tile::<S, 8>(simd, weights, x, t.first, p, c == 0),
                        6 => self.tile::<S, 6>(simd, weights, x, t.first, p, c == 0),
                        4 => self.tile::<S, 4>(simd, weights, x, t.first, p, c == 0),
                        2 => self.tile::<S, 2>(simd, weights, x, t.first, p, c == 0),
                        _ => self.tile::<S, 1>(simd, weights, x, t.first, p, c == 0),
                    }
                }
            }
        }
    }
}

impl Task<'_> {
    /// Adds `R` rows (interleaved) times a run of one panel's weights to the sums of rows
    /// `first..first + R`, columns of panel `p` (starting them at zero when `fresh`). Plain
    /// loops only: a closure here would not inherit the SIMD target features and its
    /// intrinsics would become calls.
    #[inline(always)]
    fn tile<S: Simd, const R: usize>(
        &mut self,
        simd: S,
        weights: &[f32],
        x: &[f32],
        first: usize,
        p: usize,
        fresh: bool,
    ) {
        let lanes = std::mem::size_of::<S::f32s>() / std::mem::size_of::<f32>();
        let vectors = PANEL / lanes;
        let zero = simd.splat_f32s(0.0);
        let mut acc = [[zero; PANEL]; R];
        let at = |j: usize| (first + j) * self.width + p * PANEL;
        if !fresh {
            for (j, a) in acc.iter_mut().enumerate() {
                let (sums, _) = S::as_simd_f32s(&self.out[at(j)..at(j) + PANEL]);
                a[..vectors].copy_from_slice(&sums[..vectors]);
            }
        }
        let (wv, _) = S::as_simd_f32s(weights);
        for (w, xs) in wv.chunks_exact(vectors).zip(x.chunks_exact(R)) {
            for j in 0..R {
                let xv = simd.splat_f32s(xs[j]);
                for v in 0..vectors {
                    acc[j][v] = simd.mul_add_f32s(w[v], xv, acc[j][v]);
                }
            }
        }
        for (j, a) in acc.iter().enumerate() {
            let range = at(j)..at(j) + PANEL;
            let (sums, _) = S::as_mut_simd_f32s(&mut self.out[range]);
            sums[..vectors].copy_from_slice(&a[..vectors]);
        }
    }
}

#[cfg(test)]
mod tests {
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
                for rows in [1, 2, 3, 4, 5, 6, 7, 9, 11, 13, 16, 17, 29, 96, 97, 200] {
                    let x = values(rows * k, 1);
                    let w = values(outs * k, 2);
                    let b = values(outs, 3);
                    let packed = PackedLinear::new(&w, &b, k).unwrap();
                    let got = packed.forward_by(&x, tiles, &*run);
                    let want = reference(&x, &w, &b, k);
                    assert_eq!(got.len(), rows * outs);
                    let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
                    let worst = got
                        .iter()
                        .zip(&want)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0f32, f32::max);
                    assert!(
                        worst < 1e-5 * scale,
                        "{name} {tiles:?}: k {k} outs {outs} rows {rows}: off by {worst} of {scale}"
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
        let packed = PackedLinear::new(&w, &b, k).unwrap();
        for (name, run) in instruction_sets() {
            for rows in [1, 7, 16, 18, 97] {
                let x = values(rows * k, 1);
                let narrow = packed.forward_by(&x, &TILE_ROWS, &*run);
                let wide = packed.forward_by(&x, &TILE_ROWS_AVX512, &*run);
                assert!(
                    narrow
                        .iter()
                        .zip(&wide)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{name}: rows {rows}"
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
}
