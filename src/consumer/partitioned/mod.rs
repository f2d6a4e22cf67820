//! The consumer of a partitioned queue (`weir queue create --partitions P`,
//! `queue/partitions.rs`): one pipeline per lane (each partition, and the queue's base
//! layout), as a [`Consumer`] of that lane would run it (its fetcher, buffer, pool, acker,
//! leases, heartbeat, reclaim, delayed-job promotion), all sharing the consumer's budget
//! (the concurrency limit or adaptive limiter, the jobs/s cap), its worker id and its two
//! connections. Each lane keeps the shutdown order written in `consumer/mod.rs`.
//!
//! Which lanes fetch is the owner task's business (`owner.rs`): the consumer's home lanes
//! by rendezvous hashing over the live consumers, plus one it steals from while its own
//! are empty. Every lane's reclaimer runs in every consumer whatever its role, so the
//! leases of a consumer that died come back while any consumer lives.
//!
//! Priorities are strict within a lane (its fetch script takes high before normal before
//! low) and approximate across lanes: a consumer fetches its lanes side by side, so a low
//! job of one partition may start before a high job of another.

mod owner;
mod role;

pub(crate) use role::Role;

use super::{Consumer, Report, key_limiters};
use crate::error::Result;
use crate::metrics::LimiterMetrics;
use crate::queue::keys::QueueKeys;
use crate::queue::partitions::Partitions;
use crate::redis::conn::HealingConnection;
use futures_util::stream::{FuturesUnordered, StreamExt};
use owner::Owner;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a lane's pipeline takes from the partitioned consumer.
pub(crate) struct Lane {
    pub role: Arc<Role>,
    /// The consumer's worker id, the same in every lane.
    pub tag: String,
    /// The consumer's connections: for the calls, and for the heartbeat.
    pub conns: [HealingConnection; 2],
    pub keys: QueueKeys,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane")
            .field("keys", &self.keys.name())
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

/// Runs `outer`'s queue, partitioned as `parts`, until `shutdown` (in drain mode, until
/// every lane is empty); one lane's failure stops the others and is returned.
pub(super) async fn run(
    outer: Consumer,
    parts: Partitions,
    conns: [HealingConnection; 2],
    shutdown: CancellationToken,
) -> Result<Report> {
    let c = &outer.config;
    tracing::info!(
        queue = %c.queue,
        partitions = parts.count(),
        concurrency = c.concurrency,
        "working"
    );
    if let (Some(l), true) = (&outer.limiter, c.metrics) {
        l.attach_metrics(LimiterMetrics::new(&c.queue));
    }
    // The stored settings bind every lane from its first fetch: read before any starts
    // (the base lane's watch keeps them current).
    if let Some(mut watch) = outer.settings_watch(&conns[0], &QueueKeys::new(&c.queue)?) {
        watch.apply_stored(&shutdown).await;
    }
    let tag = format!("{:016x}", rand::random::<u64>());
    let roles: Vec<Arc<Role>> = (0..parts.lane_count()).map(|_| Role::new(false)).collect();
    let lanes = parts
        .lanes()
        .zip(&roles)
        .map(|(keys, role)| {
            let lane = Lane {
                role: role.clone(),
                tag: tag.clone(),
                conns: conns.clone(),
                keys: keys.clone(),
            };
            lane_consumer(&outer, lane, parts.lane_count())
        })
        .collect::<Result<Vec<_>>>()?;
    let owner = Owner {
        conn: conns[0].clone(),
        parts: parts.clone(),
        tag,
        roles,
    };
    let owner_stop = CancellationToken::new();
    let _owner_guard = owner_stop.clone().drop_guard();
    let owner = tokio::spawn(owner.run(owner_stop.clone()));
    let stop = shutdown.child_token();
    let mut runs: FuturesUnordered<_> = lanes
        .into_iter()
        .map(|lane| {
            let stop = stop.clone();
            async move {
                let name = lane.config.queue.clone();
                (name, lane.run(stop).await)
            }
        })
        .collect();
    let mut failure = None;
    let mut first = true;
    while let Some((lane, r)) = runs.next().await {
        if std::mem::take(&mut first) {
            tracing::info!("stopping: no more fetches; finishing running jobs");
        }
        if let Err(e) = r {
            tracing::error!(lane = %lane, error = %e, "lane failed; stopping the others");
            stop.cancel();
            failure.get_or_insert(e);
        }
    }
    owner_stop.cancel();
    let _ = owner.await;
    match failure {
        Some(e) => Err(e),
        None => Ok(Report::of(&outer.tally)),
    }
}

/// The pipeline of one lane: `outer`'s configuration for the lane's keys, its budget, its
/// tally; per-key limiters of its own (a key lives in one lane).
fn lane_consumer(outer: &Consumer, lane: Lane, lanes: usize) -> Result<Consumer> {
    let mut config = outer.config.clone();
    config.queue = lane.keys.name().to_owned();
    // Each lane's acker sees a share of the outcomes: under a backlog it lingers as much
    // longer, so its settle calls stay as large as one queue's would be.
    config.acker.linger *= lanes as u32;
    Ok(Consumer {
        key_limiters: key_limiters(&config)?,
        config,
        redis: outer.redis.clone(),
        registry: outer.registry.clone(),
        limit: outer.limit.clone(),
        running: outer.running.clone(),
        limiter: outer.limiter.clone(),
        rate: outer.rate.clone(),
        share: None,
        tally: outer.tally.clone(),
        // Each lane's own: the leases it holds.
        in_memory: Arc::default(),
        lane: Some(lane),
        ready: outer.ready.clone(),
    })
}
