//! The BM25 side of the index: a tantivy index per workspace with the code tokenizer, the item
//! name, canonical path and signature in boosted fields, and raw-term fields for filters
//! (kind, language, and every ancestor directory of the file for path-prefix filters).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use rustc_hash::FxHashSet;

use tantivy::query::{BooleanQuery, BoostQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::parse::Kind;
use crate::tokenize::{CodeTokenizer, code_tokens};
use schema::{DOCSTORE_BLOCK_BYTES, DOCSTORE_COMPRESSION, Fields, schema, settings};

/// Name of the code tokenizer in the tantivy index.
const TOKENIZER: &str = "code";
/// Memory budget of the index writer.
const WRITER_BYTES: usize = 64 * 1024 * 1024;

/// Field boosts (tuned on the retrieval evaluation; see docs/RETRIEVAL.md).
#[derive(Debug, Clone, Copy)]
pub struct Boosts {
    /// Bare item name.
    pub name: f32,
    /// Canonical path and file path.
    pub path: f32,
    /// Signature.
    pub signature: f32,
    /// Doc comment.
    pub doc: f32,
    /// Whole source text of the item.
    pub body: f32,
}

impl Default for Boosts {
    fn default() -> Self {
        // Tuned on ../shared/eval (docs/RETRIEVAL.md): the source text plus the canonical path
        // (which carries the impl's type and trait names a method body lacks) beat every
        // other mix tried; extra weight on names, signatures or docs lowered recall.
        Self {
            name: 0.0,
            path: 1.0,
            signature: 0.0,
            doc: 0.0,
            body: 1.0,
        }
    }
}

/// What one document holds.
#[derive(Debug, Clone)]
pub struct Bm25Doc<'a> {
    /// Item id.
    pub id: u64,
    /// What orders it among hits of equal score ([`crate::record::order_key`]).
    pub order: u64,
    /// File path relative to the workspace root.
    pub file: &'a str,
    /// Kind.
    pub kind: Kind,
    /// Language.
    pub language: &'a str,
    /// Bare name.
    pub name: &'a str,
    /// Canonical path.
    pub canon_path: &'a str,
    /// Signature.
    pub signature: &'a str,
    /// Doc comment.
    pub doc: &'a str,
    /// Source text.
    pub body: &'a str,
}

/// Restrictions on BM25 hits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// Keep items under one of these directories or files (normalised, no trailing `/`).
    pub path_prefixes: Vec<String>,
    /// Keep items of these kinds.
    pub kinds: Vec<Kind>,
    /// Keep items in these languages.
    pub languages: Vec<String>,
}

/// The BM25 index failed.
#[derive(Debug, thiserror::Error)]
pub enum Bm25Error {
    /// tantivy failed.
    #[error("bm25 index: {}", error_text::tantivy(.0))]
    Tantivy(#[from] tantivy::TantivyError),
    /// The index directory could not be opened.
    #[error("bm25 index directory: {}", error_text::directory(.0))]
    Directory(#[from] tantivy::directory::error::OpenDirectoryError),
    /// The index directory could not be created.
    #[error("creating the bm25 index directory: {0}")]
    Io(#[from] std::io::Error),
    /// The index was closed (the service is stopping).
    #[error("bm25 index is closed")]
    Closed,
    /// Another process holds the index's writer.
    #[error(
        "bm25 index {0} is locked by another process; each rag-search needs a data dir of its own"
    )]
    Locked(String),
}

/// What a search must respect beyond its filters: files to leave out (shadowed by an overlay)
/// and the corpus statistics to score with (those of every index searched together, so that
/// their scores compare).
#[derive(Default, Clone, Copy)]
pub struct Scope<'a> {
    /// Files (relative paths) whose items are never returned.
    pub hidden: Option<&'a std::collections::HashSet<&'a str>>,
    /// Statistics to score with instead of this index's own.
    pub stats: Option<&'a CorpusStats>,
}

/// BM25 statistics of several indexes as one corpus: document counts, token counts and
/// document frequencies summed. Scoring two indexes with the same statistics makes their
/// scores comparable (the same term weighs the same in both, lengths are normalised against
/// the same average), so that their hits can be merged by score.
pub struct CorpusStats {
    searchers: Vec<tantivy::Searcher>,
}

impl CorpusStats {
    /// The statistics of these indexes together, as they are now.
    pub fn of(indexes: &[&Bm25]) -> Self {
        Self {
            searchers: indexes.iter().map(|b| b.searcher()).collect(),
        }
    }
}

