//! Retry rules an operator stores for a queue and its kinds (`weir retry set`): a delay
//! schedule (exponential, a fixed list, or the `sidekiq` preset) and optionally the runs a
//! job gets in all. They live in the queue's settings hash, next to the runtime limits:
//!
//! ```text
//! HASH weir:{Q}:settings
//!   retry          "exp:base=1s,factor=2,cap=1h,jitter=0.5,attempts=10"
//!   retry:<kind>   "fixed:10s,1m,10m,attempts=4" | "sidekiq"
//! ```
//!
//! A job's rule is its kind's, else the queue's, else the consumer's own
//! [`RetryPolicy`](super::retry_policy::RetryPolicy) with the envelope's `max_attempts`. The delay
//! is computed when an attempt fails, from the rules in force then: a change binds the
//! jobs already waiting from their next failure on.

mod store;

use crate::error::{Error, Result};
use rand::Rng;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The settings-hash field of the queue's rule.
pub const QUEUE_FIELD: &str = "retry";
/// The prefix of a kind's rule field (`retry:<kind>`).
pub const KIND_PREFIX: &str = "retry:";
/// Most delays in a fixed list.
pub const MAX_FIXED: usize = 100;

/// How long to wait after a failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// `min(cap, base * factor^n)` after failure n+1, less a random `jitter` fraction.
    Exponential {
        /// Delay after the first failure, before jitter.
        base: Duration,
        /// Growth per failure, at least 1.
        factor: f64,
        /// Longest delay.
        cap: Duration,
        /// Fraction drawn at random, 0 to 1.
        jitter: f64,
    },
    /// Delay n after failure n+1; the last one repeats.
    Fixed(Vec<Duration>),
    /// Sidekiq's: `n^4 + 15 + rand(10) * (n + 1)` seconds after failure n+1 (25 retries
    /// span about 20 days).
    Sidekiq,
}

/// A retry rule: its schedule and, when set, the runs a job gets in all (in place of the
/// envelope's `max_attempts`).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryRule {
    /// The delays.
    pub schedule: Schedule,
    /// Runs in all, at least 1 (none: the job's own `max_attempts`).
    pub attempts: Option<u32>,
}

impl RetryRule {
    /// Runs of the `sidekiq` preset: the first run and 25 retries.
    pub const SIDEKIQ_ATTEMPTS: u32 = 26;

    /// The delay after failed attempt number `attempt + 1`.
    pub fn delay(&self, attempt: u32) -> Duration {
        match &self.schedule {
            Schedule::Exponential {
                base,
                factor,
                cap,
                jitter,
            } => {
                let exp = base.as_secs_f64() * factor.powi(attempt.min(1000) as i32);
                let full = exp.min(cap.as_secs_f64());
                let r: f64 = rand::rng().random();
                Duration::from_secs_f64(full * (1.0 - jitter.clamp(0.0, 1.0) * r))
            }
            Schedule::Fixed(list) => list[(attempt as usize).min(list.len() - 1)],
            Schedule::Sidekiq => {
                let n = u64::from(attempt.min(1000));
                let r = rand::rng().random_range(0..10u64);
                Duration::from_secs(n.pow(4) + 15 + r * (n + 1))
            }
        }
    }

    /// The runs a job with `max_attempts` in its envelope gets under this rule.
    pub fn max_attempts(&self, envelope: u32) -> u32 {
        self.attempts.unwrap_or(envelope)
    }
}

fn dur(s: &str) -> Result<Duration> {
    humantime::parse_duration(s.trim()).map_err(|e| bad(format!("{s:?} is not a duration: {e}")))
}

fn bad(msg: String) -> Error {
    Error::config("retry rule", format!("is not valid: {msg}"))
}

impl FromStr for RetryRule {
    type Err = Error;

    /// `sidekiq[:attempts=N]`, `exp[:base=1s,factor=2,cap=1h,jitter=0.5][,attempts=N]`,
    /// `fixed:10s,1m,10m[,attempts=N]` (a fixed list without `attempts` gives one run more
    /// than it has delays).
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        let (name, rest) = s.split_once(':').unwrap_or((s, ""));
        let mut attempts = None;
        let mut parts = Vec::new();
        for p in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match p.strip_prefix("attempts=") {
                Some(n) => {
                    let n: u32 = n
                        .parse()
                        .map_err(|_| bad(format!("attempts {n:?} is not a count")))?;
                    if n == 0 {
                        return Err(bad("attempts must be at least 1".into()));
                    }
                    attempts = Some(n);
                }
                None => parts.push(p),
            }
        }
        let schedule = match name {
            "sidekiq" if parts.is_empty() => Schedule::Sidekiq,
            "exp" => exponential(&parts)?,
            "fixed" => {
                if parts.is_empty() || parts.len() > MAX_FIXED {
                    return Err(bad(format!("a fixed list needs 1 to {MAX_FIXED} delays")));
                }
                Schedule::Fixed(parts.iter().map(|p| dur(p)).collect::<Result<_>>()?)
            }
            _ => {
                return Err(bad(format!(
                    "{s:?}: expected sidekiq, exp:base=1s,factor=2,cap=1h,jitter=0.5 or fixed:10s,1m (each may add ,attempts=N)"
                )));
            }
        };
        let attempts = match (&schedule, attempts) {
            (Schedule::Sidekiq, None) => Some(Self::SIDEKIQ_ATTEMPTS),
            (Schedule::Fixed(l), None) => Some(l.len() as u32 + 1),
            (_, a) => a,
        };
        Ok(Self { schedule, attempts })
    }
}

