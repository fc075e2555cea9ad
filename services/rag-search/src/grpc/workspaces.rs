//! Conversions of the workspace RPCs (AddWorkspace, ListWorkspaces, RemoveWorkspace).

use ploke_proto::rag::v1::{self as pb, add_workspace_request::Source};
use ploke_proto::status::invalid_argument;
use tonic::Status;

use super::convert::{state_to_pb, timestamp};
use crate::service::{NewWorkspace, WorkspaceInfo};

impl TryFrom<pb::AddWorkspaceRequest> for NewWorkspace {
    type Error = Status;

    fn try_from(r: pb::AddWorkspaceRequest) -> Result<Self, Status> {
        match r.source {
            Some(Source::Path(path)) => Ok(NewWorkspace::Path(path)),
            Some(Source::Git(g)) => Ok(NewWorkspace::Git {
                url: g.url,
                branch: g.branch,
            }),
            None => Err(invalid_argument(
                "source",
                "set `path` (a directory on the rag-search host) or `git` (url and branch)",
            )),
        }
    }
}

pub(super) fn workspace_to_pb(w: WorkspaceInfo) -> pb::Workspace {
    pb::Workspace {
        workspace_root: w.root.display().to_string(),
        origin: if w.configured {
            pb::WorkspaceOrigin::Configured
        } else {
            pb::WorkspaceOrigin::Added
        } as i32,
        // A URL added before credentials in URLs were refused is listed without them.
        git: w.git.map(|g| pb::GitSource {
            url: ploke_runtime::text::url_without_credentials(&g.url).into_owned(),
            branch: g.branch,
        }),
        head_commit: w.head,
        state: state_to_pb(&w.state) as i32,
        items: w.items,
        added_at: w.added_at.map(timestamp),
        updated_at: w.updated_at.map(timestamp),
        name: w.name,
    }
}
