//! A queue's recent samples: its counters and sizes sampled on a fixed clock, kept in
//! Redis, so every reader (each UI server, `weir stats`, `weir queues`) shows the same
//! rates and charts, and none of them depends on when it last looked.
//!
//! Who writes: each consumer's housekeeping (`consumer/housekeeping/samples.rs`) calls
//! `scripts/samples.lua` twice a period; the script writes a sample only if the period
//! (by Redis's clock) has none, so a fleet of N consumers writes one sample per period
//! and each call costs O(1). The list keeps the newest [`SamplesConfig::kept`] samples
//! (an hour by default) and expires once nobody has written it for twice that span.
//!
//! Rates come from two samples' counters over the time between their reads (the `at` of
//! each, Redis's clock): with no consumer running no sample is written, and the rates are
//! absent rather than stale.

use crate::error::{Error, Result};
use crate::queue::json::{JSON_VERSION, Rates, Timestamp};
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use redis::aio::ConnectionLike;
use serde::Serialize;
use std::time::Duration;

/// How a queue's history is sampled: one sample per `period`, the newest `kept` kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SamplesConfig {
    /// Time between samples, 100 ms to 1 h (default 10 s). Every consumer of a queue
    /// should use the same (the first writer of a period decides).
    pub period: Duration,
    /// Samples kept, 2 to 100000 (default 360: an hour of 10 s samples).
    pub kept: usize,
}

impl SamplesConfig {
    /// Default of [`SamplesConfig::period`].
    pub const DEFAULT_PERIOD: Duration = Duration::from_secs(10);
    /// Default of [`SamplesConfig::kept`].
    pub const DEFAULT_KEPT: usize = 360;

    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if self.period < Duration::from_millis(100) || self.period > Duration::from_secs(3600) {
            return Err(Error::config(
                "history period",
                format!("must be from 100ms to 1h, not {:?}", self.period),
            ));
        }
        if !(2..=100_000).contains(&self.kept) {
            return Err(Error::config(
                "history samples kept",
                format!("must be from 2 to 100000, not {}", self.kept),
            ));
        }
        Ok(())
    }

    fn period_ms(&self) -> u64 {
        self.period.as_millis() as u64
    }
}

impl Default for SamplesConfig {
    fn default() -> Self {
        Self {
            period: Self::DEFAULT_PERIOD,
            kept: Self::DEFAULT_KEPT,
        }
    }
}

/// One sample: the queue's counters and sizes as one read saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// The start of the period it belongs to.
    pub slot: Timestamp,
    /// When the read was made (Redis's clock).
    pub at: Timestamp,
    /// Counter `enqueued`.
    pub enqueued: u64,
    /// Counter `fetched`.
    pub fetched: u64,
    /// Counter `acked`.
    pub acked: u64,
    /// Counter `retried`.
    pub retried: u64,
    /// Counter `deferred`.
    pub deferred: u64,
    /// Counter `dead`.
    pub dead: u64,
    /// Ready jobs (suspects included).
    pub ready: u64,
    /// Delayed jobs.
    pub delayed: u64,
    /// Leased jobs.
    pub in_flight: u64,
    /// Jobs in the dead-letter queue.
    pub dead_size: u64,
}

impl Sample {
    /// A sample as the script writes it (`slot at` then ten counts); `None` for anything
    /// else (a list written by hand).
    pub fn parse(s: &str) -> Option<Self> {
        let v: Vec<u64> = s.split(' ').map(|x| x.parse().ok()).collect::<Option<_>>()?;
        let [
            slot,
            at,
            enqueued,
            fetched,
            acked,
            retried,
            deferred,
            dead,
            ready,
            delayed,
            in_flight,
            dead_size,
        ] = v[..]
        else {
            return None;
        };
        Some(Sample {
            slot: Timestamp(slot),
            at: Timestamp(at),
            enqueued,
            fetched,
            acked,
            retried,
            deferred,
            dead,
            ready,
            delayed,
            in_flight,
            dead_size,
        })
    }

    /// Adds another lane's sample of the same period (a partitioned queue's history is
    /// the sum of its lanes').
    fn add(&mut self, o: &Sample) {
        self.at = self.at.max(o.at);
        self.enqueued += o.enqueued;
        self.fetched += o.fetched;
        self.acked += o.acked;
        self.retried += o.retried;
        self.deferred += o.deferred;
        self.dead += o.dead;
        self.ready += o.ready;
        self.delayed += o.delayed;
        self.in_flight += o.in_flight;
        self.dead_size += o.dead_size;
    }

    /// The rates from `self` to the later sample `b` (a counter that went down, reset by
    /// hand, counts as 0).
    pub fn rates_to(&self, b: &Sample) -> Rates {
        let ms = b.at.0.saturating_sub(self.at.0).max(1);
        let per_s = |x: u64, y: u64| y.saturating_sub(x) as f64 * 1000.0 / ms as f64;
        Rates {
            enqueued_per_s: per_s(self.enqueued, b.enqueued),
            fetched_per_s: per_s(self.fetched, b.fetched),
            acked_per_s: per_s(self.acked, b.acked),
            retried_per_s: per_s(self.retried, b.retried),
            deferred_per_s: per_s(self.deferred, b.deferred),
            dead_per_s: per_s(self.dead, b.dead),
            window_ms: ms,
        }
    }
}

