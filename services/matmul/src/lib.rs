//! The encoder's dense layers (`y = x·Wᵀ + b`), for a query's few rows and for indexing batches
//! alike, from weights rounded to bf16 and packed once at load into panels of [`PANEL`]
//! outputs (for every input feature, the weights of the panel's outputs side by side). A
//! product holds a tile of rows × [`PANEL`] outputs in registers and adds `x[r][i] · panel[i]`
//! for every input feature `i`: one broadcast and one fused multiply-add per vector, in f32,
//! no horizontal sums and no packing per call (candle's matmul packs both operands on every
//! call, which for a query's 16 rows costs as much as the product).
//!
//! On AVX-512 a panel holds two features' bf16 weights in each `u32` ([`Layout::Pairs`]), made
//! f32 in registers with an `and` and a shift: half the bytes of f32 to read for the same
//! arithmetic. Elsewhere the same bf16 values are kept one f32 each ([`Layout::Wide`]): AVX2's
//! 16 registers have no room for the conversion (docs/PERFORMANCE.md). Either way, on every
//! instruction set (`pulp` picks AVX-512, AVX2+FMA or plain code when it runs), each sum adds
//! the same products in the same order: the same bits on every host.

use half::bf16;
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

/// How a panel holds its bf16 weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Two input features per `u32`: the even feature's bf16 in the high half, the odd one's
    /// in the low half.
    Pairs,
    /// One f32 (a bf16 value) per input feature.
    Wide,
}

/// A weight's panels: `panels × rows × PANEL` words, a row per input feature (`Wide`) or pair
/// of features (`Pairs`, the last pair's odd weight zero when `k` is odd). Outputs past `outs`
/// in the last panel are zero.
enum Panels {
    Pairs(Vec<u32>),
    Wide(Vec<f32>),
}

/// A weight rounded to bf16 and packed into panels, with its bias (f32).
pub struct PackedLinear {
    panels: Panels,
    bias: Vec<f32>,
    k: usize,
    /// Row tiles for the instruction set this CPU runs (picked once, when packed).
    tiles: &'static [usize],
}

impl PackedLinear {
    /// Packs `weight` (`outs × k`, row-major) and `bias` (`outs`), each weight rounded to the
    /// nearest bf16. `None` when the lengths do not agree or `k` is zero.
    pub fn new(weight: &[f32], bias: &[f32], k: usize) -> Option<Self> {
        let (layout, tiles) = for_this_cpu();
        Self::with_layout(weight, bias, k, layout, tiles)
    }

