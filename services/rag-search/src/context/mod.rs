//! Context assembly: ranked candidates → deduplicated, stitched parts of whole items under
//! per-part, per-file and cumulative token budgets, ordered by score and rendered in the Ploke
//! Code Snippet Format `<code="PATH" #START:END>…</code>`.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;

use crate::tokens;

/// Parts cut below this many tokens are dropped rather than shown as a stub.
const MIN_USEFUL_TOKENS: u32 = 24;

/// Budgets after defaults (all > 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Cumulative limit.
    pub max_total: u32,
    /// Per-file limit.
    pub per_file_max: u32,
    /// Per-part limit.
    pub per_part_max: u32,
}

impl Budget {
    /// Applies defaults to zero fields: total 4000; per file half the total; per part 1500 or
    /// the per-file limit, whichever is smaller.
    pub fn with_defaults(max_total: u32, per_file_max: u32, per_part_max: u32) -> Self {
        let max_total = if max_total == 0 { 4000 } else { max_total };
        let per_file_max = if per_file_max == 0 {
            (max_total / 2).max(1)
        } else {
            per_file_max
        };
        let per_part_max = if per_part_max == 0 {
            per_file_max.min(1500)
        } else {
            per_part_max
        };
        Self {
            max_total,
            per_file_max,
            per_part_max,
        }
    }
}

/// One retrieved candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// File path relative to the root.
    pub file: String,
    /// Canonical path.
    pub canon_path: String,
    /// Kind name.
    pub kind: crate::parse::Kind,
    /// Language.
    pub language: String,
    /// Byte span in the file (as indexed).
    pub byte_start: usize,
    /// End byte (exclusive).
    pub byte_end: usize,
    /// First line (1-based).
    pub line_start: u32,
    /// Last line (1-based, inclusive).
    pub line_end: u32,
    /// Source text of the span.
    pub text: String,
    /// Relevance.
    pub score: f32,
    /// File hash at indexing.
    pub file_hash: String,
    /// The item's crate (empty when no manifest names it).
    pub crate_name: String,
    /// The item's bare name (empty for a text window).
    pub name: String,
}

impl Candidate {
    /// The candidate of an indexed item with its text and score.
    pub fn of(record: &crate::index::ItemRecord, text: String, score: f32) -> Self {
        Self {
            file: record.file.clone(),
            canon_path: record.item.canon_path.clone(),
            kind: record.item.kind,
            language: record.language.clone(),
            byte_start: record.item.byte_start,
            byte_end: record.item.byte_end,
            line_start: record.item.line_start,
            line_end: record.item.line_end,
            text,
            score,
            file_hash: record.file_hash.clone(),
            crate_name: record.item.crate_name.clone(),
            name: record.item.answered_name().to_owned(),
        }
    }
}

/// Why a candidate was changed or dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Same span as a better part, within it, or around it (a class or impl whose method
    /// already answers: the container would only add what the query did not ask for).
    Duplicate,
    /// Merged into an overlapping or adjacent part.
    Stitched,
    /// Shortened by the per-part limit.
    PerPart,
    /// Shortened or dropped by the per-file limit.
    PerFile,
    /// Shortened or dropped by the cumulative limit.
    Total,
}

/// A change made by assembly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutRecord {
    /// File.
    pub file: String,
    /// Canonical path.
    pub canon_path: String,
    /// Why.
    pub reason: Cut,
    /// Tokens before.
    pub tokens_before: u32,
    /// Tokens after (0 = dropped).
    pub tokens_after: u32,
}

/// One assembled part.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The candidate after stitching and truncation (text, spans updated).
    pub candidate: Candidate,
    /// The rendered part.
    pub rendered: String,
    /// Tokens of `rendered`.
    pub tokens: u32,
}

/// The result of assembly.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    /// Parts, best first.
    pub parts: Vec<Part>,
    /// What was cut.
    pub cuts: Vec<CutRecord>,
    /// Tokens of all parts.
    pub total_tokens: u32,
    /// The budget enforced.
    pub budget: Budget,
    /// Candidates before assembly.
    pub candidates: u32,
}