impl tantivy::query::Bm25StatisticsProvider for CorpusStats {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.searchers.iter().try_fold(0u64, |sum, s| {
            Ok(sum + tantivy::query::Bm25StatisticsProvider::total_num_tokens(s, field)?)
        })
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        self.searchers.iter().try_fold(0u64, |sum, s| {
            Ok(sum + tantivy::query::Bm25StatisticsProvider::total_num_docs(s)?)
        })
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.searchers
            .iter()
            .try_fold(0u64, |sum, s| Ok(sum + s.doc_freq(term)?))
    }
}

/// One BM25 hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Item id.
    pub id: u64,
    /// BM25 score.
    pub score: f32,
}

/// A merge of segments under way ([`Bm25::merge_segments`]).
pub struct Merging {
    merge: tantivy::FutureResult<Option<tantivy::index::SegmentMeta>>,
    segments: usize,
    started: std::time::Instant,
}

impl Merging {
    /// Waits for the merge to end; how many segments it merged.
    pub fn wait(self) -> Result<usize, Bm25Error> {
        self.merge.wait()?;
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(segments = self.segments, ms, "bm25 segments merged");
        Ok(self.segments)
    }
}

/// A workspace's BM25 index.
pub struct Bm25 {
    index: Index,
    reader: IndexReader,
    /// In a mutex so that a commit (the slow part: segments written) can run while searches
    /// hold the workspace index for reading.
    writer: Mutex<Option<IndexWriter>>,
    fields: Fields,
    boosts: Boosts,
    commits: AtomicU64,
    closed: bool,
}

impl std::fmt::Debug for Bm25 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25")
            .field("boosts", &self.boosts)
            .finish()
    }
}

/// `src/proto/h1/role.rs` → `src`, `src/proto`, `src/proto/h1`, `src/proto/h1/role.rs`.
fn ancestors(file: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut acc = String::new();
    for part in file.split('/') {
        if !acc.is_empty() {
            acc.push('/');
        }
        acc.push_str(part);
        out.push(acc.clone());
    }
    out
}

/// Normalises a user's path prefix the way [`ancestors`] spells paths.
pub fn normalize_prefix(prefix: &str) -> String {
    prefix
        .trim()
        .trim_start_matches("./")
        .trim_matches('/')
        .to_owned()
}

/// Documents with any of `terms`, each scoring 1 as the `TermSetQuery` it replaces did. A
/// disjunction of term queries: `TermSetQuery` builds an FST of its terms on every call,
/// which cost ~10 % of a whole BM25 Search's CPU (docs/PERFORMANCE.md).
fn any_of(terms: impl Iterator<Item = Term>) -> Box<dyn Query> {
    let clauses: Vec<(Occur, Box<dyn Query>)> = terms
        .map(|t| {
            let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::Basic));
            (Occur::Should, q)
        })
        .collect();
    Box::new(ConstScoreQuery::new(
        Box::new(BooleanQuery::new(clauses)),
        1.0,
    ))
}

impl Bm25 {
    /// Opens the index in `dir`, creating it when absent.
    pub fn open(dir: &Path, boosts: Boosts) -> Result<Self, Bm25Error> {
        std::fs::create_dir_all(dir)?;
        let (schema, fields) = schema();
        let builder = || Index::builder().schema(schema.clone()).settings(settings());
        let directory = tantivy::directory::MmapDirectory::open(dir)?;
        let opened = match builder().open_or_create(directory) {
            Ok(index)
                if index.settings().docstore_blocksize == DOCSTORE_BLOCK_BYTES
                    && index.settings().docstore_compression == DOCSTORE_COMPRESSION =>
            {
                Ok(index)
            }
            Ok(_) => Err("doc-store blocks of another size or compression".to_owned()),
            Err(tantivy::TantivyError::SchemaError(reason)) => Err(reason),
            Err(e) => return Err(e.into()),
        };
        let index = match opened {
            Ok(index) => index,
            // An index written by an older version (another schema or settings): start it
            // over; the workspace index notices the empty BM25 side and re-indexes every file.
            Err(reason) => {
                tracing::warn!(dir = %dir.display(), %reason, "bm25 index written by another version; rebuilding");
                std::fs::remove_dir_all(dir)?;
                std::fs::create_dir_all(dir)?;
                builder().create_in_dir(dir)?
            }
        };
        index.tokenizers().register(TOKENIZER, CodeTokenizer);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let writer = index.writer(WRITER_BYTES).map_err(|e| match e {
            tantivy::TantivyError::LockFailure(
                tantivy::directory::error::LockError::LockBusy,
                _,
            ) => Bm25Error::Locked(dir.display().to_string()),
            e => e.into(),
        })?;
        collect_garbage(&writer);
        Ok(Self {
            index,
            reader,
            writer: Mutex::new(Some(writer)),
            fields,
            boosts,
            commits: AtomicU64::new(0),
            closed: false,
        })
    }