    fn with_layout(
        weight: &[f32],
        bias: &[f32],
        k: usize,
        layout: Layout,
        tiles: &'static [usize],
    ) -> Option<Self> {
        let outs = bias.len();
        if k == 0 || weight.len() != outs * k {
            return None;
        }
        let count = outs.div_ceil(PANEL);
        let rounded = |w: f32| bf16::from_f32(w);
        let panels = match layout {
            Layout::Pairs => {
                let pairs = k.div_ceil(2);
                let mut panels = vec![0u32; count * pairs * PANEL];
                for (o, row) in weight.chunks_exact(k).enumerate() {
                    let panel = &mut panels[(o / PANEL) * pairs * PANEL..][..pairs * PANEL];
                    for (i, w) in row.iter().enumerate() {
                        let shift = if i % 2 == 0 { 16 } else { 0 };
                        panel[(i / 2) * PANEL + o % PANEL] |=
                            u32::from(rounded(*w).to_bits()) << shift;
                    }
                }
                Panels::Pairs(panels)
            }
            Layout::Wide => {
                let mut panels = vec![0f32; count * k * PANEL];
                for (o, row) in weight.chunks_exact(k).enumerate() {
                    let panel = &mut panels[(o / PANEL) * k * PANEL..][..k * PANEL];
                    for (i, w) in row.iter().enumerate() {
                        panel[i * PANEL + o % PANEL] = rounded(*w).to_f32();
                    }
                }
                Panels::Wide(panels)
            }
        };
        Some(Self {
            panels,
            bias: bias.to_vec(),
            k,
            tiles,
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
        let groups: Vec<Group<'_>> = match &self.panels {
            Panels::Pairs(p) => p
                .chunks(PANELS_PER_TASK * k.div_ceil(2) * PANEL)
                .map(Group::Pairs)
                .collect(),
            Panels::Wide(p) => p
                .chunks(PANELS_PER_TASK * k * PANEL)
                .map(Group::Wide)
                .collect(),
        };
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

/// The layout and tile sizes for the instruction set `pulp` picks on this CPU.
fn for_this_cpu() -> (Layout, &'static [usize]) {
    #[cfg(target_arch = "x86_64")]
    if pulp::x86::V4::try_new().is_some() {
        return (Layout::Pairs, &TILE_ROWS_AVX512);
    }
    (Layout::Wide, &TILE_ROWS)
}

/// Input features multiplied per pass over a panel's rows (even: pairs are never split): a
/// panel's `KC × PANEL` weights (8 or 16 KiB) stay in L1 while every row tile takes them.
const KC: usize = 256;

/// Consecutive input rows, interleaved: `x[i * size + j]` is row `first + j`'s feature `i`;
/// an odd `k` is padded with a zero feature, so that features come in pairs as the `Pairs`
/// weights do.
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
            let mut t = vec![0f32; k.div_ceil(2) * 2 * size];
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

/// One task's group of panels.
#[derive(Clone, Copy)]
enum Group<'a> {
    Pairs(&'a [u32]),
    Wide(&'a [f32]),
}

/// One group of panels for every row: `out` is `rows × width`.
struct Task<'a> {
    tiles: &'a [RowTile],
    panels: Group<'a>,
    k: usize,
    out: &'a mut [f32],
    width: usize,
}

impl WithSimd for Task<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(mut self, simd: S) {
        match self.panels {
            Group::Pairs(panels) => self.panels_of::<S, u32>(simd, panels),
            Group::Wide(panels) => self.panels_of::<S, f32>(simd, panels),
        }
    }
}

/// A panel row's word: a pair of bf16 weights (`u32`) or one weight (`f32`).
trait Word: Copy {
    /// Input features one word holds.
    const FEATURES: usize;

    /// Adds `R` interleaved rows times `weights` (rows of [`PANEL`] words) to `acc`.
    fn accumulate<S: Simd, const R: usize>(
        simd: S,
        weights: &[Self],
        x: &[f32],
        acc: &mut [[S::f32s; PANEL]; R],
    );
}

impl Word for f32 {
    const FEATURES: usize = 1;

    #[inline(always)]
    fn accumulate<S: Simd, const R: usize>(
        simd: S,
        weights: &[f32],
        x: &[f32],
        acc: &mut [[S::f32s; PANEL]; R],
    ) {
        let vectors = PANEL / S::F32_LANES;
        let (wv, _) = S::as_simd_f32s(weights);
        for (w, xs) in wv.chunks_exact(vectors).zip(x.chunks_exact(R)) {
            for j in 0..R {
                let xv = simd.splat_f32s(xs[j]);
                for v in 0..vectors {
                    acc[j][v] = simd.mul_add_f32s(w[v], xv, acc[j][v]);
                }
            }
        }
    }
}

impl Word for u32 {
    const FEATURES: usize = 2;

    #[inline(always)]
    fn accumulate<S: Simd, const R: usize>(
        simd: S,
        weights: &[u32],
        x: &[f32],
        acc: &mut [[S::f32s; PANEL]; R],
    ) {
        let vectors = PANEL / S::F32_LANES;
        // A bf16 is the high half of the f32 it stands for.
        let high = simd.splat_u32s(0xffff_0000);
        let sixteen = simd.splat_u32s(16);
        let zero = simd.splat_f32s(0.0);
        let (wv, _) = S::as_simd_u32s(weights);
        for (w, xs) in wv.chunks_exact(vectors).zip(x.chunks_exact(2 * R)) {
            let (even, odd) = xs.split_at(R);
            let mut wf = [zero; PANEL];
            for v in 0..vectors {
                wf[v] = simd.transmute_f32s_u32s(simd.and_u32s(w[v], high));
            }
            for j in 0..R {
                let xv = simd.splat_f32s(even[j]);
                for v in 0..vectors {
                    acc[j][v] = simd.mul_add_f32s(wf[v], xv, acc[j][v]);
                }
            }
            for v in 0..vectors {
                wf[v] = simd.transmute_f32s_u32s(simd.wrapping_dyn_shl_u32s(w[v], sixteen));
            }
            for j in 0..R {
                let xv = simd.splat_f32s(odd[j]);
                for v in 0..vectors {
                    acc[j][v] = simd.mul_add_f32s(wf[v], xv, acc[j][v]);
                }
            }
        }
    }
}

impl Task<'_> {
    /// Every panel of `panels` for every row tile, a run of [`KC`] features at a time.
    #[inline(always)]
    fn panels_of<S: Simd, W: Word>(&mut self, simd: S, panels: &[W]) {
        let words = self.k.div_ceil(W::FEATURES);
        let tiles = self.tiles;
        for (p, panel) in panels.chunks_exact(words * PANEL).enumerate() {
            for (c, weights) in panel.chunks(KC / W::FEATURES * PANEL).enumerate() {
                let from = c * KC;
                let to = from + W::FEATURES * weights.len() / PANEL;
                for t in tiles {
                    let x = &t.x[from * t.size..to * t.size];
                    let fresh = c == 0;
                    match t.size {
                        16 => self.tile::<S, W, 16>(simd, weights, x, t.first, p, fresh),
                        12 => self.tile::<S, W, 12>(simd, weights, x, t.first, p, fresh),
                        8 => self.tile::<S, W, 8>(simd, weights, x, t.first, p, fresh),
                        6 => self.tile::<S, W, 6>(simd, weights, x, t.first, p, fresh),
                        4 => self.tile::<S, W, 4>(simd, weights, x, t.first, p, fresh),
                        2 => self.tile::<S, W, 2>(simd, weights, x, t.first, p, fresh),
                        _ => self.tile::<S, W, 1>(simd, weights, x, t.first, p, fresh),
                    }
                }
            }
        }
    }

    /// Adds `R` rows (interleaved) times a run of one panel's weights to the sums of rows
    /// `first..first + R`, columns of panel `p` (starting them at zero when `fresh`). Plain
    /// loops only: a closure here would not inherit the SIMD target features and its
    /// intrinsics would become calls.
    #[inline(always)]
    fn tile<S: Simd, W: Word, const R: usize>(
        &mut self,
        simd: S,
        weights: &[W],
        x: &[f32],
        first: usize,
        p: usize,
        fresh: bool,
    ) {
        let vectors = PANEL / S::F32_LANES;
        let zero = simd.splat_f32s(0.0);
        let mut acc = [[zero; PANEL]; R];
        let at = |j: usize| (first + j) * self.width + p * PANEL;
        if !fresh {
            for (j, a) in acc.iter_mut().enumerate() {
                let (sums, _) = S::as_simd_f32s(&self.out[at(j)..at(j) + PANEL]);
                a[..vectors].copy_from_slice(&sums[..vectors]);
            }
        }
        W::accumulate::<S, R>(simd, weights, x, &mut acc);
        for (j, a) in acc.iter().enumerate() {
            let range = at(j)..at(j) + PANEL;
            let (sums, _) = S::as_mut_simd_f32s(&mut self.out[range]);
            sums[..vectors].copy_from_slice(&a[..vectors]);
        }
    }
}

#[cfg(test)]
mod tests;
