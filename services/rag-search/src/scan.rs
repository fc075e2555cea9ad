//! Walking a workspace: the one reading of its ignore files ([`path_policy::ignores`]: from the
//! root down, and from the enclosing repository's root when the workspace is inside one;
//! hidden files skipped), files over 1 MiB, binary files and non-UTF-8 files skipped,
//! `.git/` and ploke's own `.ploke/` never entered, symlinks never followed. Single paths
//! (refreshes, the watcher, snippets, context assembly) are resolved by the one path policy of
//! every service ([`ploke_runtime::path_policy`]) and follow the same rules.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ploke_runtime::path_policy;
use ploke_runtime::path_policy::ignores::IgnoreRules;

/// Largest file indexed.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// One file worth indexing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedFile {
    /// Path relative to the root, `/`-separated.
    pub rel: String,
    /// Absolute path.
    pub abs: PathBuf,
    /// Language from the extension.
    pub language: &'static str,
}

/// `abs` relative to `root`, `/`-separated; `None` outside the root, and for a path that is
/// not UTF-8 (no tool or RPC could name it: its lossy spelling names nothing).
pub fn relative(root: &Path, abs: &Path) -> Option<String> {
    let rel = abs.strip_prefix(root).ok()?;
    let parts: Vec<&str> = rel
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("/"))
    }
}

/// `rel`'s absolute path when it is a regular file inside `root` under its own name: no symlink
/// on the way or at the end, as a walk would find it; `None` otherwise (missing, a symlink,
/// outside, not a regular file).
pub fn own_file(root: &Path, rel: &str) -> Option<PathBuf> {
    own(root, rel)
        .filter(|(_, m)| m.is_file())
        .map(|(abs, _)| abs)
}

/// Like [`own_file`], for a directory.
pub fn own_dir(root: &Path, rel: &str) -> Option<PathBuf> {
    own(root, rel)
        .filter(|(_, m)| m.is_dir())
        .map(|(abs, _)| abs)
}

fn own(root: &Path, rel: &str) -> Option<(PathBuf, std::fs::Metadata)> {
    let abs = path_policy::resolve_own(root, rel).ok().flatten()?;
    let meta = std::fs::symlink_metadata(&abs).ok()?;
    Some((abs, meta))
}

/// Whether ploke should never index this relative path (its own state, VCS internals).
pub fn excluded(rel: &str) -> bool {
    rel.split('/').any(|p| p == ".git" || p == ".ploke")
}

/// Whether `rel`'s name alone allows indexing it: not hidden, not ploke's or git's own, of a
/// known language (ignore files aside, which [`is_indexable`] also reads). An overlay's files
/// (sent by a client, not walked) are indexed by this rule.
pub fn indexable_name(rel: &str) -> bool {
    !excluded(rel)
        && !rel.split('/').any(|p| p.starts_with('.'))
        && crate::parse::language_of(Path::new(rel)).is_some()
}

/// Whether the walker would index `rel`: not hidden, not ploke's or git's own, not left out by
/// the ignore files ([`path_policy::ignores::is_ignored`]), and of a known language. Used for
/// single files (refreshes, the watcher) so that they follow the same rules as a full walk.
pub fn is_indexable(root: &Path, rel: &str) -> bool {
    indexable_by(&IgnoreRules::new(root), rel)
}

/// [`is_indexable`] with rules already read (a refresh judges many paths by one reading).
pub fn indexable_by(rules: &IgnoreRules, rel: &str) -> bool {
    indexable_name(rel) && !rules.is_ignored(rel, false)
}

/// Every indexable file under `root`, sorted by path; `skipped` counts files left out.
pub fn scan(root: &Path) -> (Vec<ScannedFile>, u64) {
    scan_under(root, root)
}

/// Every indexable file under `start` (`root` or a directory inside it), relative to `root`,
/// sorted by path; `skipped` counts files left out. The ignore files on the way from the root
/// to `start` apply as in a walk of the whole root ([`path_policy::ignores`]).
pub fn scan_under(root: &Path, start: &Path) -> (Vec<ScannedFile>, u64) {
    scan_by(&Arc::new(IgnoreRules::new(root)), root, start)
}

