//! Service-to-service authentication: every call between ploke services carries a shared
//! internal token in `x-ploke-internal-token`, and every backend (rag-search, tool-executor,
//! llm-session) refuses calls without one of its tokens with `UNAUTHENTICATED`. Health and
//! reflection stay open: Kubernetes probes cannot send metadata, and reflection describes only
//! the published protos. Why a token and not mTLS: docs/SECURITY.md.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response};

use crate::config::{InternalConfig, Secret};

/// The metadata key of the internal token.
pub const HEADER: &str = "x-ploke-internal-token";

/// Fewest bytes an internal token may have.
pub const MIN_TOKEN_BYTES: usize = 16;

/// Paths every caller may use: health (probes) and reflection (the published schema).
const OPEN_PREFIXES: [&str; 3] = [
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];

/// The internal tokens could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file could not be read.
    #[error("reading the internal token file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file named in `token_file` holds no token.
    #[error("the internal token file {0} holds no token")]
    EmptyFile(PathBuf),
    /// A token is too short or has characters a header cannot carry (the token is not shown).
    #[error(
        "internal token {position} is not usable: {why} (use at least {MIN_TOKEN_BYTES} random \
         printable ASCII characters, e.g. `openssl rand -hex 32`)"
    )]
    Invalid {
        /// 1-based position among the configured tokens.
        position: usize,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// The internal tokens of a deployment: the first is sent on every call to another ploke
/// service, every one is accepted (two while a token is being rotated). Shown as `***`.
#[derive(Clone, Default)]
pub struct InternalTokens {
    tokens: Arc<[Secret]>,
    outgoing: Option<HeaderValue>,
}

impl std::fmt::Debug for InternalTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InternalTokens")
            .field("count", &self.tokens.len())
            .finish()
    }
}

impl InternalTokens {
    /// Exactly these tokens, checked: each at least [`MIN_TOKEN_BYTES`] of printable ASCII.
    pub fn new(tokens: Vec<Secret>) -> Result<Self, TokenError> {
        for (i, token) in tokens.iter().enumerate() {
            let t = token.expose().as_bytes();
            let why = if t.len() < MIN_TOKEN_BYTES {
                Some("too short")
            } else if !t.iter().all(u8::is_ascii_graphic) {
                Some("only printable ASCII without spaces can travel in a header")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(TokenError::Invalid {
                    position: i + 1,
                    why,
                });
            }
        }
        let outgoing = match tokens.first() {
            Some(t) => {
                let mut v = HeaderValue::from_str(t.expose()).map_err(|_| TokenError::Invalid {
                    position: 1,
                    why: "not a header value",
                })?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        Ok(Self {
            tokens: tokens.into(),
            outgoing,
        })
    }

    /// The tokens `[internal]` configures: `PLOKE_INTERNAL_TOKEN`'s, then the token file's.
    pub fn load(config: &InternalConfig) -> Result<Self, TokenError> {
        let mut tokens = config.tokens.clone();
        if let Some(path) = &config.token_file {
            let text = std::fs::read_to_string(path).map_err(|source| TokenError::File {
                path: path.clone(),
                source,
            })?;
            let before = tokens.len();
            tokens.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(Secret::new),
            );
            if tokens.len() == before {
                return Err(TokenError::EmptyFile(path.clone()));
            }
        }
        Self::new(tokens)
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The header value sent to other services (the first token).
    pub fn outgoing(&self) -> Option<&HeaderValue> {
        self.outgoing.as_ref()
    }

    /// Whether `presented` equals one of the tokens. Every token is compared, in constant time,
    /// so timing reveals neither which token nor how much of it matched.
    pub fn accepts(&self, presented: &[u8]) -> bool {
        let mut ok = subtle::Choice::from(0u8);
        for token in self.tokens.iter() {
            ok |= subtle::ConstantTimeEq::ct_eq(token.expose().as_bytes(), presented);
        }
        bool::from(ok)
    }

    /// `Ok` when `headers` carry one of the tokens; else the status the caller gets, which
    /// never repeats what was presented.
    pub fn check(&self, headers: &http::HeaderMap) -> Result<(), tonic::Status> {
        match headers.get(HEADER) {
            None => Err(tonic::Status::unauthenticated(format!(
                "missing internal token ({HEADER}): this backend answers other ploke services \
                 only; clients call the gateway"
            ))),
            Some(v) if self.accepts(v.as_bytes()) => Ok(()),
            Some(_) => Err(tonic::Status::unauthenticated(format!(
                "invalid internal token ({HEADER})"
            ))),
        }
    }
}

/// Who may call a server.
#[derive(Debug, Clone)]
pub enum Access {
    /// Anyone: the gateway, which authenticates its own callers.
    Public,
    /// Callers with one of these tokens; with none, see [`guard`].
    Internal {
        /// The accepted tokens.
        tokens: InternalTokens,
        /// `[internal] allow_unauthenticated`.
        allow_unauthenticated: bool,
    },
}

impl Default for Access {
    /// A backend with no token: loopback only.
    fn default() -> Self {
        Access::Internal {
            tokens: InternalTokens::default(),
            allow_unauthenticated: false,
        }
    }
}

/// A backend without internal tokens that would listen beyond loopback.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to serve on {0} without an internal token: set PLOKE_INTERNAL_TOKEN or \
     [internal] token_file (the same on every ploke service), or listen on loopback; \
     [internal] allow_unauthenticated = true only behind a network that authenticates callers"
)]
pub struct Unprotected(pub SocketAddr);

