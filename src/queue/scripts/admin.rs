//! Wrappers of the operator scripts: the dead-letter queue, pause/resume, stats. Not on
//! the hot path; same shape as the others (one typed wrapper per script).

use super::{
    DLQ_LIST, DLQ_PURGE, DLQ_REQUEUE, NOTICE, PARTITIONS, PAUSE, STATS, as_u64, call, into_strings,
    invocation, opt_string, reply_err,
};
use crate::error::Result;
use crate::metrics::QueueMetrics;
use crate::queue::keys::QueueKeys;
use redis::Value;
use redis::aio::ConnectionLike;

/// One dead-letter queue entry.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeadJob {
    /// Job id.
    pub id: String,
    /// When it was dead-lettered, epoch ms (Redis clock).
    pub dead_at_ms: u64,
    /// The envelope as stored (may be invalid JSON: that can be why it is here).
    pub envelope: Option<String>,
    /// The reason or last error.
    pub reason: Option<String>,
    /// The lane of a partitioned queue it is in (a partition's tag, or the queue's name for
    /// its base); `None` for a queue that is not partitioned. `Queue::dead_jobs` sets it.
    pub lane: Option<String>,
}

/// Lists dead-lettered jobs, newest first.
pub async fn dlq_list<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    offset: usize,
    count: usize,
) -> Result<Vec<DeadJob>> {
    let reply: Vec<Value> = call(
        "dlq_list",
        keys,
        invocation(&DLQ_LIST, keys).arg(offset).arg(count),
        conn,
    )
    .await?;
    let mut out = Vec::with_capacity(reply.len() / 4);
    let mut it = reply.into_iter();
    while let (Some(id), Some(at), Some(env), Some(reason)) = (it.next(), it.next(), it.next(), it.next()) {
        out.push(DeadJob {
            // Lossy: a hand-pushed id that is not UTF-8 ends up here, and must still list.
            id: opt_string(id).unwrap_or_default(),
            dead_at_ms: as_u64("dlq_list", &at)?,
            envelope: opt_string(env),
            reason: opt_string(reason),
            lane: None,
        });
    }
    Ok(out)
}

/// Requeues dead-lettered jobs (the given ids, or up to `limit` oldest); returns how many
/// were requeued and the ids that were not in the dead-letter queue.
pub async fn dlq_requeue<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    limit: usize,
    ids: &[String],
) -> Result<(u64, Vec<String>)> {
    let mut inv = invocation(&DLQ_REQUEUE, keys);
    inv.arg(limit);
    for id in ids {
        inv.arg(id);
    }
    let reply: Vec<Value> = call("dlq_requeue", keys, &mut inv, conn).await?;
    let mut it = reply.into_iter();
    let n = as_u64("dlq_requeue", &it.next().unwrap_or(Value::Nil))?;
    Ok((n, into_strings("dlq_requeue", it.collect())?))
}

/// Deletes up to `limit` dead-lettered jobs, oldest first; returns how many.
pub async fn dlq_purge<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys, limit: usize) -> Result<u64> {
    let mut inv = invocation(&DLQ_PURGE, keys);
    super::with_records(&mut inv, keys);
    call("dlq_purge", keys, inv.arg(limit), conn).await
}

/// Pauses (`true`) or resumes a queue; returns whether the state changed.
pub async fn pause<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys, paused: bool) -> Result<bool> {
    let changed: u64 = call(
        "pause",
        keys,
        invocation(&PAUSE, keys).arg(if paused { "1" } else { "0" }),
        conn,
    )
    .await?;
    Ok(changed == 1)
}

/// What a change notice says changed (`notice.lua`): each is read by one housekeeping
/// task of every running consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// The settings hash: runtime limits, the dead-letter cap, retry rules.
    Settings,
    /// The periodic jobs' schedules.
    Cron,
}

impl Notice {
    /// The message on the notices channel.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Settings => "settings",
            Self::Cron => "cron",
        }
    }

    /// The notice a message on the channel names, if any.
    pub fn parse(message: &[u8]) -> Option<Self> {
        match message {
            b"settings" => Some(Self::Settings),
            b"cron" => Some(Self::Cron),
            _ => None,
        }
    }
}

/// Publishes `what` on the queue's notices channel ([`QueueKeys::notices_channel`]), so
/// running consumers read it again now; returns how many received it.
pub async fn notice<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys, what: Notice) -> Result<u64> {
    let mut inv = invocation(&NOTICE, keys);
    inv.key(keys.notices_channel()).arg(what.as_str());
    call("notice", keys, &mut inv, conn).await
}

/// [`notice`], for a writer whose change is stored already: a notice that cannot be sent
/// is logged, not returned, since running consumers still read the change at their next
/// safety poll (`ConsumerConfig::settings_poll`, the cron task's `POLL`).
pub(crate) async fn notify<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys, what: Notice) {
    if let Err(e) = notice(conn, keys, what).await {
        tracing::warn!(error = %e, queue = keys.name(), notice = what.as_str(), "stored, but running consumers could not be told now: they read it at their next safety poll");
    }
}

