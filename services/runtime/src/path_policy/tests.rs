use super::*;

fn root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "fn a() {}\n").unwrap();
    (dir, root)
}

#[test]
fn relative_and_absolute_paths_inside_resolve() {
    let (_d, root) = root();
    let want = Resolved {
        abs: root.join("src/lib.rs"),
        rel: "src/lib.rs".into(),
    };
    assert_eq!(resolve(&root, "src/lib.rs").unwrap(), want);
    assert_eq!(resolve(&root, "./src/../src/lib.rs").unwrap(), want);
    let abs = root.join("src/lib.rs");
    assert_eq!(resolve(&root, abs.to_str().unwrap()).unwrap(), want);
    assert_eq!(
        resolve(&root, "new/dir/file.rs").unwrap(),
        Resolved {
            abs: root.join("new/dir/file.rs"),
            rel: "new/dir/file.rs".into()
        }
    );
    assert_eq!(resolve(&root, "").unwrap().rel, "");
}

#[test]
fn traversal_absolute_elsewhere_nul_and_long_paths_are_refused() {
    let (_d, root) = root();
    let long = "a/".repeat(MAX_PATH_BYTES);
    for (bad, want) in [
        ("../x", PathError::Climbs),
        ("src/../../x", PathError::Climbs),
        ("/etc/passwd", PathError::AbsoluteOutside),
        ("src/\0x", PathError::Nul),
        ("src/evil\n+++ b/src/lib.rs", PathError::Control(0x0a)),
        ("src/\u{1b}]0;title\u{7}.rs", PathError::Control(0x1b)),
        (long.as_str(), PathError::TooLong(long.len())),
    ] {
        assert_eq!(resolve(&root, bad).unwrap_err(), want);
    }
    let component = "n".repeat(300);
    assert_eq!(
        resolve(&root, &format!("src/{component}/x")).unwrap_err(),
        PathError::NameTooLong
    );
}

#[cfg(unix)]
#[test]
fn symlinks_are_followed_only_inside_the_root() {
    let (_d, root) = root();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), root.join("link")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path().join("secret"), root.join("notes.md")).unwrap();
    std::os::unix::fs::symlink(root.join("src"), root.join("inner")).unwrap();
    std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).unwrap();
    std::os::unix::fs::symlink(root.join("loop_b"), root.join("loop_a")).unwrap();
    std::os::unix::fs::symlink(root.join("loop_a"), root.join("loop_b")).unwrap();
    for (bad, want) in [
        ("link/secret", PathError::SymlinkEscape),
        ("link", PathError::SymlinkEscape),
        ("notes.md", PathError::SymlinkEscape),
        ("link/new.rs", PathError::SymlinkEscape),
        ("dangling", PathError::Dangling),
        ("loop_a/x", PathError::Loop),
    ] {
        assert_eq!(resolve(&root, bad).unwrap_err(), want, "{bad}");
        assert!(
            resolve_own(&root, bad).is_err(),
            "{bad} must be refused for the index too"
        );
    }
    assert_eq!(resolve(&root, "inner/lib.rs").unwrap().rel, "src/lib.rs");
    // The index stores files under their own names only.
    assert_eq!(resolve_own(&root, "inner/lib.rs").unwrap(), None);
    assert_eq!(
        resolve_own(&root, "src/lib.rs").unwrap(),
        Some(root.join("src/lib.rs"))
    );
    assert_eq!(
        resolve_own(&root, "src/gone.rs").unwrap(),
        Some(root.join("src/gone.rs"))
    );
}

