//! Starting a consumer's pipeline: the fetcher, the pool, the acker, the heartbeat and
//! housekeeping, spawned on the consumer's connections (`mod.rs` runs the shutdown order
//! over what this returns).

use super::{Consumer, Started, Steps, notices};
use crate::consumer::acker::{Acker, AckerDeps, Calls};
use crate::consumer::fetcher::Fetcher;
use crate::consumer::heartbeat::{Heartbeat, Registration};
use crate::consumer::housekeeping::{
    Activity, CronTask, DrainWatch, KeyShares, Reclaimer, Sampler, SamplesTask, SettingsWatch,
};
use crate::consumer::leases::Leases;
use crate::consumer::pool::{Pool, Suspects, start_marker};
use crate::consumer::runs::Runs;
use crate::consumer::signals::Signals;
use crate::consumer::tasks::{Task, Tasks};
use crate::metrics::{LimiterMetrics, QueueMetrics};
use crate::queue::admin::WorkerRecord;
use crate::queue::keys::QueueKeys;
use crate::redis::conn::HealingConnection;
use std::sync::Arc;
use tokio::sync::mpsc;

impl Consumer {
    /// Spawns the fetcher, the pool, the acker, the heartbeat and housekeeping, on `conn`
    /// and the heartbeat's `beat_conn`.
    pub(super) fn start(
        &self,
        tasks: &mut Tasks,
        steps: &Steps,
        [conn, beat_conn]: [HealingConnection; 2],
        keys: QueueKeys,
        watch: Option<SettingsWatch>,
    ) -> Started {
        let c = &self.config;
        // This run's tag, in the start marks of the jobs it runs: its worker id too (one
        // for every lane of a partitioned queue).
        let tag = match &self.lane {
            Some(lane) => lane.tag.clone(),
            None => format!("{:016x}", rand::random::<u64>()),
        };
        let metrics = if c.metrics {
            QueueMetrics::new(keys.name(), crate::queue::scripts::SCRIPT_NAMES)
        } else {
            QueueMetrics::disabled(keys.name())
        };
        // A limiter shared by several queues (or lanes) is labelled by their consumer.
        if let (Some(l), true, None, None) = (&self.limiter, c.metrics, &self.share, &self.lane) {
            l.attach_metrics(LimiterMetrics::new(&c.queue));
        }
        let (pool_tx, pool_rx) = mpsc::unbounded_channel();
        let (acker_tx, acker_rx) = mpsc::channel(c.acker.channel_capacity());
        // With a shared budget, the gate reads the queue's buffer: it is the share's.
        let buffer = self
            .share
            .as_ref()
            .map_or_else(Arc::default, |s| s.buffer().clone());
        let leases = Arc::new(Leases::new(self.in_memory.clone()));
        let signals = Signals::new();
        let acker = Acker::new(
            c.acker.clone(),
            AckerDeps {
                conn: conn.clone(),
                keys: keys.clone(),
                tag: tag.clone(),
                leases: leases.clone(),
                tally: self.tally.clone(),
                in_memory: self.in_memory.clone(),
                metrics: metrics.clone(),
                signals: signals.clone(),
                lease_ms: c.lease.as_millis() as u64,
                calls: Calls::new(&tag),
            },
        );
        let acker = tasks.spawn("acker", acker.run(acker_rx, steps.finish_acks.clone()));
        let registration = Registration {
            record: WorkerRecord::new(tag.clone()),
            limit: self.limit.clone(),
            running: self.running.clone(),
            reports_running: self.lane.as_ref().is_none_or(|l| !l.keys.is_partition()),
            limiter: self.limiter.clone(),
        };
        let heartbeat = Heartbeat::new(beat_conn, keys.clone(), c.lease, leases.clone(), registration);
        let heartbeat = tasks.spawn("heartbeat", heartbeat.run(steps.stop_housekeeping.clone()));
        let fetcher = Fetcher {
            config: c.fetcher.clone(),
            redis: self.redis.clone(),
            conn: conn.clone(),
            keys: keys.clone(),
            limit: self.limit.clone(),
            rate: self.rate.clone(),
            buffer: buffer.clone(),
            leases: leases.clone(),
            flush_max: c.acker.flush_max,
            signals: signals.clone(),
            pool: pool_tx,
            acker: acker_tx.clone(),
            metrics: metrics.clone(),
            lease: c.lease,
            unknown_kind_grace: c.pool.unknown_kind_grace,
            adaptive_per_key: self.key_limiters.is_some(),
            role: self.lane.as_ref().map(|l| l.role.clone()),
            ready: self.ready.clone(),
            shared: self.share.is_some(),
        };
        let fetcher = tasks.spawn("fetcher", fetcher.run(steps.stop_fetching.clone()));
        let runs = Arc::new(Runs::default());
        let pool = Pool {
            config: c.pool.clone(),
            rules: watch.as_ref().map_or_else(Default::default, |w| w.rules.clone()),
            registry: self.registry.clone(),
            limit: self.limit.clone(),
            limiter: self.limiter.clone(),
            key_limiters: self.key_limiters.clone(),
            rate: self.rate.clone(),
            share: self.share.clone(),
            buffer,
            acker: acker_tx.clone(),
            metrics: metrics.clone(),
            runs: runs.clone(),
            suspects: Suspects::new(conn.clone(), keys.clone(), tag.clone(), leases.clone()),
            inline: Default::default(),
            mark_start: start_marker(&acker_tx),
        };
        let pool = tasks.spawn("pool", pool.run(pool_rx, steps.stop_fetching.clone()));
        let drain = DrainWatch::new(
            conn.clone(),
            keys.clone(),
            self.running.clone(),
            leases,
            signals.drain_check,
        )
        .ignoring_delayed(c.drain_ignore_delayed);
        let mut key_shares = None;
        if let Some(limiters) = &self.key_limiters {
            let shares = KeyShares {
                conn: conn.clone(),
                keys: keys.clone(),
                tag,
                limiters: limiters.clone(),
            };
            key_shares = Some(tasks.spawn("key shares", shares.run(steps.stop_housekeeping.clone())));
        }
        let reclaimer = self.start_housekeeping(
            tasks,
            steps,
            (conn, keys),
            (metrics, signals.activity),
            drain,
            watch,
        );
        Started {
            fetcher,
            pool,
            acker,
            heartbeat,
            reclaimer,
            key_shares,
            runs,
            acker_tx,
        }
    }

