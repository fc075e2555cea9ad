//! The `ploke` client: the embedded deployment (all four services in one process on loopback)
//! and the commands of the terminal client.

pub mod embedded;
