//! Updating one file's entries: reading, hashing and parsing run in parallel over a batch of
//! files (the expensive part), then the results are applied to the index one by one.

use std::collections::BTreeMap;

use ploke_runtime::path_policy::{self, FileError};

use crate::bm25::Bm25Doc;
use crate::embed;
use crate::parse::{self, Layout, ModuleLoc, ParsedItem, Reexport};
use crate::scan::{self, ScannedFile};

use super::{FileOutcome, FileRecord, IndexError, ItemRecord, WorkspaceIndex};

/// Files read and parsed together before being applied.
pub(super) const BATCH_FILES: usize = 256;

/// A file, read and parsed, not yet applied.
pub(super) enum Prepared {
    /// The file is gone.
    Missing,
    /// Unreadable, too large, binary or not UTF-8.
    Skipped,
    /// Same hash as indexed.
    Unchanged,
    /// New content (or a file now in another module).
    Parsed {
        hash: String,
        /// Its place in its language's module system ([`module_key`]); empty for files read as
        /// line windows.
        module: String,
        text: String,
        items: Vec<(ParsedItem, String)>,
        /// Its re-exports (Rust's `pub use`).
        reexports: Vec<Reexport>,
    },
}

/// What a file was indexed as: its content's hash and its module.
#[derive(Clone, Copy)]
pub(super) struct Known<'a> {
    pub(super) hash: &'a str,
    pub(super) module: &'a str,
}

/// Reads, hashes and parses `file` (no index access). The file is opened by the path policy:
/// a regular file only (a FIFO, a device or a symlink swapped in since the scan is skipped,
/// never waited on or followed), at most [`scan::MAX_FILE_BYTES`]. A source file's module comes
/// from `layout`.
pub(super) fn prepare(
    file: &ScannedFile,
    layout: &Layout,
    force: bool,
    known: Option<Known<'_>>,
) -> Prepared {
    let bytes = match path_policy::read_regular(&file.abs, scan::MAX_FILE_BYTES) {
        Ok(b) => b,
        Err(FileError::NotFound) => return Prepared::Missing,
        Err(_) => return Prepared::Skipped,
    };
    prepare_bytes(&file.rel, file.language, bytes, (layout, force), known)
}

/// Bumped when a parser other than Rust's changes what it finds: files indexed before are
/// parsed again (their recorded module key no longer matches).
const PARSERS_VERSION: u32 = 2;

/// What a file's place is recorded as, to notice when it moves: a Rust file's
/// [`ModuleLoc::key`] (as indexes before other languages recorded it), the parser version
/// and key for other parsed languages, empty for line windows.
pub(super) fn module_key(language: &str, loc: Option<&ModuleLoc>) -> String {
    match loc {
        Some(loc) if language == "rust" => loc.key(),
        Some(loc) => format!("{language}@{PARSERS_VERSION}:{}", loc.key()),
        None => String::new(),
    }
}

/// [`prepare`] of content already read (an overlay's files come as bytes).
pub(super) fn prepare_bytes(
    rel: &str,
    language: &str,
    bytes: Vec<u8>,
    (layout, force): (&Layout, bool),
    known: Option<Known<'_>>,
) -> Prepared {
    let hash = blake3::hash(&bytes).to_hex().to_string();
    let loc = layout.locate(rel, language);
    let module = module_key(language, loc.as_ref());
    if !force && known.is_some_and(|k| k.hash == hash && k.module == module) {
        return Prepared::Unchanged;
    }
    let Some(text) = scan::read_text(bytes) else {
        return Prepared::Skipped;
    };
    let (parsed, reexports) = parse::parse_file(rel, language, loc.as_ref(), &text);
    let items = parsed
        .into_iter()
        .map(|item| {
            let body = text.get(item.byte_start..item.byte_end).unwrap_or("");
            let embed_text = embed::item_text(&item.canon_path, &item.signature, &item.doc, body);
            let embed_hash = blake3::hash(embed_text.as_bytes()).to_hex().to_string();
            (item, embed_hash)
        })
        .collect();
    Prepared::Parsed {
        hash,
        module,
        text,
        items,
        reexports,
    }
}

/// [`prepare`] for a batch, on every core.
pub(super) fn prepare_batch(
    batch: &[ScannedFile],
    (layout, force): (&Layout, bool),
    known: &BTreeMap<String, FileRecord>,
) -> Vec<Prepared> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = batch.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = batch
            .chunks(chunk)
            .map(|files| {
                let handle = scope.spawn(move || {
                    files
                        .iter()
                        .map(|f| {
                            prepare(f, layout, force, known.get(&f.rel).map(FileRecord::known))
                        })
                        .collect::<Vec<_>>()
                });
                (files.len(), handle)
            })
            .collect();
        // A parser panic must not shift results onto other files: its whole chunk is skipped.
        handles
            .into_iter()
            .flat_map(|(n, h)| {
                h.join().unwrap_or_else(|_| {
                    tracing::error!(files = n, "a parser thread panicked; skipping its files");
                    (0..n).map(|_| Prepared::Skipped).collect()
                })
            })
            .collect()
    })
}

/// Which file a prepared one is: its path relative to the root and its language.
pub(super) struct FileName<'a> {
    pub(super) rel: &'a str,
    pub(super) language: &'static str,
}

impl<'a> From<&'a ScannedFile> for FileName<'a> {
    fn from(f: &'a ScannedFile) -> Self {
        Self {
            rel: &f.rel,
            language: f.language,
        }
    }
}

impl WorkspaceIndex {
    /// Applies a prepared file to the index.
    pub(super) fn commit_prepared(
        &mut self,
        file: &FileName<'_>,
        prepared: Prepared,
    ) -> Result<FileOutcome, IndexError> {
        let (hash, module, text, items, reexports) = match prepared {
            Prepared::Missing => {
                let removed = self.drop_file(file.rel);
                return Ok(FileOutcome::Removed { removed });
            }
            Prepared::Skipped => {
                let removed = self.drop_file(file.rel);
                return Ok(FileOutcome::Skipped { removed });
            }
            Prepared::Unchanged => return Ok(FileOutcome::Unchanged),
            Prepared::Parsed {
                hash,
                module,
                text,
                items,
                reexports,
            } => (hash, module, text, items, reexports),
        };
        let removed = self.drop_file(file.rel);
        let mut ids = Vec::with_capacity(items.len());
        for (item, embed_hash) in items {
            let id = self.next_id;
            self.next_id += 1;
            let body = text.get(item.byte_start..item.byte_end).unwrap_or("");
            self.bm25.add(&Bm25Doc {
                id,
                order: crate::record::order_key(file.rel, item.byte_start),
                file: file.rel,
                kind: item.kind,
                language: file.language,
                name: &item.name,
                canon_path: &item.canon_path,
                signature: &item.signature,
                doc: &item.doc,
                body,
            })?;
            ids.push(id);
            self.items.insert(
                id,
                ItemRecord {
                    id,
                    file: file.rel.to_owned(),
                    language: file.language.to_owned(),
                    file_hash: hash.clone(),
                    item,
                    embed_hash,
                },
            );
        }
        let added = ids.len() as u64;
        // The file's old ones went with drop_file.
        if !reexports.is_empty() {
            self.items.set_reexports(file.rel, &reexports);
        }
        self.files.insert(
            file.rel.to_owned(),
            FileRecord {
                hash,
                language: file.language.to_owned(),
                item_ids: ids,
                module,
                reexports,
            },
        );
        Ok(FileOutcome::Indexed { added, removed })
    }
}
