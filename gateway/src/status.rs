//! The gateway's GetSystemStatus: every upstream's health as its `grpc.health.v1` says, whether
//! it takes this gateway's internal token, and the faults it lists (NOT_SERVING with why, or
//! DEGRADED: serving with a fault that stops part of its work).

use std::time::{Duration, Instant};

use ploke_proto::gateway::v1::{ServiceStatus, ServingState, SystemStatus};
use ploke_proto::runtime::v1::Fault;
use ploke_runtime::principal;
use tonic_health::pb::health_check_response::ServingStatus;

use crate::grpc::GatewayGrpc;
use crate::upstreams;

/// How long a backend's faults are waited for.
const FAULTS_WAIT: Duration = Duration::from_secs(2);

impl GatewayGrpc {
    /// Health of every upstream. Where the services run and why one fails are the operators'
    /// business: only admins and a one-person setup's `default` see endpoints and messages.
    pub(crate) async fn system_status(&self) -> SystemStatus {
        let internals = principal::sees_internals();
        let probes = self.upstreams.all.iter().map(|u| async move {
            let started = Instant::now();
            let probe = tokio::time::timeout(
                Duration::from_secs(2),
                ploke_runtime::probe::health(u.channel.clone(), u.service),
            )
            .await;
            let latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            let (state, message) = match probe {
                // Serving, unless it lists a fault that degrades it (or refuses the token).
                Ok(Ok(ServingStatus::Serving)) => match u.faults(FAULTS_WAIT).await {
                    Ok(faults) => {
                        let faults = faults.unwrap_or_default();
                        let degraded: Vec<&Fault> = faults.iter().filter(|f| f.degraded).collect();
                        if degraded.is_empty() {
                            (ServingState::Serving, String::new())
                        } else {
                            (
                                ServingState::Degraded,
                                format!("degraded: {}", upstreams::said(&degraded)),
                            )
                        }
                    }
                    Err(refused) => (
                        ServingState::NotServing,
                        format!(
                            "refuses this gateway's internal token ({}); the services of this \
                             deployment are configured with different internal tokens",
                            refused.message()
                        ),
                    ),
                },
                // Why, when the backend says (its faults and their causes).
                Ok(Ok(other)) => (
                    ServingState::NotServing,
                    match u.faults(FAULTS_WAIT).await {
                        Ok(Some(faults)) if !faults.is_empty() => {
                            let (degraded, stopping): (Vec<&Fault>, Vec<&Fault>) =
                                faults.iter().partition(|f| f.degraded);
                            let mut said = if stopping.is_empty() {
                                format!("{other:?}")
                            } else {
                                format!("not serving: {}", upstreams::said(&stopping))
                            };
                            if !degraded.is_empty() {
                                said += &format!("; degraded: {}", upstreams::said(&degraded));
                            }
                            said
                        }
                        Ok(_) | Err(_) => format!("{other:?}"),
                    },
                ),
                Ok(Err(status)) => (ServingState::Unreachable, status.message().to_owned()),
                Err(_) => (
                    ServingState::Unreachable,
                    "health check timed out after 2 s".to_owned(),
                ),
            };
            ServiceStatus {
                service: u.service.to_owned(),
                endpoint: if internals {
                    u.url.clone()
                } else {
                    String::new()
                },
                state: state as i32,
                message: if internals { message } else { String::new() },
                latency_us,
            }
        });
        let services = futures::future::join_all(probes).await;
        SystemStatus {
            version: ploke_runtime::build::LONG_VERSION.to_owned(),
            services,
            correlation: Some(ploke_runtime::correlation::current().into()),
            principal: principal::current().map(|p| p.to_proto()),
        }
    }
}
