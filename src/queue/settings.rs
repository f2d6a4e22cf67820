//! Queue settings: limits an operator stores for a queue (`weir limits set`) that bind
//! every consumer of that queue. Running consumers apply the runtime limits within about
//! a second, without a restart; the scripts read the dead-letter cap on every call that
//! buries or trims. They live in the queue's settings hash ([`QueueKeys::settings`](crate::queue::keys::QueueKeys::settings)):
//!
//! ```text
//! HASH weir:{Q}:settings
//!   min_concurrency  "4"       max_concurrency "200"
//!   target_p95       "250ms" | "1.5x"
//!   error_threshold  "0.05"
//!   overload_status  "429,503,502,504"
//!   rate             "500/s" | "off"      burst "100"
//!   dead_cap         "10000"
//!   global_rate      "500/s"              global_burst "50"
//!   global_concurrency "10"
//!   key_rate         "5/s"                key_burst "1"
//!   key_concurrency  "2"
//!   key_rate:acme    "50/s"               key_concurrency:acme "10"
//!   key_overrides    "1"     (present while any key has a limit of its own)
//!   keep_completed_ms "3600000"           keep_completed_count "10000"
//!   history_runs     "5"
//! ```
//!
//! A runtime limit that is absent leaves the consumer's own configuration in force; an
//! absent `dead_cap` is [`DEFAULT_DEAD_CAP`]. A consumer reads these before its first
//! fetch (so they bind from its first job on), then polls them with a plain HGETALL once
//! a second. The global limits bind the whole fleet together, not each
//! consumer: the fetch script reads them on every call (`fetch.lua`'s `global_grant`), so
//! they apply at the next fetch. So do the per-key limits, which bind each job key (the
//! envelope's `key`) on its own.
//!
//! A partitioned queue's partitions each hold their share of its fleet-wide limits
//! (`settings/lanes.rs`): [`Settings::update`] and the clears write them.

mod hash;
mod lanes;
mod store;
mod values;

pub use values::{Cleared, RateSetting};

use crate::error::{Error, Result};
use crate::limiter::{LimiterConfig, LimiterOptions, OverloadStatus, Rate, Target};
use std::collections::BTreeMap;

/// The dead-letter cap of a queue with no `dead_cap` setting (`scripts/lib.lua` has the
/// same number): the oldest dead-lettered jobs beyond it are trimmed, and counted.
pub const DEFAULT_DEAD_CAP: u64 = 10_000;

/// The runtime settings of a queue; `None` fields are not set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Lowest concurrency limit (adaptive consumers).
    pub min: Option<usize>,
    /// Highest concurrency limit (adaptive consumers).
    pub max: Option<usize>,
    /// p95 target (adaptive consumers).
    pub target_p95: Option<Target>,
    /// Overload-rate threshold (adaptive consumers).
    pub error_threshold: Option<f64>,
    /// HTTP statuses that mean overload (adaptive consumers).
    pub overload_status: Option<OverloadStatus>,
    /// Jobs/s cap (every consumer).
    pub rate: Option<RateSetting>,
    /// Dead-letter queue cap, at least 1: the oldest entries beyond it are trimmed and
    /// counted (absent: [`DEFAULT_DEAD_CAP`]).
    pub dead_cap: Option<u64>,
    /// Jobs/s the whole fleet of the queue's consumers starts, with its burst (see
    /// [`Settings::default_global_burst`]).
    pub global_rate: Option<Rate>,
    /// Jobs of the queue leased (fetched and not yet settled) at once, fleet-wide, at
    /// least 1.
    pub global_concurrency: Option<u64>,
    /// Jobs/s each job key starts, fleet-wide, with its burst (default as for the global
    /// rate).
    pub key_rate: Option<Rate>,
    /// Jobs of each job key leased at once, fleet-wide, at least 1.
    pub key_concurrency: Option<u64>,
    /// Keys with limits of their own, in place of `key_rate` / `key_concurrency`.
    pub key_overrides: BTreeMap<String, KeyLimits>,
    /// How long completed jobs are kept, with their history (field `keep_completed_ms`);
    /// either this or [`Settings::keep_completed_count`] turns keeping on.
    pub keep_completed: Option<std::time::Duration>,
    /// How many completed jobs are kept at most, at least 1 (absent while keeping is on:
    /// [`DEFAULT_KEEP_COMPLETED_COUNT`]).
    pub keep_completed_count: Option<u64>,
    /// How many of its last runs each job's history keeps, 0 to [`MAX_HISTORY_RUNS`]
    /// (absent: [`DEFAULT_HISTORY_RUNS`]).
    pub history_runs: Option<u32>,
}