/// A queue's history as read: its samples, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Samples {
    /// [`JSON_VERSION`].
    pub version: u32,
    /// The queue.
    pub queue: String,
    /// Redis's clock at the read.
    pub now: Timestamp,
    /// The samples, oldest first (a partitioned queue's summed over its lanes, period by
    /// period).
    pub samples: Vec<Sample>,
    /// Rates over the two newest samples, if the newest is recent (no older than two
    /// periods and a half, the periods measured between samples): `null` when no
    /// consumer has sampled the queue lately.
    pub rates: Option<Rates>,
}

impl Samples {
    /// The history of `lanes` (one queue's keys, or a partitioned queue's lanes) read as
    /// of `now`, each lane's samples newest first.
    pub fn of(queue: &str, now: Timestamp, lanes: Vec<Vec<Sample>>) -> Self {
        let mut by_slot = std::collections::BTreeMap::<Timestamp, Sample>::new();
        for lane in lanes {
            for s in lane {
                by_slot.entry(s.slot).and_modify(|t| t.add(&s)).or_insert(s);
            }
        }
        let samples: Vec<Sample> = by_slot.into_values().collect();
        let rates = match samples[..] {
            [.., a, b] => {
                let period = b.slot.0.saturating_sub(a.slot.0).max(1);
                (now.0.saturating_sub(b.at.0) <= period * 5 / 2).then(|| a.rates_to(&b))
            }
            _ => None,
        };
        Samples {
            version: JSON_VERSION,
            queue: queue.to_owned(),
            now,
            samples,
            rates,
        }
    }

    /// The rates between each pair of neighbouring samples, at the later one's time.
    pub fn rate_points(&self) -> Vec<(Timestamp, Rates)> {
        self.samples
            .windows(2)
            .map(|w| (w[1].at, w[0].rates_to(&w[1])))
            .collect()
    }
}

/// Writes a sample of `keys`' lane unless this period has one (see the module's doc).
pub async fn record<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    config: &SamplesConfig,
) -> Result<bool> {
    scripts::samples_record(conn, keys, config.period_ms(), config.kept).await
}

/// One lane's samples, newest first, at most `max`, and Redis's clock (one round trip).
/// Entries that are not samples are skipped.
pub async fn read_lane<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    max: usize,
) -> Result<(Vec<Sample>, Timestamp)> {
    let (raw, (secs, micros)): (Vec<String>, (u64, u64)) = redis::pipe()
        .cmd("LRANGE")
        .arg(keys.samples())
        .arg(0)
        .arg(max.max(1) as i64 - 1)
        .cmd("TIME")
        .query_async(conn)
        .await?;
    let samples = raw.iter().filter_map(|s| Sample::parse(s)).collect();
    Ok((samples, Timestamp(secs * 1000 + micros / 1000)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(slot: u64, at: u64, acked: u64, ready: u64) -> Sample {
        Sample {
            slot: Timestamp(slot),
            at: Timestamp(at),
            acked,
            ready,
            ..Sample::default()
        }
    }

    #[test]
    fn samples_parse_and_garbage_does_not() {
        let x = Sample::parse("10000 10004 1 2 3 4 5 6 7 8 9 10").unwrap();
        assert_eq!((x.slot.0, x.at.0, x.acked, x.dead_size), (10000, 10004, 3, 10));
        for bad in [
            "",
            "1 2 3",
            "a b c d e f g h i j k l",
            "1 2 3 4 5 6 7 8 9 10 11 12 13",
        ] {
            assert_eq!(Sample::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rates_use_the_reads_times_and_go_stale() {
        let a = s(10_000, 10_000, 100, 0);
        let b = s(20_000, 20_000, 600, 0);
        let h = Samples::of("q", Timestamp(21_000), vec![vec![b, a]]);
        assert_eq!(h.samples, vec![a, b], "oldest first");
        let r = h.rates.unwrap();
        assert_eq!((r.acked_per_s, r.window_ms), (50.0, 10_000));
        // Two periods and a half after the newest read: no rates.
        assert!(
            Samples::of("q", Timestamp(45_001), vec![vec![b, a]])
                .rates
                .is_none()
        );
        assert!(Samples::of("q", Timestamp(20_000), vec![vec![b]]).rates.is_none());
    }

    #[test]
    fn lanes_sum_period_by_period() {
        let h = Samples::of(
            "q",
            Timestamp(20_000),
            vec![
                vec![s(10_000, 10_002, 5, 1), s(0, 1, 1, 1)],
                vec![s(10_000, 10_001, 7, 2)],
            ],
        );
        assert_eq!(h.samples.len(), 2);
        assert_eq!(
            (h.samples[1].acked, h.samples[1].ready, h.samples[1].at.0),
            (12, 3, 10_002)
        );
        assert_eq!(h.rate_points().len(), 1);
    }
}
