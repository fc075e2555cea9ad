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
mod tests {
    use ploke_proto::rag::v1::GitSource;

    use super::*;

    fn dir(root: &str) -> Workspace {
        Workspace {
            workspace_root: root.into(),
            name: root.rsplit('/').next().unwrap_or_default().into(),
            ..Default::default()
        }
    }

    fn git(root: &str, url: &str, branch: &str) -> Workspace {
        Workspace {
            git: Some(GitSource {
                url: url.into(),
                branch: branch.into(),
            }),
            ..dir(root)
        }
    }

    fn clues(remotes: &[&str], branch: &str, dir_name: &str) -> Clues {
        Clues {
            remotes: remotes.iter().map(|r| (*r).to_owned()).collect(),
            branch: branch.into(),
            dir_name: dir_name.into(),
        }
    }

    #[test]
    fn the_spellings_of_one_git_remote_have_one_key() {
        for url in [
            "https://github.com/Org/Repo.git",
            "https://user:token@github.com/org/repo/",
            "ssh://git@github.com:22/org/repo.git",
            "git@github.com:org/repo.git",
            "git@GitHub.com:/org/repo",
            "git://github.com/org/repo",
        ] {
            assert_eq!(git_url_key(url), "github.com/org/repo", "{url}");
        }
        assert_eq!(
            git_url_key("https://github.com/org/repo.GIT"),
            "github.com/org/repo"
        );
        assert_eq!(git_url_key("/srv/git/repo.git"), "/srv/git/repo");
        assert_eq!(git_url_key("file:///srv/git/repo"), "/srv/git/repo");
        assert_ne!(
            git_url_key("git@github.com:org/repo"),
            git_url_key("git@github.com:org/repo-two")
        );
    }

    #[test]
    fn a_git_url_names_its_repository() {
        for (url, name) in [
            ("https://github.com/org/repo.git", "repo"),
            ("https://github.com/org/repo/", "repo"),
            ("git@github.com:repo.GIT", "repo"),
            ("file:///tmp/ws/b", "b"),
            ("/srv/git/api.git/", "api"),
            ("git@host:.git", ""),
            ("https://h/é.git", "é"),
        ] {
            assert_eq!(git_repo_name(url), name, "{url}");
        }
    }

    #[test]
    fn the_checkout_finds_its_workspace_by_name_remote_branch_or_directory() {
        let served = [
            git(
                "/repos/api-main-1a",
                "https://git.example.com/team/api.git",
                "main",
            ),
            git(
                "/repos/api-rel-2b",
                "https://git.example.com/team/api.git",
                "release",
            ),
            git(
                "/repos/web-main-3c",
                "git@git.example.com:team/web.git",
                "main",
            ),
            dir("/workspace/tools"),
        ];
        let web = clues(&["https://git.example.com/team/web"], "feature/x", "web");
        assert_eq!(
            choose(&served, "", None, &web).unwrap(),
            (
                "/repos/web-main-3c".to_owned(),
                Chosen::GitRemote("https://git.example.com/team/web".into())
            )
        );
        // Two clones of one repository: the checkout's branch decides.
        let api = clues(&["git@git.example.com:team/api.git"], "release", "api");
        assert_eq!(
            choose(&served, "", None, &api).unwrap().0,
            "/repos/api-rel-2b"
        );
        let api_elsewhere = clues(&["git@git.example.com:team/api.git"], "feature/y", "api");
        let err = choose(&served, "", None, &api_elsewhere).unwrap_err();
        assert_eq!(
            err.to_string(),
            "this checkout's git remote matches 2 of the gateway's workspaces (api-main-1a, \
             api-rel-2b); name one with --server-workspace NAME (or PLOKE_SERVER_WORKSPACE)"
        );
        assert_eq!(
            choose(&served, "", Some("api-main-1a"), &api_elsewhere).unwrap(),
            ("/repos/api-main-1a".to_owned(), Chosen::Named)
        );
        assert_eq!(
            choose(&served, "", Some("/workspace/tools"), &web).unwrap(),
            ("/workspace/tools".to_owned(), Chosen::Named)
        );
        let tools = clues(&[], "", "tools");
        assert_eq!(
            choose(&served, "", None, &tools).unwrap(),
            ("/workspace/tools".to_owned(), Chosen::DirName)
        );
    }

