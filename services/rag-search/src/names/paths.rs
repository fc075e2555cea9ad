//! Paths written from a crate's root, resolved through its re-exports: `reqwest::Client::get`
//! is `crate::async_impl::client::Client::get` because reqwest's root says
//! `pub use self::async_impl::Client` and `async_impl` says `pub use self::client::Client`;
//! `requests.Session.send` is `requests.sessions.Session.send` because `requests/__init__.py`
//! says `from .sessions import Session`.
//! A user or a model writes the public path it knows from the crate's documentation; the index
//! knows canonical paths. Every path here is a lookup key per segment ([`super::key`]) joined
//! with `::`, the crate's own name first (`reqwest::asyncimpl::client::client::get`).

use rustc_hash::{FxHashMap, FxHashSet};

use super::{key, owners};
use crate::parse::Reexport;
use crate::record::ItemRecord;

/// Most re-exports followed in a chain (`a` re-exports `b`'s, which re-exports `c`'s, …).
const MAX_DEPTH: usize = 8;
/// Most paths one written path may resolve to (the same name re-exported under `cfg`s).
const MAX_PATHS: usize = 16;
/// Most steps and re-exports looked at for one written path: a module of thousands of globs
/// (web-sys's features) or globs that import each other end early instead of taking seconds.
const MAX_WORK: usize = 4096;

/// A name a module binds with `pub use`.
#[derive(Debug, Clone)]
struct Bound {
    /// The file declaring it.
    file: String,
    /// The name's key; empty for a glob.
    name: String,
    /// The path as written, each name as its key.
    target: Vec<String>,
}

/// The paths of one index's Rust items and modules, and its re-exports.
#[derive(Debug, Clone, Default)]
pub(super) struct Paths {
    /// Every item's path and each path above it (its modules, its type), with how many items
    /// lie at or below it.
    paths: FxHashMap<String, u32>,
    /// The modules among them (the crate roots too), with their items.
    modules: FxHashMap<String, u32>,
    /// Crates by key, with their items.
    crates: FxHashMap<String, u32>,
    /// The crates that have an item of each name (its key), with how many: a path written
    /// without its crate is resolved from the roots of these alone (a workspace may hold a
    /// hundred test and example crates).
    crates_of_name: FxHashMap<String, FxHashMap<String, u32>>,
    /// Re-exports by the path of the module declaring them.
    bound: FxHashMap<String, Vec<Bound>>,
    /// The modules each file declares re-exports in.
    bound_by_file: FxHashMap<String, Vec<String>>,
    /// Names bound under an alias (`pub use fmt::Subscriber as FmtSubscriber`), by key, with
    /// the module binding each and the file declaring it: a name written alone
    /// (`FmtSubscriber`) that no item has is resolved from there.
    aliases: FxHashMap<String, Vec<(String, String)>>,
}

/// The key of a crate as paths start with it (a file no manifest accounts for: `crate`).
fn crate_key(name: &str) -> String {
    if name.is_empty() {
        "crate".to_owned()
    } else {
        key(name)
    }
}

/// The segments of an item's module below its crate's root, for the languages whose
/// re-exports are read: Rust (`crate::a::b` → `a`, `b`) and Python in a package
/// (`requests.sessions` → `sessions`; the top package is the distribution's root).
pub(super) fn module_of(record: &ItemRecord) -> Option<Vec<&str>> {
    let item = &record.item;
    let separator = match record.language.as_str() {
        "rust" => "::",
        "python" if !item.crate_name.is_empty() => ".",
        _ => return None,
    };
    let module = item
        .canon_path
        .strip_suffix(item.qualname.as_str())?
        .trim_end_matches(separator);
    let mut segments = module.split(separator).filter(|s| !s.is_empty());
    // Rust's `crate`, Python's top package.
    segments.next()?;
    Some(segments.collect())
}

/// The types an item is inside, outermost first: Rust's one (`Client` of `Client::get` and of
/// `<Client as Trait>::get`), Python's classes (`Outer`, `Inner` of `Outer.Inner.method`).
fn owners_of(record: &ItemRecord) -> Vec<&str> {
    let qualname = record.item.qualname.as_str();
    if record.language == "python" {
        let mut classes: Vec<&str> = qualname.split('.').collect();
        classes.pop();
        classes
    } else {
        owners(qualname).take(1).collect()
    }
}

