//! Periodic jobs: schedules stored in Redis under the queue's hash tag, fired by the
//! queue's consumers (`consumer/housekeeping/cron.rs`; there is no scheduler process).
//!
//! A schedule enqueues one job of its kind and payload per tick. Ticks are either a fixed
//! interval counted from the Unix epoch (`every 1h` fires on the hour UTC, `every 1d` at
//! midnight UTC: every consumer computes the same ticks without talking to the others),
//! or a cron pattern (croner: 5 fields, or 6 with seconds first) in an IANA time zone
//! (default UTC). A tick's job has the id `cron:<name>:<tick ms>` (so a tick's job is one
//! job, whoever fires it).
//!
//! Exactly one job per tick: firing is `cron_fire.lua`, which compares the tick with the
//! schedule's last fired tick and, in the same call, moves it forward and enqueues the
//! job; a consumer that loses the race gets "already fired". Only the latest due tick is
//! fired, so ticks missed while no consumer ran give one job on recovery, not one each.
//! Adding a schedule (or changing it) counts every tick up to that moment as fired.

use crate::error::{Error, Result};
use crate::queue::envelope::Priority;
use crate::queue::keys::{QueueKeys, validate_token};
use crate::queue::producer::{NewJob, Producer};
use crate::queue::scripts;
use crate::redis::conn::Conn;
use croner::Cron;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::time::Duration;

/// Longest schedule name (a tick's job id, `cron:<name>:<ms>`, stays under 128).
pub const MAX_SCHEDULE_NAME: usize = 96;

/// When a schedule fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// Every interval, counted from the Unix epoch (at least 1 s, whole milliseconds).
    Every(Duration),
    /// A cron pattern in an IANA time zone (none: UTC).
    Cron {
        /// The pattern: `min hour day month weekday`, or with seconds first.
        pattern: String,
        /// The time zone, like `Europe/Berlin`.
        tz: Option<String>,
    },
}

/// A periodic job: what to enqueue, and when.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Schedule {
    /// The schedule's name, unique in its queue.
    #[serde(skip)]
    pub name: String,
    /// Interval in ms (for [`When::Every`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    every_ms: Option<u64>,
    /// Cron pattern (for [`When::Cron`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tz: Option<String>,
    /// The jobs' kind.
    pub kind: String,
    /// The jobs' payload (JSON text).
    pub payload: Box<RawValue>,
    /// The jobs' priority (0 high, 1 normal, 2 low).
    priority: u8,
    /// The jobs' attempts (none: the producer default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
}

impl Schedule {
    /// A schedule `name` enqueueing `kind` jobs with `payload` (JSON text) `when`; checks
    /// every part (the name and kind's alphabet, the interval, the pattern, the zone).
    pub fn new(name: &str, when: When, kind: &str, payload: &str) -> Result<Self> {
        validate_token("schedule name", name, MAX_SCHEDULE_NAME)?;
        validate_token("job kind", kind, crate::queue::envelope::MAX_ID_LEN)?;
        let (every_ms, cron, tz) = match when {
            When::Every(d) => (Some(d.as_millis() as u64), None, None),
            When::Cron { pattern, tz } => (None, Some(pattern), tz),
        };
        let s = Self {
            name: name.to_owned(),
            every_ms,
            cron,
            tz,
            kind: kind.to_owned(),
            payload: RawValue::from_string(payload.to_owned())?,
            priority: Priority::Normal as u8,
            max_attempts: None,
        };
        s.ticks()?;
        Ok(s)
    }

    /// The jobs' priority (default normal).
    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = p as u8;
        self
    }

    /// When it fires.
    pub fn when(&self) -> When {
        match (&self.every_ms, &self.cron) {
            (Some(ms), _) => When::Every(Duration::from_millis(*ms)),
            (None, pattern) => When::Cron {
                pattern: pattern.clone().unwrap_or_default(),
                tz: self.tz.clone(),
            },
        }
    }

    /// Its first tick after `ms` (ms since the epoch), for display.
    pub fn next_tick_after(&self, ms: u64) -> Option<u64> {
        self.ticks().ok()?.next(ms)
    }

    /// The schedule as stored (a JSON object).
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a schedule always encodes")
    }

    /// The schedule `name` as stored in `json`.
    pub(crate) fn from_json(name: &str, json: &str) -> Result<Self> {
        let mut s: Self = serde_json::from_str(json)?;
        s.name = name.to_owned();
        s.ticks()?;
        Ok(s)
    }

    /// The tick calculator, checking the schedule on the way.
    pub(crate) fn ticks(&self) -> Result<Ticks> {
        let bad = |why: String| {
            Error::config(
                format!("schedule {:?}", self.name),
                format!("is not valid: {why}"),
            )
        };
        match (self.every_ms, &self.cron) {
            (Some(ms), None) if ms >= 1000 => Ok(Ticks::Every(ms)),
            (Some(_), None) => Err(bad("the interval must be at least 1s".into())),
            (None, Some(p)) => {
                let cron: Cron = p
                    .parse()
                    .map_err(|e| bad(format!("invalid cron pattern {p:?}: {e}")))?;
                let tz = match &self.tz {
                    Some(name) => {
                        TimeZone::get(name).map_err(|e| bad(format!("unknown time zone {name:?}: {e}")))?
                    }
                    None => TimeZone::UTC,
                };
                Ok(Ticks::Cron(Box::new(cron), tz))
            }
            _ => Err(bad("give either an interval or a cron pattern".into())),
        }
    }

    /// The job a tick at `tick_ms` enqueues, encoded, with its id.
    pub(crate) fn job(&self, tick_ms: u64, now_ms: u64) -> Result<scripts::EnqueueArg> {
        let mut job = NewJob::from_raw(self.kind.clone(), self.payload.clone())
            .id(format!("cron:{}:{tick_ms}", self.name))
            .priority(Priority::from_u8(self.priority));
        if let Some(n) = self.max_attempts {
            job = job.max_attempts(n);
        }
        Producer::prepare_offline(job, now_ms, &mut Vec::new())
    }
}

