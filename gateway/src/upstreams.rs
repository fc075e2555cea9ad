//! The gateway's upstream services: typed clients with trace propagation and the internal
//! token, the raw channels used for health probes (health needs no token), and the probe of
//! whether an upstream takes this gateway's internal token.

use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::session::v1::llm_session_client::LlmSessionClient;
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_runtime::client::{ChannelError, TracedChannel, internal, lazy_channel};
use ploke_runtime::config::UpstreamsConfig;
use ploke_runtime::internal::InternalTokens;
use tonic::transport::Channel;

/// One upstream: its name, URL and channel.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// gRPC service name.
    pub service: &'static str,
    /// URL.
    pub url: String,
    /// Channel without interceptors (health probes).
    pub channel: Channel,
    /// The same channel sending the internal token.
    pub internal: TracedChannel,
}

/// A method no ploke service has: behind a backend's internal-token check it answers
/// UNIMPLEMENTED, and before it UNAUTHENTICATED.
const TOKEN_PROBE: &str = "/ploke.probe.v1.Probe/InternalToken";

impl Upstream {
    /// `Err` with the backend's refusal when it does not take this gateway's internal token
    /// (health is open to all, so a deployment whose services hold different tokens looked
    /// healthy while every call failed); `Ok` when it does, or when it cannot be asked.
    pub async fn takes_internal_token(&self) -> Result<(), tonic::Status> {
        let mut grpc = tonic::client::Grpc::new(self.internal.clone());
        if grpc.ready().await.is_err() {
            return Ok(());
        }
        let codec = tonic_prost::ProstCodec::<(), ()>::default();
        let path = http::uri::PathAndQuery::from_static(TOKEN_PROBE);
        match grpc.unary(tonic::Request::new(()), path, codec).await {
            Err(s) if s.code() == tonic::Code::Unauthenticated => Err(s),
            Ok(_) | Err(_) => Ok(()),
        }
    }
}

impl Upstream {
    /// What holds the backend NOT_SERVING, as one line (`storage: …; blocking_pool: …`), asked
    /// of its `ploke.runtime.v1.Faults` within `wait`; `None` when it cannot be told (an older
    /// backend, no answer in time, no fault).
    pub async fn faults(&self, wait: std::time::Duration) -> Option<String> {
        use ploke_proto::runtime::v1::ListFaultsRequest;
        use ploke_proto::runtime::v1::faults_client::FaultsClient;
        let mut client = FaultsClient::new(self.internal.clone());
        let listed = tokio::time::timeout(wait, client.list_faults(ListFaultsRequest {}))
            .await
            .ok()?
            .ok()?
            .into_inner();
        let said: Vec<String> = listed
            .faults
            .iter()
            .map(|f| format!("{}: {}", f.name, f.reason))
            .collect();
        (!said.is_empty()).then(|| said.join("; "))
    }
}

/// Every upstream the gateway forwards to.
#[derive(Debug, Clone)]
pub struct Upstreams {
    /// llm-session.
    pub sessions: LlmSessionClient<TracedChannel>,
    /// tool-executor.
    pub tools: ToolExecutorClient<TracedChannel>,
    /// rag-search.
    pub rag: RagSearchClient<TracedChannel>,
    /// All three, in forwarding order.
    pub all: Vec<Upstream>,
}

impl Upstreams {
    /// Lazily connecting clients to the configured URLs, sending the first of `tokens`; a
    /// reply may be as large as a message this gateway sends (`max_message_bytes`): a backend
    /// answering within the same limit (a 1 MB `create_file` as a proposal's diff, a page of
    /// proposals) is relayed, not cut at tonic's default of 4 MiB.
    pub fn connect(
        config: &UpstreamsConfig,
        tokens: &InternalTokens,
        max_message_bytes: usize,
    ) -> Result<Self, ChannelError> {
        let session = lazy_channel(&config.llm_session_url)?;
        let tools = lazy_channel(&config.tool_executor_url)?;
        let rag = lazy_channel(&config.rag_search_url)?;
        Ok(Self {
            sessions: LlmSessionClient::new(internal(session.clone(), tokens))
                .max_decoding_message_size(max_message_bytes),
            tools: ToolExecutorClient::new(internal(tools.clone(), tokens))
                .max_decoding_message_size(max_message_bytes),
            rag: RagSearchClient::new(internal(rag.clone(), tokens))
                .max_decoding_message_size(max_message_bytes),
            all: vec![
                Upstream {
                    service: "ploke.session.v1.LlmSession",
                    url: config.llm_session_url.clone(),
                    internal: internal(session.clone(), tokens),
                    channel: session,
                },
                Upstream {
                    service: "ploke.tools.v1.ToolExecutor",
                    url: config.tool_executor_url.clone(),
                    internal: internal(tools.clone(), tokens),
                    channel: tools,
                },
                Upstream {
                    service: "ploke.rag.v1.RagSearch",
                    url: config.rag_search_url.clone(),
                    internal: internal(rag.clone(), tokens),
                    channel: rag,
                },
            ],
        })
    }
}
