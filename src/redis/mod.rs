//! Connections to Redis: healing multiplexed connections (with TLS), and the private
//! redis-server the demo and the tests start.

pub mod conn;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod eviction;
pub mod retry;
