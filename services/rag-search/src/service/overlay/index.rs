//! Making new entries an overlay's, with its index in line: the changed files whose content
//! the index does not have yet are read from the content store and parsed, their items'
//! vectors come from the overlay's own cache, then the base's (an edited file's untouched
//! items are not embedded again), then the model — all with no read lock held. The manifest
//! is written next, and one short write section applies the index change and the entries
//! together, so a reader never sees new entries beside an old index.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::store::Manifest;
use super::{Entry, Overlay};
use crate::embed::{self, Embedder};
use crate::error::RagError;
use crate::index::{Contents, Summary, WorkspaceIndex};
use crate::parse::Layout;
use crate::scan;
use crate::service::{Slot, lock_poisoned};
use crate::vectors::TextHash;

/// What the index must change to match `next`: files to (re)index with their content hash,
/// and files to drop.
fn plan(
    index: &WorkspaceIndex,
    next: &BTreeMap<String, Entry>,
    want_vectors: bool,
) -> (Vec<(String, String)>, Vec<String>) {
    // A file whose items lack vectors (the model failed last time) is indexed again.
    let lacking = if want_vectors {
        index.files_without_vectors()
    } else {
        HashSet::new()
    };
    let to_index = next
        .iter()
        .filter_map(|(path, e)| match e {
            Entry::Changed { hash, .. }
                if scan::indexable_name(path)
                    && (index.file_hash(path) != Some(hash.as_str())
                        || lacking.contains(path.as_str())) =>
            {
                Some((path.clone(), hash.clone()))
            }
            Entry::Changed { .. } | Entry::Deleted | Entry::Pending { .. } => None,
        })
        .collect();
    let to_remove = index
        .files()
        .filter(|(path, _)| !matches!(next.get(*path), Some(Entry::Changed { .. })))
        .map(|(path, _)| path.to_owned())
        .collect();
    (to_index, to_remove)
}

/// Vectors for the items of `contents`: cached (the overlay's, then the base's) or embedded
/// now. A failing model leaves those items without vectors (the next sync or put tries them
/// again); BM25 finds them meanwhile.
fn vectors_for(
    overlay: &Overlay,
    contents: &Contents,
    base: Option<&Slot>,
    embedder: &Embedder,
    summary: &mut Summary,
) -> Result<HashMap<TextHash, Vec<f32>>, RagError> {
    let hashes = contents.embed_hashes();
    let mut found = overlay
        .inner
        .read()
        .map_err(|_| lock_poisoned())?
        .index
        .cached_vectors(&hashes);
    if let Some(base) = base {
        let rest: Vec<TextHash> = hashes
            .iter()
            .filter(|h| !found.contains_key(*h))
            .copied()
            .collect();
        if !rest.is_empty() {
            let index = base.index.read().map_err(|_| lock_poisoned())?;
            found.extend(index.cached_vectors(&rest));
        }
    }
    summary.embeddings_reused = found.len() as u64;
    let inputs = contents.embed_inputs(|h| found.contains_key(h));
    if inputs.is_empty() {
        return Ok(found);
    }
    let texts: Vec<String> = inputs.iter().map(|(_, t)| t.clone()).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    match embed::embed_with_progress(embedder, &texts, threads, &mut |_| {}) {
        Ok(vectors) => {
            for ((hash, _), vector) in inputs.iter().zip(vectors) {
                if !vector.is_empty() {
                    found.insert(*hash, vector);
                    summary.items_embedded += 1;
                }
            }
        }
        Err(e) => tracing::warn!(
            session = %overlay.session,
            error = %e,
            texts = texts.len(),
            "embedding an overlay's items failed; dense retrieval misses them until the next sync or put"
        ),
    }
    Ok(found)
}

/// Makes `next` the overlay's entries at `version`, with its index in line (see the module
/// doc). The caller holds the overlay's writer lock. When the index cannot be updated the
/// entries are still the new ones (the manifest says so, and shadowing must follow it) and
/// the error is returned; the next write brings the index in line.
pub(super) fn commit(
    overlay: &Overlay,
    next: BTreeMap<String, Entry>,
    version: u64,
    base: Option<&Slot>,
    embedder: Option<&Embedder>,
) -> Result<Summary, RagError> {
    let (to_index, mut to_remove, same) = {
        let inner = overlay.inner.read().map_err(|_| lock_poisoned())?;
        let want_vectors = embedder.is_some() && inner.index.has_vectors();
        let (to_index, to_remove) = plan(&inner.index, &next, want_vectors);
        let same = inner.version == version && inner.entries == next;
        (to_index, to_remove, same)
    };
    if same && to_index.is_empty() && to_remove.is_empty() {
        return Ok(Summary::default());
    }
    let mut next = next;
    let mut same = same;
    let mut files = Vec::with_capacity(to_index.len());
    for (path, hash) in to_index {
        match overlay.store.blob_content(&hash) {
            Some(content) => files.push((path, content)),
            // Lost or damaged on disk: awaited again, never answered from the base.
            None => {
                tracing::warn!(session = %overlay.session, path, "an overlay's content is missing or damaged; it is awaited again");
                to_remove.push(path.clone());
                next.insert(path, Entry::Pending { hash });
                same = false;
            }
        }
    }
    // The developer's files sit in the crates of the base's manifests.
    let layout = match base {
        Some(b) => b
            .index
            .read()
            .map_err(|_| lock_poisoned())?
            .layout()
            .clone(),
        None => Layout::default(),
    };
    let contents = Contents::parse(files, &layout);
    let mut summary = Summary::default();
    let vectors = match embedder {
        Some(e) if contents.item_count() > 0 => {
            vectors_for(overlay, &contents, base, e, &mut summary)?
        }
        Some(_) | None => HashMap::new(),
    };
    if !same {
        overlay.store.write_manifest(&Manifest::new(
            &overlay.session,
            &overlay.root,
            &overlay.owner,
            version,
            next.clone(),
        ))?;
    }
    let mut inner = overlay.inner.write().map_err(|_| lock_poisoned())?;
    let applied = inner.index.apply_contents(contents, &to_remove, &vectors);
    inner.entries = next;
    inner.version = version;
    let live: HashSet<&str> = inner
        .entries
        .values()
        .filter_map(|e| match e {
            Entry::Changed { hash, .. } => Some(hash.as_str()),
            Entry::Deleted | Entry::Pending { .. } => None,
        })
        .collect();
    overlay.store.collect_garbage(&live);
    let applied = applied.map_err(RagError::Index)?;
    tracing::info!(
        session = %overlay.session,
        version,
        files_indexed = applied.files_indexed,
        files_removed = applied.files_removed,
        items = applied.items_total,
        embedded = summary.items_embedded,
        reused = summary.embeddings_reused,
        ms = applied.duration.as_millis() as u64,
        "overlay updated"
    );
    Ok(Summary {
        items_embedded: summary.items_embedded,
        embeddings_reused: summary.embeddings_reused,
        ..applied
    })
}
