//! The settings watch: reads the queue's runtime settings ([`Settings`], stored by
//! `weir limits set`) before the consumer's first fetch ([`SettingsWatch::apply_stored`]),
//! then reads them again on each change notice (`consumer/notices.rs`: the writers
//! publish one) and on a slow safety poll, and applies changes to the running consumer's
//! limiter and rate gate,
//! on top of the configuration the consumer was started with. A consumer with a fixed
//! limit takes `max_concurrency` as its limit (and its own `concurrency` back when the
//! setting is cleared); the adaptive knobs (min, target, thresholds) have nothing to
//! drive there and are reported as ignored. (The dead-letter cap needs
//! no applying: the scripts read it; a change is only logged.)

use crate::limiter::limit::Limit;
use crate::limiter::{Limiter, LimiterConfig, Rate, RateGate};
use crate::queue::keys::QueueKeys;
use crate::queue::retry_rules::{LiveRules, RetryRules};
use crate::queue::settings::Settings;
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, Streak};
use redis::AsyncCommands;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The first wait after a failed read (doubling up to the safety poll).
const RETRY: Duration = Duration::from_secs(1);

/// The settings watch task.
pub(crate) struct SettingsWatch {
    every: Duration,
    conn: HealingConnection,
    /// The settings hash.
    key: String,
    /// The adaptive limiter and the configuration it started with.
    limiter: Option<(Arc<Limiter>, LimiterConfig)>,
    /// The rate gate and the rate it started with.
    rate: (Arc<RateGate>, Option<Rate>),
    /// Without an adaptive limiter: the fixed limit and the concurrency it started with.
    fixed: Option<(Arc<Limit>, usize)>,
    /// The settings last read (and applied).
    seen: Settings,
    /// The last read did not parse (reported once).
    unparsed: bool,
    /// The retry rules in force (`weir retry set`), read by the pool.
    pub(crate) rules: Arc<LiveRules>,
    /// The retry rules last read.
    seen_rules: RetryRules,
    /// The last read's retry rules did not parse (reported once).
    rules_unparsed: bool,
}

impl SettingsWatch {
    /// Watches the settings of the queue `keys`, with a safety poll every `every`.
    pub(crate) fn new(
        every: Duration,
        conn: HealingConnection,
        keys: &QueueKeys,
        limiter: Option<(Arc<Limiter>, LimiterConfig)>,
        rate: (Arc<RateGate>, Option<Rate>),
        fixed: Option<(Arc<Limit>, usize)>,
    ) -> Self {
        Self {
            every,
            conn,
            key: keys.settings(),
            limiter,
            rate,
            fixed,
            seen: Settings::default(),
            unparsed: false,
            rules: Arc::default(),
            seen_rules: RetryRules::default(),
            rules_unparsed: false,
        }
    }

