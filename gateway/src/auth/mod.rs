//! Who is calling the gateway. Each bearer token maps to a [`Principal`]: a token of the
//! principals file (stored as SHA-256, compared in constant time), a one-person setup's plain
//! token (`PLOKE_GATEWAY_TOKENS` → `default`, `PLOKE_GATEWAY_ADMIN_TOKENS` → `admin`), or a JWT
//! from the team's identity provider. The [`AuthLayer`] refuses anything else with
//! UNAUTHENTICATED and runs every call with its principal as the task's current one, so the
//! backends receive it (and nothing a client wrote in the same metadata).
//!
//! The principals and JWKS files are re-read when they change ([`Authenticator::watch`]): a new
//! developer or a rotated key needs no restart; a file that no longer parses keeps the last
//! good table and logs why.

pub mod jwt;
pub mod principals;

use std::convert::Infallible;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use ploke_runtime::Secret;
use ploke_runtime::config::JwtConfig;
use ploke_runtime::principal::{self, Principal, Role};
use tonic::Status;

use jwt::JwtVerifier;
use principals::Table;

/// The name of the one principal of an unauthenticated (`ploke up`, loopback) gateway.
pub const LOCAL: &str = "local";

/// Where the credentials come from.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// `[gateway] principals_file`.
    pub principals_file: Option<PathBuf>,
    /// Plain user tokens (`PLOKE_GATEWAY_TOKENS`, `[gateway] tokens_file`).
    pub tokens: Vec<Secret>,
    /// Plain admin tokens (`PLOKE_GATEWAY_ADMIN_TOKENS`).
    pub admin_tokens: Vec<Secret>,
    /// `[gateway.jwt]`.
    pub jwt: Option<JwtConfig>,
}

/// The credentials could not be loaded at start.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The principals file.
    #[error(transparent)]
    Principals(#[from] principals::PrincipalsError),
    /// The JWKS file.
    #[error(transparent)]
    Jwks(#[from] jwt::JwksError),
    /// Plain shared tokens beside per-principal credentials.
    #[error(
        "PLOKE_GATEWAY_TOKENS / PLOKE_GATEWAY_ADMIN_TOKENS / [gateway] tokens_file are set beside a principals file or [gateway.jwt]: everyone holding a shared token would be the principal `default` or `admin`; give each person an entry of the principals file and remove the shared tokens"
    )]
    Mixed,
    /// A principals file re-read empty where it had principals: a file being written in place
    /// (`cat > principals.toml`) is empty for a moment, and a file emptied by mistake would
    /// shut the whole team out.
    #[error(
        "the principals file now lists no principals (it had {0}); the last good ones stay until it lists some again (to refuse everyone, stop the gateway)"
    )]
    Emptied(usize),
}

/// What a file held when it was last read (its SHA-256; `None` when unreadable), to notice any
/// change: an edit within the clock's resolution, a file replaced by rename, a deleted one.
type Stamp = Option<[u8; 32]>;

fn stamp(path: &std::path::Path) -> Stamp {
    use sha2::Digest as _;
    let bytes = std::fs::read(path).ok()?;
    Some(sha2::Sha256::digest(&bytes).into())
}

struct Checked {
    credentials: Credentials,
    table: RwLock<Arc<Table>>,
    jwt: RwLock<Option<Arc<JwtVerifier>>>,
    stamps: Mutex<(Stamp, Stamp)>,
}

/// Maps bearer tokens to principals.
#[derive(Clone)]
pub struct Authenticator {
    checked: Option<Arc<Checked>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.checked {
            None => f.write_str("Authenticator(open)"),
            Some(c) => f
                .debug_struct("Authenticator")
                .field("principals_file", &c.credentials.principals_file)
                .field("jwt", &c.credentials.jwt.as_ref().map(|j| &j.jwks_file))
                .finish(),
        }
    }
}

fn load_table(c: &Credentials) -> Result<Table, principals::PrincipalsError> {
    let table = match &c.principals_file {
        Some(path) => Table::load(path)?,
        None => Table::default(),
    };
    Ok(table.with_plain_tokens(&c.tokens, &c.admin_tokens))
}

