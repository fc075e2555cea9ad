//! Looking items up by canonical (or public) path, by name and by file: what
//! `code_item_lookup`, `replace_item` and snippets by path ask.

use super::{ItemRecord, Kind, WorkspaceIndex};
use crate::names::{key, key_eq};

impl WorkspaceIndex {
    /// Items with this exact canonical path: `crate::a::Item`, or with the crate named
    /// (`my_crate::a::Item`) where several crates have the same path; else the items a public
    /// path means through the crate's re-exports (`reqwest::Client` for
    /// `crate::async_impl::client::Client`, `requests.Session` for `requests.sessions.Session`).
    pub fn lookup_canon(&self, canon: &str, kind: Option<Kind>) -> Vec<&ItemRecord> {
        let named = |r: &ItemRecord| {
            let krate = r.item.crate_name.as_str();
            !krate.is_empty()
                && canon
                    .strip_prefix(krate)
                    .and_then(|rest| rest.strip_prefix("::"))
                    .is_some_and(|rest| r.item.canon_path.strip_prefix("crate::") == Some(rest))
        };
        let found = self.lookup(|r| r.item.canon_path == canon || named(r), kind);
        if !found.is_empty() {
            return found;
        }
        // A public path (`reqwest::Client::get` for `crate::async_impl::client::Client::get`):
        // through the crates' re-exports (paths compared without case), then the name and the
        // type before it as written: one that differs from the item's in case only is a
        // collision of keys (`k::Client::get` is no free `k::client::get`), one that differs in
        // letters is an `as` alias (`k::FastClient` for `pub use fast::Client as FastClient`).
        let public = self.items.names().resolve_path(canon);
        if public.is_empty() {
            return found;
        }
        let mut segments = crate::names::path_segments(canon).rev();
        let name = segments.next().unwrap_or(canon);
        let owner = segments
            .next()
            .filter(|s| s.starts_with(char::is_uppercase));
        let (name_key, owner_key) = (key(name), owner.map(key));
        let as_written = |actual: &str, written: &str, written_key: &str| {
            actual == written || !key_eq(actual, written_key)
        };
        self.lookup(
            |r| {
                as_written(&r.item.name, name, &name_key)
                    && match (crate::names::owners(&r.item.qualname).next(), owner) {
                        (Some(actual), Some(written)) => {
                            as_written(actual, written, owner_key.as_deref().unwrap_or_default())
                        }
                        (None, None) => true,
                        (Some(_), None) | (None, Some(_)) => false,
                    }
                    && crate::names::path_of(r).is_some_and(|p| public.contains(&p))
            },
            kind,
        )
    }

    /// Items with this bare name (or qualified name).
    pub fn lookup_name(&self, name: &str, kind: Option<Kind>) -> Vec<&ItemRecord> {
        self.lookup(|r| r.item.name == name || r.item.qualname == name, kind)
    }

    /// Every item of one file, in span order.
    pub fn lookup_file(&self, file: &str, kind: Option<Kind>) -> Vec<&ItemRecord> {
        let mut out: Vec<&ItemRecord> = self
            .items
            .values()
            .filter(|r| r.file == file && kind.is_none_or(|k| r.item.kind == k))
            .collect();
        out.sort_by_key(|r| (r.item.byte_start, std::cmp::Reverse(r.item.byte_end)));
        out
    }

    fn lookup(&self, pred: impl Fn(&ItemRecord) -> bool, kind: Option<Kind>) -> Vec<&ItemRecord> {
        let mut out: Vec<&ItemRecord> = self
            .items
            .values()
            .filter(|r| pred(r) && kind.is_none_or(|k| r.item.kind == k))
            .collect();
        out.sort_by(|a, b| by_place(a, b));
        out
    }
}

/// The order lookups answer in: canonical path, file, position.
pub(crate) fn by_place(a: &ItemRecord, b: &ItemRecord) -> std::cmp::Ordering {
    (&a.item.canon_path, &a.file, a.item.byte_start).cmp(&(
        &b.item.canon_path,
        &b.file,
        b.item.byte_start,
    ))
}
