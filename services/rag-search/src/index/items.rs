//! The items of one index by id, with their names indexed beside them ([`NameIndex`]): one
//! place changes both, so a name never outlives its item. Files' re-exports go to the names
//! through here too.

use rustc_hash::FxHashMap;

use crate::names::NameIndex;
use crate::parse::Reexport;

use super::ItemRecord;

/// Items by id and by name. Reads go through `Deref` to the map; writes through the methods.
#[derive(Debug, Clone, Default)]
pub(super) struct Items {
    by_id: FxHashMap<u64, ItemRecord>,
    names: NameIndex,
}

impl Items {
    /// Adds (or replaces) an item.
    pub(super) fn insert(&mut self, id: u64, record: ItemRecord) {
        if let Some(old) = self.by_id.remove(&id) {
            self.names.remove(&old);
        }
        self.names.insert(&record);
        self.by_id.insert(id, record);
    }

    /// Removes an item.
    pub(super) fn remove(&mut self, id: &u64) -> Option<ItemRecord> {
        let old = self.by_id.remove(id)?;
        self.names.remove(&old);
        Some(old)
    }

    /// Sets the re-exports of `file`, replacing those it had.
    pub(super) fn set_reexports(&mut self, file: &str, reexports: &[Reexport]) {
        self.names.set_reexports(file, reexports);
    }

    /// Forgets the re-exports of `file`.
    pub(super) fn remove_reexports(&mut self, file: &str) {
        self.names.remove_reexports(file);
    }

    /// Forgets every item.
    pub(super) fn clear(&mut self) {
        self.by_id.clear();
        self.names.clear();
    }

    /// The items' names.
    pub(super) fn names(&self) -> &NameIndex {
        &self.names
    }
}

impl std::ops::Deref for Items {
    type Target = FxHashMap<u64, ItemRecord>;

    fn deref(&self) -> &Self::Target {
        &self.by_id
    }
}

impl FromIterator<(u64, ItemRecord)> for Items {
    fn from_iter<T: IntoIterator<Item = (u64, ItemRecord)>>(iter: T) -> Self {
        let mut items = Self::default();
        for (id, record) in iter {
            items.insert(id, record);
        }
        items
    }
}