impl Authenticator {
    /// Every caller is the admin principal `local` (an unauthenticated gateway on loopback).
    pub fn open() -> Self {
        Self { checked: None }
    }

    /// Checks callers against `credentials`, read now (an unreadable file stops the start).
    pub fn load(credentials: Credentials) -> Result<Self, CredentialsError> {
        let per_principal = credentials.principals_file.is_some() || credentials.jwt.is_some();
        if per_principal && !(credentials.tokens.is_empty() && credentials.admin_tokens.is_empty())
        {
            return Err(CredentialsError::Mixed);
        }
        let table = load_table(&credentials)?;
        let jwt = credentials
            .jwt
            .as_ref()
            .map(JwtVerifier::load)
            .transpose()?
            .map(Arc::new);
        if table.has_no_tokens() && jwt.is_none() {
            tracing::warn!(
                "no gateway credentials configured (principals_file, PLOKE_GATEWAY_TOKENS or [gateway.jwt]): every call will be refused"
            );
        } else {
            tracing::info!(
                principals = table.principal_count(),
                jwt = jwt.is_some(),
                "gateway credentials loaded"
            );
        }
        let stamps = (
            credentials.principals_file.as_deref().and_then(stamp),
            credentials.jwt.as_ref().and_then(|j| stamp(&j.jwks_file)),
        );
        Ok(Self {
            checked: Some(Arc::new(Checked {
                credentials,
                table: RwLock::new(Arc::new(table)),
                jwt: RwLock::new(jwt),
                stamps: Mutex::new(stamps),
            })),
        })
    }

    /// Re-reads the files that changed since they were last read; a file that does not load
    /// keeps what was loaded before (the error is returned). Whether anything was replaced.
    pub fn reload(&self) -> Result<bool, CredentialsError> {
        let Some(c) = &self.checked else {
            return Ok(false);
        };
        let now = (
            c.credentials.principals_file.as_deref().and_then(stamp),
            c.credentials.jwt.as_ref().and_then(|j| stamp(&j.jwks_file)),
        );
        let mut stamps = c.stamps.lock().unwrap_or_else(|e| e.into_inner());
        let mut changed = false;
        if now.0 != stamps.0 {
            stamps.0 = now.0;
            let table = load_table(&c.credentials)?;
            let before = c
                .table
                .read()
                .map(|t| t.principal_count())
                .unwrap_or_default();
            if table.principal_count() == 0 && before > 0 {
                return Err(CredentialsError::Emptied(before));
            }
            tracing::info!(
                principals = table.principal_count(),
                "principals file re-read"
            );
            *c.table.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(table);
            changed = true;
        }
        if now.1 != stamps.1
            && let Some(config) = &c.credentials.jwt
        {
            stamps.1 = now.1;
            let verifier = JwtVerifier::load(config)?;
            tracing::info!("JWKS file re-read");
            *c.jwt.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(verifier));
            changed = true;
        }
        Ok(changed)
    }

    /// Re-reads changed files every `period` until the task is aborted.
    pub fn watch(&self, period: Duration) -> Option<tokio::task::JoinHandle<()>> {
        self.checked.as_ref()?;
        let this = self.clone();
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = this.reload() {
                    tracing::error!(error = %e, "gateway credentials not reloaded; the last good ones stay");
                }
            }
        }))
    }

    /// The principal the request's `authorization: Bearer …` names.
    pub fn authenticate(&self, headers: &http::HeaderMap) -> Result<Principal, Status> {
        let Some(c) = &self.checked else {
            return Ok(Principal::everywhere(LOCAL, Role::Admin));
        };
        let header = headers
            .get(http::header::AUTHORIZATION)
            .ok_or_else(|| Status::unauthenticated("missing bearer token"))?;
        let value = header
            .to_str()
            .map_err(|_| Status::unauthenticated("malformed authorization header"))?;
        // The scheme's case does not matter (RFC 7235): `BEARER x` is `Bearer x`.
        let token = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .ok_or_else(|| Status::unauthenticated("authorization is not a bearer token"))?;
        if token.is_empty() {
            return Err(Status::unauthenticated("empty bearer token"));
        }
        let table = c.table.read().map(|t| Arc::clone(&t)).unwrap_or_default();
        if let Some(p) = table.by_token(token) {
            return Ok(p.clone());
        }
        let verifier = c.jwt.read().ok().and_then(|j| j.clone());
        if table.has_no_tokens() && verifier.is_none() {
            return Err(Status::unauthenticated(
                "the gateway has no credentials configured (principals_file, PLOKE_GATEWAY_TOKENS or [gateway.jwt])",
            ));
        }
        match verifier {
            Some(v) if jwt::looks_like_jwt(token) => v
                .verify(token, &table)
                .map_err(|e| Status::unauthenticated(e.to_string())),
            Some(_) | None => Err(Status::unauthenticated("invalid bearer token")),
        }
    }
}

