//! The `ploke` client: the embedded deployment (all four services in one process on loopback),
//! reaching a gateway, and what a developer's client does for a session on a shared
//! workspace: sending its own changes (overlay) and writing approved edits into its checkout;
//! finding sessions by the ids users type; which served workspace a checkout stands for.

pub mod checkout;
pub mod delivery;
pub mod embedded;
pub mod gateway;
pub mod mcp;
pub mod overlay;
pub mod sessions;