/// An item's path (`reqwest::asyncimpl::client::client::get`) and the paths above it, nearest
/// the root first (the crate's root not among them); none for items of languages whose
/// re-exports are not read. The first `.1` of them are its modules.
fn path_and_above(record: &ItemRecord) -> (Vec<String>, usize) {
    let (Some(path), Some(module)) = (path_of(record), module_of(record)) else {
        return (Vec::new(), 0);
    };
    // Keys hold no `:`: every `::` after the root's ends a path above the item's.
    let mut out: Vec<String> = path
        .match_indices("::")
        .skip(1)
        .map(|(at, _)| path[..at].to_owned())
        .collect();
    out.push(path);
    (out, module.len())
}

/// The key of an item's name, as paths end with it.
fn name_key(record: &ItemRecord) -> String {
    key(record.item.name.trim_end_matches('!'))
}

/// An item's path as [`super::NameIndex::resolve`] gives them
/// (`reqwest::asyncimpl::client::client::get`); none for languages whose re-exports are not
/// read.
pub(crate) fn path_of(record: &ItemRecord) -> Option<String> {
    let mut path = module_path(record)?;
    for owner in owners_of(record) {
        path.push_str("::");
        path.extend(super::key_chars(owner));
    }
    path.push_str("::");
    path.push_str(&name_key(record));
    Some(path)
}

/// The path of an item's module (`reqwest::asyncimpl::body`); none for languages whose
/// re-exports are not read.
fn module_path(record: &ItemRecord) -> Option<String> {
    let module = module_of(record)?;
    let mut path = crate_key(&record.item.crate_name);
    for segment in module {
        path.push_str("::");
        path.extend(super::key_chars(segment));
    }
    Some(path)
}

/// The path of the type an item belongs to (its outermost class in Python), or of the item
/// itself when it belongs to none: what a crate's root would re-export to make it public
/// there (`reqwest::asyncimpl::body::body` for `Body::as_bytes` in `async_impl/body.rs`).
pub fn head_of(record: &ItemRecord) -> Option<String> {
    let mut path = module_path(record)?;
    path.push_str("::");
    match owners_of(record).first() {
        Some(owner) => path.extend(super::key_chars(owner)),
        None => path.push_str(&name_key(record)),
    }
    Some(path)
}

impl Paths {
    /// Whether the type (or free item) at `head` ([`head_of`]) is bound at its crate's root
    /// under its own name: defined there, or re-exported there by name or through a glob
    /// (`reqwest::Body` is the async client's `Body`, not the blocking one's), re-exports in
    /// files `hidden` says no to left out. An alias does not count: `pub use fmt::Subscriber as
    /// FmtSubscriber` is a convenience, not the name the crate gives the type (measured:
    /// counting aliases cost two `easy` queries, docs/RETRIEVAL.md).
    pub(super) fn at_root(&self, head: &str, hidden: &dyn Fn(&str) -> bool) -> bool {
        let Some((root, below)) = head.split_once("::") else {
            return false;
        };
        let Some((_, name)) = below.rsplit_once("::") else {
            // Defined in the root module itself.
            return true;
        };
        // Most candidates are not bound there: the root neither names them nor has a glob.
        let may_bind = self
            .bound
            .get(root)
            .is_some_and(|bound| bound.iter().any(|b| b.name.is_empty() || b.name == name));
        may_bind
            && Walk::new(self, hidden)
                .step(root, name, 0)
                .iter()
                .any(|p| p == head)
    }

    /// Adds an item's path.
    pub(super) fn insert(&mut self, record: &ItemRecord) {
        let (paths, modules) = path_and_above(record);
        if paths.is_empty() {
            return;
        }
        let root = crate_key(&record.item.crate_name);
        *self.crates.entry(root.clone()).or_default() += 1;
        *self
            .crates_of_name
            .entry(name_key(record))
            .or_default()
            .entry(root.clone())
            .or_default() += 1;
        *self.modules.entry(root).or_default() += 1;
        for (i, path) in paths.into_iter().enumerate() {
            if i < modules {
                *self.modules.entry(path.clone()).or_default() += 1;
            }
            *self.paths.entry(path).or_default() += 1;
        }
    }

    /// Takes an item's path off.
    pub(super) fn remove(&mut self, record: &ItemRecord) {
        let (paths, modules) = path_and_above(record);
        if paths.is_empty() {
            return;
        }
        let root = crate_key(&record.item.crate_name);
        uncount(&mut self.crates, root.clone());
        let name = name_key(record);
        if let Some(crates) = self.crates_of_name.get_mut(&name) {
            uncount(crates, root.clone());
            if crates.is_empty() {
                self.crates_of_name.remove(&name);
            }
        }
        uncount(&mut self.modules, root);
        for (i, path) in paths.into_iter().enumerate() {
            if i < modules {
                uncount(&mut self.modules, path.clone());
            }
            uncount(&mut self.paths, path);
        }
    }

