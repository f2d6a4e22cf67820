//! The stats sampler: publishes queue depths (one stats call) and the local limit and
//! in-flight count once a second, while a metrics recorder is installed. On a quiet queue
//! (no work seen, the depths as they were) it samples every [`QUIET`] instead, until work
//! shows up (`quiet.rs`).

use crate::consumer::housekeeping::quiet::Watcher;
use crate::limiter::limit::Limit;
use crate::metrics::{KEY_THROTTLED, QueueMetrics, TOP_THROTTLED_KEYS};
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often queue depths are sampled.
const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// How often they are sampled on a quiet queue.
const QUIET: Duration = Duration::from_secs(30);

/// The sampler task.
pub(crate) struct Sampler {
    conn: HealingConnection,
    keys: QueueKeys,
    limit: Arc<Limit>,
    /// The consumer's running jobs (with a limit shared by several queues, its own).
    running: Arc<Limit>,
    metrics: QueueMetrics,
}

impl Sampler {
    pub(crate) fn new(
        conn: HealingConnection,
        keys: QueueKeys,
        (limit, running): (Arc<Limit>, Arc<Limit>),
        metrics: QueueMetrics,
    ) -> Self {
        Self {
            conn,
            keys,
            limit,
            running,
            metrics,
        }
    }

    /// Publishes the keys held back the most by their limits (none while no key was).
    async fn sample_throttled_keys(&mut self) {
        let top: redis::RedisResult<Vec<(String, f64)>> = redis::cmd("ZRANGE")
            .arg(self.keys.key_throttled())
            .arg(0)
            .arg(TOP_THROTTLED_KEYS - 1)
            .arg("REV")
            .arg("WITHSCORES")
            .query_async(&mut self.conn)
            .await;
        for (key, n) in top.unwrap_or_default() {
            let mut l = crate::metrics::lane_labels(self.keys.name());
            l.push(metrics::Label::new("key", key));
            metrics::counter!(KEY_THROTTLED, l).absolute(n as u64);
        }
    }

    /// Samples until `shutdown`; returns at once if no recorder is installed. A failed
    /// stats call skips one sample (the next one comes a second later anyway).
    pub(crate) async fn run(mut self, mut work: Watcher, shutdown: CancellationToken) {
        if !crate::metrics::is_installed() {
            return;
        }
        let mut last = None;
        let mut wait = STATS_INTERVAL;
        loop {
            self.metrics.limit.set(self.limit.get() as f64);
            self.metrics.in_flight.set(self.running.in_flight() as f64);
            let sample = scripts::stats(&mut self.conn, &self.keys).await.ok();
            if let Some(s) = &sample {
                s.record(&self.metrics);
            }
            self.sample_throttled_keys().await;
            let quiet = sample.is_some() && sample == last && self.running.in_flight() == 0;
            last = sample;
            let busy = tokio::select! {
                _ = shutdown.cancelled() => return,
                busy = work.sleep(STATS_INTERVAL, wait) => busy,
            };
            wait = if quiet && !busy && !work.saw_work() {
                QUIET
            } else {
                STATS_INTERVAL
            };
        }
    }
}
