//! What this build is: the crate version and the commit it was made from, shown by every
//! binary's `--version`, logged when a server starts and exported as `ploke_build_info`.

/// The workspace's version (every ploke crate shares it).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit the binaries were built from: git's `HEAD` (12 hex digits) when built from a
/// checkout, `PLOKE_BUILD_COMMIT` when that was set at build time, else `unknown`.
pub const COMMIT: &str = env!("PLOKE_BUILD_COMMIT");

/// `0.1.0 (3f2a9c1d0b7e)`: what `--version` prints after the binary's name.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("PLOKE_BUILD_COMMIT"),
    ")"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_version_is_the_version_and_the_commit() {
        assert_eq!(LONG_VERSION, format!("{VERSION} ({COMMIT})"));
        match env!("PLOKE_BUILD_COMMIT_SOURCE") {
            // A build from a checkout names its commit as git abbreviates it (12 digits, more
            // only where 12 are ambiguous).
            "git" => assert!(
                COMMIT.len() >= 12
                    && COMMIT
                        .chars()
                        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
                "{COMMIT}"
            ),
            "env" => assert!(!COMMIT.is_empty() && COMMIT.trim() == COMMIT, "{COMMIT}"),
            source => assert_eq!((source, COMMIT), ("none", "unknown")),
        }
    }
}
