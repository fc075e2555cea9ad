//! Which files of a workspace its ignore files leave out, read one way for every walk and
//! every single path (rag-search's scan, refreshes and watcher; tool-executor's search_code):
//!
//! - `.gitignore` and `.ignore` files from the workspace root down, each anchored at its own
//!   directory and judging the entries below it, a deeper file overriding a shallower one (any
//!   `.ignore` over any `.gitignore`, as ripgrep reads them), a directory left out taking all
//!   below;
//! - when the workspace is a subdirectory of a git repository (a monorepo's service), those of
//!   the directories from the repository's root down to the workspace's, as git applies them;
//!   these, and those above where a walk starts, are final: a deeper `!pattern` does not undo
//!   them;
//! - the workspace's own `.git/info/exclude` when it is a repository's root.
//!
//! Nothing above the enclosing repository counts (or above the workspace when it is in none):
//! a clone kept under a directory whose `.gitignore` says `*` (ploke's own `.ploke/repos`) is
//! indexed whole. Nor does the server user's global excludes file: replicas answer alike.

use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The regular file `name` of `dir`, as a matcher anchored at `dir` (a FIFO named
/// `.gitignore` is never opened).
fn matcher(dir: &Path, name: &str) -> Option<Gitignore> {
    let file = dir.join(name);
    std::fs::symlink_metadata(&file)
        .is_ok_and(|m| m.is_file())
        .then(|| Gitignore::new(&file).0)
}

/// The directories from the root of the git repository enclosing `root` down to `root`'s
/// parent, outermost first; none when `root` is a repository's root or in no repository.
fn enclosing_dirs(root: &Path) -> Vec<PathBuf> {
    if root.join(".git").exists() {
        return Vec::new();
    }
    let mut dirs = Vec::new();
    for dir in root.ancestors().skip(1) {
        dirs.push(dir.to_owned());
        if dir.join(".git").exists() {
            dirs.reverse();
            return dirs;
        }
    }
    Vec::new()
}

/// Ignore files read as one level of precedence, outermost directory first: `.ignore` files
/// over `.gitignore` files, a deeper one over a shallower one.
#[derive(Default)]
struct Rules {
    ignore: Vec<Gitignore>,
    git: Vec<Gitignore>,
}

impl Rules {
    /// Adds the ignore files of `dir` (deeper than any added before).
    fn read(&mut self, dir: &Path) {
        self.ignore.extend(matcher(dir, ".ignore"));
        self.git.extend(matcher(dir, ".gitignore"));
    }

    /// Their verdict on the absolute `path`: `Some(true)` left out, `Some(false)` kept by a
    /// `!pattern`, `None` when no file speaks of it.
    fn judge(&self, path: &Path, is_dir: bool) -> Option<bool> {
        self.ignore
            .iter()
            .rev()
            .chain(self.git.iter().rev())
            .map(|g| g.matched(path, is_dir))
            .find(|m| !m.is_none())
            .map(|m| m.is_ignore())
    }

    fn is_empty(&self) -> bool {
        self.ignore.is_empty() && self.git.is_empty()
    }
}

/// The rules above `start` (`root` or a path inside it): the enclosing repository's, then the
/// workspace's directories from `root` down to `start`'s parent.
fn above(root: &Path, start: &Path) -> Rules {
    let mut rules = Rules::default();
    for dir in enclosing_dirs(root) {
        rules.read(&dir);
    }
    if let Ok(rel) = start.strip_prefix(root) {
        let mut dirs: Vec<&Path> = rel.ancestors().skip(1).collect();
        dirs.reverse();
        for dir in dirs {
            rules.read(&root.join(dir));
        }
    }
    rules
}

/// A walk of `start` (`root` or a path inside it) that leaves out what the ignore files say
/// (module doc), hidden entries below `start` and `.git` / `.ploke` whatever their case;
/// symlinks are not followed.
pub fn walker(root: &Path, start: &Path) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(start);
    builder
        .hidden(true)
        .parents(false)
        .ignore(true)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false);
    let rules = above(root, start);
    // `.git` and `.ploke` (any case) are never entered, hidden or not.
    builder.filter_entry(move |e| {
        e.depth() == 0
            || super::protected(e.file_name()).is_none()
                && (rules.is_empty()
                    || rules.judge(e.path(), e.file_type().is_some_and(|t| t.is_dir()))
                        != Some(true))
    });
    builder
}