/// A schedule's ticks, in ms since the Unix epoch.
#[derive(Debug)]
pub(crate) enum Ticks {
    Every(u64),
    Cron(Box<Cron>, TimeZone),
}

impl Ticks {
    /// The latest tick at or before `now_ms`.
    pub(crate) fn latest(&self, now_ms: u64) -> Option<u64> {
        match self {
            Ticks::Every(every) => Some(now_ms - now_ms % every),
            Ticks::Cron(cron, tz) => {
                let now = zoned(now_ms, tz)?;
                let t = cron.find_previous_occurrence(&now, true).ok()?;
                u64::try_from(t.timestamp().as_millisecond()).ok()
            }
        }
    }

    /// The first tick after `now_ms`.
    pub(crate) fn next(&self, now_ms: u64) -> Option<u64> {
        match self {
            Ticks::Every(every) => Some(now_ms - now_ms % every + every),
            Ticks::Cron(cron, tz) => {
                let now = zoned(now_ms, tz)?;
                let t = cron.find_next_occurrence(&now, false).ok()?;
                u64::try_from(t.timestamp().as_millisecond()).ok()
            }
        }
    }
}

fn zoned(ms: u64, tz: &TimeZone) -> Option<jiff::Zoned> {
    let ts = Timestamp::from_millisecond(i64::try_from(ms).ok()?).ok()?;
    Some(ts.to_zoned(tz.clone()))
}

/// What [`Schedules::add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// A new schedule.
    New,
    /// An existing schedule, changed: ticks up to now count as fired.
    Changed,
    /// An existing schedule, already exactly so: nothing changed.
    Unchanged,
}

/// The schedules of one queue: add, list, remove.
#[derive(Clone)]
pub struct Schedules {
    conn: Conn,
    keys: QueueKeys,
}

impl std::fmt::Debug for Schedules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedules")
            .field("queue", &self.keys.name())
            .finish_non_exhaustive()
    }
}

impl Schedules {
    /// The schedules of `queue` over `conn`.
    pub fn new(conn: Conn, queue: &str) -> Result<Self> {
        Ok(Self {
            conn,
            keys: QueueKeys::new(queue)?,
        })
    }

    /// Adds `s`, or replaces the schedule of that name.
    pub async fn add(&self, s: &Schedule) -> Result<Added> {
        let mut conn = self.conn.clone();
        let r = scripts::cron_set(&mut conn, &self.keys, &s.name, &s.to_json()).await?;
        if r > 0 {
            scripts::notify(&mut conn, &self.keys, scripts::Notice::Cron).await;
        }
        Ok(match r {
            2 => Added::New,
            1 => Added::Changed,
            _ => Added::Unchanged,
        })
    }

    /// Removes the schedule `name`; false if there was none.
    pub async fn remove(&self, name: &str) -> Result<bool> {
        let mut conn = self.conn.clone();
        let removed = scripts::cron_set(&mut conn, &self.keys, name, "").await? == 1;
        if removed {
            scripts::notify(&mut conn, &self.keys, scripts::Notice::Cron).await;
        }
        Ok(removed)
    }

    /// Every schedule with its last fired tick (ms since the epoch), by name. A stored
    /// schedule that does not parse is an error naming it.
    pub async fn list(&self) -> Result<Vec<(Schedule, Option<u64>)>> {
        let mut conn = self.conn.clone();
        let specs: BTreeMap<String, String> = conn.hgetall(self.keys.cron()).await?;
        let fired: BTreeMap<String, u64> = conn.hgetall(self.keys.cron_fired()).await?;
        specs
            .iter()
            .map(|(name, json)| Ok((Schedule::from_json(name, json)?, fired.get(name).copied())))
            .collect()
    }
}

#[cfg(test)]
mod tests;