    /// The runtime settings watch this consumer runs, if any: [`Consumer::run_on`] has it
    /// apply the stored settings before the fetcher starts, then [`Consumer::start`]
    /// spawns it.
    pub(super) fn settings_watch(&self, conn: &HealingConnection, keys: &QueueKeys) -> Option<SettingsWatch> {
        let c = &self.config;
        // A partitioned queue's process-wide knobs are its base lane's to watch.
        let lane_of_many = self.lane.as_ref().is_some_and(|l| l.keys.is_partition());
        let every = c.settings_poll.filter(|_| !lane_of_many)?;
        // A limiter shared with other queues is no one queue's to tune.
        let limiter = self
            .limiter
            .clone()
            .zip(c.limiter.clone())
            .filter(|_| self.share.is_none());
        let rate = (self.rate.clone(), c.rate);
        // A fixed limit of this queue's own takes `max_concurrency` live.
        let fixed =
            (self.limiter.is_none() && self.share.is_none()).then(|| (self.limit.clone(), c.concurrency));
        Some(SettingsWatch::new(
            every,
            conn.clone(),
            keys,
            limiter,
            rate,
            fixed,
        ))
    }

    /// Spawns the reclaimer (returned: the shutdown waits for it) and the other
    /// housekeeping tasks this configuration asks for (`drain` in drain mode, the settings
    /// `watch` when there is one).
    fn start_housekeeping(
        &self,
        tasks: &mut Tasks,
        steps: &Steps,
        (conn, keys): (HealingConnection, QueueKeys),
        (metrics, activity): (QueueMetrics, Activity),
        drain: DrainWatch,
        watch: Option<SettingsWatch>,
    ) -> Task {
        let c = &self.config;
        let stop = &steps.stop_housekeeping;
        // A partitioned queue's process-wide knobs are its base lane's to watch, and its
        // change notices are the base queue's.
        let base = !self.lane.as_ref().is_some_and(|l| l.keys.is_partition());
        let board = notices::Board::default();
        if base {
            let notices = notices::Notices::new(self.redis.clone(), &keys, board.clone());
            tasks.spawn("notices", notices.run(stop.clone()));
        }
        let budget = c.pool.deferral_budget;
        let reclaimer = Reclaimer::new(
            c.reclaimer.clone(),
            budget,
            conn.clone(),
            keys.clone(),
            metrics.clone(),
            c.lease.as_millis() as u64,
        );
        let reclaimer = tasks.spawn("reclaimer", reclaimer.run(activity.watch(), stop.clone()));
        tasks.spawn(
            "cron",
            CronTask::new(conn.clone(), keys.clone()).run(board.cron.clone(), stop.clone()),
        );
        tasks.spawn(
            "samples",
            SamplesTask::new(c.samples, conn.clone(), keys.clone()).run(stop.clone()),
        );
        if base {
            let every = crate::queue::functions::WATCH_EVERY;
            let library = crate::queue::functions::keep_loaded(
                conn.clone(),
                every,
                board.library.clone(),
                stop.clone(),
            );
            tasks.spawn("functions library watch", library);
        }
        if let Some(watch) = watch {
            tasks.spawn("settings watch", watch.run(board.settings.clone(), stop.clone()));
        }
        if c.metrics {
            let limits = (self.limit.clone(), self.running.clone());
            let sampler = Sampler::new(conn.clone(), keys.clone(), limits, metrics);
            tasks.spawn("sampler", sampler.run(activity.watch(), stop.clone()));
        }
        if c.drain {
            tasks.spawn("drain watch", drain.run(steps.stop_fetching.clone()));
        }
        reclaimer
    }
}
