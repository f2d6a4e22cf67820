//! Queue settings: limits an operator stores for a queue (`weir limits set`) that bind
//! every consumer of that queue. Running consumers apply the runtime limits within about
//! a second, without a restart; the scripts read the dead-letter cap on every call that
//! buries or trims. They live in the queue's settings hash ([`QueueKeys::settings`]):
//!
//! ```text
//! HASH weir:{Q}:settings
//!   min_concurrency  "4"       max_concurrency "200"
//!   target_p95       "250ms" | "1.5x"
//!   error_threshold  "0.05"
//!   rate             "500/s" | "off"      burst "100"
//!   dead_cap         "10000"
//!   global_rate      "500/s"              global_burst "50"
//!   global_concurrency "10"
//!   key_rate         "5/s"                key_burst "1"
//!   key_concurrency  "2"
//!   key_rate:acme    "50/s"               key_concurrency:acme "10"
//!   key_overrides    "1"     (present while any key has a limit of its own)
//! ```
//!
//! A runtime limit that is absent leaves the consumer's own configuration in force; an
//! absent `dead_cap` is [`DEFAULT_DEAD_CAP`]. The consumers poll these with a plain
//! HGETALL once a second. The global limits bind the whole fleet together, not each
//! consumer: the fetch script reads them on every call (`fetch.lua`'s `global_grant`), so
//! they apply at the next fetch. So do the per-key limits, which bind each job key (the
//! envelope's `key`) on its own.
//!
//! A partitioned queue's partitions each hold their share of its fleet-wide limits
//! (`settings/lanes.rs`): [`Settings::update`] and the clears write them.

mod lanes;

use crate::error::{Error, Result};
use crate::limiter::{LimiterConfig, LimiterOptions, Rate, Target};
use crate::queue::keys::QueueKeys;
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use std::collections::{BTreeMap, HashMap};

/// The dead-letter cap of a queue with no `dead_cap` setting (`scripts/lib.lua` has the
/// same number): the oldest dead-lettered jobs beyond it are trimmed, and counted.
pub const DEFAULT_DEAD_CAP: u64 = 10_000;

/// A stored rate: a cap, or `off` to lift the consumers' own cap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateSetting {
    /// No cap, whatever the consumer was started with.
    Off,
    /// This cap.
    Limit(Rate),
}

impl RateSetting {
    /// This setting with `burst` (a cap gets it; `off` stays off).
    pub fn with_burst(self, burst: u32) -> Self {
        match self {
            RateSetting::Off => RateSetting::Off,
            RateSetting::Limit(r) => RateSetting::Limit(r.with_burst(burst)),
        }
    }
}

impl std::str::FromStr for RateSetting {
    type Err = crate::limiter::LimiterError;

    /// `off`, or a rate as [`Rate`] parses it (`500/s`, `30/m`).
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        if s.trim() == "off" {
            Ok(RateSetting::Off)
        } else {
            s.parse().map(RateSetting::Limit)
        }
    }
}

/// A group of settings `weir limits clear` can remove alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleared {
    /// The dead-letter cap (back to [`DEFAULT_DEAD_CAP`]).
    DeadCap,
    /// The global rate and its burst.
    GlobalRate,
    /// The global concurrency.
    GlobalConcurrency,
    /// Every per-key limit: the defaults and every key's own.
    PerKey,
}

impl Cleared {
    /// The hash fields of the group (for [`Cleared::PerKey`], the defaults: the keys' own
    /// are found in the hash).
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Cleared::DeadCap => &["dead_cap"],
            Cleared::GlobalRate => &["global_rate", "global_burst"],
            Cleared::GlobalConcurrency => &["global_concurrency"],
            Cleared::PerKey => &["key_rate", "key_burst", "key_concurrency", "key_overrides"],
        }
    }
}

