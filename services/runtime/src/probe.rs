//! Probes of a running gRPC server as a client sees it: `grpc.health.v1` status and the
//! service list from server reflection (v1 and v1alpha). The gateway's system status and the
//! test suites use them.

use tokio_stream::StreamExt as _;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::{v1, v1alpha};

/// The health status `channel` reports for `service` (`""` = the whole server).
pub async fn health(channel: Channel, service: &str) -> Result<ServingStatus, tonic::Status> {
    let response = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await?;
    Ok(response.into_inner().status())
}

/// Which reflection protocol to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReflectionVersion {
    /// `grpc.reflection.v1`.
    V1,
    /// `grpc.reflection.v1alpha` (older grpcurl and ghz).
    V1Alpha,
}

/// The services a server lists through reflection, sorted.
pub async fn reflected_services(
    channel: Channel,
    version: ReflectionVersion,
) -> Result<Vec<String>, tonic::Status> {
    let mut names = match version {
        ReflectionVersion::V1 => {
            let request = v1::ServerReflectionRequest {
                host: String::new(),
                message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
                    String::new(),
                )),
            };
            let mut stream = v1::server_reflection_client::ServerReflectionClient::new(channel)
                .server_reflection_info(tokio_stream::iter([request]))
                .await?
                .into_inner();
            let mut names = Vec::new();
            while let Some(reply) = stream.next().await {
                if let Some(
                    v1::server_reflection_response::MessageResponse::ListServicesResponse(list),
                ) = reply?.message_response
                {
                    names.extend(list.service.into_iter().map(|s| s.name));
                }
            }
            names
        }
        ReflectionVersion::V1Alpha => {
            let request = v1alpha::ServerReflectionRequest {
                host: String::new(),
                message_request: Some(
                    v1alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
                ),
            };
            let mut stream =
                v1alpha::server_reflection_client::ServerReflectionClient::new(channel)
                    .server_reflection_info(tokio_stream::iter([request]))
                    .await?
                    .into_inner();
            let mut names = Vec::new();
            while let Some(reply) = stream.next().await {
                if let Some(
                    v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(
                        list,
                    ),
                ) = reply?.message_response
                {
                    names.extend(list.service.into_iter().map(|s| s.name));
                }
            }
            names
        }
    };
    names.sort();
    Ok(names)
}
