//! Who is calling: the [`Principal`] the gateway authenticated, carried to the backends in the
//! `x-ploke-principal-bin` metadata and held, while a handler runs, as the task's current one
//! (like the correlation ids). Backends trust the header only from callers that presented the
//! internal token (see [`crate::internal`]); the gateway drops any a client sends.
//!
//! No principal means a trusted caller inside the deployment (a service's own background work,
//! or a backend called directly with the internal token): it is not restricted. Every
//! restriction — own sessions, own proposals, allowed workspaces, admin-only calls — is decided
//! from the current principal with the methods here, so the rule lives in one place.

use std::future::Future;
use std::path::Path;

use http::{HeaderMap, HeaderValue};
use prost::Message as _;

/// The metadata key of the encoded principal (binary metadata: base64 on the wire).
pub const HEADER: &str = "x-ploke-principal-bin";

/// Largest encoded principal (its metadata header must stay far below HTTP/2's header limits).
pub const MAX_ENCODED_BYTES: usize = 4096;

/// The principal of a one-person setup's plain tokens (`PLOKE_GATEWAY_TOKENS`). It also owns
/// what has no owner: sessions and proposals made before principals existed, or by a trusted
/// caller without one — so such a setup keeps working as it did.
pub const DEFAULT_PRINCIPAL: &str = "default";

/// What a principal may do beyond using its workspaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Its own sessions and proposals, on the workspaces it is allowed.
    #[default]
    User,
    /// Every session and proposal, and workspace administration.
    Admin,
}