    /// Sets the re-exports of `file` (replacing those it had).
    pub(super) fn set_reexports(&mut self, file: &str, reexports: &[Reexport]) {
        self.remove_reexports(file);
        let mut modules = Vec::new();
        for r in reexports {
            let mut module = crate_key(&r.crate_name);
            for segment in &r.module {
                module.push_str("::");
                module.push_str(&key(segment));
            }
            if !modules.contains(&module) {
                modules.push(module.clone());
            }
            // Keyed once here; `crate`, `self`, `super` and `::` stay words of their own.
            let target: Vec<String> = r
                .target
                .iter()
                .map(|s| match s.as_str() {
                    "crate" | "self" | "super" | "::" => s.clone(),
                    _ => key(s),
                })
                .collect();
            let name = key(&r.name);
            let aliased = !name.is_empty() && target.last().is_some_and(|t| *t != name);
            if aliased {
                self.aliases
                    .entry(name.clone())
                    .or_default()
                    .push((module.clone(), file.to_owned()));
            }
            self.bound.entry(module).or_default().push(Bound {
                file: file.to_owned(),
                name,
                target,
            });
        }
        if !modules.is_empty() {
            self.bound_by_file.insert(file.to_owned(), modules);
        }
    }

    /// Forgets the re-exports of `file`.
    pub(super) fn remove_reexports(&mut self, file: &str) {
        if self.bound_by_file.contains_key(file) {
            self.aliases.retain(|_, at| {
                at.retain(|(_, f)| f != file);
                !at.is_empty()
            });
        }
        for module in self.bound_by_file.remove(file).into_iter().flatten() {
            if let Some(bound) = self.bound.get_mut(&module) {
                bound.retain(|b| b.file != file);
                if bound.is_empty() {
                    self.bound.remove(&module);
                }
            }
        }
    }

    /// Forgets everything.
    pub(super) fn clear(&mut self) {
        self.paths.clear();
        self.modules.clear();
        self.crates.clear();
        self.crates_of_name.clear();
        self.bound.clear();
        self.bound_by_file.clear();
        self.aliases.clear();
    }

    /// The item paths a name written alone (its key) means where a module binds it under an
    /// alias (`FmtSubscriber` for tracing-subscriber's `fmt::Subscriber`), re-exports in
    /// files `hidden` says no to left out; none for a name no re-export aliases (most).
    pub(super) fn resolve_alias(
        &self,
        name: &str,
        hidden: &dyn Fn(&str) -> bool,
    ) -> FxHashSet<String> {
        let Some(at) = self.aliases.get(name) else {
            return FxHashSet::default();
        };
        let mut walk = Walk::new(self, hidden);
        let mut found = FxHashSet::default();
        for (module, file) in at {
            if !hidden(file) {
                found.extend(walk.step(module, name, 0));
            }
        }
        found.retain(|p| !self.modules.contains_key(p));
        found
    }

    /// The item paths a written path (segment keys: `reqwest`, `client`, `get`) can mean: from
    /// the crate it names first, and from the root of each crate that has an item of its name
    /// (`Client::get` in reqwest is `reqwest::Client::get`; `config::load` may be a module's or
    /// crate `config`'s), through re-exports, those declared in a file `hidden` says no to left
    /// out (a file a session's overlay changed). None when a lowercase last segment
    /// (`lowercase_last`) is a module there: `tracing_subscriber::fmt` names the module, not
    /// the function `fmt::fmt` the root also re-exports as `fmt`.
    pub(super) fn resolve(
        &self,
        written: &[String],
        lowercase_last: bool,
        hidden: &dyn Fn(&str) -> bool,
    ) -> FxHashSet<String> {
        let (Some((first, rest)), Some(name)) = (written.split_first(), written.last()) else {
            return FxHashSet::default();
        };
        let mut starts: Vec<(&String, &[String])> = Vec::new();
        if self.crates.contains_key(first) {
            starts.push((first, rest));
        }
        // From a crate's root only where its first segment can lead somewhere: defined there,
        // or the root re-exports (a workspace may hold a crate per test file).
        for root in self
            .crates_of_name
            .get(name)
            .into_iter()
            .flat_map(|c| c.keys())
        {
            if self.bound.contains_key(root) || self.paths.contains_key(&format!("{root}::{first}"))
            {
                starts.push((root, written));
            }
        }
        let mut walk = Walk::new(self, hidden);
        let mut found = FxHashSet::default();
        for (root, rest) in starts {
            let mut current = vec![root.clone()];
            for segment in rest {
                current = walk.step_all(&current, segment, 0);
            }
            found.extend(current);
        }
        if lowercase_last && found.iter().any(|p| self.modules.contains_key(p)) {
            found.clear();
        }
        found
    }
}

