//! A minimal ToolExecutor used to exercise the runtime: `ListEdits` answers with the
//! correlation the handler saw, or forwards to a downstream server when one is configured;
//! `ListTools` answers an empty list, `ExecuteTool` streams two empty events when asked to,
//! `DecideEdit` answers INVALID_ARGUMENT (the metrics suite counts these); `GetEditDelivery`
//! answers with the principal the handler saw as the proposal's owner (or forwards).

use std::pin::Pin;

use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_proto::tools::v1::tool_executor_server::{ToolExecutor, ToolExecutorServer};
use ploke_proto::tools::v1::*;
use ploke_runtime::client::{TracedChannel, internal_channel};
use ploke_runtime::config::{InternalConfig, LimitsConfig};
use ploke_runtime::server::{Readiness, ServiceHost};
use ploke_runtime::shutdown::Shutdown;
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};

pub(super) struct Echo {
    pub downstream: Option<ToolExecutorClient<TracedChannel>>,
}

#[tonic::async_trait]
impl ToolExecutor for Echo {
    async fn list_tools(
        &self,
        _: Request<ListToolsRequest>,
    ) -> Result<Response<ListToolsResponse>, Status> {
        Ok(Response::new(ListToolsResponse::default()))
    }

    type ExecuteToolStream =
        Pin<Box<dyn tokio_stream::Stream<Item = Result<ExecuteToolEvent, Status>> + Send>>;

    /// For `workspace_root = "stream"`: two events, then the end of the stream (OK in the
    /// trailers); otherwise UNIMPLEMENTED.
    async fn execute_tool(
        &self,
        request: Request<ExecuteToolRequest>,
    ) -> Result<Response<Self::ExecuteToolStream>, Status> {
        if request.get_ref().workspace_root != "stream" {
            return Err(Status::unimplemented("not in this fixture"));
        }
        let events = vec![
            Ok(ExecuteToolEvent::default()),
            Ok(ExecuteToolEvent::default()),
        ];
        Ok(Response::new(Box::pin(tokio_stream::iter(events))))
    }

    async fn list_edits(
        &self,
        request: Request<ListEditsRequest>,
    ) -> Result<Response<ListEditsResponse>, Status> {
        tracing::info!("list edits handled");
        if let Some(client) = &self.downstream {
            let mut client = client.clone();
            return client.list_edits(request.into_inner()).await;
        }
        let seen = ploke_runtime::correlation::current();
        Ok(Response::new(ListEditsResponse {
            proposals: vec![EditProposal {
                correlation: Some(seen.into()),
                ..Default::default()
            }],
            truncated: false,
        }))
    }

    async fn decide_edit(
        &self,
        _: Request<DecideEditRequest>,
    ) -> Result<Response<DecideEditResponse>, Status> {
        Err(Status::invalid_argument("this fixture decides nothing"))
    }

    async fn get_edit_delivery(
        &self,
        request: Request<GetEditDeliveryRequest>,
    ) -> Result<Response<GetEditDeliveryResponse>, Status> {
        if let Some(client) = &self.downstream {
            let mut client = client.clone();
            return client.get_edit_delivery(request.into_inner()).await;
        }
        let seen = ploke_runtime::principal::current();
        Ok(Response::new(GetEditDeliveryResponse {
            proposal: Some(EditProposal {
                owner: seen.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
                decided_by: seen
                    .map(|p| format!("{}:{}", p.role.as_str(), p.workspaces.join(",")))
                    .unwrap_or_default(),
                ..Default::default()
            }),
            deliveries: Vec::new(),
        }))
    }
}

pub(super) struct Running {
    pub url: String,
    pub readiness: Readiness,
    pub shutdown: Shutdown,
    pub task: tokio::task::JoinHandle<Result<(), ploke_runtime::server::ServeError>>,
}

pub(super) async fn start(downstream: Option<&str>, ready: bool, limits: LimitsConfig) -> Running {
    start_with(downstream, ready, limits, &InternalConfig::default()).await
}

/// [`start`] as a backend requiring the internal tokens of `internal` (sent downstream too).
pub(super) async fn start_with(
    downstream: Option<&str>,
    ready: bool,
    limits: LimitsConfig,
    internal: &InternalConfig,
) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mut host = ServiceHost::new(limits, &["ploke.tools.v1.ToolExecutor"]).await;
    let tokens = host.require_internal(internal).unwrap();
    let readiness = host.readiness();
    let echo = Echo {
        downstream: downstream
            .map(|u| ToolExecutorClient::new(internal_channel(u, &tokens).unwrap())),
    };
    let routes = tonic::service::Routes::new(ToolExecutorServer::new(echo));
    if ready {
        readiness.set_serving().await;
    }
    let shutdown = Shutdown::new();
    let signal = shutdown.wait();
    let task = tokio::spawn(host.serve(routes, listener, signal));
    Running {
        url,
        readiness,
        shutdown,
        task,
    }
}

pub(super) async fn channel(url: &str) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(url.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// The test binary's one global subscriber: an OpenTelemetry layer exporting into memory.
/// Every test calls this first, so no callsite is ever seen without it (tracing caches
/// per-callsite interest process-wide; a thread-local subscriber would race other tests).
pub(super) fn telemetry() -> &'static (
    opentelemetry_sdk::trace::InMemorySpanExporter,
    opentelemetry_sdk::trace::SdkTracerProvider,
) {
    use tracing_subscriber::layer::SubscriberExt as _;
    static TELEMETRY: std::sync::OnceLock<(
        opentelemetry_sdk::trace::InMemorySpanExporter,
        opentelemetry_sdk::trace::SdkTracerProvider,
    )> = std::sync::OnceLock::new();
    TELEMETRY.get_or_init(|| {
        let exporter = opentelemetry_sdk::trace::InMemorySpanExporter::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(ploke_runtime::telemetry::otel_layer(&provider, "test"));
        tracing::subscriber::set_global_default(subscriber).unwrap();
        (exporter, provider)
    })
}
