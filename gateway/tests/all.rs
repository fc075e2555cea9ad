//! Integration tests of ploke-gateway: the real binary and the in-process server, driven by real gRPC
//! clients on 127.0.0.1:0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