/// Completed jobs kept at most when only an age is set (`scripts/lib.lua`'s KEEP_COUNT).
pub const DEFAULT_KEEP_COMPLETED_COUNT: u64 = 10_000;
/// Runs a job's history keeps without a `history_runs` setting (lib.lua's HISTORY_RUNS).
pub const DEFAULT_HISTORY_RUNS: u32 = 5;
/// Most runs a job's history keeps (lib.lua's HISTORY_MAX_RUNS).
pub const MAX_HISTORY_RUNS: u32 = 50;

/// The limits of one job key of its own (`weir limits set --key acme=50/s
/// --key-concurrency acme=10`); what is not set is the queue's per-key default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KeyLimits {
    /// Its jobs/s (burst: a tenth of the count, at least 1).
    pub rate: Option<Rate>,
    /// Its jobs leased at once.
    pub concurrency: Option<u64>,
}

impl Settings {
    /// Whether any per-key limit is set.
    pub fn per_key(&self) -> bool {
        self.key_rate.is_some() || self.key_concurrency.is_some() || !self.key_overrides.is_empty()
    }

    /// The burst of a global rate set without one: a tenth of the rate's period's count,
    /// at least 1 (`500/s` gives 50). So the fleet starts at most about 1.1 times the rate
    /// in any one period, and a fetch takes up to a tenth of a period's jobs at once.
    pub fn default_global_burst(rate: &Rate) -> u32 {
        (rate.count / 10.0).ceil().clamp(1.0, 1e6) as u32
    }

    /// The dead-letter cap in force.
    pub fn dead_cap(&self) -> u64 {
        self.dead_cap.unwrap_or(DEFAULT_DEAD_CAP)
    }

    /// These settings with `newer`'s set fields on top.
    pub fn merge(&self, newer: &Settings) -> Settings {
        Settings {
            min: newer.min.or(self.min),
            max: newer.max.or(self.max),
            target_p95: newer.target_p95.or(self.target_p95),
            error_threshold: newer.error_threshold.or(self.error_threshold),
            overload_status: newer.overload_status.clone().or(self.overload_status.clone()),
            rate: newer.rate.or(self.rate),
            dead_cap: newer.dead_cap.or(self.dead_cap),
            keep_completed: newer.keep_completed.or(self.keep_completed),
            keep_completed_count: newer.keep_completed_count.or(self.keep_completed_count),
            history_runs: newer.history_runs.or(self.history_runs),
            global_rate: newer.global_rate.or(self.global_rate),
            global_concurrency: newer.global_concurrency.or(self.global_concurrency),
            key_rate: newer.key_rate.or(self.key_rate),
            key_concurrency: newer.key_concurrency.or(self.key_concurrency),
            key_overrides: {
                let mut o = self.key_overrides.clone();
                for (k, l) in &newer.key_overrides {
                    let e = o.entry(k.clone()).or_default();
                    e.rate = l.rate.or(e.rate);
                    e.concurrency = l.concurrency.or(e.concurrency);
                }
                o
            },
        }
    }

    /// `base` with these settings applied.
    pub fn limiter(&self, base: &LimiterConfig) -> LimiterConfig {
        LimiterOptions {
            adaptive: true,
            adaptive_per_key: false,
            min_concurrency: self.min,
            max_concurrency: self.max,
            target_p95: self.target_p95,
            error_threshold: self.error_threshold,
            overload_status: self.overload_status.clone(),
            rate: None,
            burst: None,
        }
        .apply(base)
    }

    /// The rate in force given the consumer's own `base`.
    pub fn rate(&self, base: Option<Rate>) -> Option<Rate> {
        match self.rate {
            None => base,
            Some(RateSetting::Off) => None,
            Some(RateSetting::Limit(r)) => Some(r),
        }
    }

