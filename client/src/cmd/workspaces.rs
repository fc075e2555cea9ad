//! `ploke workspaces`: list the workspaces rag-search serves, add a directory or a git
//! repository, remove one that was added (adding and removing need an admin token).

use ploke_proto::rag::v1::{
    AddWorkspaceRequest, GitSource, IndexState, ListWorkspacesRequest, RemoveWorkspaceRequest,
    Workspace, WorkspaceOrigin, add_workspace_request::Source,
};

use super::{Conn, Target};

/// What to do with workspaces.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum WorkspacesCommand {
    /// Every workspace served, configured ones first.
    List,
    /// Serve one more: a directory on the rag-search host, or a git repository (--git URL).
    Add {
        /// An absolute directory on the rag-search host.
        #[arg(required_unless_present = "git", conflicts_with = "git")]
        path: Option<String>,
        /// A git repository to clone and keep at its branch's tip.
        #[arg(long, value_name = "URL")]
        git: Option<String>,
        /// The branch to follow (default: the remote's default branch).
        #[arg(long, requires = "git", default_value = "")]
        branch: String,
    },
    /// Stop serving a workspace that was added.
    Remove {
        /// Its name or root, as `ploke workspaces` lists it (a clone also by its repository's
        /// name, when one clone has it).
        root: String,
        /// Also delete its index (and, for git, the clone).
        #[arg(long)]
        delete_data: bool,
    },
}

fn print(w: &Workspace) {
    let origin = match w.origin() {
        WorkspaceOrigin::Configured => "configured",
        WorkspaceOrigin::Added | WorkspaceOrigin::Unspecified => "added",
    };
    let state = crate::describe::lower(w.state().as_str_name(), "INDEX_STATE_");
    print!("{}  {origin}  {state}  {} items", w.workspace_root, w.items);
    if let Some(g) = &w.git {
        let head: String = w.head_commit.chars().take(12).collect();
        print!("  git {} {} @ {head}", g.url, g.branch);
    }
    println!();
}

/// The workspaces the gateway serves the caller.
async fn served(conn: &mut Conn) -> anyhow::Result<Vec<Workspace>> {
    Ok(conn
        .gateway
        .list_workspaces(ListWorkspacesRequest {})
        .await
        .map_err(|s| anyhow::anyhow!("workspaces: {}", s.message()))?
        .into_inner()
        .workspaces)
}

/// `ploke workspaces …`.
pub(crate) async fn run(target: &Target, command: WorkspacesCommand) -> anyhow::Result<()> {
    let mut conn = Conn::open_unindexed(target).await?;
    let fail = |s: tonic::Status| anyhow::anyhow!("workspaces: {}", s.message());
    match command {
        WorkspacesCommand::List => {
            let listed = served(&mut conn).await?;
            for w in &listed {
                print(w);
            }
            // Which of them this checkout's commands use (stderr: stdout is the list).
            if conn.is_remote() {
                match conn.workspace_root().await {
                    Ok(root) if !root.is_empty() => {
                        eprintln!("(this checkout stands for {root})");
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("({})", crate::describe::error(&e)),
                }
            }
        }
        WorkspacesCommand::Add { path, git, branch } => {
            let source = match (path, git) {
                (_, Some(url)) => Source::Git(GitSource { url, branch }),
                (Some(path), None) => Source::Path(path),
                (None, None) => anyhow::bail!("give a directory or --git URL"),
            };
            let added = conn
                .gateway
                .add_workspace(AddWorkspaceRequest {
                    source: Some(source),
                })
                .await
                .map_err(fail)?
                .into_inner();
            print(&added);
            if added.state() == IndexState::Indexing {
                eprintln!(
                    "indexing in the background; `ploke index --server-workspace {}` waits for it",
                    added.name
                );
            }
        }
        WorkspacesCommand::Remove { root, delete_data } => {
            // A name is looked up among the workspaces listed, as --server-workspace is.
            let root = if root.starts_with('/') {
                root
            } else {
                ploke_client::checkout::choose(
                    &served(&mut conn).await?,
                    "",
                    Some(&root),
                    &ploke_client::checkout::Clues::default(),
                )
                .map_err(|e| {
                    let message = e.to_string();
                    let message = message
                        .strip_prefix("--server-workspace ")
                        .map_or(message.clone(), str::to_owned);
                    anyhow::anyhow!("workspaces remove {message}")
                })?
                .0
            };
            let removed = conn
                .gateway
                .remove_workspace(RemoveWorkspaceRequest {
                    workspace_root: root,
                    delete_data,
                })
                .await
                .map_err(fail)?
                .into_inner();
            if let Some(w) = &removed.removed {
                print!("removed ");
                print(w);
            }
        }
    }
    conn.close().await
}
