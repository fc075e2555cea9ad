//! Which files of a workspace its ignore files leave out, judged one way for every walk and
//! every single path (rag-search's scan, refreshes and watcher; tool-executor's search_code):
//!
//! - `.gitignore` and `.ignore` files from the workspace root down, each anchored at its own
//!   directory and judging the entries below it: any `.ignore` over any `.gitignore` (as
//!   ripgrep reads them), a deeper file over a shallower one, a directory left out taking all
//!   below;
//! - when the workspace is a subdirectory of a git repository (a monorepo's service), those of
//!   the directories from the repository's root down to the workspace's, as shallower levels;
//! - the `info/exclude` of each of those repositories (`.git` a directory, or a worktree's
//!   `.git` file naming it), below every ignore file;
//! - inside a repository nested in the workspace (a submodule, a vendored clone), only its own
//!   files: nothing of the repositories around it, as git reads them (whether the nested
//!   directory is entered at all is the outer files' call).
//!
//! Nothing above the enclosing repository counts (or above the workspace when it is in none):
//! a clone kept under a directory whose `.gitignore` says `*` (ploke's own `.ploke/repos`) is
//! indexed whole. Nor does the server user's global excludes file: replicas answer alike. Only
//! regular files are read as ignore files (never a FIFO, nor a symlink), each once per
//! [`IgnoreRules`]; the walker reads none itself, so a walk and a single path are judged by the
//! same matchers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The ignore files of one directory, and its repository's exclude file when it is one's root.
#[derive(Default)]
struct Level {
    ignore: Option<Gitignore>,
    git: Option<Gitignore>,
    exclude: Option<Gitignore>,
    /// The directory is a repository's root (`.git` in it).
    repository: bool,
}

/// The regular file `name` of `dir` as a matcher anchored at `dir`.
fn matcher(dir: &Path, name: &str) -> Option<Gitignore> {
    let file = dir.join(name);
    std::fs::symlink_metadata(&file)
        .is_ok_and(|m| m.is_file())
        .then(|| Gitignore::new(&file).0)
}

impl Level {
    fn read(dir: &Path) -> Self {
        // One look at `.git` per directory: whether it is a repository, and its exclude file.
        let dot_git = std::fs::symlink_metadata(dir.join(".git")).ok();
        Self {
            ignore: matcher(dir, ".ignore"),
            git: matcher(dir, ".gitignore"),
            exclude: dot_git.as_ref().and_then(|m| exclude_of(dir, m)),
            repository: dot_git.is_some(),
        }
    }

    fn is_empty(&self) -> bool {
        self.ignore.is_none() && self.git.is_none() && self.exclude.is_none() && !self.repository
    }
}

/// The directories from the root of the git repository enclosing `root` down to `root`'s
/// parent, outermost first; none when `root` is a repository's root or in no repository.
fn enclosing_dirs(root: &Path) -> Vec<PathBuf> {
    let has_git = |dir: &Path| std::fs::symlink_metadata(dir.join(".git")).is_ok();
    if has_git(root) {
        return Vec::new();
    }
    let mut dirs = Vec::new();
    for dir in root.ancestors().skip(1) {
        dirs.push(dir.to_owned());
        if has_git(dir) {
            dirs.reverse();
            return dirs;
        }
    }
    Vec::new()
}

/// The `info/exclude` of the repository `root` is the root of (`meta`: its `.git`'s):
/// `.git/info/exclude`, or for a worktree (`.git` a file saying `gitdir: …`) its common
/// directory's.
fn exclude_of(root: &Path, meta: &std::fs::Metadata) -> Option<Gitignore> {
    let dot_git = root.join(".git");
    let git_dir = if meta.is_dir() {
        dot_git
    } else if meta.is_file() {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let named = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
        root.join(named)
    } else {
        return None;
    };
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(rel) => git_dir.join(rel.trim()),
        Err(_) => git_dir,
    };
    let file = common.join("info/exclude");
    if !std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut builder = GitignoreBuilder::new(root);
    let _ = builder.add(&file);
    builder.build().ok()
}

/// The ignore rules of one workspace, read lazily and once (a walk, a refresh, a batch of
/// watcher events); a new value reads the files again.
pub struct IgnoreRules {
    root: PathBuf,
    /// The enclosing repository's levels, outermost first.
    outer: Vec<Level>,
    /// Each directory met so far: the levels from the root down to it.
    chains: Mutex<HashMap<PathBuf, Chain>>,
}