/// Renders one part in the Ploke Code Snippet Format.
pub fn render(root: &Path, file: &str, byte_start: usize, byte_end: usize, text: &str) -> String {
    ploke_proto::snippet::render(root, file, byte_start as u64, byte_end as u64, text)
}

/// Whether `a` and `b` are one stretch of a file: their bytes overlap or meet, or one ends on
/// the line before the other starts. Two items on one line with code between them (a minified
/// file's functions) are not: stitched, a named function's part became a window of the line
/// starting at another one, under the first one's name.
fn overlaps_or_touches(a: &Candidate, b: &Candidate) -> bool {
    a.file == b.file
        && ((a.byte_start <= b.byte_end && b.byte_start <= a.byte_end)
            || a.line_end + 1 == b.line_start
            || b.line_end + 1 == a.line_start)
}

fn contains(outer: &Candidate, inner: &Candidate) -> bool {
    outer.file == inner.file
        && outer.byte_start <= inner.byte_start
        && inner.byte_end <= outer.byte_end
}

/// Merges `b` into `a` (same file, overlapping or adjacent, neither holding the other), using
/// the file's current text when it still has the indexed hash; `None` when the union cannot be
/// read exactly.
fn stitch(a: &Candidate, b: &Candidate, file_text: Option<&str>) -> Option<Candidate> {
    let text = file_text?;
    let start = a.byte_start.min(b.byte_start);
    let end = a.byte_end.max(b.byte_end);
    let union = text.get(start..end)?;
    Some(Candidate {
        byte_start: start,
        byte_end: end,
        line_start: a.line_start.min(b.line_start),
        line_end: a.line_end.max(b.line_end),
        text: union.to_owned(),
        score: a.score.max(b.score),
        canon_path: a.canon_path.clone(),
        ..a.clone()
    })
}

/// Cuts `c` to at most `limit` rendered tokens at a line boundary, or inside its first line
/// when that line alone is over the limit (a minified file's or a generated table's one line:
/// the best hit was dropped whole); `None` if nothing useful fits. A part cut inside a line
/// says so by its byte range. The first count is of the whole part, which [`tokens::count`]
/// has usually just counted and remembers.
fn truncate(root: &Path, c: &Candidate, limit: u32) -> Option<(Candidate, String, u32)> {
    let mut kept = c.text.len();
    while kept > 0 {
        let text = c.text.get(..kept)?;
        let end = c.byte_start + kept;
        let rendered = render(
            root,
            &c.file,
            c.byte_start,
            end,
            text.trim_end_matches('\n'),
        );
        let tokens = tokens::count(&rendered);
        let lines = text.split_inclusive('\n').count();
        if tokens <= limit {
            if tokens < MIN_USEFUL_TOKENS.min(limit) {
                return None;
            }
            let line_end = c.line_start + u32::try_from(lines).unwrap_or(u32::MAX) - 1;
            let cut = Candidate {
                byte_end: end,
                line_end,
                text: text.to_owned(),
                ..c.clone()
            };
            return Some((cut, rendered, tokens));
        }
        kept = if lines > 1 {
            // Whole lines, the first at least.
            let keep = proportional_keep(lines, tokens, limit).max(1);
            text.split_inclusive('\n').take(keep).map(str::len).sum()
        } else {
            // One line: a proportional share of its bytes, at a character boundary.
            let share = (kept as u64 * u64::from(limit) / u64::from(tokens.max(1))) as usize;
            let mut cut = share.min(kept - 1);
            while cut > 0 && !text.is_char_boundary(cut) {
                cut -= 1;
            }
            cut
        };
    }
    None
}

/// Lines to keep of `lines` that render to `tokens` (more than `limit`): a proportional share
/// of them, and always fewer than before, so long parts shrink in a few steps and short ones
/// one line at a time.
fn proportional_keep(lines: usize, tokens: u32, limit: u32) -> usize {
    let share = (lines as u64 * u64::from(limit) / u64::from(tokens.max(1))) as usize;
    share.min(lines.saturating_sub(1))
}

