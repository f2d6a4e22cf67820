//! The cron task: fires the queue's periodic jobs (`queue/cron.rs`). Every consumer runs
//! one; `cron_fire.lua` makes each tick fire once whatever their number.
//!
//! Each round is one pipelined read (Redis `TIME`, the schedules, their last fired
//! ticks), then one script call per schedule whose latest tick is past its last fired
//! one. Then it sleeps until the next tick of any schedule, or a change notice (`weir
//! cron` publishes one: `consumer/notices.rs`), at most [`POLL`], the safety poll for a
//! notice lost. Ticks come from Redis's clock; only the length of the sleep comes from
//! the local one.

use crate::error::Result;
use crate::queue::cron::{Schedule, Ticks};
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, Streak};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Longest sleep between rounds: how soon a new or changed schedule is seen when its
/// change notice was lost (an idle consumer's cron task reads three commands per round).
pub(crate) const POLL: Duration = Duration::from_secs(30);
/// Slept past a tick, so the round after the sleep finds it due on Redis's clock.
const MARGIN: Duration = Duration::from_millis(5);
/// How often the jobs fired are summed up in one INFO line (each one is a DEBUG line: a
/// schedule every second would otherwise fill the log).
pub(crate) const SUMMARY: Duration = Duration::from_secs(600);

/// The cron task.
pub(crate) struct CronTask {
    conn: HealingConnection,
    keys: QueueKeys,
    /// Schedules by name, parsed once per change of their JSON.
    parsed: HashMap<String, Parsed>,
    /// Jobs this consumer fired since the last summary line, and when that was.
    fired: u64,
    since: tokio::time::Instant,
}

/// A schedule's JSON, and the schedule with its ticks (none if it does not parse: that
/// is logged once, when the JSON is first seen).
struct Parsed {
    json: String,
    schedule: Option<(Schedule, Ticks)>,
}

impl CronTask {
    pub(crate) fn new(conn: HealingConnection, keys: QueueKeys) -> Self {
        Self {
            conn,
            keys,
            parsed: HashMap::new(),
            fired: 0,
            since: tokio::time::Instant::now(),
        }
    }

    /// Fires due ticks until `shutdown`, reading the schedules again on each `notice`. A
    /// failed round is tried again after the backoff; a tick it missed is fired by the next
    /// round (the latest due tick, once).
    pub(crate) async fn run(mut self, notice: Arc<Notify>, shutdown: CancellationToken) {
        let mut errors = Streak::new(
            "periodic jobs",
            Backoff {
                first: Duration::from_millis(500),
                max: POLL,
            },
        );
        loop {
            let wait = match self.round().await {
                Ok(wait) => {
                    errors.succeeded();
                    wait
                }
                Err(e) => errors.failed(&e),
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
                _ = notice.notified() => {}
            }
        }
    }

    /// One round: fires what is due; returns how long to sleep.
    async fn round(&mut self) -> Result<Duration> {
        let ((secs, micros), specs, fired): ((u64, u64), HashMap<String, String>, HashMap<String, u64>) =
            redis::pipe()
                .cmd("TIME")
                .hgetall(self.keys.cron())
                .hgetall(self.keys.cron_fired())
                .query_async(&mut self.conn)
                .await?;
        let now = secs * 1000 + micros / 1000;
        self.parsed.retain(|name, _| specs.contains_key(name));
        let mut next: Option<u64> = None;
        for (name, json) in &specs {
            let Some((s, ticks)) = parse(&mut self.parsed, name, json) else {
                continue;
            };
            let last = fired.get(name).copied().unwrap_or(0);
            if let Some(tick) = ticks.latest(now).filter(|t| *t > last)
                && fire(&mut self.conn, &self.keys, s, json, tick, now).await?
            {
                self.fired += 1;
            }
            if let Some(t) = ticks.next(now) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        let elapsed = self.since.elapsed();
        if elapsed >= SUMMARY {
            if self.fired > 0 {
                let over = humantime::format_duration(elapsed).to_string();
                tracing::info!(jobs = self.fired, over = %over, "periodic jobs enqueued by this consumer");
            }
            (self.fired, self.since) = (0, tokio::time::Instant::now());
        }
        let until_next = next.map_or(POLL, |t| Duration::from_millis(t.saturating_sub(now)) + MARGIN);
        Ok(until_next.min(POLL))
    }
}

/// The schedule `name` stored as `json`, from `cache` unless the JSON changed; none if
/// it does not parse (logged once per change).
fn parse<'a>(
    cache: &'a mut HashMap<String, Parsed>,
    name: &str,
    json: &str,
) -> Option<&'a (Schedule, Ticks)> {
    let entry = cache.entry(name.to_owned()).or_insert_with(|| Parsed {
        json: String::new(),
        schedule: None,
    });
    if entry.json != json {
        let parsed = Schedule::from_json(name, json).and_then(|s| Ok((s.ticks()?, s)));
        entry.json = json.to_owned();
        entry.schedule = match parsed {
            Ok((ticks, s)) => Some((s, ticks)),
            Err(e) => {
                tracing::warn!(schedule = name, error = %e, "periodic job schedule does not parse; skipped");
                None
            }
        };
    }
    entry.schedule.as_ref()
}

/// Fires `tick` of `s` (stored as `json`) and logs what happened (DEBUG); true if this
/// call enqueued the job.
async fn fire(
    conn: &mut HealingConnection,
    keys: &QueueKeys,
    s: &Schedule,
    json: &str,
    tick: u64,
    now: u64,
) -> Result<bool> {
    let job = s.job(tick, now)?;
    let code = scripts::cron_fire(conn, keys, &s.name, json, tick, &job).await?;
    match code {
        1 => tracing::debug!(schedule = %s.name, job = %job.id, "periodic job enqueued"),
        0 => tracing::debug!(schedule = %s.name, tick, "tick fired by another consumer"),
        _ => tracing::debug!(schedule = %s.name, "schedule changed while firing; read again next round"),
    }
    Ok(code == 1)
}
