//! End-to-end suites: the Sandbox driven through the gateway with real gRPC clients.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