    /// Reads the stored settings and applies them, trying again every `every` until a
    /// read succeeds or `shutdown`. Called before the consumer's first fetch, so a consumer
    /// that starts (or restarts) under a stored rate or concurrency bound never runs a job
    /// outside it; [`SettingsWatch::run`] then keeps them current.
    pub(crate) async fn apply_stored(&mut self, shutdown: &CancellationToken) {
        let mut errors = self.streak();
        loop {
            match self.poll().await {
                Ok(()) => return,
                Err(e) => {
                    let wait = errors.failed(&e);
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    /// Reads the settings again on each change `notice` and every `every` (the safety
    /// poll) until `shutdown` (the first read is [`SettingsWatch::apply_stored`]'s). A
    /// failed read is tried again after a backoff, and a setting that does not parse is
    /// reported once; either way the settings in force stay.
    pub(crate) async fn run(mut self, notice: Arc<Notify>, shutdown: CancellationToken) {
        let mut errors = self.streak();
        let mut wait = self.every;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
                _ = notice.notified() => {}
            }
            wait = match self.poll().await {
                Ok(()) => {
                    errors.succeeded();
                    self.every
                }
                Err(e) => errors.failed(&e),
            };
        }
    }

    fn streak(&self) -> Streak {
        let every = self.every;
        Streak::new(
            "runtime settings",
            Backoff {
                first: RETRY.min(every),
                max: every,
            },
        )
    }

    /// One read of the settings hash; what changed since the last read is applied.
    async fn poll(&mut self) -> redis::RedisResult<()> {
        let hash: HashMap<String, String> = self.conn.hgetall(&self.key).await?;
        self.poll_rules(&hash);
        match Settings::from_hash(&hash) {
            Ok(s) => {
                self.unparsed = false;
                if s != self.seen {
                    self.apply(&s, &self.seen);
                    self.seen = s;
                }
            }
            Err(e) if !self.unparsed => {
                self.unparsed = true;
                tracing::warn!(error = %e, "cannot read runtime settings; keeping the current ones");
            }
            Err(_) => {}
        }
        Ok(())
    }

    /// Puts the retry rules of `hash` in force when they changed; rules that do not parse
    /// are reported (once per change) and the ones in force stay.
    fn poll_rules(&mut self, hash: &HashMap<String, String>) {
        let read = RetryRules::from_hash(hash);
        let unparsed = read.is_err();
        match read {
            Ok(r) if r != self.seen_rules => {
                tracing::info!(queue = ?r.queue.as_ref().map(|r| r.to_string()), kinds = r.kinds.len(), "retry rules applied");
                self.rules.set(r.clone());
                self.seen_rules = r;
            }
            Ok(_) => {}
            Err(e) if !self.rules_unparsed => {
                tracing::warn!(error = %e, "cannot read retry rules; keeping the current ones");
            }
            Err(_) => {}
        }
        self.rules_unparsed = unparsed;
    }

    fn apply(&self, s: &Settings, before: &Settings) {
        if s.dead_cap != before.dead_cap {
            tracing::info!(dead_cap = s.dead_cap(), "queue dead-letter cap");
        }
        let limits = |s: &Settings| {
            (
                s.min,
                s.max,
                s.target_p95,
                s.error_threshold,
                s.overload_status.clone(),
            )
        };
        if limits(s) == limits(before) {
            // Nothing for the limiter: only the rate or the dead-letter cap changed.
        } else if let Some((limiter, base)) = &self.limiter {
            let mut next = s.limiter(base);
            next.window = limiter.config().window;
            match limiter.reconfigure(next.clone()) {
                Ok(()) => tracing::info!(
                    min = next.aimd.min,
                    max = next.aimd.max,
                    target_p95 = %next.aimd.target,
                    error_threshold = next.aimd.error_threshold,
                    overload_status = ?next.aimd.overload_status,
                    "runtime limiter settings applied"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "runtime limiter settings refused; keeping the current ones")
                }
            }
        } else if let Some((limit, own)) = &self.fixed {
            let to = s.max.unwrap_or(*own).max(1);
            limit.set(to);
            tracing::info!(concurrency = to, "runtime concurrency applied to the fixed limit");
            if s.min.is_some()
                || s.target_p95.is_some()
                || s.error_threshold.is_some()
                || s.overload_status.is_some()
            {
                tracing::warn!(
                    "runtime min concurrency, target p95, error threshold and overload statuses ignored: this consumer's limit is fixed (not --adaptive)"
                );
            }
        } else if s.min.is_some() || s.max.is_some() || s.target_p95.is_some() {
            tracing::warn!(
                "runtime concurrency settings ignored: this consumer's limit is shared by several queues"
            );
        }
        if s.rate != before.rate {
            let (gate, base) = &self.rate;
            let rate = s.rate(*base);
            match gate.set(rate) {
                Ok(()) => {
                    tracing::info!(rate = %rate.map_or_else(|| "off".into(), |r| r.to_string()), "runtime rate applied")
                }
                Err(e) => tracing::warn!(error = %e, "runtime rate refused; keeping the current one"),
            }
        }
    }
}
