//! weir drains Redis job queues as fast as Redis can move them.
//!
//! ```text
//! producer ──enqueue.lua──▶ Redis ◀──fetch.lua (pipelined)── fetcher
//!                             ▲                                 │ buffer (2 × limit)
//!                             │                                 ▼
//!                   settle.lua ◀── acker ◀── outcomes ── worker pool (Limit)
//!                             ▲
//!            reclaim.lua ── housekeeping      extend.lua ── heartbeat, release.lua ── acker
//! ```
//!
//! The tree follows the data:
//! - [`queue`]: the Redis side (keys, envelope, scripts, producer, operator actions, retry
//!   policy);
//! - [`consumer`]: the wiring and shutdown order, with the fetcher, the buffer, the pool,
//!   the acker and housekeeping beneath it;
//! - [`limiter`]: how many jobs may run (the resizable semaphore, AIMD, the rate gate);
//! - [`handler`]: what users write, and the HTTP handler;
//! - [`redis`]: connections and the embedded redis-server;
//! - [`metrics`] and [`error`] serve them all; [`runtime`] sizes the binaries' runtime.
//!
//! Every batch costs one round trip; every step is O(1) or O(log n) per job.
//!
//! Delivery is at-least-once: a job leaves Redis only when acked, dead-lettered or purged;
//! a crash loses nothing and may run a job twice (after its lease expires).
//!
//! # Features
//!
//! All on by default; a service that embeds weir can turn them off
//! (`default-features = false`) and take only what it uses.
//!
//! | feature      | adds                                                      | pulls in |
//! |--------------|-----------------------------------------------------------|----------|
//! | `cli`        | the crates of the `weir` binary                           | clap, indicatif, tracing-subscriber |
//! | `exec`       | `handler::exec`: worker processes of any language (stdin/stdout) | nothing (tokio's process) |
//! | `http`       | `handler::http`: the HTTP(S) handler, signed requests     | reqwest, httpdate, rustls, ring |
//! | `prometheus` | `metrics::install`: the Prometheus exporter               | metrics-exporter-prometheus |
//! | `embedded`   | `EmbeddedRedis`: a private redis-server                   | tempfile |
//! | `simd`       | [`Job::payload`] decodes large payloads with simd-json   | simd-json |
//! | `tls`        | `rediss://` URLs and [`TlsFiles`]                         | rustls |
//!
//! Without `prometheus`, every metric is still recorded through the `metrics` facade, for
//! whatever recorder the application installs.
#![forbid(unsafe_code)]

pub mod consumer;
pub mod error;
pub mod handler;
pub mod limiter;
pub mod metrics;
pub mod net;
pub mod queue;
pub mod redis;
pub mod runtime;

// The public API: what a service that embeds weir names, one path each.
pub use consumer::{Consumer, ConsumerConfig, Handle, MultiConsumer, Report, WeightedQueue};
pub use error::{Error, Result};
pub use handler::{BatchHandler, Handler, JobError, JobErrorKind, JobResult, Registry, Start, handler_fn};
pub use queue::admin::{Queue, Queues};
pub use queue::cron::{Schedule, Schedules};
pub use queue::envelope::{Job, Priority};
pub use queue::producer::{Bulk, BulkReport, NewJob, Producer};
pub use queue::scripts::{DeadJob, Stats};
pub use redis::conn::{Conn, HealingConnection, Redis, TlsFiles};
#[cfg(feature = "embedded")]
pub use redis::embedded::EmbeddedRedis;
#[cfg(feature = "embedded")]
pub use redis::embedded_cluster::EmbeddedCluster;
pub use tokio_util::sync::CancellationToken;

// Every component's configuration, at the root beside `ConsumerConfig`, which holds them.
pub use consumer::{AckerConfig, FetcherConfig, PoolConfig, ReclaimerConfig};
#[cfg(feature = "http")]
pub use handler::http::HttpConfig;
pub use limiter::{AimdConfig, LimiterConfig, LimiterOptions, Rate, Target, WindowConfig};
pub use queue::retry_policy::{DeferralBudget, RetryPolicy};