/// A snapshot of a queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Ready jobs per priority: high, normal, low.
    pub ready: [u64; 3],
    /// Delayed jobs (retries and scheduled jobs).
    pub delayed: u64,
    /// Leased jobs.
    pub in_flight: u64,
    /// Dead-lettered jobs.
    pub dead: u64,
    /// Whether the queue is paused.
    pub paused: bool,
    /// Age of the oldest ready job, ms (0 when none is ready).
    pub oldest_ready_age_ms: u64,
    /// Lifetime counters: enqueued, fetched, acked, retried, deferred (jobs put back
    /// without charging an attempt), dead, reclaimed, trimmed (dead-letter entries
    /// dropped by the cap).
    pub counters: std::collections::BTreeMap<String, u64>,
    /// The dead-letter cap in force: the queue's `dead_cap` setting, or the default.
    pub dead_cap: u64,
    /// Jobs deferred at least once and not done yet (waiting, ready or leased again).
    pub deferred: u64,
    /// Completed jobs kept on request (`weir limits set --keep-completed`).
    pub done: u64,
}

impl Stats {
    /// Ready jobs of all priorities.
    pub fn ready_total(&self) -> u64 {
        self.ready.iter().sum()
    }

    /// Jobs still to be done: ready, delayed or leased.
    pub fn pending(&self) -> u64 {
        self.ready_total() + self.delayed + self.in_flight
    }

    /// The snapshot of a partitioned queue from its lanes' (`queue/partitions.rs`): sizes,
    /// counters and dead-letter caps added, paused if any lane is, the oldest ready job's
    /// age the oldest of any lane.
    pub fn sum<'a>(lanes: impl IntoIterator<Item = &'a Stats>) -> Stats {
        let mut s = Stats::default();
        for l in lanes {
            for (a, b) in s.ready.iter_mut().zip(l.ready) {
                *a += b;
            }
            s.delayed += l.delayed;
            s.in_flight += l.in_flight;
            s.dead += l.dead;
            s.deferred += l.deferred;
            s.done += l.done;
            s.dead_cap += l.dead_cap;
            s.paused |= l.paused;
            s.oldest_ready_age_ms = s.oldest_ready_age_ms.max(l.oldest_ready_age_ms);
            for (k, v) in &l.counters {
                *s.counters.entry(k.clone()).or_default() += v;
            }
        }
        s
    }

    /// Publishes this snapshot as the queue's gauges (and the trimmed counter). It lives
    /// here rather than in `metrics` so that module depends on nothing of the queue.
    pub(crate) fn record(&self, m: &QueueMetrics) {
        use crate::metrics::{
            DEAD_TRIMMED, QUEUE_DEAD, QUEUE_DEFERRED, QUEUE_DELAYED, QUEUE_IN_FLIGHT, QUEUE_JOB_EVENTS,
            QUEUE_JOBS, QUEUE_OLDEST, QUEUE_READY,
        };
        // A partition's lane: queue and partition labels (see `QueueMetrics::new`).
        let l = crate::metrics::lane_labels(&m.queue);
        for (i, p) in ["high", "normal", "low"].into_iter().enumerate() {
            let mut with = l.clone();
            with.push(metrics::Label::new("priority", p));
            metrics::gauge!(QUEUE_READY, with).set(self.ready[i] as f64);
        }
        metrics::gauge!(QUEUE_DELAYED, l.clone()).set(self.delayed as f64);
        metrics::gauge!(QUEUE_IN_FLIGHT, l.clone()).set(self.in_flight as f64);
        metrics::gauge!(QUEUE_DEAD, l.clone()).set(self.dead as f64);
        metrics::gauge!(QUEUE_DEFERRED, l.clone()).set(self.deferred as f64);
        metrics::gauge!(QUEUE_OLDEST, l.clone()).set(self.oldest_ready_age_ms as f64 / 1000.0);
        for event in QUEUE_JOB_EVENTS {
            let mut with = l.clone();
            with.push(metrics::Label::new("event", *event));
            let n = self.counters.get(*event).copied().unwrap_or(0);
            metrics::counter!(QUEUE_JOBS, with).absolute(n);
        }
        let trimmed = self.counters.get("trimmed").copied().unwrap_or(0);
        metrics::counter!(DEAD_TRIMMED, l).absolute(trimmed);
    }
}

/// Reads a [`Stats`] snapshot.
pub async fn stats<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys) -> Result<Stats> {
    let mut inv = invocation(&STATS, keys);
    super::with_records(&mut inv, keys);
    let reply: Vec<Value> = call("stats", keys, &mut inv, conn).await?;
    if reply.len() != 12 {
        return Err(reply_err("stats", format!("{} values", reply.len())));
    }
    let n = |i: usize| as_u64("stats", &reply[i]);
    let mut s = Stats {
        ready: [n(0)?, n(1)?, n(2)?],
        delayed: n(3)?,
        in_flight: n(4)?,
        dead: n(5)?,
        paused: n(6)? == 1,
        oldest_ready_age_ms: n(7)?,
        counters: Default::default(),
        dead_cap: n(9)?,
        deferred: n(10)?,
        done: n(11)?,
    };
    if let Value::Array(pairs) = &reply[8] {
        for pair in pairs.chunks(2) {
            if let [k, v] = pair {
                let name = match k {
                    Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    _ => continue,
                };
                // (a counter written by hand with what is not a count is left out: the
                // next bump restarts it, lib.lua's counters_ready)
                if let Ok(n) = as_u64("stats", v) {
                    s.counters.insert(name, n);
                }
            }
        }
    }
    Ok(s)
}

/// Writes `keys`' partition map (`count` partitions, `tags` joined by spaces) unless the
/// queue has one; returns the map it has: (count, tags, whether this call wrote it).
pub async fn partitions<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    count: usize,
    tags: &str,
) -> Result<(usize, String, bool)> {
    let mut inv = invocation(&PARTITIONS, keys);
    inv.key(keys.partitions()).arg(count).arg(tags);
    let (have, tags, created): (usize, String, u8) = call("partitions", keys, &mut inv, conn).await?;
    Ok((have, tags, created == 1))
}
