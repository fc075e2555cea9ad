//! The `ploke-gateway` binary starts with zero configuration, reports SERVING, lists its service
//! through reflection and drains on SIGTERM.

use std::path::Path;

#[tokio::test]
async fn binary_serves_health_and_reflection_then_drains() {
    let data = tempfile::tempdir().unwrap();
    ploke_runtime::testing::check_binary(
        Path::new(env!("CARGO_BIN_EXE_ploke-gateway")),
        "ploke.gateway.v1.Gateway",
        data.path(),
        &[],
    )
    .await
    .unwrap();
}