fn exponential(parts: &[&str]) -> Result<Schedule> {
    let (mut base, mut factor, mut cap, mut jitter) =
        (Duration::from_secs(1), 2.0, Duration::from_secs(3600), 0.5);
    for p in parts {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| bad(format!("{p:?}: expected name=value")))?;
        let num = |v: &str| {
            v.parse::<f64>()
                .map_err(|_| bad(format!("{k} {v:?} is not a number")))
        };
        match k {
            "base" => base = dur(v)?,
            "cap" => cap = dur(v)?,
            "factor" => factor = num(v)?,
            "jitter" => jitter = num(v)?,
            _ => {
                return Err(bad(format!(
                    "unknown exp field {k:?} (base, factor, cap, jitter, attempts)"
                )));
            }
        }
    }
    if !(1.0..=100.0).contains(&factor) {
        return Err(bad(format!("factor {factor} is outside 1..=100")));
    }
    if !(0.0..=1.0).contains(&jitter) {
        return Err(bad(format!("jitter {jitter} is outside 0..=1")));
    }
    if cap < base {
        return Err(bad("cap is below base".into()));
    }
    Ok(Schedule::Exponential {
        base,
        factor,
        cap,
        jitter,
    })
}

impl fmt::Display for RetryRule {
    /// The spec [`RetryRule::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |d: &Duration| humantime::format_duration(*d).to_string().replace(' ', "");
        let mut parts: Vec<String> = match &self.schedule {
            Schedule::Sidekiq => Vec::new(),
            Schedule::Exponential {
                base,
                factor,
                cap,
                jitter,
            } => vec![
                format!("base={}", d(base)),
                format!("factor={factor}"),
                format!("cap={}", d(cap)),
                format!("jitter={jitter}"),
            ],
            Schedule::Fixed(l) => l.iter().map(d).collect(),
        };
        if let Some(n) = self.attempts {
            parts.push(format!("attempts={n}"));
        }
        let name = match self.schedule {
            Schedule::Sidekiq => "sidekiq",
            Schedule::Exponential { .. } => "exp",
            Schedule::Fixed(_) => "fixed",
        };
        write!(f, "{name}:{}", parts.join(","))
    }
}

/// The rules of one queue: its own and its kinds'.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RetryRules {
    /// The queue's rule (field `retry`).
    pub queue: Option<RetryRule>,
    /// Rules by job kind (fields `retry:<kind>`).
    pub kinds: HashMap<String, RetryRule>,
}

impl RetryRules {
    /// Reads the rules from the settings hash; a field that does not parse is an error
    /// naming it.
    pub fn from_hash(h: &HashMap<String, String>) -> Result<Self> {
        let mut out = Self::default();
        for (k, v) in h {
            let parse = || {
                v.parse::<RetryRule>().map_err(|e| {
                    Error::config(
                        format!("runtime setting {k} = {v:?}"),
                        format!("does not parse: {e}"),
                    )
                })
            };
            if k == QUEUE_FIELD {
                out.queue = Some(parse()?);
            } else if let Some(kind) = k.strip_prefix(KIND_PREFIX) {
                out.kinds.insert(kind.to_owned(), parse()?);
            }
        }
        Ok(out)
    }

    /// The rule of a job of `kind` (none: the consumer's own policy).
    pub fn rule(&self, kind: Option<&str>) -> Option<&RetryRule> {
        kind.and_then(|k| self.kinds.get(k)).or(self.queue.as_ref())
    }
}

#[cfg(test)]
mod tests;

/// The rules in force for a running consumer: the settings watch replaces them, the pool
/// reads them when an attempt fails.
#[derive(Debug, Default)]
pub(crate) struct LiveRules {
    rules: std::sync::RwLock<std::sync::Arc<RetryRules>>,
    /// Whether any kind has a rule: only then does a run keep its job's kind.
    by_kind: std::sync::atomic::AtomicBool,
}

impl LiveRules {
    /// Puts `rules` in force.
    pub(crate) fn set(&self, rules: RetryRules) {
        let by_kind = !rules.kinds.is_empty();
        *self.rules.write().unwrap_or_else(|e| e.into_inner()) = std::sync::Arc::new(rules);
        self.by_kind.store(by_kind, std::sync::atomic::Ordering::Relaxed);
    }

    /// The rules in force.
    pub(crate) fn get(&self) -> std::sync::Arc<RetryRules> {
        self.rules.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether any kind has a rule of its own.
    pub(crate) fn by_kind(&self) -> bool {
        self.by_kind.load(std::sync::atomic::Ordering::Relaxed)
    }
}
