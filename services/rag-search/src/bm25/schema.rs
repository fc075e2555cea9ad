//! The BM25 index's schema and settings: what a document holds and how it is stored.

use tantivy::IndexSettings;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::store::Compressor;

use super::TOKENIZER;

/// The fields of a document.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fields {
    pub(super) id: Field,
    pub(super) order: Field,
    pub(super) file: Field,
    pub(super) dirs: Field,
    pub(super) kind: Field,
    pub(super) lang: Field,
    pub(super) name: Field,
    pub(super) path: Field,
    pub(super) signature: Field,
    pub(super) doc: Field,
    pub(super) body: Field,
    pub(super) text: Field,
}

/// The fast field of each document's [`crate::record::order_key`]: what orders equal scores.
pub(super) const ORDER_FIELD: &str = "order";

/// The index's fields: raw terms for filters, code-tokenized text for the boosted fields, the
/// stored text.
pub(super) fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = |stored: bool| {
        let o = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        if stored { o.set_stored() } else { o }
    };
    let fields = Fields {
        id: b.add_u64_field("id", INDEXED | STORED | FAST),
        order: b.add_u64_field(ORDER_FIELD, FAST),
        file: b.add_text_field("file", STRING | STORED),
        dirs: b.add_text_field("dirs", STRING),
        kind: b.add_text_field("kind", STRING),
        lang: b.add_text_field("lang", STRING),
        name: b.add_text_field("name", text(false)),
        path: b.add_text_field("path", text(false)),
        signature: b.add_text_field("signature", text(false)),
        doc: b.add_text_field("doc", text(false)),
        body: b.add_text_field("body", text(false)),
        text: b.add_text_field("text", STORED),
    };
    (b.build(), fields)
}

/// Bytes of stored text per doc-store block. A search reads its hits' texts, and each read
/// decompresses the whole block around the text: tantivy's 16 KiB default made that the
/// largest single cost of a BM25 search (docs/PERFORMANCE.md); an item's text is ~1 KiB.
pub(super) const DOCSTORE_BLOCK_BYTES: usize = 4096;

/// How stored text is compressed: not at all. Reading a hit's text decompressed a whole block
/// (~10k instructions of lz4 per hit, the largest cost of a BM25 search after tantivy's own
/// ranking); uncompressed, the `.store` file is ~2.5x larger (tokio: 2.99 -> ~7 MB, mapped, not
/// read into memory) and a read is one copy (docs/PERFORMANCE.md).
pub(super) const DOCSTORE_COMPRESSION: Compressor = Compressor::None;

/// The index's settings (made when it is created; an index made with others is started over).
pub(super) fn settings() -> IndexSettings {
    IndexSettings {
        docstore_blocksize: DOCSTORE_BLOCK_BYTES,
        docstore_compression: DOCSTORE_COMPRESSION,
        ..IndexSettings::default()
    }
}
