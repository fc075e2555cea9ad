//! The gateway's upstream services: typed clients with trace propagation and the internal
//! token, the raw channels used for health probes (health needs no token), and the probe of
//! the faults an upstream lists behind its internal token (which also tells whether it takes
//! this gateway's).

use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::runtime::v1::Fault;
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

impl Upstream {
    /// The faults the backend has raised (`ploke.runtime.v1.Faults`, behind its internal-token
    /// check), asked within `wait`. `Err` with the refusal when it does not take this
    /// gateway's internal token (health is open to all, so a deployment whose services hold
    /// different tokens looked healthy while every call failed); `Ok(None)` when it cannot be
    /// told (no answer in time, an older backend).
    pub async fn faults(
        &self,
        wait: std::time::Duration,
    ) -> Result<Option<Vec<Fault>>, tonic::Status> {
        use ploke_proto::runtime::v1::ListFaultsRequest;
        use ploke_proto::runtime::v1::faults_client::FaultsClient;
        let mut client = FaultsClient::new(self.internal.clone());
        match tokio::time::timeout(wait, client.list_faults(ListFaultsRequest {})).await {
            Ok(Ok(listed)) => Ok(Some(listed.into_inner().faults)),
            Ok(Err(s)) if s.code() == tonic::Code::Unauthenticated => Err(s),
            Ok(Err(_)) | Err(_) => Ok(None),
        }
    }
}

/// `faults` as one line (`storage: …; blocking_pool: …`).
pub(crate) fn said(faults: &[&Fault]) -> String {
    let said: Vec<String> = faults
        .iter()
        .map(|f| format!("{}: {}", f.name, f.reason))
        .collect();
    said.join("; ")
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
