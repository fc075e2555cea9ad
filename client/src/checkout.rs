//! Which of a shared gateway's workspaces a developer's checkout stands for. A team's gateway
//! serves several repositories; a session, its overlay (the developer's changes) and the
//! approved edits written back all belong to one of them, so the client must know which before
//! it sends a single file: the one named with `--server-workspace`, else the only one the
//! caller may use, else the one cloned from a git remote of the checkout (its branch breaking
//! a tie), else the directory workspace of the checkout's own name. A checkout matching none
//! of several is an error that lists them: sending it to the wrong tree would show the model
//! another repository's code as deleted and write that repository's edits here.

use std::path::{Path, PathBuf};

use ploke_proto::rag::v1::{IndexStatusRequest, ListWorkspacesRequest, Workspace};

use crate::gateway::Gateway;

/// A developer's checkout and the served workspace it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    /// The checkout's root on this machine.
    pub root: PathBuf,
    /// The served workspace's root (as sessions and proposals name it).
    pub workspace_root: String,
}

impl Checkout {
    /// The checkout, when `workspace_root` (a session's or a proposal's) is the one it stands
    /// for; `None` for any other workspace, whose changes it must neither send nor receive.
    pub fn for_workspace(&self, workspace_root: &str) -> Option<&Path> {
        (self.workspace_root == workspace_root).then_some(self.root.as_path())
    }

    /// Why nothing of `workspace_root` is sent from or written into this checkout.
    pub fn elsewhere(&self, workspace_root: &str) -> String {
        format!(
            "it is over workspace {workspace_root}, and this checkout ({}) stands for {}",
            self.root.display(),
            self.workspace_root
        )
    }
}

/// How the served workspace was chosen (said to the user when it was not obvious).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chosen {
    /// Named with `--server-workspace`.
    Named,
    /// The only workspace the caller may use (or the gateway's default when it lists none).
    Only,
    /// Cloned from this git remote of the checkout.
    GitRemote(String),
    /// A directory workspace with the checkout's directory name.
    DirName,
}

impl Chosen {
    /// How, in words.
    pub fn why(&self) -> String {
        match self {
            Chosen::Named => "named with --server-workspace".to_owned(),
            Chosen::Only => "the only one the gateway serves you".to_owned(),
            Chosen::GitRemote(url) => format!("cloned from {}, this checkout's remote", shown(url)),
            Chosen::DirName => "a directory of this checkout's name".to_owned(),
        }
    }
}

/// A URL as it may be shown: without the user and password a remote may carry
/// (`https://user:token@host/…` → `https://host/…`).
pub fn shown(url: &str) -> String {
    ploke_runtime::text::url_without_credentials(url).into_owned()
}

/// What the checkout tells about itself: its git remotes' URLs, its branch, its directory name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clues {
    /// URLs of its git remotes.
    pub remotes: Vec<String>,
    /// The branch checked out (empty when detached or not a git checkout).
    pub branch: String,
    /// The last component of its root.
    pub dir_name: String,
}

impl Clues {
    /// Reads the clues of the checkout at `root` (git asked when installed; none otherwise).
    pub fn of(root: &Path) -> Self {
        let git = |args: &[&str]| -> String {
            std::process::Command::new("git")
                .arg("-C")
                .arg(root)
                .args(args)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        let remotes = git(&["config", "--get-regexp", r"^remote\..*\.url$"])
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(_, url)| url.trim().to_owned()))
            .collect();
        let branch = git(&["symbolic-ref", "--quiet", "--short", "HEAD"])
            .trim()
            .to_owned();
        let dir_name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self {
            remotes,
            branch,
            dir_name,
        }
    }
}

/// A git URL reduced to `host/path` so that the https, ssh and scp-like spellings of one
/// repository compare equal: no scheme, user, port, trailing `/` or `.git`; lowercase.
pub fn git_url_key(url: &str) -> String {
    let url = url.trim();
    let rest = match url.split_once("://") {
        Some((_, rest)) => {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            let host = host.split_once(':').map_or(host, |(h, _)| h);
            format!("{host}/{path}")
        }
        // scp-like `user@host:path` (a colon before any slash); else a plain path.
        None => match url.split_once(':') {
            Some((before, path)) if !before.contains('/') => {
                let host = before.rsplit_once('@').map_or(before, |(_, h)| h);
                format!("{host}/{}", path.trim_start_matches('/'))
            }
            _ => url.to_owned(),
        },
    };
    let rest = rest.trim_end_matches('/').to_lowercase();
    rest.strip_suffix(".git")
        .unwrap_or(&rest)
        .trim_end_matches('/')
        .to_owned()
}

/// The name of the repository a git URL points to: its last path component without `.git`
/// (`https://host/team/api.git` → `api`, `git@host:team/web` → `web`).
pub fn git_repo_name(url: &str) -> &str {
    let last = url
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or_default();
    match last.len().checked_sub(4) {
        Some(cut) if last.is_char_boundary(cut) && last[cut..].eq_ignore_ascii_case(".git") => {
            &last[..cut]
        }
        _ => last,
    }
}

