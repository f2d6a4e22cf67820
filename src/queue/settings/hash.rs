//! The settings as the fields of their hash: [`Settings::from_hash`] parses them (a field
//! that does not parse is an error naming it), [`Settings::to_fields`] writes them.

use super::{KeyLimits, RateSetting, Settings};
use crate::error::{Error, Result};
use crate::limiter::Rate;
use std::collections::{BTreeMap, HashMap};

impl Settings {
    /// Parses the hash; a field that does not parse is an error naming it.
    pub fn from_hash(h: &HashMap<String, String>) -> Result<Self> {
        fn field<T: std::str::FromStr>(h: &HashMap<String, String>, name: &'static str) -> Result<Option<T>>
        where
            T::Err: std::fmt::Display,
        {
            h.get(name)
                .map(|v| {
                    v.trim().parse::<T>().map_err(|e| {
                        Error::config(
                            format!("runtime setting {name} = {v:?}"),
                            format!("does not parse: {e}"),
                        )
                    })
                })
                .transpose()
        }
        // A fleet-wide rate and its burst (default: Settings::default_global_burst).
        let rate_with_burst =
            |h: &HashMap<String, String>, rate: &'static str, burst: &'static str| -> Result<Option<Rate>> {
                Ok(match field::<Rate>(h, rate)? {
                    None => None,
                    Some(r) => Some(match field::<u32>(h, burst)? {
                        Some(b) => r.with_burst(b),
                        None => r.with_burst(Self::default_global_burst(&r)),
                    }),
                })
            };
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
            overload_status: field(h, "overload_status")?,
            rate,
            dead_cap: field(h, "dead_cap")?,
            keep_completed: field::<u64>(h, "keep_completed_ms")?.map(std::time::Duration::from_millis),
            keep_completed_count: field(h, "keep_completed_count")?,
            history_runs: field(h, "history_runs")?,
            global_rate: rate_with_burst(h, "global_rate", "global_burst")?,
            global_concurrency: field(h, "global_concurrency")?,
            key_rate: rate_with_burst(h, "key_rate", "key_burst")?,
            key_concurrency: field(h, "key_concurrency")?,
            key_overrides: Self::overrides_from_hash(h)?,
        })
    }

    /// The `key_rate:<key>` and `key_concurrency:<key>` fields.
    fn overrides_from_hash(h: &HashMap<String, String>) -> Result<BTreeMap<String, KeyLimits>> {
        let mut out: BTreeMap<String, KeyLimits> = BTreeMap::new();
        for (name, v) in h {
            let bad = |e: &dyn std::fmt::Display| {
                Error::config(
                    format!("runtime setting {name} = {v:?}"),
                    format!("does not parse: {e}"),
                )
            };
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
        if let Some(v) = &self.overload_status {
            f.push(("overload_status", v.to_string()));
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
        if let Some(v) = self.keep_completed {
            f.push(("keep_completed_ms", v.as_millis().to_string()));
        }
        if let Some(v) = self.keep_completed_count {
            f.push(("keep_completed_count", v.to_string()));
        }
        if let Some(v) = self.history_runs {
            f.push(("history_runs", v.to_string()));
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
}

/// The hash fields of the limits of their own of `keys`.
pub(super) fn key_fields<'a>(keys: impl Iterator<Item = &'a String>) -> impl Iterator<Item = String> {
    keys.flat_map(|k| [format!("key_rate:{k}"), format!("key_concurrency:{k}")])
}
