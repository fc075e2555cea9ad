//! Reaching a gateway: a channel with the caller's bearer token on every call, and a
//! session's events followed across broken streams.

use std::time::Duration;

use anyhow::Context as _;
use ploke_proto::gateway::v1::gateway_client::GatewayClient;
use ploke_proto::session::v1::{SessionEvent, StreamEventsRequest};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

/// Adds `authorization: Bearer TOKEN` when there is a token.
#[derive(Debug, Clone)]
pub struct Auth(Option<MetadataValue<Ascii>>);

impl Interceptor for Auth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            request.metadata_mut().insert("authorization", v.clone());
        }
        Ok(request)
    }
}

/// A gateway client.
pub type Gateway = GatewayClient<InterceptedService<Channel, Auth>>;

/// The largest reply taken from a gateway: above the services' default limit (16 MiB), so a
/// gateway configured for larger messages is read whole; tonic's own default is 4 MiB.
pub const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;

/// Connects to the gateway at `url`, sending `token`: TLS (the system's roots) for
/// `https://`; a token sent in the clear to anything but loopback is warned about.
pub async fn connect(url: &str, token: Option<String>) -> anyhow::Result<Gateway> {
    let mut endpoint = Endpoint::from_shared(url.to_owned())
        .with_context(|| format!("gateway URL `{url}`"))?
        .connect_timeout(Duration::from_secs(5));
    let uri = endpoint.uri().clone();
    if uri.scheme_str() == Some("https") {
        endpoint = endpoint
            .tls_config(ClientTlsConfig::new().with_native_roots())
            .with_context(|| format!("TLS for {url}"))?;
    } else if token.is_some() && !is_loopback(uri.host().unwrap_or_default()) {
        eprintln!(
            "warning: your token and code go to {url} unencrypted; use https:// (TLS at the gateway's balancer or ingress)"
        );
    }
    let channel = endpoint
        .connect()
        .await
        .with_context(|| format!("connecting to the gateway at {url}"))?;
    Ok(GatewayClient::with_interceptor(channel, auth(token)?)
        .max_decoding_message_size(MAX_REPLY_BYTES))
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The interceptor that sends `token`.
pub fn auth(token: Option<String>) -> anyhow::Result<Auth> {
    let value = match token {
        Some(t) => Some(
            format!("Bearer {t}")
                .parse()
                .context("PLOKE_TOKEN is not a valid header value")?,
        ),
        None => None,
    };
    Ok(Auth(value))
}

/// What following a session's events yields.
#[derive(Debug)]
pub enum Followed {
    /// A stream is open (again): what follows is live.
    Connected,
    /// The next event.
    Event(Box<SessionEvent>),
    /// The stream broke or could not be opened (why); the next call resumes after the last
    /// event seen.
    Interrupted(String),
    /// The session no longer exists (deleted): nothing more will come (why).
    Gone(String),
}

/// A session's events from a seq on, resumed after any break from the last one seen: the
/// one follow loop of `ploke ask` and the TUI.
pub struct SessionEvents {
    gateway: Gateway,
    session_id: String,
    after_seq: u64,
    stream: Option<tonic::Streaming<SessionEvent>>,
    opened: bool,
}

/// Pause before a stream is opened again.
const RESUME_PAUSE: Duration = Duration::from_millis(500);

impl SessionEvents {
    /// Follows `session_id` after `after_seq`.
    pub fn new(gateway: Gateway, session_id: String, after_seq: u64) -> Self {
        Self {
            gateway,
            session_id,
            after_seq,
            stream: None,
            opened: false,
        }
    }

    /// The next event, or a change of the connection.
    pub async fn next(&mut self) -> Followed {
        loop {
            let Some(stream) = self.stream.as_mut() else {
                if self.opened {
                    tokio::time::sleep(RESUME_PAUSE).await;
                }
                self.opened = true;
                let opened = self
                    .gateway
                    .stream_events(StreamEventsRequest {
                        session_id: self.session_id.clone(),
                        after_seq: self.after_seq,
                        no_follow: false,
                    })
                    .await;
                return match opened {
                    Ok(s) => {
                        self.stream = Some(s.into_inner());
                        Followed::Connected
                    }
                    Err(s) => broken(&s),
                };
            };
            match stream.message().await {
                Ok(Some(e)) => {
                    self.after_seq = e.seq;
                    return Followed::Event(Box::new(e));
                }
                // The server ended the stream (a drain): open another.
                Ok(None) => self.stream = None,
                Err(s) => {
                    self.stream = None;
                    return broken(&s);
                }
            }
        }
    }
}

/// A stream that could not be opened or broke: gone for good when the session is.
fn broken(s: &tonic::Status) -> Followed {
    let why = s.message().to_owned();
    if s.code() == tonic::Code::NotFound {
        Followed::Gone(why)
    } else {
        Followed::Interrupted(why)
    }
}