/// The runtime settings of a queue; `None` fields are not set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// Lowest concurrency limit (adaptive consumers).
    pub min: Option<usize>,
    /// Highest concurrency limit (adaptive consumers).
    pub max: Option<usize>,
    /// p95 target (adaptive consumers).
    pub target_p95: Option<Target>,
    /// Error-rate threshold (adaptive consumers).
    pub error_threshold: Option<f64>,
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
}

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
    /// Reads the settings of `queue`.
    pub async fn load<C: ConnectionLike + Send + Sync>(conn: &mut C, queue: &str) -> Result<Self> {
        let key = QueueKeys::new(queue)?.settings();
        let h: HashMap<String, String> = conn.hgetall(&key).await?;
        Self::from_hash(&h)
    }

    /// Parses the hash; a field that does not parse is an error naming it.
    pub fn from_hash(h: &HashMap<String, String>) -> Result<Self> {
        fn field<T: std::str::FromStr>(h: &HashMap<String, String>, name: &'static str) -> Result<Option<T>>
        where
            T::Err: std::fmt::Display,
        {
            h.get(name)
                .map(|v| {
                    v.trim()
                        .parse::<T>()
                        .map_err(|e| Error::Config(format!("runtime setting {name} = {v:?}: {e}")))
                })
                .transpose()
        }
        let rate = match h.get("rate").map(|r| r.trim()) {
            None => None,
            Some("off") => Some(RateSetting::Off),
            Some(_) => {
                let r: Rate = field(h, "rate")?.expect("present");
                let burst: Option<u32> = field(h, "burst")?;
                Some(RateSetting::Limit(burst.map_or(r, |b| r.with_burst(b))))
            }
        };
        Ok(Self {
            min: field(h, "min_concurrency")?,
            max: field(h, "max_concurrency")?,
            target_p95: field(h, "target_p95")?,
            error_threshold: field(h, "error_threshold")?,
            rate,
            dead_cap: field(h, "dead_cap")?,
            global_rate: match field::<Rate>(h, "global_rate")? {
                None => None,
                Some(r) => Some(match field::<u32>(h, "global_burst")? {
                    Some(b) => r.with_burst(b),
                    None => r.with_burst(Self::default_global_burst(&r)),
                }),
            },
            global_concurrency: field(h, "global_concurrency")?,
            key_rate: match field::<Rate>(h, "key_rate")? {
                None => None,
                Some(r) => Some(match field::<u32>(h, "key_burst")? {
                    Some(b) => r.with_burst(b),
                    None => r.with_burst(Self::default_global_burst(&r)),
                }),
            },
            key_concurrency: field(h, "key_concurrency")?,
            key_overrides: Self::overrides_from_hash(h)?,
        })
    }

    /// The `key_rate:<key>` and `key_concurrency:<key>` fields.
    fn overrides_from_hash(h: &HashMap<String, String>) -> Result<BTreeMap<String, KeyLimits>> {
        let mut out: BTreeMap<String, KeyLimits> = BTreeMap::new();
        for (name, v) in h {
            let bad =
                |e: &dyn std::fmt::Display| Error::Config(format!("runtime setting {name} = {v:?}: {e}"));
            if let Some(k) = name.strip_prefix("key_rate:") {
                let r: Rate = v.trim().parse().map_err(|e| bad(&e))?;
                let r = r.with_burst(Self::default_global_burst(&r));
                out.entry(k.to_owned()).or_default().rate = Some(r);
            } else if let Some(k) = name.strip_prefix("key_concurrency:") {
                let c: u64 = v.trim().parse().map_err(|e| bad(&e))?;
                out.entry(k.to_owned()).or_default().concurrency = Some(c);
            }
        }
        Ok(out)
    }

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

    /// The hash fields of the settings that are set.
    pub fn to_fields(&self) -> Vec<(String, String)> {
        let mut f: Vec<(String, String)> = self
            .fixed_fields()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        for (key, l) in &self.key_overrides {
            if let Some(r) = l.rate {
                f.push((format!("key_rate:{key}"), r.spec()));
            }
            if let Some(c) = l.concurrency {
                f.push((format!("key_concurrency:{key}"), c.to_string()));
            }
        }
        if !self.key_overrides.is_empty() {
            f.push(("key_overrides".into(), "1".into()));
        }
        f
    }

    /// The fields of the settings that are set, but for the keys' own limits.
    fn fixed_fields(&self) -> Vec<(&'static str, String)> {
        let mut f = Vec::new();
        if let Some(v) = self.min {
            f.push(("min_concurrency", v.to_string()));
        }
        if let Some(v) = self.max {
            f.push(("max_concurrency", v.to_string()));
        }
        if let Some(v) = self.target_p95 {
            f.push(("target_p95", v.to_string()));
        }
        if let Some(v) = self.error_threshold {
            f.push(("error_threshold", v.to_string()));
        }
        match self.rate {
            Some(RateSetting::Off) => f.push(("rate", "off".into())),
            Some(RateSetting::Limit(r)) => {
                f.push(("rate", r.spec()));
                f.push(("burst", r.burst.to_string()));
            }
            None => {}
        }
        if let Some(v) = self.dead_cap {
            f.push(("dead_cap", v.to_string()));
        }
        if let Some(r) = self.global_rate {
            f.push(("global_rate", r.spec()));
            f.push(("global_burst", r.burst.to_string()));
        }
        if let Some(v) = self.global_concurrency {
            f.push(("global_concurrency", v.to_string()));
        }
        if let Some(r) = self.key_rate {
            f.push(("key_rate", r.spec()));
            f.push(("key_burst", r.burst.to_string()));
        }
        if let Some(v) = self.key_concurrency {
            f.push(("key_concurrency", v.to_string()));
        }
        f
    }

    /// Writes the settings that are set, leaving the others as they are.
    pub async fn store<C: ConnectionLike + Send + Sync>(&self, conn: &mut C, queue: &str) -> Result<()> {
        let key = QueueKeys::new(queue)?.settings();
        let fields = self.to_fields();
        if !fields.is_empty() {
            // HSET with several pairs, not HMSET: the minimal ACL (docs/security.md) has
            // `hset` only.
            let _: () = redis::cmd("HSET")
                .arg(&key)
                .arg(&fields)
                .query_async(conn)
                .await?;
        }
        Ok(())
    }

    /// Stores `update`'s set fields for `queue` once the settings they make (the stored
    /// ones with `update` on top) pass [`Settings::validate`]; returns those settings. What
    /// `weir limits set` and the web UI's limits form do: nothing is written when the
    /// result would be refused. A partitioned queue's partitions get their share
    /// ([`Settings::share`]).
    pub async fn update<C: ConnectionLike + Send + Sync>(
        conn: &mut C,
        queue: &str,
        update: &Settings,
    ) -> Result<Settings> {
        let merged = Self::load(conn, queue).await?.merge(update);
        merged.validate()?;
        update.store(conn, queue).await?;
        lanes::spread(conn, queue).await?;
        Ok(merged)
    }

    /// Removes every setting of `queue` (and of its partitions).
    pub async fn clear<C: ConnectionLike + Send + Sync>(conn: &mut C, queue: &str) -> Result<()> {
        let _: () = conn.del(QueueKeys::new(queue)?.settings()).await?;
        lanes::spread(conn, queue).await
    }

    /// Removes some settings of `queue`, leaving the others: each of `which` is a hash
    /// group of fields.
    pub async fn clear_some<C: ConnectionLike + Send + Sync>(
        conn: &mut C,
        queue: &str,
        which: &[Cleared],
    ) -> Result<()> {
        let mut fields: Vec<String> = which
            .iter()
            .flat_map(|c| c.fields().iter().map(|f| f.to_string()))
            .collect();
        if which.contains(&Cleared::PerKey) {
            let stored = Self::load(conn, queue).await?;
            fields.extend(key_fields(stored.key_overrides.keys()));
        }
        if !fields.is_empty() {
            let _: () = conn.hdel(QueueKeys::new(queue)?.settings(), fields).await?;
        }
        lanes::spread(conn, queue).await
    }

    /// Removes the limits of their own of `keys` (they go back to the per-key defaults).
    pub async fn clear_keys<C: ConnectionLike + Send + Sync>(
        conn: &mut C,
        queue: &str,
        keys: &[String],
    ) -> Result<()> {
        let settings = QueueKeys::new(queue)?.settings();
        let fields: Vec<String> = key_fields(keys.iter()).collect();
        if !fields.is_empty() {
            let _: () = conn.hdel(&settings, fields).await?;
        }
        if Self::load(conn, queue).await?.key_overrides.is_empty() {
            let _: () = conn.hdel(&settings, "key_overrides").await?;
        }
        lanes::spread(conn, queue).await
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
            rate: newer.rate.or(self.rate),
            dead_cap: newer.dead_cap.or(self.dead_cap),
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
            return Err(Error::Config("dead-letter cap must be at least 1".into()));
        }
        if let Some(r) = self.global_rate {
            r.validate()?;
        }
        if self.global_concurrency == Some(0) {
            return Err(Error::Config(
                "global concurrency must be at least 1 (clear it to lift the limit)".into(),
            ));
        }
        if let Some(r) = self.key_rate {
            r.validate()?;
        }
        if self.key_concurrency == Some(0) {
            return Err(Error::Config(
                "per-key concurrency must be at least 1 (clear it to lift the limit)".into(),
            ));
        }
        for (key, l) in &self.key_overrides {
            crate::queue::keys::validate_token("job key", key, crate::envelope::MAX_ID_LEN)?;
            if let Some(r) = l.rate {
                r.validate()?;
            }
            if l.concurrency == Some(0) {
                return Err(Error::Config(format!(
                    "key {key}: concurrency must be at least 1 (clear the key's limits to lift them)"
                )));
            }
        }
        Ok(())
    }
}

/// The hash fields of the limits of their own of `keys`.
fn key_fields<'a>(keys: impl Iterator<Item = &'a String>) -> impl Iterator<Item = String> {
    keys.flat_map(|k| [format!("key_rate:{k}"), format!("key_concurrency:{k}")])
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
