//! weir drains Redis job queues as fast as Redis can move them.
//!
//! ```text
//! producer ──enqueue.lua──▶ Redis ◀──fetch.lua (pipelined)── fetcher
//!                             ▲                                 │ buffer (2 × limit)
//!                             │                                 ▼
//!                   settle.lua ◀── acker ◀── outcomes ── worker pool (Limit)
//!                             ▲
//!            reclaim.lua ── housekeeping      extend.lua / release.lua ── acker
//! ```
//!
//! The modules follow the data: [`keys`] → [`scripts`] → [`envelope`] → [`producer`] →
//! fetcher → [`pool`] / [`limit`] / [`limiter`] → [`acker`] → [`housekeeping`] →
//! [`consumer`] (wiring) → [`admin`] / [`settings`]. Every batch costs one round trip;
//! every step is O(1) or O(log n) per job.
//!
//! Delivery is at-least-once: a job leaves Redis only when acked, dead-lettered or purged;
//! a crash loses nothing and may run a job twice (after its lease expires).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod acker;
pub mod admin;
pub mod conn;
pub mod consumer;
pub mod embedded;
pub mod envelope;
pub mod error;
mod fetcher;
pub mod handler;
pub mod housekeeping;
pub mod http;
pub mod keys;
pub mod limit;
pub mod limiter;
pub mod metrics;
pub mod pool;
pub mod producer;
pub mod retry;
pub mod scripts;
pub mod settings;

pub use admin::Queue;
pub use conn::{HealingConnection, Redis, TlsFiles};
pub use consumer::{Consumer, ConsumerConfig, Handle, Report};
pub use embedded::EmbeddedRedis;
pub use envelope::{Job, Priority};
pub use error::{Error, Result};
pub use fetcher::FetcherConfig;
pub use handler::{BatchHandler, Handler, JobError, JobResult, Registry, handler_fn};
pub use limiter::{LimiterConfig, Rate, Target};
pub use producer::{BulkReport, NewJob, Producer};
pub use retry::RetryPolicy;
pub use scripts::{DeadJob, Stats};
pub use tokio_util::sync::CancellationToken;