/// The levels that judge the entries of a directory, outermost first: from the root down to
/// it, or from the nearest repository nested in the workspace (a submodule, a vendored clone:
/// nothing of the repositories around it applies inside it, as for git).
#[derive(Default)]
struct Levels {
    levels: Vec<Arc<Level>>,
    /// Inside a repository nested in the workspace: the enclosing repository's levels do not
    /// apply either.
    nested: bool,
}

type Chain = Arc<Levels>;

impl IgnoreRules {
    /// The rules of the workspace at `root` (canonical).
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            outer: enclosing_dirs(root)
                .iter()
                .map(|d| Level::read(d))
                .collect(),
            chains: Mutex::new(HashMap::new()),
        }
    }

    /// The levels from the root down to `dir` (the root or a directory inside it).
    fn chain(&self, dir: &Path) -> Chain {
        let known = self
            .chains
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(dir)
            .cloned();
        if let Some(chain) = known {
            return chain;
        }
        let above = match dir.parent() {
            Some(parent) if dir != self.root && parent.starts_with(&self.root) => {
                Some(self.chain(parent))
            }
            _ => None,
        };
        let level = Level::read(dir);
        let chain = match above {
            // Most directories hold no ignore file: they share the chain above them.
            Some(above) if level.is_empty() => above,
            // A repository nested in the workspace starts over.
            Some(_) if level.repository => Arc::new(Levels {
                levels: vec![Arc::new(level)],
                nested: true,
            }),
            Some(above) => {
                let mut levels = above.levels.clone();
                levels.push(Arc::new(level));
                Arc::new(Levels {
                    levels,
                    nested: above.nested,
                })
            }
            None => Arc::new(Levels {
                levels: vec![Arc::new(level)],
                nested: false,
            }),
        };
        self.chains
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(dir.to_owned(), chain.clone());
        chain
    }

    /// Whether the files judge the absolute `path` (inside the root, not the root) left out by
    /// itself; its directories are not looked at (a walk never reaches below one left out).
    fn judges_out(&self, path: &Path, is_dir: bool) -> bool {
        let Some(parent) = path.parent().filter(|p| p.starts_with(&self.root)) else {
            return false;
        };
        let inside = self.chain(parent);
        let outer: &[Level] = if inside.nested { &[] } else { &self.outer };
        let levels = || outer.iter().chain(inside.levels.iter().map(|l| &**l)).rev();
        levels()
            .filter_map(|l| l.ignore.as_ref())
            .chain(levels().filter_map(|l| l.git.as_ref()))
            .chain(levels().filter_map(|l| l.exclude.as_ref()))
            .map(|g| g.matched(path, is_dir))
            .find(|m| !m.is_none())
            .is_some_and(|m| m.is_ignore())
    }

    /// Whether `rel` (relative to the root, `/`-separated), or a directory on its way, is left
    /// out: what a walk of the root would not yield. Hidden names are not judged here.
    pub fn is_ignored(&self, rel: &str, is_dir: bool) -> bool {
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        // Not a path a walk yields: never judged by files outside the root.
        if parts.iter().any(|p| *p == "." || *p == "..") {
            return true;
        }
        let mut path = self.root.clone();
        parts.iter().enumerate().any(|(i, part)| {
            path.push(part);
            self.judges_out(&path, is_dir || i + 1 < parts.len())
        })
    }

    /// A walk of `start` (the root or a path inside it) that leaves out, below `start`, what
    /// the ignore files say, hidden entries, and `.git` / `.ploke` whatever their case; `start`
    /// itself is walked when asked for. Symlinks are not followed.
    pub fn walker(self: &Arc<Self>, start: &Path) -> ignore::WalkBuilder {
        let mut builder = ignore::WalkBuilder::new(start);
        builder.standard_filters(false).follow_links(false);
        let rules = self.clone();
        // Hidden names include `.git` and `.ploke` in any case (the protected directories).
        builder.filter_entry(move |e| {
            e.depth() == 0
                || !e.file_name().to_string_lossy().starts_with('.')
                    && !rules.judges_out(e.path(), e.file_type().is_some_and(|t| t.is_dir()))
        });
        builder
    }
}

/// [`IgnoreRules::walker`] over rules read now.
pub fn walker(root: &Path, start: &Path) -> ignore::WalkBuilder {
    Arc::new(IgnoreRules::new(root)).walker(start)
}

