//! Connections to Redis: healing multiplexed connections (with TLS), to a single Redis or a
//! Redis Cluster, and the private redis-server the demo and the tests start.

pub(crate) mod cluster;
pub mod conn;
#[cfg(feature = "embedded")]
pub mod embedded;
#[cfg(feature = "embedded")]
pub mod embedded_cluster;
pub(crate) mod eviction;
mod link;
pub(crate) mod retry;
mod sentinel;
mod tls;
mod url;