#[test]
fn protected_dirs_are_never_read_or_written_in_any_case() {
    let (_d, root) = root();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(root.join(".ploke/repos/b")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(root.join(".git/config"), root.join("cfg")).unwrap();
        std::os::unix::fs::symlink(root.join(".ploke/repos/b"), root.join("b")).unwrap();
    }
    for (bad, dir) in [
        (".git", ".git"),
        (".git/config", ".git"),
        (".GIT/config", ".git"),
        (".Git/hooks/pre-commit", ".git"),
        ("sub/.git/x", ".git"),
        ("src/../.git/config", ".git"),
        (".ploke/ploke.db", ".ploke"),
        (".ploke/repos/b/src/lib.rs", ".ploke"),
        ("a/.PLOKE/b", ".ploke"),
        #[cfg(unix)]
        ("cfg", ".git"),
        #[cfg(unix)]
        ("b/src/lib.rs", ".ploke"),
    ] {
        assert_eq!(
            resolve(&root, bad).unwrap_err(),
            PathError::Protected(dir),
            "{bad}"
        );
        assert!(resolve_own(&root, bad).is_err(), "{bad}: the index too");
    }
    assert!(resolve(&root, "src/git.rs").is_ok());
    assert!(resolve(&root, ".github/workflows/ci.yml").is_ok());
    assert!(resolve(&root, ".gitignore").is_ok());
    assert!(resolve(&root, "src/.plokeignore").is_ok());
}

#[cfg(unix)]
#[test]
fn only_regular_files_are_opened_and_reads_are_capped() {
    let (_d, root) = root();
    let fifo = root.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink(root.join("src/lib.rs"), root.join("alias.rs")).unwrap();
    let refused = |p: &Path| match read_regular(p, 1024) {
        Err(FileError::NotRegular(kind)) => kind,
        other => panic!("{} gave {other:?}", p.display()),
    };
    // A FIFO with no writer would block a plain open forever.
    assert_eq!(refused(&fifo), "a FIFO");
    assert_eq!(refused(Path::new("/dev/zero")), "a device");
    assert_eq!(refused(&root.join("src")), "a directory");
    assert_eq!(refused(&root.join("alias.rs")), "a symlink");
    assert!(matches!(
        read_regular(&root.join("missing"), 1024),
        Err(FileError::NotFound)
    ));
    assert_eq!(
        read_regular(&root.join("src/lib.rs"), 1024).unwrap(),
        b"fn a() {}\n"
    );
    assert!(matches!(
        read_regular(&root.join("src/lib.rs"), 4),
        Err(FileError::TooLarge { size: 10, limit: 4 })
    ));
    let mut seen = Vec::new();
    stream_regular(&root.join("src/lib.rs"), &|| false, &mut |b| {
        seen.extend_from_slice(b)
    })
    .unwrap();
    assert_eq!(seen, b"fn a() {}\n");
    assert!(matches!(
        stream_regular(&root.join("src/lib.rs"), &|| true, &mut |_| {}),
        Err(FileError::Cancelled)
    ));
}

/// A root that is a link (git-sync's, a deploy's `current`) is followed as it points at each
/// call, and the tree it points at is what nothing may leave.
#[test]
fn a_root_link_is_followed_where_it_points_now_and_its_tree_is_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(dir.path()).unwrap();
    let (first, second) = (top.join("worktree-1"), top.join("worktree-2"));
    for tree in [&first, &second] {
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::write(tree.join("src/lib.rs"), "fn a() {}\n").unwrap();
    }
    std::fs::write(top.join("outside.rs"), "secret\n").unwrap();
    std::os::unix::fs::symlink(top.join("outside.rs"), second.join("src/escape.rs")).unwrap();
    let root = top.join("repo");
    std::os::unix::fs::symlink(&first, &root).unwrap();
    assert_eq!(crate::workspaces::root_path(&root), root);
    let lib = |tree: &Path| Resolved {
        abs: tree.join("src/lib.rs"),
        rel: "src/lib.rs".into(),
    };
    assert_eq!(resolve(&root, "src/lib.rs").unwrap(), lib(&first));
    // Absolute paths inside, by the link or by where it points.
    let by_link = root.join("src/lib.rs");
    assert_eq!(
        resolve(&root, by_link.to_str().unwrap()).unwrap(),
        lib(&first)
    );
    let by_target = first.join("src/lib.rs");
    assert_eq!(
        resolve(&root, by_target.to_str().unwrap()).unwrap(),
        lib(&first)
    );
    // Pointed at the second tree: paths resolve there, and the first tree is outside now.
    repoint(&root, &second);
    assert_eq!(resolve(&root, "src/lib.rs").unwrap(), lib(&second));
    assert_eq!(
        resolve(&root, by_target.to_str().unwrap()),
        Err(PathError::AbsoluteOutside)
    );
    assert_eq!(
        resolve(&root, "src/escape.rs"),
        Err(PathError::SymlinkEscape)
    );
    assert_eq!(resolve(&root, "../outside.rs"), Err(PathError::Climbs));
}