    fn writer(&mut self) -> Result<&mut IndexWriter, Bm25Error> {
        let slot = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() && !self.closed {
            // A writer lost to a failed rollback is made again (the disk may be back).
            *slot = Some(new_writer(&self.index)?);
        }
        slot.as_mut().ok_or(Bm25Error::Closed)
    }

    /// Releases the writer (and the index lock); later writes fail with `Closed`.
    pub fn close(&mut self) {
        self.closed = true;
        if let Some(w) = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            && let Err(e) = w.wait_merging_threads()
        {
            tracing::warn!(error = %e, "closing the bm25 writer");
        }
    }

    /// Removes every document, durably.
    pub fn clear(&mut self) -> Result<(), Bm25Error> {
        self.writer()?.delete_all_documents()?;
        self.commit()
    }

    /// Removes every document of `file` (applied at the next commit; nothing once closed).
    pub fn remove_file(&mut self, file: &str) {
        let term = Term::from_field_text(self.fields.file, file);
        if let Ok(w) = self.writer() {
            w.delete_term(term);
        }
    }

    /// Adds one item (applied at the next commit).
    pub fn add(&mut self, d: &Bm25Doc<'_>) -> Result<(), Bm25Error> {
        let f = self.fields;
        let mut doc = TantivyDocument::new();
        doc.add_u64(f.id, d.id);
        doc.add_u64(f.order, d.order);
        doc.add_text(f.file, d.file);
        for dir in ancestors(d.file) {
            doc.add_text(f.dirs, &dir);
        }
        doc.add_text(f.kind, d.kind.as_str());
        doc.add_text(f.lang, d.language);
        doc.add_text(f.name, d.name);
        doc.add_text(f.path, d.canon_path);
        doc.add_text(f.path, d.file);
        doc.add_text(f.signature, d.signature);
        doc.add_text(f.doc, d.doc);
        doc.add_text(f.body, d.body);
        doc.add_text(f.text, d.body);
        self.writer()?.add_document(doc)?;
        Ok(())
    }

    /// Makes every change since the last commit durable and visible. Takes `&self`: searches
    /// may go on meanwhile (they see the last commit until the reader reloads).
    pub fn commit(&self) -> Result<(), Bm25Error> {
        let mut slot = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() && !self.closed {
            *slot = Some(new_writer(&self.index)?);
        }
        slot.as_mut().ok_or(Bm25Error::Closed)?.commit()?;
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.reader.reload()?;
        Ok(())
    }

    /// Starts merging every committed segment into one (none to do: `None`). A search looks
    /// each query term up in every segment and collects each segment's top hits apart, so one
    /// segment answers cheapest (docs/PERFORMANCE.md). The merge runs on tantivy's threads:
    /// wait for it with no lock held ([`Merging::wait`]), then [`Bm25::reload`].
    pub fn merge_segments(&self) -> Result<Option<Merging>, Bm25Error> {
        let ids = self.index.searchable_segment_ids()?;
        if ids.len() < 2 {
            return Ok(None);
        }
        let mut slot = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let merge = slot.as_mut().ok_or(Bm25Error::Closed)?.merge(&ids);
        Ok(Some(Merging {
            merge,
            segments: ids.len(),
            started: std::time::Instant::now(),
        }))
    }

    /// Shows searches what was committed or merged since they last looked.
    pub fn reload(&self) -> Result<(), Bm25Error> {
        Ok(self.reader.reload()?)
    }

