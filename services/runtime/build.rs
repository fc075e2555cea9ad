//! The commit this build was made from, for `ploke_build_info` and `--version`: the
//! `PLOKE_BUILD_COMMIT` variable when set (a build from a source archive), else git's `HEAD`
//! when the sources are a checkout, else `unknown`.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(std::env::var_os("CARGO_MANIFEST_DIR")?)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Tells cargo to run this again when `path` (a file of git's, relative to the checkout or
/// absolute) changes; a file that does not exist is left out, since cargo would run the script
/// on every build for it.
fn watch(path: &str) {
    let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") else {
        return;
    };
    let path = PathBuf::from(dir).join(path);
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=PLOKE_BUILD_COMMIT");
    let given = std::env::var("PLOKE_BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty());
    let (commit, source) = match given {
        Some(commit) => {
            assert!(
                !commit.chars().any(char::is_control),
                "PLOKE_BUILD_COMMIT holds a control character"
            );
            (commit, "env")
        }
        None => {
            // HEAD moves when a branch is switched; the branch's ref (loose or packed) when a
            // commit is made on it.
            for file in ["HEAD", "packed-refs"] {
                if let Some(path) = git(&["rev-parse", "--git-path", file]) {
                    watch(&path);
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
                && let Some(path) = git(&["rev-parse", "--git-path", &branch])
            {
                watch(&path);
            }
            match git(&["rev-parse", "--short=12", "HEAD"]) {
                Some(commit) => (commit, "git"),
                None => ("unknown".to_owned(), "none"),
            }
        }
    };
    println!("cargo:rustc-env=PLOKE_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=PLOKE_BUILD_COMMIT_SOURCE={source}");
}
