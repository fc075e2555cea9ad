//! An item as an index keeps it: what ranking, names and the index itself all read. It sits
//! below them so that they need not depend on one another for it.

use crate::parse::ParsedItem;

/// An item as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ItemRecord {
    /// Stable id within the workspace index.
    pub id: u64,
    /// File path relative to the root.
    pub file: String,
    /// Language of the file.
    pub language: String,
    /// blake3 (hex) of the file when the item was parsed.
    pub file_hash: String,
    /// The parsed item.
    pub item: ParsedItem,
    /// blake3 (hex) of the text the item is embedded from.
    #[serde(default)]
    pub embed_hash: String,
}
