//! Git workspaces: cloning a repository's branch and keeping it at the remote's tip, with the
//! `git` program (never a shell; URLs and branches are checked first so neither can pass as an
//! option; no terminal prompts; every command bounded in time and killed when it overruns).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use ploke_runtime::text::clip;

/// A git operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The URL or branch is not acceptable.
    #[error("{field}: {reason}")]
    Invalid {
        /// Request field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// git ran and failed.
    #[error("git {what} failed: {stderr}")]
    Failed {
        /// The operation.
        what: &'static str,
        /// What git said (clipped).
        stderr: String,
    },
    /// git did not finish in time.
    #[error("git {what} did not finish within {secs} s")]
    TimedOut {
        /// The operation.
        what: &'static str,
        /// The limit.
        secs: u64,
    },
    /// git could not be started.
    #[error("git could not be run (is it installed?): {0}")]
    Unavailable(String),
}

/// Longest URL accepted.
pub const MAX_URL_BYTES: usize = 2048;

/// Checks a repository URL: a URL with a scheme git fetches over (https, http, ssh, git,
/// file) or scp-like `user@host:path`; never something git would read as an option.
pub fn check_url(url: &str) -> Result<(), GitError> {
    let bad = |reason: &str| GitError::Invalid {
        field: "git.url",
        reason: reason.to_owned(),
    };
    if url.is_empty() {
        return Err(bad("must not be empty"));
    }
    if url.len() > MAX_URL_BYTES {
        return Err(bad("must be at most 2048 bytes"));
    }
    if url.starts_with('-') {
        return Err(bad("must not start with `-`"));
    }
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad("must not contain spaces or control characters"));
    }
    let scheme_ok = ["https://", "http://", "ssh://", "git://", "file://"]
        .iter()
        .any(|s| url.starts_with(s));
    let scp_like = !url.contains("://")
        && url
            .split_once(':')
            .is_some_and(|(host, path)| host.contains('@') && !path.is_empty());
    // A user or password in the URL would be kept in the clone's .git/config (which tools may
    // read) and listed to everyone; ssh names its user there, without a password.
    let ssh = url.starts_with("ssh://");
    if let Some(userinfo) = ploke_runtime::text::url_userinfo(url)
        && (!ssh || userinfo.contains(':'))
    {
        return Err(bad(
            "must not carry a user or password (the clone would keep it, where tools can read \
             it, and everyone listing workspaces would see it); give rag-search's git a \
             credential helper or an ssh key instead (docs/DEPLOY.md, Private repositories)",
        ));
    }
    if scheme_ok || scp_like {
        Ok(())
    } else {
        Err(bad(
            "must be an https://, http://, ssh://, git:// or file:// URL, or user@host:path",
        ))
    }
}

/// Runs `git args` (in `dir` if given) with a time limit; its stdout.
async fn git(
    what: &'static str,
    dir: Option<&Path>,
    args: &[&str],
    limit: Duration,
) -> Result<String, GitError> {
    let mut cmd = tokio::process::Command::new("git");
    if let Some(dir) = dir {
        cmd.arg("-C").arg(dir);
    }
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .env("SSH_ASKPASS", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| GitError::Unavailable(e.to_string()))?;
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| GitError::TimedOut {
            what,
            secs: limit.as_secs(),
        })?
        .map_err(|e| GitError::Unavailable(e.to_string()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = ploke_runtime::text::text_without_credentials(stderr.trim());
        Err(GitError::Failed {
            what,
            stderr: clip(&stderr, 500).into_owned(),
        })
    }
}

/// Checks a branch name the way git does.
pub async fn check_branch(branch: &str) -> Result<(), GitError> {
    let bad = |reason: String| GitError::Invalid {
        field: "git.branch",
        reason,
    };
    if branch.starts_with('-') {
        return Err(bad("must not start with `-`".into()));
    }
    match git(
        "check-ref-format",
        None,
        &["check-ref-format", "--branch", branch],
        Duration::from_secs(10),
    )
    .await
    {
        Ok(_) => Ok(()),
        Err(GitError::Failed { .. }) => Err(bad(format!(
            "`{}` is not a valid branch name",
            clip(branch, 100)
        ))),
        Err(e) => Err(e),
    }
}

/// Clones `branch` (the remote's default when empty) of `url` into `dir`; the branch checked
/// out.
pub async fn clone(
    url: &str,
    branch: &str,
    dir: &Path,
    limit: Duration,
) -> Result<String, GitError> {
    let dir_text = dir.to_string_lossy();
    let mut args = vec!["clone", "--quiet", "--single-branch", "--no-tags"];
    if !branch.is_empty() {
        args.extend(["--branch", branch]);
    }
    args.extend(["--", url, &dir_text]);
    git("clone", None, &args, limit).await?;
    git(
        "rev-parse",
        Some(dir),
        &["rev-parse", "--abbrev-ref", "HEAD"],
        limit,
    )
    .await
}

/// Moves the clone in `dir` to the tip of `branch` on its remote, dropping local changes.
pub async fn update(dir: &Path, branch: &str, limit: Duration) -> Result<(), GitError> {
    git(
        "fetch",
        Some(dir),
        &["fetch", "--quiet", "--no-tags", "origin", "--", branch],
        limit,
    )
    .await?;
    git(
        "reset",
        Some(dir),
        &["reset", "--quiet", "--hard", "FETCH_HEAD"],
        limit,
    )
    .await?;
    Ok(())
}

/// The commit checked out in `dir`.
pub async fn head(dir: &Path) -> Result<String, GitError> {
    git(
        "rev-parse",
        Some(dir),
        &["rev-parse", "HEAD"],
        Duration::from_secs(10),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_that_could_pass_as_options_or_use_odd_schemes_are_refused() {
        for ok in [
            "https://example.com/org/repo.git",
            "file:///srv/repo.git",
            "ssh://git@example.com/org/repo",
            "git@example.com:org/repo.git",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("", "must not be empty"),
            ("--upload-pack=touch /tmp/x", "must not start with `-`"),
            (
                "ext::sh -c touch% /tmp/x",
                "must not contain spaces or control characters",
            ),
            ("/srv/repo.git", "must be an https://"),
            ("ftp://example.com/repo", "must be an https://"),
            (
                "https://ci:ghp_secret@github.com/org/repo.git",
                "must not carry a user or password",
            ),
            (
                "https://ghp_secret@github.com/org/repo.git",
                "must not carry a user",
            ),
            (
                "ssh://git:secret@example.com/org/repo",
                "must not carry a user",
            ),
        ] {
            let e = check_url(bad).unwrap_err().to_string();
            assert!(e.starts_with("git.url: ") && e.contains(why), "{bad}: {e}");
        }
    }
}
