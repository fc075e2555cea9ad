//! What every ploke service shares: layered configuration, telemetry, trace and correlation
//! propagation, the gRPC server scaffold (health, reflection, limits, graceful drain),
//! service-to-service auth, the calling principal, upstream channels, Prometheus metrics, and clipping user input
//! in errors.

pub mod binary;
pub mod blocking;
pub mod build;
pub mod cli;
pub mod client;
pub mod config;
pub mod correlation;
pub mod decode_errors;
pub mod faults;
pub mod internal;
pub mod language;
pub mod metrics;
pub mod notices;
pub mod path_policy;
#[cfg(feature = "sqlite")]
pub mod postgres;
pub mod principal;
pub mod probe;
pub mod retry;
pub mod server;
pub mod shutdown;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod storage_health;
pub mod telemetry;
pub mod testing;
pub mod text;
pub mod trace_context;
mod trace_layer;
pub mod workspaces;

pub use config::{PlokeConfig, Secret, ServiceKind};
pub use correlation::Correlation;
pub use trace_layer::TraceLayer;