    #[test]
    fn a_checkout_matching_none_of_several_is_refused_with_the_list() {
        let served = [
            git(
                "/repos/api-main-1a",
                "https://git.example.com/team/api.git",
                "main",
            ),
            dir("/workspace/tools"),
        ];
        let other = clues(
            &["https://me:s3cret@github.com/me/other.git"],
            "main",
            "other",
        );
        assert_eq!(
            choose(&served, "", None, &other).unwrap_err().to_string(),
            "this checkout (git remote https://github.com/me/other.git; directory name `other`) \
             is none of the 2 workspaces the gateway serves you: api-main-1a \
             (/repos/api-main-1a, from https://git.example.com/team/api.git), tools \
             (/workspace/tools); name one with --server-workspace NAME (or PLOKE_SERVER_WORKSPACE)"
        );
        let twice = [dir("/a/app"), dir("/b/app")];
        assert_eq!(
            choose(&twice, "", Some("app"), &other)
                .unwrap_err()
                .to_string(),
            "--server-workspace app: 2 workspaces go by that name (/a/app, /b/app); name one by \
             its root"
        );
        // A clone is also known by its repository's name, when that names one clone.
        assert_eq!(
            choose(&served, "", Some("api"), &other).unwrap(),
            ("/repos/api-main-1a".to_owned(), Chosen::Named)
        );
        let clones = [
            git("/repos/api-main-1a", "https://h/team/api.git", "main"),
            git("/repos/api-rel-2b", "git@h:team/api", "release"),
            dir("/srv/api-tools"),
        ];
        assert_eq!(
            choose(&clones, "", Some("api"), &other)
                .unwrap_err()
                .to_string(),
            "--server-workspace api: 2 workspaces go by that name (api-main-1a, api-rel-2b); \
             name one by its name"
        );
        assert_eq!(
            choose(&clones, "", Some("api-rel-2b"), &other).unwrap(),
            ("/repos/api-rel-2b".to_owned(), Chosen::Named)
        );
        assert_eq!(
            choose(&twice, "", Some("/b/app/"), &other).unwrap(),
            ("/b/app".to_owned(), Chosen::Named)
        );
        assert_eq!(
            choose(&served, "", Some("nope"), &other)
                .unwrap_err()
                .to_string(),
            "--server-workspace nope: the gateway serves you no such workspace (yours: \
             api-main-1a (/repos/api-main-1a, from https://git.example.com/team/api.git), tools \
             (/workspace/tools))"
        );
    }

    #[test]
    fn one_workspace_or_none_needs_no_clue() {
        let nothing = Clues::default();
        assert_eq!(
            choose(&[dir("/srv/app")], "", None, &nothing).unwrap(),
            ("/srv/app".to_owned(), Chosen::Only)
        );
        assert_eq!(
            choose(&[], "/srv/default", None, &nothing).unwrap(),
            ("/srv/default".to_owned(), Chosen::Only)
        );
        // A gateway that lists none serves its default, by name too; knowing none is an error.
        assert_eq!(
            choose(&[], "/srv/default", Some("default"), &nothing).unwrap(),
            ("/srv/default".to_owned(), Chosen::Named)
        );
        assert_eq!(
            choose(&[], "", None, &nothing).unwrap_err().to_string(),
            "the gateway serves you no workspace (`ploke workspaces` lists them)"
        );
    }

    #[test]
    fn the_checkout_takes_only_what_is_over_its_own_workspace() {
        let c = Checkout {
            root: "/home/dev/api".into(),
            workspace_root: "/repos/api-main-1a".into(),
        };
        assert_eq!(
            c.for_workspace("/repos/api-main-1a"),
            Some(Path::new("/home/dev/api"))
        );
        assert_eq!(c.for_workspace("/repos/web-main-3c"), None);
        assert_eq!(
            c.elsewhere("/repos/web-main-3c"),
            "it is over workspace /repos/web-main-3c, and this checkout (/home/dev/api) stands \
             for /repos/api-main-1a"
        );
    }

    #[test]
    fn clues_come_from_the_checkouts_git_config() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("svc");
        std::fs::create_dir(&root).unwrap();
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(&root)
                .args(args)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        };
        if !git(&["init", "--quiet", "--initial-branch=trunk"]) {
            // No git on this machine: nothing to read, and nothing read.
            assert_eq!(Clues::of(&root).remotes, Vec::<String>::new());
            return;
        }
        assert!(git(&[
            "remote",
            "add",
            "origin",
            "git@example.com:team/svc.git"
        ]));
        assert!(git(&[
            "remote",
            "add",
            "fork",
            "https://example.com/me/svc"
        ]));
        assert_eq!(
            Clues::of(&root),
            Clues {
                remotes: vec![
                    "git@example.com:team/svc.git".into(),
                    "https://example.com/me/svc".into()
                ],
                branch: "trunk".into(),
                dir_name: "svc".into(),
            }
        );
    }
}
