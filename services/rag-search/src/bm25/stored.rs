//! Reading items' stored texts back by id: each id's document found in the id field's postings
//! and only its text taken out of the doc store.

use rustc_hash::FxHashMap;
use tantivy::schema::document::{DeserializeError, DocumentDeserialize, DocumentDeserializer};
use tantivy::schema::{Field, IndexRecordOption, OwnedValue};
use tantivy::{DocAddress, DocSet, TERMINATED, TantivyError, Term};

use super::{Bm25, Bm25Error};

impl Bm25 {
    /// Source texts of items by id (an id without a live document is left out).
    pub fn texts(&self, ids: &[u64]) -> Result<FxHashMap<u64, String>, Bm25Error> {
        let f = self.fields;
        let searcher = self.reader.searcher();
        let mut out = FxHashMap::with_capacity_and_hasher(ids.len(), Default::default());
        for (ord, segment) in searcher.segment_readers().iter().enumerate() {
            let postings_of = segment.inverted_index(f.id)?;
            let alive = segment.alive_bitset();
            for &id in ids {
                if out.contains_key(&id) {
                    continue;
                }
                let term = Term::from_field_u64(f.id, id);
                let Some(mut postings) = postings_of
                    .read_postings(&term, IndexRecordOption::Basic)
                    .map_err(TantivyError::from)?
                else {
                    continue;
                };
                let mut doc = postings.doc();
                while doc != TERMINATED && alive.is_some_and(|a| a.is_deleted(doc)) {
                    doc = postings.advance();
                }
                if doc == TERMINATED {
                    continue;
                }
                let address = DocAddress::new(u32::try_from(ord).unwrap_or(u32::MAX), doc);
                let stored: StoredText = searcher.doc(address)?;
                if let Some(text) = stored.text(f.text) {
                    out.insert(id, text);
                }
            }
        }
        Ok(out)
    }
}

/// A stored document's values, read straight into owned values (no intermediate document).
struct StoredText(Vec<(Field, OwnedValue)>);

impl StoredText {
    /// The text stored in `field`, moved out.
    fn text(self, field: Field) -> Option<String> {
        self.0.into_iter().find_map(|(f, v)| match v {
            OwnedValue::Str(s) if f == field => Some(s),
            _ => None,
        })
    }
}

impl DocumentDeserialize for StoredText {
    fn deserialize<'de, D>(mut deserializer: D) -> Result<Self, DeserializeError>
    where
        D: DocumentDeserializer<'de>,
    {
        let mut values = Vec::with_capacity(deserializer.size_hint());
        while let Some(value) = deserializer.next_field::<OwnedValue>()? {
            values.push(value);
        }
        Ok(Self(values))
    }
}