/// Chooses among `workspaces` (those the caller may use) the one `named`, else the one the
/// checkout's `clues` point to; `default_root` is the gateway's default (used when the list
/// is empty). The error names every candidate and how to choose.
pub fn choose(
    workspaces: &[Workspace],
    default_root: &str,
    named: Option<&str>,
    clues: &Clues,
) -> anyhow::Result<(String, Chosen)> {
    let listed = || {
        workspaces
            .iter()
            .map(|w| match &w.git {
                Some(g) => format!("{} ({}, from {})", w.name, w.workspace_root, shown(&g.url)),
                None => format!("{} ({})", w.name, w.workspace_root),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(n) = named {
        let n = match n.trim_end_matches('/') {
            "" => n,
            trimmed => trimmed,
        };
        let mut found: Vec<&Workspace> = workspaces
            .iter()
            .filter(|w| w.name == n || w.workspace_root == n)
            .collect();
        // A clone's name carries a hash (`api-main-1a2b…`); its repository's name will do
        // when only one clone is of a repository of that name.
        if found.is_empty() {
            found = workspaces
                .iter()
                .filter(|w| w.git.as_ref().is_some_and(|g| git_repo_name(&g.url) == n))
                .collect();
        }
        return match found.as_slice() {
            [w] => Ok((w.workspace_root.clone(), Chosen::Named)),
            // A gateway that lists none (older than workspaces at run time) serves its default.
            [] if workspaces.is_empty()
                && !default_root.is_empty()
                && (default_root == n || default_root.rsplit('/').next() == Some(n)) =>
            {
                Ok((default_root.to_owned(), Chosen::Named))
            }
            [] => Err(anyhow::anyhow!(
                "--server-workspace {n}: the gateway serves you no such workspace (yours: {})",
                if workspaces.is_empty() {
                    default_root.to_owned()
                } else {
                    listed()
                }
            )),
            several => {
                let names_differ = several
                    .iter()
                    .all(|w| several.iter().filter(|o| o.name == w.name).count() == 1);
                Err(anyhow::anyhow!(
                    "--server-workspace {n}: {} workspaces go by that name ({}); name one by its {}",
                    several.len(),
                    several
                        .iter()
                        .map(|w| if names_differ {
                            w.name.as_str()
                        } else {
                            w.workspace_root.as_str()
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                    if names_differ { "name" } else { "root" }
                ))
            }
        };
    }
    match workspaces {
        [] if default_root.is_empty() => {
            anyhow::bail!("the gateway serves you no workspace (`ploke workspaces` lists them)")
        }
        [] => return Ok((default_root.to_owned(), Chosen::Only)),
        [only] => return Ok((only.workspace_root.clone(), Chosen::Only)),
        _ => {}
    }
    let remotes: Vec<(String, &str)> = clues
        .remotes
        .iter()
        .map(|u| (git_url_key(u), u.as_str()))
        .collect();
    let cloned: Vec<(&Workspace, &str)> = workspaces
        .iter()
        .filter_map(|w| {
            let key = git_url_key(&w.git.as_ref()?.url);
            remotes
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, url)| (w, *url))
        })
        .collect();
    let on_branch: Vec<_> = cloned
        .iter()
        .filter(|(w, _)| w.git.as_ref().is_some_and(|g| g.branch == clues.branch))
        .copied()
        .collect();
    match (cloned.as_slice(), on_branch.as_slice()) {
        ([(w, url)], _) | (_, [(w, url)]) => {
            return Ok((
                w.workspace_root.clone(),
                Chosen::GitRemote((*url).to_owned()),
            ));
        }
        ([], _) => {}
        (several, _) => anyhow::bail!(
            "this checkout's git remote matches {} of the gateway's workspaces ({}); name one \
             with --server-workspace NAME (or PLOKE_SERVER_WORKSPACE)",
            several.len(),
            several
                .iter()
                .map(|(w, _)| w.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
    let same_name: Vec<&Workspace> = workspaces
        .iter()
        .filter(|w| w.git.is_none() && !clues.dir_name.is_empty() && w.name == clues.dir_name)
        .collect();
    if let [w] = same_name.as_slice() {
        return Ok((w.workspace_root.clone(), Chosen::DirName));
    }
    anyhow::bail!(
        "this checkout ({}; directory name `{}`) is none of the {} workspaces the gateway serves \
         you: {}; name one with --server-workspace NAME (or PLOKE_SERVER_WORKSPACE)",
        if clues.remotes.is_empty() {
            "no git remote".to_owned()
        } else {
            format!(
                "git remote {}",
                clues
                    .remotes
                    .iter()
                    .map(|r| shown(r))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        clues.dir_name,
        workspaces.len(),
        listed()
    )
}

/// The served workspace the checkout at `root` stands for, asked of the gateway (the caller's
/// workspaces and the default), with how it was chosen.
pub async fn served_workspace(
    gateway: &mut Gateway,
    root: &Path,
    named: Option<&str>,
) -> anyhow::Result<(String, Chosen)> {
    let workspaces = match gateway.list_workspaces(ListWorkspacesRequest {}).await {
        Ok(listed) => listed.into_inner().workspaces,
        // A gateway older than workspaces at run time serves one: its default.
        Err(s) if s.code() == tonic::Code::Unimplemented => Vec::new(),
        Err(s) => anyhow::bail!("listing the gateway's workspaces: {}", s.message()),
    };
    let default_root = if workspaces.is_empty() {
        gateway
            .index_status(IndexStatusRequest::default())
            .await
            .map(|s| s.into_inner().workspace_root)
            .unwrap_or_default()
    } else {
        String::new()
    };
    let root = root.to_owned();
    let clues = tokio::task::spawn_blocking(move || Clues::of(&root))
        .await
        .unwrap_or_default();
    choose(&workspaces, &default_root, named, &clues)
}

#[cfg(test)]
mod tests;