    /// Checks the settings on top of the limiter defaults, with messages naming ranges.
    pub fn validate(&self) -> Result<()> {
        let c = self.limiter(&LimiterConfig::default());
        let c = LimiterConfig {
            aimd: crate::limiter::AimdConfig {
                // Unset bounds must not make set ones look contradictory.
                max: if self.max.is_none() {
                    c.aimd.max.max(c.aimd.min)
                } else {
                    c.aimd.max
                },
                ..c.aimd
            },
            ..c
        };
        c.validate()?;
        if let Some(RateSetting::Limit(r)) = self.rate {
            r.validate()?;
        }
        if self.dead_cap == Some(0) {
            return Err(Error::config("dead-letter cap", "must be at least 1"));
        }
        if self.keep_completed_count == Some(0) {
            return Err(Error::config(
                "completed jobs kept",
                "must be at least 1 (clear --keep-completed to keep none)",
            ));
        }
        if self.keep_completed.is_some_and(|d| d.as_millis() == 0) {
            return Err(Error::config(
                "completed jobs",
                "must be kept at least 1ms (clear --keep-completed to keep none)",
            ));
        }
        if self.history_runs.is_some_and(|n| n > MAX_HISTORY_RUNS) {
            return Err(Error::config(
                "a job's history",
                format!("keeps 0 to {MAX_HISTORY_RUNS} runs"),
            ));
        }
        if let Some(r) = self.global_rate {
            r.validate()?;
        }
        if self.global_concurrency == Some(0) {
            return Err(Error::config(
                "global concurrency",
                "must be at least 1 (clear it to lift the limit)",
            ));
        }
        if let Some(r) = self.key_rate {
            r.validate()?;
        }
        if self.key_concurrency == Some(0) {
            return Err(Error::config(
                "per-key concurrency",
                "must be at least 1 (clear it to lift the limit)",
            ));
        }
        for (key, l) in &self.key_overrides {
            crate::queue::keys::validate_token("job key", key, crate::queue::envelope::MAX_ID_LEN)?;
            if let Some(r) = l.rate {
                r.validate()?;
            }
            if l.concurrency == Some(0) {
                return Err(Error::config(
                    format!("key {key} concurrency"),
                    "must be at least 1 (clear the key's limits to lift them)",
                ));
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fields = self.to_fields();
        let text: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&text.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn hash(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn round_trips_through_the_hash() {
        let s = Settings {
            min: Some(4),
            max: Some(200),
            target_p95: Some(Target::Relative(2.5)),
            error_threshold: Some(0.1),
            overload_status: Some("429,503,502".parse().unwrap()),
            rate: Some(RateSetting::Limit("30/m".parse::<Rate>().unwrap().with_burst(5))),
            dead_cap: Some(25),
            global_rate: Some("500/s".parse::<Rate>().unwrap().with_burst(50)),
            global_concurrency: Some(10),
            key_rate: Some("5/s".parse::<Rate>().unwrap().with_burst(1)),
            key_concurrency: Some(2),
            key_overrides: [(
                "acme".to_string(),
                KeyLimits {
                    rate: Some("50/s".parse::<Rate>().unwrap().with_burst(5)),
                    concurrency: Some(10),
                },
            )]
            .into(),
            keep_completed: Some(std::time::Duration::from_secs(3600)),
            keep_completed_count: Some(500),
            history_runs: Some(7),
        };
        let h: HashMap<String, String> = s
            .to_fields()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        assert_eq!(h["rate"], "30/m");
        assert_eq!(
            (h["global_rate"].as_str(), h["global_burst"].as_str()),
            ("500/s", "50")
        );
        assert_eq!(h["key_rate:acme"], "50/s");
        assert_eq!(h["key_overrides"], "1", "the marker the fetch script looks for");
        // A global rate stored without a burst gets the default, a tenth of its count.
        let bare = Settings::from_hash(&hash(&[("global_rate", "200/s")])).unwrap();
        assert_eq!(bare.global_rate.map(|r| r.burst), Some(20));
        assert_eq!(Settings::from_hash(&h).unwrap(), s);
        let off = Settings::from_hash(&hash(&[("rate", "off")])).unwrap();
        assert_eq!(off.rate, Some(RateSetting::Off));
        assert_eq!(off.rate(Some("5/s".parse().unwrap())), None);
    }

    #[test]
    fn bad_fields_are_named() {
        let e = Settings::from_hash(&hash(&[("target_p95", "soon")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("target_p95") && e.contains("1.5x"), "{e}");
        let e = Settings {
            min: Some(50),
            max: Some(10),
            ..Settings::default()
        };
        assert!(e.validate().unwrap_err().to_string().contains("max concurrency"));
        assert!(
            Settings {
                min: Some(5000),
                ..Settings::default()
            }
            .validate()
            .is_ok()
        );
        let e = Settings {
            dead_cap: Some(0),
            ..Settings::default()
        };
        assert!(e.validate().unwrap_err().to_string().contains("dead-letter cap"));
    }

    #[test]
    fn applies_over_the_consumer_config() {
        let base = LimiterConfig::default();
        let s = Settings {
            max: Some(30),
            ..Settings::default()
        };
        let c = s.limiter(&base);
        assert_eq!((c.aimd.min, c.aimd.max, c.aimd.target), (1, 30, base.aimd.target));
        let newer = Settings {
            min: Some(2),
            ..Settings::default()
        };
        assert_eq!(
            s.merge(&newer),
            Settings {
                min: Some(2),
                max: Some(30),
                ..Settings::default()
            }
        );
    }
}