/// The gate a server listening on `addr` applies. A backend without tokens serves loopback
/// callers only (binding elsewhere is refused unless `allow_unauthenticated`).
pub fn guard(access: &Access, addr: SocketAddr) -> Result<Gate, Unprotected> {
    guard_tokens(access, addr).map(|tokens| match access {
        Access::Public => Gate::Public,
        Access::Internal { .. } => Gate::Backend(tokens),
    })
}

/// The tokens a server listening on `addr` checks: `None` lets every call in.
fn guard_tokens(access: &Access, addr: SocketAddr) -> Result<Option<InternalTokens>, Unprotected> {
    match access {
        Access::Public => Ok(None),
        Access::Internal { tokens, .. } if !tokens.is_empty() => Ok(Some(tokens.clone())),
        Access::Internal { .. } if addr.ip().is_loopback() => {
            tracing::info!(
                %addr,
                "no internal token configured; serving loopback callers without one"
            );
            Ok(None)
        }
        Access::Internal {
            allow_unauthenticated: true,
            ..
        } => {
            tracing::warn!(
                %addr,
                "no internal token configured; any caller that reaches this address is served (allow_unauthenticated)"
            );
            Ok(None)
        }
        Access::Internal { .. } => Err(Unprotected(addr)),
    }
}

/// What [`InternalAuthLayer`] does with a call.
#[derive(Debug, Clone)]
pub enum Gate {
    /// The gateway: anyone may call, and a principal a caller sends is dropped (the gateway
    /// authenticates its callers itself).
    Public,
    /// A backend: the caller must present one of the tokens (none checked when `None`: a
    /// loopback backend without tokens); the principal it sends becomes the handler's current
    /// one ([`crate::principal`]).
    Backend(Option<InternalTokens>),
}

/// Tower layer that refuses calls without an internal token and carries the principal.
#[derive(Debug, Clone)]
pub struct InternalAuthLayer {
    gate: Gate,
}

impl InternalAuthLayer {
    /// Applies `gate` to every call but health and reflection.
    pub fn new(gate: Gate) -> Self {
        Self { gate }
    }
}

impl<S> tower_layer::Layer<S> for InternalAuthLayer {
    type Service = InternalAuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        InternalAuthService {
            inner,
            gate: self.gate.clone(),
        }
    }
}

/// The service of [`InternalAuthLayer`].
#[derive(Debug, Clone)]
pub struct InternalAuthService<S> {
    inner: S,
    gate: Gate,
}

fn peer<B>(req: &Request<B>) -> String {
    req.extensions()
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|i| i.remote_addr())
        .map(|a| a.to_string())
        .unwrap_or_default()
}

