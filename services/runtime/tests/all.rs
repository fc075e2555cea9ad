//! Integration tests of ploke-runtime: real servers on 127.0.0.1:0, real gRPC clients.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
