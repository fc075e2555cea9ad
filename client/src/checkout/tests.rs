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