impl<S, B, ResB> tower_service::Service<Request<B>> for InternalAuthService<S>
where
    S: tower_service::Service<Request<B>, Response = Response<ResB>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResB: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let tokens = match &self.gate {
            Gate::Public => {
                req.headers_mut().remove(crate::principal::HEADER);
                return Box::pin(self.inner.call(req));
            }
            Gate::Backend(tokens) => tokens,
        };
        let path = req.uri().path();
        if let Some(tokens) = tokens
            && !OPEN_PREFIXES.iter().any(|p| path.starts_with(p))
            && let Err(status) = tokens.check(req.headers())
        {
            tracing::warn!(
                path,
                peer = peer(&req),
                reason = status.message(),
                "internal call refused"
            );
            return Box::pin(std::future::ready(Ok(status.into_http())));
        }
        let principal = match crate::principal::Principal::from_headers(req.headers()) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(
                    path,
                    peer = peer(&req),
                    "internal call with a bad principal refused"
                );
                let status = tonic::Status::unauthenticated(e.to_string());
                return Box::pin(std::future::ready(Ok(status.into_http())));
            }
        };
        if let Some(p) = &principal {
            tracing::Span::current().record("enduser.id", p.name.as_str());
        }
        let fut = self.inner.call(req);
        Box::pin(crate::principal::scope(principal, fut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbb";

    fn tokens(t: &[&str]) -> InternalTokens {
        InternalTokens::new(t.iter().map(|s| Secret::new(*s)).collect()).unwrap()
    }

    fn headers(token: Option<&str>) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        if let Some(t) = token {
            h.insert(HEADER, t.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_first_token_is_sent_and_every_one_accepted() {
        let t = tokens(&[A, B]);
        assert_eq!(t.outgoing().unwrap().as_bytes(), A.as_bytes());
        assert!(t.outgoing().unwrap().is_sensitive());
        assert!(t.check(&headers(Some(A))).is_ok());
        assert!(t.check(&headers(Some(B))).is_ok());
        let missing = t.check(&headers(None)).unwrap_err();
        assert_eq!(
            (missing.code(), missing.message()),
            (
                tonic::Code::Unauthenticated,
                "missing internal token (x-ploke-internal-token): this backend answers other \
                 ploke services only; clients call the gateway"
            )
        );
        let wrong = t
            .check(&headers(Some("cccccccccccccccccccccccc")))
            .unwrap_err();
        assert_eq!(
            (wrong.code(), wrong.message()),
            (
                tonic::Code::Unauthenticated,
                "invalid internal token (x-ploke-internal-token)"
            )
        );
        assert!(!t.accepts(&A.as_bytes()[1..]));
        assert_eq!(format!("{t:?}"), "InternalTokens { count: 2 }");
    }

    #[test]
    fn weak_or_unsendable_tokens_are_refused_without_showing_them() {
        for (token, why) in [
            ("sh0rtk3y", "too short"),
            (
                "k3y with a space in the middle",
                "only printable ASCII without spaces can travel in a header",
            ),
        ] {
            let e = InternalTokens::new(vec![Secret::new(A), Secret::new(token)]).unwrap_err();
            assert!(matches!(e, TokenError::Invalid { position: 2, why: w } if w == why));
            assert!(!e.to_string().contains(token));
        }
    }

    #[test]
    fn the_token_file_adds_tokens_after_the_environments() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens");
        std::fs::write(&file, format!("# rotated 2025-01-01\n\n{B}\n")).unwrap();
        let config = InternalConfig {
            token_file: Some(file.clone()),
            tokens: vec![Secret::new(A)],
            allow_unauthenticated: false,
        };
        let t = InternalTokens::load(&config).unwrap();
        assert_eq!(t.outgoing().unwrap().as_bytes(), A.as_bytes());
        assert!(t.accepts(B.as_bytes()));
        std::fs::write(&file, "# nothing\n").unwrap();
        assert!(matches!(
            InternalTokens::load(&config),
            Err(TokenError::EmptyFile(p)) if p == file
        ));
    }

    #[test]
    fn a_backend_without_tokens_serves_loopback_only_unless_allowed() {
        let loopback: SocketAddr = "127.0.0.1:50054".parse().unwrap();
        let v6_loopback: SocketAddr = "[::1]:50054".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:50054".parse().unwrap();
        let open = Access::default();
        assert!(guard_tokens(&open, loopback).unwrap().is_none());
        assert!(guard_tokens(&open, v6_loopback).unwrap().is_none());
        assert_eq!(
            guard_tokens(&open, any).unwrap_err().to_string(),
            "refusing to serve on 0.0.0.0:50054 without an internal token: set \
             PLOKE_INTERNAL_TOKEN or [internal] token_file (the same on every ploke service), \
             or listen on loopback; [internal] allow_unauthenticated = true only behind a \
             network that authenticates callers"
        );
        let allowed = Access::Internal {
            tokens: InternalTokens::default(),
            allow_unauthenticated: true,
        };
        assert!(guard_tokens(&allowed, any).unwrap().is_none());
        assert!(guard_tokens(&Access::Public, any).unwrap().is_none());
        let with = Access::Internal {
            tokens: tokens(&[A]),
            allow_unauthenticated: true,
        };
        assert!(guard_tokens(&with, loopback).unwrap().is_some());
        assert!(guard_tokens(&with, any).unwrap().is_some());
    }
}