/// [`scan_under`] with rules already read.
pub fn scan_by(rules: &Arc<IgnoreRules>, root: &Path, start: &Path) -> (Vec<ScannedFile>, u64) {
    let mut files = Vec::new();
    let mut skipped = 0u64;
    for entry in rules.walker(start).build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let abs = entry.path().to_owned();
        let Some(rel) = relative(root, &abs) else {
            continue;
        };
        let Some(language) = crate::parse::language_of(&abs) else {
            continue;
        };
        if excluded(&rel) || entry.metadata().map_or(true, |m| m.len() > MAX_FILE_BYTES) {
            skipped += 1;
            continue;
        }
        files.push(ScannedFile { rel, abs, language });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    (files, skipped)
}

/// The file's text, or `None` when it is binary (a NUL byte) or not UTF-8.
pub fn read_text(bytes: Vec<u8>) -> Option<String> {
    if looks_binary(&bytes) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// Whether content is text as the index takes it: no NUL byte near the start, UTF-8.
pub fn is_text(bytes: &[u8]) -> bool {
    !looks_binary(bytes) && std::str::from_utf8(bytes).is_ok()
}

fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|b| *b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_is_not_utf8_is_left_out() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("good.rs"), "fn g() {}").unwrap();
        let bad = root.join(std::ffi::OsStr::from_bytes(b"bad\xffname.rs"));
        std::fs::write(&bad, "fn b() {}").unwrap();
        assert_eq!(relative(root, &bad), None);
        let (files, _) = scan(root);
        let rels: Vec<&str> = files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, vec!["good.rs"]);
    }

    #[test]
    fn honours_gitignore_size_binary_and_own_state() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |p: &str, data: &[u8]| {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, data).unwrap();
        };
        write(".gitignore", b"target/\nsecret.rs\n");
        write("src/lib.rs", b"fn a() {}");
        write("src/secret.rs", b"fn s() {}");
        write("target/debug/gen.rs", b"fn g() {}");
        write(".ploke/index/x.json", b"{}");
        write(".hidden/h.rs", b"fn h() {}");
        write("README.md", b"# hi");
        write("image.png", b"\x89PNG");
        write("big.rs", &vec![b'a'; (MAX_FILE_BYTES + 1) as usize]);
        let (files, skipped) = scan(root);
        let rels: Vec<&str> = files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, vec!["README.md", "src/lib.rs"]);
        assert_eq!(skipped, 1);
        assert_eq!(read_text(b"a\0b".to_vec()), None);
        assert_eq!(read_text(vec![0xff, 0xfe]), None);
        assert_eq!(read_text(b"ok".to_vec()), Some("ok".into()));
        assert!(is_text(b"ok") && !is_text(b"a\0b") && !is_text(&[0xff, 0xfe]));
        // Single files follow the same rules.
        assert!(is_indexable(root, "src/lib.rs"));
        assert!(!is_indexable(root, "src/secret.rs"));
        assert!(!is_indexable(root, "target/debug/gen.rs"));
        assert!(!is_indexable(root, ".hidden/h.rs"));
        assert!(!is_indexable(root, ".ploke/index/x.json"));
        assert!(!is_indexable(root, "image.png"));
        write("sub/.gitignore", b"local.rs\n");
        assert!(!is_indexable(root, "sub/local.rs"));
        assert!(is_indexable(root, "sub/other.rs"));
    }

    #[test]
    fn a_clone_kept_under_an_ignoring_directory_is_scanned_whole() {
        // Where `ploke up` keeps the clones of git workspaces: `.ploke/repos/`, under a
        // `.ploke/.gitignore` of `*` (its files stay out of the served repository's git).
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".ploke")).unwrap();
        std::fs::write(dir.path().join(".ploke/.gitignore"), "*\n").unwrap();
        let root = dir.path().join(".ploke/repos/billing-1a2b");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("src/api")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "pub fn charge() {}\n").unwrap();
        std::fs::write(root.join("src/api/mod.rs"), "pub fn route() {}\n").unwrap();
        let (files, _) = scan(&root);
        let rels: Vec<&str> = files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, vec!["src/api/mod.rs", "src/lib.rs"]);
        assert!(is_indexable(&root, "src/lib.rs"));
        // A directory scanned on its own (a refresh) is judged the same way.
        let (under, _) = scan_under(&root, &root.join("src/api"));
        let rels: Vec<&str> = under.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, vec!["src/api/mod.rs"]);
    }
}
