//! Adaptive concurrency per job key (`weir work --adaptive --adaptive-per-key`): the same
//! AIMD rule as the consumer's limiter, run once per job key (a tenant, a customer, a
//! destination host) from that key's own latencies and errors, so one slow endpoint backs
//! off alone while the others keep their pace.
//!
//! ```text
//! pool ── started(key) / finished(key, …) ──▶ KeyLimiters: per key a Window + Aimd
//!                                                  │ shares due (changed, or to refresh)
//!                                                  ▼
//!          consumer task ── key_shares.lua ──▶ weir:{Q}:keylimit:auto:<key>  HASH
//!                                                  │   consumer tag -> "<share> <expires>"
//!          fetch.lua ◀── the key's limit = Σ live shares (with the per-key settings: the lower)
//! ```
//!
//! Each consumer's rule finds its own share of a key (its peak in-flight of that key is
//! what makes the share binding), the fetch script holds the whole fleet to the sum of the
//! live shares, and jobs over it wait parked, uncharged, as under `--per-key-concurrency`.
//! A key seen for the first time has no share yet: its jobs run under the other limits
//! until its first window closes.
//!
//! State is bounded: at most [`KeyLimiterConfig::max_keys`] keys are kept (the least
//! recently seen go first), and a key not seen for [`KeyLimiterConfig::idle`] is forgotten.
//! In Redis a share lives [`SHARE_TTL`] and is written again every third of it while the
//! key is active, so the share of a consumer that stopped or died is gone within it. A key
//! costs at most a window's latencies plus the rule's no-load memory (up to
//! `baseline_windows` p95 values): about 5 KB at the defaults, 20 MB for 4,096 keys.

mod config;

pub use config::KeyLimiterConfig;

use super::error::LimiterError;
use super::{Aimd, Decision, Signal, Window};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// How long a share written to Redis lives unless written again.
pub const SHARE_TTL: Duration = Duration::from_secs(10);

/// One key's state.
#[derive(Debug)]
struct KeyState {
    window: Window,
    rule: Aimd,
    in_flight: usize,
    /// Most of the key's jobs running at once since the window opened.
    peak: usize,
    seen: Instant,
    /// When its share was last handed out to be written (none: not yet).
    written: Option<Instant>,
}

/// The per-key limiters of one consumer. Share it with `Arc`.
#[derive(Debug)]
pub struct KeyLimiters {
    config: KeyLimiterConfig,
    inner: Mutex<HashMap<Box<str>, KeyState>>,
}

impl KeyLimiters {
    /// Limiters under `config` (checked).
    pub fn new(config: KeyLimiterConfig) -> Result<Self, LimiterError> {
        config.validate()?;
        Ok(Self {
            config,
            inner: Mutex::new(HashMap::new()),
        })
    }

    /// The settings in force.
    pub fn config(&self) -> &KeyLimiterConfig {
        &self.config
    }

    /// A job of `key` starts.
    pub fn started(&self, key: &str, now: Instant) {
        let mut keys = self.lock();
        if !keys.contains_key(key) {
            self.make_room(&mut keys, now);
            let state = KeyState {
                window: Window::new(self.config.window.clone(), now).expect("checked in new"),
                rule: Aimd::new(self.config.aimd.clone(), self.config.initial).expect("checked in new"),
                in_flight: 0,
                peak: 0,
                seen: now,
                written: None,
            };
            keys.insert(key.into(), state);
        }
        let k = keys.get_mut(key).expect("inserted above");
        k.in_flight += 1;
        k.peak = k.peak.max(k.in_flight);
        k.seen = now;
    }

    /// A job of `key` that started at `started` finished after `elapsed`; the completion
    /// that closes the key's window applies the rule, and its decision is returned.
    pub fn finished(
        &self,
        key: &str,
        started: Instant,
        elapsed: Duration,
        signal: Signal,
    ) -> Option<Decision> {
        let now = started + elapsed;
        let mut keys = self.lock();
        // Forgotten while it ran (over max_keys): its next job starts it afresh.
        let k = keys.get_mut(key)?;
        k.in_flight = k.in_flight.saturating_sub(1);
        k.seen = k.seen.max(now);
        let signal = k.rule.config().classify(signal);
        k.window.record(started, elapsed, signal);
        if !k.window.ready(now) {
            return None;
        }
        let summary = k.window.close(now, k.peak);
        k.peak = k.in_flight;
        let d = k.rule.decide(&summary);
        if d.to != d.from {
            k.window.discard_before(now);
            // Written at the next flush.
            k.written = None;
            tracing::debug!(key, from = d.from, to = d.to, reason = %d.reason, "per-key limit");
        }
        Some(d)
    }

    /// The shares to write at `now`: the keys whose share changed (or was never written)
    /// and those active since their share was written a third of [`SHARE_TTL`] ago or
    /// more, so it does not expire while in use. Keys idle for longer than `idle` are
    /// forgotten here.
    pub fn due(&self, now: Instant) -> Vec<(String, usize)> {
        let idle = self.config.idle;
        let refresh = SHARE_TTL / 3;
        let mut keys = self.lock();
        keys.retain(|_, k| k.in_flight > 0 || now.saturating_duration_since(k.seen) < idle);
        let mut out = Vec::new();
        for (key, k) in keys.iter_mut() {
            let stale = k.written.is_none_or(|w| {
                now.saturating_duration_since(w) >= refresh && (k.seen > w || k.in_flight > 0)
            });
            if stale {
                k.written = Some(now);
                out.push((key.to_string(), k.rule.limit()));
            }
        }
        out
    }