/// One resolution: the work done so far (bounded by [`MAX_WORK`]) and the steps already
/// answered (each `(module, segment)` once; one still being answered gives what is defined
/// there only).
struct Walk<'a> {
    paths: &'a Paths,
    hidden: &'a dyn Fn(&str) -> bool,
    work: usize,
    done: FxHashMap<(String, String), Option<Vec<String>>>,
}

impl<'a> Walk<'a> {
    fn new(paths: &'a Paths, hidden: &'a dyn Fn(&str) -> bool) -> Self {
        Self {
            paths,
            hidden,
            work: 0,
            done: FxHashMap::default(),
        }
    }

    /// Counts `n` units of work if the budget has them; false (and nothing counted) if not.
    fn spend(&mut self, n: usize) -> bool {
        if self.work + n > MAX_WORK {
            return false;
        }
        self.work += n;
        true
    }

    /// [`Self::step`] from each of `modules`.
    fn step_all(&mut self, modules: &[String], segment: &str, depth: usize) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for module in modules {
            for path in self.step(module, segment, depth) {
                if !out.contains(&path) && out.len() < MAX_PATHS {
                    out.push(path);
                }
            }
        }
        out
    }

    /// What `segment` (a key) names in `module`: an item or module defined there (a module
    /// holding re-exports only too), or what a re-export there binds to it — by name, or
    /// through a glob when no re-export names it (a name imported by name hides the globs', as
    /// in Rust).
    fn step(&mut self, module: &str, segment: &str, depth: usize) -> Vec<String> {
        let paths = self.paths;
        let child = format!("{module}::{segment}");
        let mut out = Vec::new();
        if paths.paths.contains_key(&child) || paths.bound.contains_key(&child) {
            out.push(child);
        }
        // No re-export there: nothing more to follow (most steps).
        if !paths.bound.contains_key(module) {
            return out;
        }
        let memo = (module.to_owned(), segment.to_owned());
        match self.done.get(&memo) {
            Some(Some(answer)) => return answer.clone(),
            // Being answered: what is defined there, no re-export followed again (a glob cycle;
            // or `pub use self::client::Client` in a module that has a module `client`, the
            // two one key).
            Some(None) => return out,
            None => {}
        }
        if !self.spend(1) {
            return out;
        }
        self.done.insert(memo.clone(), None);
        if depth < MAX_DEPTH {
            let bound: Vec<&Bound> = paths
                .bound
                .get(module)
                .into_iter()
                .flatten()
                .filter(|b| !(self.hidden)(&b.file))
                .collect();
            if self.spend(bound.len()) {
                let named: Vec<&Bound> = bound
                    .iter()
                    .copied()
                    .filter(|b| b.name == segment)
                    .collect();
                for b in &named {
                    out.extend(self.target(module, &b.target, depth + 1));
                }
                if named.is_empty() {
                    for b in bound.iter().filter(|b| b.name.is_empty()) {
                        let sources = self.target(module, &b.target, depth + 1);
                        out.extend(self.step_all(&sources, segment, depth + 1));
                    }
                }
            }
        }
        self.done.insert(memo, Some(out.clone()));
        out
    }

    /// Where a `use` path written in `module` leads (`self::x::Y`, `super::Y`, `crate::a::Y`,
    /// or `x::Y` from `module`); nothing for a path into another crate.
    fn target(&mut self, module: &str, target: &[String], depth: usize) -> Vec<String> {
        let root = module.split("::").next().unwrap_or(module);
        let mut current = module.to_owned();
        let mut segments = target;
        let mut leading = true;
        while let Some((first, rest)) = segments.split_first() {
            match first.as_str() {
                "crate" if leading => current = root.to_owned(),
                "self" => {}
                "super" => match current.rsplit_once("::") {
                    Some((parent, _)) => current = parent.to_owned(),
                    None => return Vec::new(),
                },
                "::" => return Vec::new(),
                _ => break,
            }
            leading = false;
            segments = rest;
        }
        let mut paths = vec![current];
        for segment in segments {
            paths = self.step_all(&paths, segment, depth);
            if paths.is_empty() {
                break;
            }
        }
        paths
    }
}

/// Counts one less under `key`, and forgets it at zero.
fn uncount(map: &mut FxHashMap<String, u32>, key: String) {
    if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
}