#[test]
fn a_root_path_is_canonical_up_to_its_first_link() {
    let dir = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(top.join("trees/one/services/api")).unwrap();
    std::os::unix::fs::symlink(top.join("trees/one"), top.join("trees/repo")).unwrap();
    std::os::unix::fs::symlink(top.join("trees"), top.join("via")).unwrap();
    let root_path = crate::workspaces::root_path;
    // A link stays a name, however the path is written (a trailing `/`, `.`, `..` before it),
    // and so does everything after it.
    for (given, kept) in [
        ("trees/repo", "trees/repo"),
        ("trees/repo/", "trees/repo"),
        ("trees/./repo", "trees/repo"),
        ("trees/one/../repo", "trees/repo"),
        ("via/repo", "via/repo"),
        ("via/one", "via/one"),
        ("trees/repo/services/api", "trees/repo/services/api"),
    ] {
        assert_eq!(root_path(&top.join(given)), top.join(kept), "{given}");
    }
    // Without links, or with `..` after one (it would climb out of where the link points):
    // canonical.
    assert_eq!(
        root_path(&top.join("trees/one/services/../services/api")),
        top.join("trees/one/services/api")
    );
    assert_eq!(
        root_path(&top.join("trees/repo/services/..")),
        top.join("trees/one")
    );
    assert_eq!(root_path(&top.join("missing")), top.join("missing"));
}

/// A root under a link (`/srv/current/services/api`, the link being `current`) follows the
/// link too.
#[test]
fn a_root_below_a_link_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(dir.path()).unwrap();
    let (first, second) = (top.join("release-1"), top.join("release-2"));
    for tree in [&first, &second] {
        std::fs::create_dir_all(tree.join("services/api/src")).unwrap();
        std::fs::write(tree.join("services/api/src/lib.rs"), "fn a() {}\n").unwrap();
    }
    std::os::unix::fs::symlink(&first, top.join("current")).unwrap();
    let root = crate::workspaces::root_path(&top.join("current/services/api"));
    assert_eq!(root, top.join("current/services/api"));
    let lib = |tree: &Path| Resolved {
        abs: tree.join("services/api/src/lib.rs"),
        rel: "src/lib.rs".into(),
    };
    assert_eq!(resolve(&root, "src/lib.rs").unwrap(), lib(&first));
    repoint(&top.join("current"), &second);
    assert_eq!(resolve(&root, "src/lib.rs").unwrap(), lib(&second));
    // The rest of the release is outside the root, as before.
    assert_eq!(resolve(&root, "../web"), Err(PathError::Climbs));
    let other = first.join("services/api/src/lib.rs");
    assert_eq!(
        resolve(&root, other.to_str().unwrap()),
        Err(PathError::AbsoluteOutside)
    );
}

/// Points the symbolic link `link` at `target` as git-sync and deploys do: a new link renamed
/// over the old one.
fn repoint(link: &Path, target: &Path) {
    let swap = link.with_extension("new");
    std::os::unix::fs::symlink(target, &swap).unwrap();
    std::fs::rename(&swap, link).unwrap();
}