    /// Marks the shares of `keys` as not written (their write failed): the next
    /// [`KeyLimiters::due`] hands them out again.
    pub fn unwritten<'a>(&self, keys: impl IntoIterator<Item = &'a str>) {
        let mut kept = self.lock();
        for key in keys {
            if let Some(k) = kept.get_mut(key) {
                k.written = None;
            }
        }
    }

    /// Every key kept (a consumer that stops withdraws their shares).
    pub fn keys(&self) -> Vec<String> {
        self.lock().keys().map(|k| k.to_string()).collect()
    }

    /// The share of `key`, if kept.
    pub fn limit(&self, key: &str) -> Option<usize> {
        self.lock().get(key).map(|k| k.rule.limit())
    }

    /// Keys kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// No key kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Before a new key is kept at the bound: forgets the least recently seen eighth of
    /// the keys not running (one sort per max_keys / 8 new keys, not a scan per key).
    #[cold]
    fn make_room(&self, keys: &mut HashMap<Box<str>, KeyState>, now: Instant) {
        if keys.len() < self.config.max_keys {
            return;
        }
        let mut seen: Vec<Instant> = keys
            .values()
            .filter(|k| k.in_flight == 0)
            .map(|k| k.seen)
            .collect();
        if seen.is_empty() {
            return; // every key is running: keep them, the bound is briefly exceeded
        }
        let n = (self.config.max_keys / 8).clamp(1, seen.len());
        let (_, cut, _) = seen.select_nth_unstable(n - 1);
        let cut = *cut;
        let mut left = n;
        keys.retain(|_, k| {
            let forget = left > 0 && k.in_flight == 0 && k.seen <= cut && k.seen <= now;
            if forget {
                left -= 1;
            }
            !forget
        });
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Box<str>, KeyState>> {
        // A panic while holding the lock leaves plain numbers behind: keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::{AimdConfig, Target};

    fn config() -> KeyLimiterConfig {
        KeyLimiterConfig {
            aimd: AimdConfig {
                min: 1,
                max: 100,
                target: Target::Absolute(Duration::from_millis(50)),
                ..AimdConfig::default()
            },
            initial: 32,
            ..KeyLimiterConfig::default()
        }
    }

    /// Runs `n` jobs of `key` in `conc` parallel lanes of `latency`, from `t`; returns the
    /// time after them.
    fn run(l: &KeyLimiters, key: &str, n: usize, conc: usize, latency: Duration, mut t: Instant) -> Instant {
        for _ in 0..n / conc {
            for _ in 0..conc {
                l.started(key, t);
            }
            for _ in 0..conc {
                l.finished(key, t, latency, Signal::Success);
            }
            t += latency;
        }
        t
    }

    #[test]
    fn a_slow_key_backs_off_alone() {
        let l = KeyLimiters::new(config()).unwrap();
        let mut t = Instant::now();
        for _ in 0..40 {
            let slow = l.limit("slow").unwrap_or(32);
            let t1 = run(&l, "slow", 2 * slow.max(10), slow, Duration::from_millis(200), t);
            let t2 = run(&l, "fast", 400, 4, Duration::from_millis(5), t);
            t = t1.max(t2);
        }
        assert_eq!(
            l.limit("slow"),
            Some(1),
            "a key at 4x its target goes to the minimum"
        );
        // The fast key never reached its share: it holds where it started.
        assert_eq!(l.limit("fast"), Some(32));
    }

    #[test]
    fn shares_are_written_when_they_change_and_refreshed_while_in_use() {
        let l = KeyLimiters::new(config()).unwrap();
        let t0 = Instant::now();
        l.started("a", t0);
        assert_eq!(l.due(t0), vec![("a".to_string(), 32)]);
        assert!(l.due(t0 + Duration::from_secs(1)).is_empty(), "nothing changed");
        l.finished("a", t0, Duration::from_millis(10), Signal::Success);
        // Seen since it was written, a third of idle later: refreshed.
        let later = t0 + Duration::from_secs(21);
        l.started("a", later);
        l.finished("a", later, Duration::from_millis(10), Signal::Success);
        assert_eq!(l.due(later), vec![("a".to_string(), 32)]);
        // Idle for longer than `idle`: forgotten.
        assert!(l.due(later + Duration::from_secs(61)).is_empty());
        assert!(l.is_empty());
    }

    #[test]
    fn keys_kept_are_bounded_least_recently_seen_first() {
        let c = KeyLimiterConfig {
            max_keys: 80,
            ..config()
        };
        let l = KeyLimiters::new(c).unwrap();
        let t0 = Instant::now();
        for i in 0..1000u64 {
            let t = t0 + Duration::from_millis(i);
            l.started(&format!("k{i}"), t);
            l.finished(&format!("k{i}"), t, Duration::ZERO, Signal::Success);
            assert!(l.len() <= 80);
        }
        assert!(l.limit("k999").is_some());
        assert!(l.limit("k0").is_none());
        // A running key is never forgotten.
        let l = KeyLimiters::new(KeyLimiterConfig {
            max_keys: 8,
            ..config()
        })
        .unwrap();
        l.started("busy", t0);
        for i in 0..100u64 {
            let t = t0 + Duration::from_millis(i + 1);
            l.started(&format!("k{i}"), t);
            l.finished(&format!("k{i}"), t, Duration::ZERO, Signal::Success);
        }
        assert!(l.limit("busy").is_some());
    }

    #[test]
    fn settings_are_checked() {
        let bad = KeyLimiterConfig {
            max_keys: 0,
            ..KeyLimiterConfig::default()
        };
        assert!(
            KeyLimiters::new(bad)
                .unwrap_err()
                .to_string()
                .contains("keys kept")
        );
        let bad = KeyLimiterConfig {
            idle: Duration::from_millis(10),
            ..KeyLimiterConfig::default()
        };
        assert!(KeyLimiters::new(bad).unwrap_err().to_string().contains("idle"));
    }
}
