//! What the benches of this crate share: their `--name value` flags and percentiles.

use std::time::Duration;

/// The value after `--name`, if given.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The number after `--name`, else `default`; a value that is not a number stops the bench.
pub fn number(args: &[String], name: &str, default: u64) -> u64 {
    arg(args, name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|e| panic!("{name} {v}: not a number ({e})"))
    })
}

/// The workspace a bench serves: `--workspace DIR`, else this repository's `services/`.
pub fn workspace(args: &[String]) -> std::path::PathBuf {
    arg(args, "--workspace").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../services"),
        std::path::PathBuf::from,
    )
}

/// A copy of `workspace` in a temporary directory, for a bench to serve (and write into)
/// without touching the original.
pub fn copy_of(workspace: &std::path::Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(format!("{}/.", workspace.display()))
        .arg(copy.path())
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "copying {} failed",
        workspace.display()
    );
    copy
}

/// The `q`th percentile of `sorted`, in milliseconds.
pub fn ms(sorted: &[Duration], q: usize) -> f64 {
    sorted[(sorted.len() * q / 100).min(sorted.len().saturating_sub(1))].as_secs_f64() * 1000.0
}

/// p50 and p99 of `took`, in milliseconds.
pub fn pct(mut took: Vec<Duration>) -> (f64, f64) {
    took.sort();
    (ms(&took, 50), ms(&took, 99))
}
