//! The gateway's MCP endpoint: Streamable HTTP at `/mcp` on `[gateway] mcp_listen`, behind the
//! same bearer tokens as the gRPC API (401 with `WWW-Authenticate: Bearer` without one). Each
//! request runs as its principal; legacy (pre-2026-07-28) clients get a session, bound to the
//! principal that opened it, newer ones are served statelessly, so any replica answers them.
//! A browser page's request (an `Origin` that is not the endpoint's own) is refused.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

use super::{Backend, McpServer, Options};
use crate::auth::Authenticator;

/// The path of the endpoint.
pub const PATH: &str = "/mcp";

/// How long open connections may take to finish after shutdown begins.
const DRAIN: Duration = Duration::from_secs(5);

/// How long a legacy session lives without requests: longer than an edit may wait for its
/// decision (tool-executor's approval timeout), so a waiting call keeps its session.
const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// Legacy sessions one principal keeps open; opening another closes its least recently used
/// (each holds ~50 KB for [`SESSION_IDLE`]: any token could grow the gateway by 160 MB with
/// 3,000 `initialize` requests in a second).
const SESSIONS_PER_PRINCIPAL: usize = 32;

/// The session header of Streamable HTTP.
const SESSION_HEADER: &str = "mcp-session-id";

/// Which principal opened each legacy session: a session is answered only for its principal
/// (another token with a leaked session id finds none).
#[derive(Debug, Default)]
struct Owners(Mutex<HashMap<String, (String, Instant)>>);

impl Owners {
    /// Whether `principal` may use `session` (unknown sessions are left to the session manager).
    fn check(&self, session: &str, principal: &str) -> bool {
        let Ok(mut map) = self.0.lock() else {
            return false;
        };
        match map.get_mut(session) {
            Some((owner, seen)) if owner == principal => {
                *seen = Instant::now();
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// Records that `principal` opened `session`; the principal's sessions past
    /// [`SESSIONS_PER_PRINCIPAL`], least recently used first, to close.
    fn opened(&self, session: &str, principal: &str) -> Vec<String> {
        let Ok(mut map) = self.0.lock() else {
            return Vec::new();
        };
        map.retain(|_, (_, seen)| seen.elapsed() < SESSION_IDLE);
        map.insert(session.to_owned(), (principal.to_owned(), Instant::now()));
        let mut theirs: Vec<(Instant, String)> = map
            .iter()
            .filter(|(_, (owner, _))| owner == principal)
            .map(|(id, (_, seen))| (*seen, id.clone()))
            .collect();
        if theirs.len() <= SESSIONS_PER_PRINCIPAL {
            return Vec::new();
        }
        theirs.sort();
        let excess = theirs.len() - SESSIONS_PER_PRINCIPAL;
        let evicted: Vec<String> = theirs.into_iter().take(excess).map(|(_, id)| id).collect();
        for id in &evicted {
            map.remove(id);
        }
        evicted
    }

    fn closed(&self, session: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(session);
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// Where and how the endpoint serves.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The MCP server's options.
    pub options: Options,
    /// `Host` names accepted without authentication (DNS rebinding guard).
    pub allowed_hosts: Vec<String>,
    /// Largest request body.
    pub max_body_bytes: usize,
}

/// A JSON-RPC error answered at the HTTP layer (no request id is known there).
fn refusal(status: http::StatusCode, code: i32, message: &str) -> http::Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    let mut r = http::Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

/// Whether the request says its body is JSON (`application/json`, parameters aside).
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

fn unauthorized(reason: &str) -> http::Response<Body> {
    let mut r = refusal(
        http::StatusCode::UNAUTHORIZED,
        -32001,
        &format!("{reason}: send `Authorization: Bearer <token>` (docs/MCP.md)"),
    );
    r.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer realm=\"ploke\""),
    );
    r
}

/// Whether a request's `Origin` (when it has one) is the endpoint itself: a page elsewhere
/// must not drive it with a browser's ambient access.
fn same_origin(headers: &http::HeaderMap) -> bool {
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return true;
    };
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .is_some_and(|(_, authority)| !host.is_empty() && authority.eq_ignore_ascii_case(host))
}

/// Serves MCP on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    backend: Arc<dyn Backend>,
    auth: Authenticator,
    endpoint: Endpoint,
    shutdown: CancellationToken,
) {
    let authenticated = endpoint.options.authenticated;
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(endpoint.max_body_bytes);
    config = if authenticated {
        // Every request needs a token: a rebound DNS name gets nothing without one.
        config.disable_allowed_hosts()
    } else {
        // An open loopback endpoint: only its own host names, and no browser pages.
        config
            .with_allowed_hosts(endpoint.allowed_hosts.clone())
            .enforce_origin_validation()
    };
    let options = Arc::new(endpoint.options);
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let sessions = Arc::new(sessions);
    let mcp = StreamableHttpService::new(
        move || Ok(McpServer::new(Arc::clone(&backend), Arc::clone(&options))),
        Arc::clone(&sessions),
        config,
    );
    let owners = Arc::new(Owners::default());
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    tracing::info!(addr, path = PATH, "mcp endpoint listening");
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "mcp endpoint accept failed");
                    continue;
                }
            },
        };
        let (mcp, auth, stop) = (mcp.clone(), auth.clone(), shutdown.clone());
        let state = Arc::new((Arc::clone(&owners), Arc::clone(&sessions)));
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                let (mut mcp, auth, state) = (mcp.clone(), auth.clone(), Arc::clone(&state));
                async move { Ok::<_, Infallible>(handle(&mut mcp, &auth, &state, req, peer).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "mcp connection ended");
                    }
                }
                () = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(DRAIN, conn).await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    let _ = tokio::time::timeout(DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    connections.abort_all();
}