/// Tower layer that authenticates every call to the service it wraps.
#[derive(Debug, Clone)]
pub struct AuthLayer {
    auth: Authenticator,
}

impl AuthLayer {
    /// Authenticates with `auth`.
    pub fn new(auth: Authenticator) -> Self {
        Self { auth }
    }
}

impl<S> tower_layer::Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            auth: self.auth.clone(),
        }
    }
}

/// The service of [`AuthLayer`].
#[derive(Debug, Clone)]
pub struct AuthService<S> {
    inner: S,
    auth: Authenticator,
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for AuthService<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> tower_service::Service<http::Request<B>> for AuthService<S>
where
    S: tower_service::Service<
            http::Request<B>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        >,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        match self.auth.authenticate(req.headers()) {
            Err(status) => {
                let method = req.uri().path().rsplit('/').next().unwrap_or_default();
                let peer = req
                    .extensions()
                    .get::<tonic::transport::server::TcpConnectInfo>()
                    .and_then(|i| i.remote_addr())
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                tracing::info!(
                    target: crate::audit::TARGET,
                    method,
                    peer,
                    code = "UNAUTHENTICATED",
                    reason = status.message(),
                    "gateway call refused"
                );
                Box::pin(std::future::ready(Ok(status.into_http())))
            }
            Ok(p) => {
                tracing::Span::current().record("enduser.id", p.name.as_str());
                req.extensions_mut().insert(p.clone());
                Box::pin(principal::scope(Some(p), self.inner.call(req)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(token: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        h
    }

    fn entry(name: &str, token: &str) -> String {
        format!(
            "[[principal]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\nworkspaces = [\"*\"]\n",
            hex::encode(principals::token_sha256(token))
        )
    }

    #[test]
    fn a_changed_principals_file_is_read_again_and_a_broken_one_keeps_the_last_good() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("principals.toml");
        let (a, b) = ("alice-token-0123456789", "bob-token-0123456789ab");
        std::fs::write(&file, entry("alice", a)).unwrap();
        let auth = Authenticator::load(Credentials {
            principals_file: Some(file.clone()),
            ..Credentials::default()
        })
        .unwrap();
        assert_eq!(auth.authenticate(&bearer(a)).unwrap().name, "alice");
        for scheme in ["BEARER", "bearer", "BeArEr"] {
            let mut h = http::HeaderMap::new();
            h.insert(
                http::header::AUTHORIZATION,
                format!("{scheme} {a}").parse().unwrap(),
            );
            assert_eq!(auth.authenticate(&h).unwrap().name, "alice", "{scheme}");
        }
        let mut basic = http::HeaderMap::new();
        basic.insert(
            http::header::AUTHORIZATION,
            format!("Basic {a}").parse().unwrap(),
        );
        assert_eq!(
            auth.authenticate(&basic).unwrap_err().message(),
            "authorization is not a bearer token"
        );
        assert_eq!(
            auth.authenticate(&bearer(b)).unwrap_err().message(),
            "invalid bearer token"
        );
        assert!(!auth.reload().unwrap(), "nothing changed yet");
        // Bob is added.
        std::fs::write(&file, entry("alice", a) + &entry("bob", b)).unwrap();
        assert!(auth.reload().unwrap());
        assert_eq!(auth.authenticate(&bearer(b)).unwrap().name, "bob");
        // Alice's token is swapped in place for another of the same length (same size, and
        // within the file system clock's resolution): still noticed.
        let a2 = "alice-token-9876543210";
        std::fs::write(&file, entry("alice", a2) + &entry("bob", b)).unwrap();
        assert!(auth.reload().unwrap());
        assert_eq!(
            auth.authenticate(&bearer(a)).unwrap_err().message(),
            "invalid bearer token"
        );
        assert_eq!(auth.authenticate(&bearer(a2)).unwrap().name, "alice");
        // Replaced by rename (an editor's save): noticed too.
        let tmp = dir.path().join("principals.toml.new");
        std::fs::write(&tmp, entry("bob", b)).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        assert!(auth.reload().unwrap());
        assert!(auth.authenticate(&bearer(a2)).is_err());
        // A typo: the error is reported and both keep working.
        std::fs::write(&file, "[[principal]]\nnmae = \"x\"\n".repeat(3)).unwrap();
        let e = auth.reload().unwrap_err().to_string();
        assert!(e.contains("unknown field `nmae`"), "{e}");
        assert_eq!(auth.authenticate(&bearer(b)).unwrap().name, "bob");
        // Emptied (`cat > principals.toml` truncates before it writes): the last good stay.
        std::fs::write(&file, "").unwrap();
        assert!(matches!(auth.reload(), Err(CredentialsError::Emptied(1))));
        assert_eq!(auth.authenticate(&bearer(b)).unwrap().name, "bob");
        // Written: read.
        std::fs::write(&file, entry("alice", a)).unwrap();
        assert!(auth.reload().unwrap());
        assert_eq!(auth.authenticate(&bearer(a)).unwrap().name, "alice");
    }

    #[test]
    fn bearer_headers_are_parsed_strictly_and_an_open_gateway_is_local() {
        let auth = Authenticator::load(Credentials {
            tokens: vec![Secret::new("plain-token-0123456789")],
            ..Credentials::default()
        })
        .unwrap();
        let mut basic = http::HeaderMap::new();
        basic.insert(
            http::header::AUTHORIZATION,
            "Basic YWxpY2U=".parse().unwrap(),
        );
        for (headers, message) in [
            (http::HeaderMap::new(), "missing bearer token"),
            (basic, "authorization is not a bearer token"),
            (bearer("plain-token-012345678"), "invalid bearer token"),
        ] {
            let s = auth.authenticate(&headers).unwrap_err();
            assert_eq!(
                (s.code(), s.message()),
                (tonic::Code::Unauthenticated, message)
            );
        }
        assert_eq!(
            auth.authenticate(&bearer("plain-token-0123456789"))
                .unwrap(),
            Principal::everywhere("default", Role::User)
        );
        assert_eq!(
            Authenticator::open()
                .authenticate(&http::HeaderMap::new())
                .unwrap(),
            Principal::everywhere(LOCAL, Role::Admin)
        );
        assert_eq!(
            auth.authenticate(&bearer("  ")).unwrap_err().message(),
            "empty bearer token"
        );
        let mut empty = http::HeaderMap::new();
        empty.insert(http::header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(
            auth.authenticate(&empty).unwrap_err().message(),
            "empty bearer token"
        );
        // Shared tokens beside per-principal credentials are refused at start.
        let mixed = Authenticator::load(Credentials {
            principals_file: Some("/nonexistent/principals.toml".into()),
            tokens: vec![Secret::new("plain-token-0123456789")],
            ..Credentials::default()
        });
        assert!(matches!(mixed, Err(CredentialsError::Mixed)));
        let none = Authenticator::load(Credentials::default()).unwrap();
        assert_eq!(
            none.authenticate(&bearer("anything-at-all-0123"))
                .unwrap_err()
                .message(),
            "the gateway has no credentials configured (principals_file, PLOKE_GATEWAY_TOKENS or [gateway.jwt])"
        );
    }
}
