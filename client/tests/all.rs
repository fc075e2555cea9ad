//! Integration tests of the `ploke` binary against the Sandbox and the fake provider.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