/// [`IgnoreRules::is_ignored`] over rules read now.
pub fn is_ignored(root: &Path, rel: &str, is_dir: bool) -> bool {
    IgnoreRules::new(root).is_ignored(rel, is_dir)
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
        // In no repository at all: the directories above are not read either (unless this
        // machine keeps its temporary files inside a repository).
        let tmp = tempfile::tempdir().unwrap();
        if !enclosing_dirs(tmp.path()).is_empty() {
            return;
        }
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
        // A walk from below the root judges alike (the files above it, the exclude file).
        assert_eq!(
            walked(root, &root.join("sub")),
            vec!["sub/keep.log.rs", "sub/other.rs"]
        );
        write(root, "sub/notes.md", "\n");
        write(root, ".git/info/exclude", "/notes.md\nnotes.md\n");
        assert_eq!(
            walked(root, &root.join("sub")),
            vec!["sub/keep.log.rs", "sub/other.rs"]
        );
        // A directory asked for is walked even when it is left out or hidden; below it the
        // rules apply.
        write(root, ".github/ci.rs", "\n");
        assert_eq!(walked(root, &root.join("vendor")), vec!["vendor/v.rs"]);
        assert_eq!(walked(root, &root.join(".github")), vec![".github/ci.rs"]);
        assert_eq!(
            walked(root, &root.join("sub/local.rs")),
            vec!["sub/local.rs"]
        );
        assert!(is_ignored(root, "vendor", true));
        assert!(is_ignored(root, "vendor/new/file.rs", false));
    }

    #[test]
    fn a_worktree_reads_the_exclude_file_of_its_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let main = tmp.path().join("main");
        write(&main, ".git/info/exclude", "secret.rs\n");
        write(&main, ".git/worktrees/wt/commondir", "../..\n");
        let root = tmp.path().join("wt");
        write(
            &root,
            ".git",
            &format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
        );
        write(&root, "src/secret.rs", "\n");
        write(&root, "src/lib.rs", "\n");
        assert_eq!(walked(&root, &root), vec!["src/lib.rs"]);
        assert_eq!(judged(&root), vec!["src/lib.rs"]);
    }

    #[test]
    fn ignore_files_that_are_not_regular_files_are_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(root, ".git/HEAD", "\n");
        write(root, "elsewhere/rules", "*.rs\n");
        std::os::unix::fs::symlink(root.join("elsewhere/rules"), root.join(".gitignore")).unwrap();
        write(root, "src/.gitignore/keep", "\n");
        write(root, "src/lib.rs", "\n");
        assert!(walked(root, root).contains(&"src/lib.rs".to_owned()));
        assert!(!is_ignored(root, "src/lib.rs", false));
    }

    #[test]
    fn a_repository_nested_in_the_workspace_reads_only_its_own_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(root, ".git/HEAD", "\n");
        write(root, ".gitignore", "*.gen.rs\nskipped/\n");
        write(root, "top.gen.rs", "\n");
        write(root, "src/lib.rs", "\n");
        write(root, "skipped/lib/.git/HEAD", "\n");
        write(root, "skipped/lib/a.rs", "\n");
        let nested = "vendor/lib";
        write(root, &format!("{nested}/.git/HEAD"), "\n");
        write(root, &format!("{nested}/.git/info/exclude"), "local.rs\n");
        write(root, &format!("{nested}/.gitignore"), "out/\n");
        write(root, &format!("{nested}/x.gen.rs"), "\n");
        write(root, &format!("{nested}/local.rs"), "\n");
        write(root, &format!("{nested}/out/o.rs"), "\n");
        let expected = vec!["src/lib.rs", "vendor/lib/x.gen.rs"];
        assert_eq!(walked(root, root), expected);
        assert_eq!(judged(root), expected);
        assert_eq!(
            walked(root, &root.join(nested)),
            vec!["vendor/lib/x.gen.rs"]
        );
    }

    #[test]
    fn a_workspace_inside_a_repository_takes_its_exclude_file_too() {
        let repo = tempfile::tempdir().unwrap();
        write(repo.path(), ".git/info/exclude", "scratch.rs\n");
        let root = repo.path().join("services/api");
        write(&root, "src/lib.rs", "\n");
        write(&root, "src/scratch.rs", "\n");
        assert_eq!(walked(&root, &root), vec!["src/lib.rs"]);
        assert_eq!(judged(&root), vec!["src/lib.rs"]);
    }
}