async fn handle(
    mcp: &mut StreamableHttpService<McpServer, LocalSessionManager>,
    auth: &Authenticator,
    (owners, sessions): &(Arc<Owners>, Arc<LocalSessionManager>),
    mut req: http::Request<Incoming>,
    peer: std::net::SocketAddr,
) -> http::Response<Body> {
    if req.uri().path() != PATH {
        return refusal(
            http::StatusCode::NOT_FOUND,
            -32601,
            "not found: the MCP endpoint is /mcp",
        );
    }
    if !same_origin(req.headers()) {
        return refusal(
            http::StatusCode::FORBIDDEN,
            -32600,
            "requests from another origin (a web page) are refused",
        );
    }
    let principal = match auth.authenticate(req.headers()) {
        Ok(p) => p,
        Err(status) => {
            tracing::info!(
                target: crate::audit::TARGET,
                method = "mcp",
                peer = %peer,
                code = "UNAUTHENTICATED",
                reason = status.message(),
                "gateway call refused"
            );
            return unauthorized(status.message());
        }
    };
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(s) = &session
        && !owners.check(s, &principal.name)
    {
        return refusal(http::StatusCode::NOT_FOUND, -32001, "session not found");
    }
    let closing = req.method() == http::Method::DELETE;
    if closing && let Some(s) = &session {
        // rmcp answers a DELETE of a session it does not have (ended, expired, never opened)
        // like one it ended; the spec's answer for an unknown session is 404.
        use rmcp::transport::streamable_http_server::session::SessionManager as _;
        if !sessions
            .has_session(&s.as_str().into())
            .await
            .unwrap_or(false)
        {
            return refusal(http::StatusCode::NOT_FOUND, -32001, "session not found");
        }
    }
    let sent_json = req.method() == http::Method::POST && is_json(req.headers());
    let name = principal.name.clone();
    req.extensions_mut().insert(principal);
    let response = match mcp.call(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    // rmcp answers a JSON body it cannot read as a JSON-RPC message with 415, the status of a
    // wrong content type: a client is told what JSON-RPC says instead.
    if sent_json && response.status() == http::StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return refusal(
            http::StatusCode::BAD_REQUEST,
            -32700,
            "parse error: the body is not a JSON-RPC message (malformed JSON, or a message of no \
             known shape)",
        );
    }
    match (&session, response.headers().get(SESSION_HEADER)) {
        // A DELETE refused (a protocol version it does not speak) leaves the session its
        // owner's.
        (Some(s), _) if closing && response.status().is_success() => owners.closed(s),
        (None, Some(opened)) => {
            if let Ok(opened) = opened.to_str() {
                for old in owners.opened(opened, &name) {
                    use rmcp::transport::streamable_http_server::session::SessionManager as _;
                    if let Err(e) = sessions.close_session(&old.as_str().into()).await {
                        tracing::debug!(session = old, error = %e, "closing an evicted mcp session failed");
                    }
                }
            }
        }
        _ => {}
    }
    if closing && response.status() == http::StatusCode::ACCEPTED {
        // The session is ended, not merely accepted for later: 204, which the official SDKs'
        // clients take as done (the Python one warns on rmcp's 202).
        let (mut parts, body) = response.into_parts();
        parts.status = http::StatusCode::NO_CONTENT;
        return http::Response::from_parts(parts, body);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_answers_only_the_principal_that_opened_it() {
        let owners = Owners::default();
        assert!(
            owners.check("s1", "alice"),
            "unknown sessions are the manager's to refuse"
        );
        assert_eq!(owners.opened("s1", "alice"), Vec::<String>::new());
        assert!(owners.check("s1", "alice"));
        assert!(!owners.check("s1", "bob"));
        owners.closed("s1");
        assert!(owners.check("s1", "bob"));
    }

    #[test]
    fn a_principal_s_sessions_past_the_limit_close_least_recently_used_first() {
        let owners = Owners::default();
        for i in 0..SESSIONS_PER_PRINCIPAL {
            assert!(owners.opened(&format!("a{i}"), "alice").is_empty());
        }
        // Bob's sessions do not count against alice's.
        assert!(owners.opened("b0", "bob").is_empty());
        // a0 is used again: a1 is now the least recently used.
        assert!(owners.check("a0", "alice"));
        assert_eq!(owners.opened("a-new", "alice"), ["a1"]);
        assert_eq!(owners.opened("a-newer", "alice"), ["a2"]);
        assert!(owners.check("a0", "alice") && owners.check("b0", "bob"));
    }

    #[test]
    fn only_the_endpoints_own_origin_is_accepted() {
        let headers = |origin: Option<&str>| {
            let mut h = http::HeaderMap::new();
            h.insert(http::header::HOST, "gw.example.com:50055".parse().unwrap());
            if let Some(o) = origin {
                h.insert(http::header::ORIGIN, o.parse().unwrap());
            }
            h
        };
        assert!(same_origin(&headers(None)));
        assert!(same_origin(&headers(Some("https://gw.example.com:50055"))));
        assert!(!same_origin(&headers(Some("https://evil.example"))));
        assert!(!same_origin(&headers(Some("null"))));
    }
}
