//! git as the tests run it: a real `git` on a directory made by the test (nothing leaves the
//! machine; commits by a fixed author whatever the machine's git config says).

use std::path::Path;
use std::process::Command;

/// Runs `git -C dir ARGS` and returns its trimmed stdout; panics (a test helper) when it fails.
#[allow(clippy::expect_used)]
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=ploke", "-c", "user.email=ploke@localhost"])
        .args(args)
        .output()
        .expect("running git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