/// Assembles `candidates` (best first) under `budget`. `read_file(file, hash)` returns the
/// file's current text if its hash still equals `hash` (for stitching).
pub fn assemble(
    root: &Path,
    candidates: Vec<Candidate>,
    budget: Budget,
    read_file: &mut dyn FnMut(&str, &str) -> Option<String>,
) -> Assembled {
    let count = u32::try_from(candidates.len()).unwrap_or(u32::MAX);
    let mut cuts = Vec::new();
    let cost =
        |c: &Candidate| tokens::count(&render(root, &c.file, c.byte_start, c.byte_end, &c.text));

    // Every candidate's whole rendering is counted once, on all cores: counting tokens is most
    // of assembly's time. A stitched part is counted again when it is budgeted.
    let costs: Vec<u32> = candidates.par_iter().map(cost).collect();

    // 1. dedupe and stitch, keeping score order.
    let mut merged: Vec<(Candidate, Option<u32>)> = Vec::new();
    let mut files: HashMap<String, Option<String>> = HashMap::new();
    for (c, c_cost) in candidates.into_iter().zip(costs) {
        if merged
            .iter()
            .any(|(m, _)| contains(m, &c) || contains(&c, m))
        {
            cuts.push(CutRecord {
                file: c.file.clone(),
                canon_path: c.canon_path.clone(),
                reason: Cut::Duplicate,
                tokens_before: c_cost,
                tokens_after: 0,
            });
            continue;
        }
        if let Some(pos) = merged.iter().position(|(m, _)| overlaps_or_touches(m, &c)) {
            let text = files
                .entry(c.file.clone())
                .or_insert_with(|| read_file(&c.file, &c.file_hash))
                .clone();
            if let Some(stitched) = stitch(&merged[pos].0, &c, text.as_deref()) {
                cuts.push(CutRecord {
                    file: c.file.clone(),
                    canon_path: c.canon_path.clone(),
                    reason: Cut::Stitched,
                    tokens_before: c_cost,
                    tokens_after: 0,
                });
                merged[pos] = (stitched, None);
                continue;
            }
        }
        merged.push((c, Some(c_cost)));
    }

    // 2. budgets, in score order.
    let mut parts = Vec::new();
    let mut total = 0u32;
    let mut per_file: HashMap<String, u32> = HashMap::new();
    for (c, known) in merged {
        let full = known.unwrap_or_else(|| cost(&c));
        let used_in_file = per_file.get(&c.file).copied().unwrap_or(0);
        let file_left = budget.per_file_max.saturating_sub(used_in_file);
        let total_left = budget.max_total.saturating_sub(total);
        let (limit, reason) = [
            (budget.per_part_max, Cut::PerPart),
            (file_left, Cut::PerFile),
            (total_left, Cut::Total),
        ]
        .into_iter()
        .min_by_key(|(l, _)| *l)
        .unwrap_or((0, Cut::Total));
        let fitted = if full <= limit {
            Some((
                c.clone(),
                render(root, &c.file, c.byte_start, c.byte_end, &c.text),
                full,
            ))
        } else {
            truncate(root, &c, limit)
        };
        match fitted {
            Some((cand, rendered, tokens)) => {
                if tokens < full {
                    cuts.push(CutRecord {
                        file: c.file.clone(),
                        canon_path: c.canon_path.clone(),
                        reason,
                        tokens_before: full,
                        tokens_after: tokens,
                    });
                }
                total += tokens;
                *per_file.entry(c.file.clone()).or_default() += tokens;
                parts.push(Part {
                    candidate: cand,
                    rendered,
                    tokens,
                });
            }
            None => cuts.push(CutRecord {
                file: c.file.clone(),
                canon_path: c.canon_path.clone(),
                reason,
                tokens_before: full,
                tokens_after: 0,
            }),
        }
    }
    Assembled {
        parts,
        cuts,
        total_tokens: total,
        budget,
        candidates: count,
    }
}

#[cfg(test)]
mod tests;