impl Role {
    /// `user` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Admin => "admin",
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Principal {
    /// Its name (`alice`, `alice@example.com`).
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Workspaces it may use: roots, names (a root's last component) or `*`.
    pub workspaces: Vec<String>,
    /// May run only tools without side effects.
    pub read_only: bool,
}

/// A workspace's name: the last component of its root.
pub fn workspace_name(root: &Path) -> String {
    root.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl Principal {
    /// A principal that may use every workspace.
    pub fn everywhere(name: impl Into<String>, role: Role) -> Self {
        Self {
            name: name.into(),
            role,
            workspaces: vec!["*".to_owned()],
            read_only: false,
        }
    }

    /// Refuses a principal too large to travel in a header (a very long workspaces list).
    pub fn check_size(&self) -> Result<(), String> {
        let size = self.to_proto().encoded_len();
        if size > MAX_ENCODED_BYTES {
            return Err(format!(
                "its name and workspaces take {size} bytes; at most {MAX_ENCODED_BYTES} travel with every call (grant \"*\" or fewer, shorter entries)"
            ));
        }
        Ok(())
    }

    /// Whether it is an admin.
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// Whether it may use the workspace at `root` (canonical): `*`, the root itself, or the
    /// root's name.
    pub fn may_use(&self, root: &Path) -> bool {
        let name = workspace_name(root);
        self.workspaces.iter().any(|w| {
            let w = w.trim_end_matches('/');
            w == "*" || Path::new(w) == root || (!w.contains('/') && !name.is_empty() && w == name)
        })
    }

    /// Whether it owns (or, as an admin, may act on) something owned by `owner`. Things made
    /// without a principal (empty owner) belong to admins and to [`DEFAULT_PRINCIPAL`].
    pub fn owns(&self, owner: &str) -> bool {
        self.is_admin()
            || owner == self.name
            || (owner.is_empty() && self.name == DEFAULT_PRINCIPAL)
    }

    /// Whether it is `owner` itself (an admin acting on someone else's thing is not): what has
    /// no owner is [`DEFAULT_PRINCIPAL`]'s.
    pub fn is(&self, owner: &str) -> bool {
        owner == self.name || (owner.is_empty() && self.name == DEFAULT_PRINCIPAL)
    }

    /// The owners whose things it lists as its own.
    pub fn listed_owners(&self) -> Vec<String> {
        if self.name == DEFAULT_PRINCIPAL {
            vec![self.name.clone(), String::new()]
        } else {
            vec![self.name.clone()]
        }
    }

    /// The principal as the proto message.
    pub fn to_proto(&self) -> ploke_proto::common::v1::Principal {
        ploke_proto::common::v1::Principal {
            name: self.name.clone(),
            role: match self.role {
                Role::User => ploke_proto::common::v1::Role::User,
                Role::Admin => ploke_proto::common::v1::Role::Admin,
            } as i32,
            workspaces: self.workspaces.clone(),
            read_only: self.read_only,
        }
    }

    /// From the proto message (an unknown role is a user).
    pub fn from_proto(p: ploke_proto::common::v1::Principal) -> Self {
        let role = match p.role() {
            ploke_proto::common::v1::Role::Admin => Role::Admin,
            ploke_proto::common::v1::Role::User | ploke_proto::common::v1::Role::Unspecified => {
                Role::User
            }
        };
        Self {
            name: p.name,
            role,
            workspaces: p.workspaces,
            read_only: p.read_only,
        }
    }

    /// Writes the principal into `headers` (replacing any there).
    pub fn write_headers(&self, headers: &mut HeaderMap) {
        let mut metadata = tonic::metadata::MetadataMap::new();
        metadata.insert_bin(
            HEADER,
            tonic::metadata::MetadataValue::from_bytes(&self.to_proto().encode_to_vec()),
        );
        if let Some(value) = metadata.into_headers().remove(HEADER) {
            headers.insert(HEADER, value);
        }
    }

    /// The principal in `headers`: `Ok(None)` without one, an error when it cannot be decoded.
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, BadPrincipal> {
        let Some(value) = headers.get(HEADER) else {
            return Ok(None);
        };
        decode(value).map(Some)
    }
}

/// The principal metadata could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {HEADER} metadata is not an encoded ploke.common.v1.Principal")]
pub struct BadPrincipal;

fn decode(value: &HeaderValue) -> Result<Principal, BadPrincipal> {
    let mut one = HeaderMap::new();
    one.insert(HEADER, value.clone());
    let metadata = tonic::metadata::MetadataMap::from_headers(one);
    let bytes = metadata
        .get_bin(HEADER)
        .ok_or(BadPrincipal)?
        .to_bytes()
        .map_err(|_| BadPrincipal)?;
    let p = ploke_proto::common::v1::Principal::decode(bytes).map_err(|_| BadPrincipal)?;
    if p.name.is_empty() {
        return Err(BadPrincipal);
    }
    Ok(Principal::from_proto(p))
}

tokio::task_local! {
    static CURRENT: Option<Principal>;
}

/// The principal of the running task (set by the backend's auth layer, the gateway's
/// authentication, or [`scope`]); `None` for trusted callers and outside any scope.
pub fn current() -> Option<Principal> {
    CURRENT.try_with(Clone::clone).ok().flatten()
}

/// Whether the current caller may see a deployment's internals (where services run, their
/// files and database address, why they fail): admins, a one-person setup's
/// [`DEFAULT_PRINCIPAL`] and trusted callers without a principal; not a plain principal of a
/// shared deployment.
pub fn sees_internals() -> bool {
    current().is_none_or(|p| p.is_admin() || p.name == DEFAULT_PRINCIPAL)
}

/// Runs `fut` with `principal` as the current one; calls to other ploke services made inside
/// carry it.
pub async fn scope<F: Future>(principal: Option<Principal>, fut: F) -> F::Output {
    CURRENT.scope(principal, fut).await
}

/// Why the current principal may not do something: what each service answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// It may not use the workspace.
    #[error("{principal} may not use workspace {root}")]
    Workspace {
        /// The principal's name.
        principal: String,
        /// The workspace root.
        root: String,
    },
    /// The call needs an admin.
    #[error("{what} needs an admin principal ({principal} is a user)")]
    NotAdmin {
        /// The principal's name.
        principal: String,
        /// What was asked.
        what: String,
    },
    /// The call would change files, and the principal is read-only.
    #[error("{what} changes files; {principal} may run read-only tools only")]
    ReadOnly {
        /// The principal's name.
        principal: String,
        /// What was asked.
        what: String,
    },
}

impl Denied {
    /// `PERMISSION_DENIED` with the reason.
    pub fn to_status(&self) -> tonic::Status {
        tonic::Status::permission_denied(self.to_string())
    }
}

/// Refuses when the current principal is not an admin (trusted callers pass).
pub fn require_admin(what: &str) -> Result<(), Denied> {
    match current() {
        Some(p) if !p.is_admin() => Err(Denied::NotAdmin {
            principal: p.name,
            what: what.to_owned(),
        }),
        Some(_) | None => Ok(()),
    }
}

/// Refuses when the current principal is read-only (trusted callers pass): what every service
/// that stages or applies edits checks itself, whoever forwarded the call.
pub fn require_writer(what: &str) -> Result<(), Denied> {
    match current() {
        Some(p) if p.read_only => Err(Denied::ReadOnly {
            principal: p.name,
            what: what.to_owned(),
        }),
        Some(_) | None => Ok(()),
    }
}

/// Refuses when the current principal may not use the workspace at `root`.
pub fn check_workspace(root: &Path) -> Result<(), Denied> {
    match current() {
        Some(p) if !p.may_use(root) => Err(Denied::Workspace {
            principal: p.name,
            root: root.display().to_string(),
        }),
        Some(_) | None => Ok(()),
    }
}

/// Whether the current principal may act on something owned by `owner` (trusted callers may).
pub fn may_act_on(owner: &str) -> bool {
    current().is_none_or(|p| p.owns(owner))
}

/// The owner to record for something the current principal makes (empty for trusted callers).
pub fn owner_name() -> String {
    current().map(|p| p.name).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice(workspaces: &[&str]) -> Principal {
        Principal {
            name: "alice".into(),
            role: Role::User,
            workspaces: workspaces.iter().map(|w| (*w).to_owned()).collect(),
            read_only: false,
        }
    }

    #[test]
    fn workspaces_match_by_root_name_or_star() {
        let root = Path::new("/srv/repos/app");
        assert!(alice(&["*"]).may_use(root));
        assert!(alice(&["/srv/repos/app"]).may_use(root));
        assert!(alice(&["/srv/repos/app/"]).may_use(root));
        assert!(alice(&["app"]).may_use(root));
        assert!(!alice(&["other", "/srv/repos"]).may_use(root));
        assert!(!alice(&["/srv/repos/ap"]).may_use(root));
        assert!(!alice(&[]).may_use(root));
        // A name never matches a root that has no last component.
        assert!(!alice(&[""]).may_use(Path::new("/")));
    }

    #[test]
    fn ownership_admins_and_ownerless_things() {
        let a = alice(&["*"]);
        assert!(a.owns("alice"));
        assert!(!a.owns("bob"));
        assert!(!a.owns(""));
        assert_eq!(a.listed_owners(), vec!["alice".to_owned()]);
        let admin = Principal::everywhere("root", Role::Admin);
        assert!(admin.owns("bob") && admin.owns(""));
        let one_person = Principal::everywhere(DEFAULT_PRINCIPAL, Role::User);
        assert!(one_person.owns("") && !one_person.owns("alice"));
        assert_eq!(
            one_person.listed_owners(),
            vec!["default".to_owned(), String::new()]
        );
    }

    #[test]
    fn headers_round_trip_and_garbage_is_an_error() {
        let p = alice(&["app", "/srv/ünïcode"]);
        let mut headers = HeaderMap::new();
        p.write_headers(&mut headers);
        assert_eq!(Principal::from_headers(&headers), Ok(Some(p)));
        assert_eq!(Principal::from_headers(&HeaderMap::new()), Ok(None));
        let mut bad = HeaderMap::new();
        bad.insert(HEADER, HeaderValue::from_static("!!notbase64"));
        assert_eq!(Principal::from_headers(&bad), Err(BadPrincipal));
        let mut nameless = HeaderMap::new();
        Principal {
            name: String::new(),
            role: Role::Admin,
            workspaces: vec![],
            read_only: false,
        }
        .write_headers(&mut nameless);
        assert_eq!(Principal::from_headers(&nameless), Err(BadPrincipal));
    }

    #[tokio::test]
    async fn checks_follow_the_current_principal() {
        let root = Path::new("/srv/repos/app");
        assert_eq!(check_workspace(root), Ok(()));
        assert_eq!(require_admin("AddWorkspace"), Ok(()));
        assert!(may_act_on("anyone"));
        scope(Some(alice(&["other"])), async {
            assert_eq!(
                check_workspace(root).unwrap_err().to_string(),
                "alice may not use workspace /srv/repos/app"
            );
            assert_eq!(
                require_admin("AddWorkspace").unwrap_err().to_string(),
                "AddWorkspace needs an admin principal (alice is a user)"
            );
            assert!(may_act_on("alice") && !may_act_on("bob"));
            assert_eq!(owner_name(), "alice");
        })
        .await;
        assert_eq!(owner_name(), "");
    }
}
