//! The gateway's MCP endpoint: Streamable HTTP at `/mcp` on `[gateway] mcp_listen`, behind the
//! same bearer tokens as the gRPC API (401 with `WWW-Authenticate: Bearer` without one). Each
//! request runs as its principal; legacy (pre-2026-07-28) clients get a session, newer ones are
//! served statelessly, so any replica answers them.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

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

fn plain(status: http::StatusCode, text: &str) -> http::Response<Body> {
    let mut r = http::Response::new(Full::new(Bytes::from(text.to_owned())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn unauthorized(reason: &str) -> http::Response<Body> {
    let mut r = plain(
        http::StatusCode::UNAUTHORIZED,
        &format!("{reason}: send `Authorization: Bearer <token>` (docs/MCP.md)\n"),
    );
    r.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer realm=\"ploke\""),
    );
    r
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
    let mcp = StreamableHttpService::new(
        move || Ok(McpServer::new(Arc::clone(&backend), Arc::clone(&options))),
        Arc::new(LocalSessionManager::default()),
        config,
    );
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
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                let (mut mcp, auth) = (mcp.clone(), auth.clone());
                async move { Ok::<_, Infallible>(handle(&mut mcp, &auth, req, peer).await) }
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
    mut req: http::Request<Incoming>,
    peer: std::net::SocketAddr,
) -> http::Response<Body> {
    if req.uri().path() != PATH {
        return plain(
            http::StatusCode::NOT_FOUND,
            "not found: the MCP endpoint is /mcp\n",
        );
    }
    match auth.authenticate(req.headers()) {
        Ok(p) => {
            req.extensions_mut().insert(p);
            match mcp.call(req).await {
                Ok(r) => r,
                Err(never) => match never {},
            }
        }
        Err(status) => {
            tracing::info!(
                target: crate::audit::TARGET,
                method = "mcp",
                peer = %peer,
                code = "UNAUTHENTICATED",
                reason = status.message(),
                "gateway call refused"
            );
            unauthorized(status.message())
        }
    }
}