    /// Commits that succeeded since the index was opened.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::SeqCst)
    }

    /// Drops every change since the last commit; searches never saw them, and the segment
    /// files written for them are deleted (a run that failed on a full disk left them, and
    /// the disk stayed full). A writer that cannot roll back (its directory is gone) is
    /// dropped with its changes, and the next write makes a new one, deleting them then.
    pub fn rollback(&mut self) -> Result<(), Bm25Error> {
        let slot = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(mut writer) = slot.take() else {
            return Ok(());
        };
        writer.rollback()?;
        collect_garbage(&writer);
        *slot = Some(writer);
        Ok(())
    }

    /// Number of documents visible to searches.
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The best `limit` items for `query` by BM25 score, best first (ids only: texts are read
    /// afterwards, with [`Bm25::texts`], for the few hits that are kept).
    pub fn search(
        &self,
        query: &str,
        filters: &Filters,
        limit: usize,
    ) -> Result<Vec<Candidate>, Bm25Error> {
        self.search_scoped(query, filters, limit, &Scope::default())
    }

    /// [`Bm25::search`] leaving out the files of `scope` and scoring with its statistics.
    pub fn search_scoped(
        &self,
        query: &str,
        filters: &Filters,
        limit: usize,
        scope: &Scope<'_>,
    ) -> Result<Vec<Candidate>, Bm25Error> {
        let f = self.fields;
        let mut seen = FxHashSet::default();
        let tokens: Vec<String> = code_tokens(query)
            .into_iter()
            .filter(|t| !crate::tokenize::is_stopword(t) && seen.insert(t.clone()))
            .collect();
        if tokens.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let b = self.boosts;
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        // The query's words, then the abbreviations code writes for them (weighing less).
        let shorts = expand::abbreviations(query);
        let mut terms: Vec<(&str, f32)> = tokens.iter().map(|t| (t.as_str(), 1.0)).collect();
        for (short, weight) in &shorts {
            if seen.insert(short.clone()) {
                terms.push((short.as_str(), *weight));
            }
        }
        // The verb a change is told with ("Remove unneeded lifetimes …") is no item's name.
        let verb = lead::verb_tokens(query);
        for (token, weight) in terms {
            let of_verb = verb.iter().any(|v| v == token);
            for (field, boost) in [
                (f.name, b.name),
                (f.path, b.path),
                (f.signature, b.signature),
                (f.doc, b.doc),
                (f.body, b.body),
            ] {
                let boost = match of_verb {
                    true if field == f.body => boost * lead::IN_BODY,
                    true => boost * lead::ELSEWHERE,
                    false => boost,
                };
                if boost <= 0.0 {
                    continue;
                }
                let term = TermQuery::new(
                    Term::from_field_text(field, token),
                    IndexRecordOption::WithFreqs,
                );
                should.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(Box::new(term), boost * weight)),
                ));
            }
        }
        // Quoted text: the items holding every word of a span score them once more.
        let spans = crate::quotes::quoted_spans(query);
        should.extend(quoted::every_word_clauses(f.body, &spans));
        let mut clauses: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, Box::new(BooleanQuery::new(should)))];
        if !filters.kinds.is_empty() {
            let terms = filters
                .kinds
                .iter()
                .map(|k| Term::from_field_text(f.kind, k.as_str()));
            clauses.push((Occur::Must, any_of(terms)));
        }
        if !filters.languages.is_empty() {
            let terms = filters
                .languages
                .iter()
                .map(|l| Term::from_field_text(f.lang, l));
            clauses.push((Occur::Must, any_of(terms)));
        }
        if !filters.path_prefixes.is_empty() {
            let terms = filters
                .path_prefixes
                .iter()
                .map(|p| Term::from_field_text(f.dirs, p));
            clauses.push((Occur::Must, any_of(terms)));
        }
        if let Some(hidden) = scope.hidden
            && !hidden.is_empty()
        {
            let terms = hidden.iter().map(|p| Term::from_field_text(f.file, p));
            clauses.push((Occur::MustNot, any_of(terms)));
        }
        let query = BooleanQuery::new(clauses);
        let searcher = self.reader.searcher();
        let mut top = cut::top_docs(&searcher, &query, limit, scope.stats)?;
        quoted::raise_holders(&searcher, (f.file, f.text), &mut top, &spans)?;
        // The id column of each segment, opened once for all its hits.
        let ids = searcher
            .segment_readers()
            .iter()
            .map(|r| r.fast_fields().u64("id"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(top
            .into_iter()
            .filter_map(|(score, address)| {
                let id = ids
                    .get(address.segment_ord as usize)?
                    .first(address.doc_id)?;
                Some(Candidate { id, score })
            })
            .collect())
    }

    /// The index handle (for tests and tooling).
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// What searches see now (for corpus statistics over several indexes: [`CorpusStats`]).
    pub fn searcher(&self) -> tantivy::Searcher {
        self.reader.searcher()
    }

    /// Drops the writer (its threads and memory) until the next write makes one again: for
    /// small indexes that are written rarely and must not hold threads meanwhile (overlays).
    /// Nothing is lost: call it after a commit.
    pub fn release_writer(&mut self) {
        if let Some(w) = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            && let Err(e) = w.wait_merging_threads()
        {
            tracing::warn!(error = %e, "releasing the bm25 writer");
        }
    }
}

mod cut;
mod error_text;
mod expand;
mod lead;
mod quoted;
mod schema;
mod stored;

/// A writer made again after one was lost, with the files of what the lost one never
/// committed deleted.
fn new_writer(index: &Index) -> Result<IndexWriter, Bm25Error> {
    let writer = index.writer(WRITER_BYTES)?;
    collect_garbage(&writer);
    Ok(writer)
}

/// Deletes the index's files no commit refers to (segments of a failed or rolled back run).
fn collect_garbage(writer: &IndexWriter) {
    match writer.garbage_collect_files().wait() {
        Ok(gc) if !gc.deleted_files.is_empty() => {
            tracing::info!(
                files = gc.deleted_files.len(),
                "bm25 files of uncommitted work deleted"
            );
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "bm25 files of uncommitted work not deleted"),
    }
}

#[cfg(test)]
mod tests;
