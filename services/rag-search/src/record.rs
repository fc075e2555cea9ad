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

impl ItemRecord {
    /// The key that orders this item among items of equal score ([`order_key`]).
    pub fn order_key(&self) -> u64 {
        order_key(&self.file, self.item.byte_start)
    }
}

/// What orders items of equal score, in every ranking: a hash of the item's file and place in
/// it. It depends on the tree alone, not on ids or on how the index was built, so every replica
/// and every rebuild of the same tree ranks ties alike (docs/RETRIEVAL.md). A hash, not the
/// path's order, so that ties favour no corner of the tree; FNV-1a, whose output is fixed by its
/// definition (no crate version or seed can change it) and costs ~100 instructions here, where
/// a ranking asks for a hundred keys per search.
pub fn order_key(file: &str, byte_start: usize) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let place = (byte_start as u64).to_le_bytes();
    file.as_bytes()
        .iter()
        .chain(&[0])
        .chain(&place)
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::order_key;

    #[test]
    fn the_order_key_is_fnv_1a_of_the_file_a_zero_byte_and_the_place() {
        // Computed apart (Python, FNV-1a 64 over b"src/lib.rs\0" + (42).to_bytes(8, "little")):
        // every replica and every future build must give these same keys.
        assert_eq!(order_key("src/lib.rs", 42), 0x0492_c394_ffb0_6d24);
        assert_eq!(order_key("", 0), 0xe604_823a_2490_29bf);
        assert_ne!(order_key("src/lib.rs", 43), order_key("src/lib.rs", 42));
    }
}
