//! `ploke.runtime.v1.Faults`: the health faults a backend has raised (those that hold it
//! NOT_SERVING and those that only degrade it), with their causes, for
//! the gateway's SystemStatus (`ploke status`). Served by every backend's [`ServiceHost`]
//! behind the internal token (a cause names files or the database address); not by the
//! gateway, whose callers are not operators by default.
//!
//! [`ServiceHost`]: crate::server::ServiceHost

use ploke_proto::runtime::v1::faults_server::{Faults, FaultsServer};
use ploke_proto::runtime::v1::{Fault, ListFaultsRequest, ListFaultsResponse};
use tonic::{Request, Response, Status};

use crate::server::{Impact, Readiness};

/// The gRPC service of one server's faults.
#[derive(Debug, Clone)]
pub struct FaultsService(Readiness);

impl FaultsService {
    /// The service for `readiness`'s faults.
    pub fn server(readiness: Readiness) -> FaultsServer<Self> {
        FaultsServer::new(Self(readiness))
    }
}

#[tonic::async_trait]
impl Faults for FaultsService {
    async fn list_faults(
        &self,
        _request: Request<ListFaultsRequest>,
    ) -> Result<Response<ListFaultsResponse>, Status> {
        let mut faults: Vec<Fault> = self
            .0
            .faults()
            .into_iter()
            .map(|f| Fault {
                name: f.name.to_owned(),
                reason: f.reason,
                degraded: f.impact == Impact::Degraded,
            })
            .collect();
        faults.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Response::new(ListFaultsResponse { faults }))
    }
}