/// Whether the ignore files leave `rel` (relative to `root`, `/`-separated) out, or one of the
/// directories on its way: what `walker(root, root)` would not yield. Hidden names are not
/// judged here.
pub fn is_ignored(root: &Path, rel: &str, is_dir: bool) -> bool {
    let outer = above(root, root);
    let exclude = std::fs::symlink_metadata(root.join(".git/info/exclude"))
        .is_ok_and(|m| m.is_file())
        .then(|| {
            let mut b = GitignoreBuilder::new(root);
            let _ = b.add(root.join(".git/info/exclude"));
            b.build().unwrap_or_else(|_| Gitignore::empty())
        });
    let mut inner = Rules::default();
    let mut path = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        inner.read(&path);
        path.push(part);
        let dir = is_dir || i + 1 < parts.len();
        if outer.judge(&path, dir) == Some(true) {
            return true;
        }
        let verdict = inner.judge(&path, dir).or_else(|| {
            exclude
                .as_ref()
                .map(|g| g.matched(&path, dir))
                .filter(|m| !m.is_none())
                .map(|m| m.is_ignore())
        });
        if verdict == Some(true) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// What the walk of `start` yields, relative to `root`, sorted.
    fn walked(root: &Path, start: &Path) -> Vec<String> {
        let mut found: Vec<String> = walker(root, start)
            .build()
            .flatten()
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .map(|e| {
                e.path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/")
            })
            .collect();
        found.sort();
        found
    }

    /// Every file under `dir` but hidden ones, relative to `root`, and whether it is ignored.
    fn judged(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_owned()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                if e.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else {
                    let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                    if !is_ignored(root, &rel, false) {
                        out.push(rel);
                    }
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn nothing_above_a_repository_counts() {
        // A clone kept where ploke keeps them: under a directory ignoring everything.
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), ".ploke/.gitignore", "*\n");
        let root = tmp.path().join(".ploke/repos/app");
        write(&root, ".git/HEAD", "ref: refs/heads/main\n");
        write(&root, "src/lib.rs", "pub fn a() {}\n");
        write(&root, "target/debug/x.rs", "\n");
        write(&root, ".gitignore", "/target\n");
        assert_eq!(walked(&root, &root), vec!["src/lib.rs"]);
        assert_eq!(judged(&root), vec!["src/lib.rs"]);
        // In no repository at all: the directories above are not read either.
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), ".gitignore", "*\n");
        let root = tmp.path().join("plain");
        write(&root, "main.py", "x = 1\n");
        assert_eq!(walked(&root, &root), vec!["main.py"]);
        assert_eq!(judged(&root), vec!["main.py"]);
    }

    #[test]
    fn a_workspace_inside_a_repository_takes_the_rules_above_it() {
        let repo = tempfile::tempdir().unwrap();
        write(repo.path(), ".git/HEAD", "ref: refs/heads/main\n");
        write(
            repo.path(),
            ".gitignore",
            "node_modules/\n/services/api/gen/\n",
        );
        write(repo.path(), "services/.gitignore", "*.tmp.rs\n");
        let root = repo.path().join("services/api");
        write(&root, "src/lib.rs", "\n");
        write(&root, "src/scratch.tmp.rs", "\n");
        write(&root, "gen/out.rs", "\n");
        write(&root, "web/node_modules/dep/index.js", "\n");
        write(&root, "web/app.js", "\n");
        assert_eq!(walked(&root, &root), vec!["src/lib.rs", "web/app.js"]);
        assert_eq!(judged(&root), vec!["src/lib.rs", "web/app.js"]);
        // A walk starting below the root reads the files above its start too.
        assert_eq!(walked(&root, &root.join("web")), vec!["web/app.js"]);
    }

    #[test]
    fn each_file_is_anchored_at_its_own_directory_and_deeper_ones_win() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(root, ".git/HEAD", "ref: refs/heads/main\n");
        write(root, ".git/info/exclude", "/notes.md\n");
        write(root, ".gitignore", "*.log.rs\nvendor/\n");
        write(root, "sub/.gitignore", "/local.rs\n!keep.log.rs\n");
        write(root, "sub/.ignore", "drafts/\n");
        for rel in [
            "local.rs",
            "notes.md",
            "sub/local.rs",
            "sub/other.rs",
            "sub/a.log.rs",
            "sub/keep.log.rs",
            "sub/drafts/d.rs",
            "vendor/v.rs",
            "top.log.rs",
        ] {
            write(root, rel, "\n");
        }
        let expected = vec!["local.rs", "sub/keep.log.rs", "sub/other.rs"];
        assert_eq!(walked(root, root), expected);
        assert_eq!(judged(root), expected);
        assert!(is_ignored(root, "vendor", true));
        assert!(is_ignored(root, "vendor/new/file.rs", false));
    }
}
