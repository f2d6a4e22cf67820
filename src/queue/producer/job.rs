//! A job to enqueue ([`NewJob`]) and its encoding into an envelope, checked once.

use crate::error::{Error, Result};
use crate::queue::envelope::{self, EnvelopeOut, MAX_ID_LEN, Priority};
use crate::queue::keys::validate_token;
use crate::queue::partitions;
use crate::queue::retry_rules::RetryRule;
use crate::queue::scripts::EnqueueArg;
use serde_json::value::RawValue;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A job to enqueue, built with options.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub(super) kind: String,
    pub(super) payload: Box<RawValue>,
    pub(super) id: Option<String>,
    pub(super) priority: Priority,
    pub(super) max_attempts: Option<u32>,
    pub(super) key: Option<String>,
    /// The options bulk loads seldom set, boxed: a bulk load moves every job a few times
    /// on its way to the wire, and a small `NewJob` moves cheaply.
    more: Option<Box<More>>,
}

/// [`NewJob`]'s less common options.
#[derive(Debug, Clone, Default)]
struct More {
    delay: Duration,
    run_at: Option<SystemTime>,
    trace_id: Option<String>,
    unique_for: Duration,
    unique_key: Option<String>,
    retry: Option<RetryRule>,
}

impl NewJob {
    /// A job of `kind` whose payload is `payload` serialized to JSON.
    pub fn new<T: serde::Serialize + ?Sized>(kind: impl Into<String>, payload: &T) -> Result<Self> {
        Ok(Self::from_raw(kind, serde_json::value::to_raw_value(payload)?))
    }

    /// A job whose payload is already JSON text (checked to be valid JSON).
    pub fn from_json(kind: impl Into<String>, payload: &str) -> Result<Self> {
        Ok(Self::from_raw(kind, RawValue::from_string(payload.to_owned())?))
    }

    /// A job with a raw JSON payload.
    pub fn from_raw(kind: impl Into<String>, payload: Box<RawValue>) -> Self {
        Self {
            kind: kind.into(),
            payload,
            id: None,
            priority: Priority::Normal,
            max_attempts: None,
            key: None,
            more: None,
        }
    }

    fn more(&mut self) -> &mut More {
        self.more.get_or_insert_with(Box::default)
    }

    /// A caller-chosen id: enqueueing it again while the job exists is refused.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The priority (default normal).
    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }

    /// Run no sooner than `delay` from now (Redis's clock).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.more().delay = delay;
        self
    }

    /// Run no sooner than `at`.
    pub fn run_at(mut self, at: SystemTime) -> Self {
        self.more().run_at = Some(at);
        self
    }

    /// Runs allowed in all before the job is dead-lettered (default 5, at least 1).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// A trace id that travels with the job.
    pub fn trace_id(mut self, t: impl Into<String>) -> Self {
        self.more().trace_id = Some(t.into());
        self
    }

    /// A uniqueness window: the job is refused (reported as a duplicate) if a job with the
    /// same unique key (its [`unique_key`](Self::unique_key), else its id) was enqueued
    /// within `window`, by any producer in any language, whether that job is still
    /// waiting, running or done. The window starts when the job is due (now, or after its
    /// delay). A dead-lettered job frees its key early. Zero (the default) means none;
    /// whole milliseconds count.
    pub fn unique_for(mut self, window: Duration) -> Self {
        self.more().unique_for = window;
        self
    }

    /// The key [`unique_for`](Self::unique_for) dedupes on, instead of the id (1 to 128
    /// characters from `[A-Za-z0-9_.:-]`: hash longer keys). Without a window it does
    /// nothing.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.more().unique_key = Some(key.into());
        self
    }

    /// The unique key given for a window, if any: on a partitioned queue a job with a
    /// generated id goes to this key's partition, so every job that may hold the key is
    /// checked in one place.
    pub(super) fn routing_unique_key(&self) -> Option<&str> {
        let more = self.more.as_deref()?;
        more.unique_key.as_deref().filter(|_| !more.unique_for.is_zero())
    }

    /// The job's own retry rule (`"fixed:1m,10m".parse()?`, `"sidekiq".parse()?`): the
    /// delays after its failures and, when the rule says, its runs in all. It wins over
    /// the rules an operator sets for its kind and its queue (`weir retry set`); a
    /// `Retry-After` from the handler still wins over its delay. Written in the
    /// envelope's `retry` field; none by default.
    pub fn retry(mut self, rule: RetryRule) -> Self {
        self.more().retry = Some(rule);
        self
    }

    /// The job's key: the tenant, customer or destination host that per-key limits count
    /// it against (1 to 128 characters from `[A-Za-z0-9_.:-]`: hash longer keys). Written
    /// in the envelope's `key` field; none by default.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

impl More {
    const NONE: More = More {
        delay: Duration::ZERO,
        run_at: None,
        trace_id: None,
        unique_for: Duration::ZERO,
        unique_key: None,
        retry: None,
    };
}

/// Checks and encodes `job` under the limits (envelope bytes, default attempts); a
/// generated id names `partition` when given (`<id>.p<i>`).
pub(super) fn encode_job(
    job: NewJob,
    now_ms: u64,
    buf: &mut Vec<u8>,
    limits: Encoding,
    partition: Option<usize>,
) -> Result<EnqueueArg> {
    let more = job.more.as_deref().unwrap_or(&More::NONE);
    let parts = JobParts {
        kind: &job.kind,
        payload: &job.payload,
        priority: job.priority,
        max_attempts: job.max_attempts,
        key: job.key.as_deref(),
    };
    encode(parts, job.id, more, now_ms, buf, limits, partition)
}

/// How a producer encodes its jobs: its limits, and whether it writes compact envelopes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Encoding {
    pub max_envelope_bytes: usize,
    pub default_max_attempts: u32,
    pub compact: bool,
}

/// A job that is ready now, with a generated id and none of [`NewJob`]'s less common
/// options, borrowed from where it was read (a line of text, say): what
/// [`super::Producer::prepare_parts`] encodes without building a [`NewJob`].
#[derive(Debug, Clone, Copy)]
pub struct JobParts<'a> {
    /// The job kind.
    pub kind: &'a str,
    /// Its payload.
    pub payload: &'a RawValue,
    /// Its priority.
    pub priority: Priority,
    /// Its runs in all (default: the producer's).
    pub max_attempts: Option<u32>,
    /// Its key for per-key limits.
    pub key: Option<&'a str>,
}

/// [`encode_job`] of a job given as its parts (a generated id, no less common option).
pub(super) fn encode_parts(
    job: JobParts<'_>,
    now_ms: u64,
    buf: &mut Vec<u8>,
    limits: Encoding,
    partition: Option<usize>,
) -> Result<EnqueueArg> {
    encode(job, None, &More::NONE, now_ms, buf, limits, partition)
}

/// Checks and encodes a job given as its parts, its id (`None`: generated) and its less
/// common options, as [`encode_job`] says.
fn encode(
    job: JobParts<'_>,
    id: Option<String>,
    more: &More,
    now_ms: u64,
    buf: &mut Vec<u8>,
    limits: Encoding,
    partition: Option<usize>,
) -> Result<EnqueueArg> {
    validate_token("job kind", job.kind, MAX_ID_LEN)?;
    let unique = id.is_some();
    // A generated id holds the enqueue time when compact envelopes are written.
    let mut compact = false;
    let id = match id {
        Some(id) => {
            validate_token("job id", &id, MAX_ID_LEN)?;
            id
        }
        None => {
            // A time id and a partition's suffix fit: one allocation, no regrowth.
            let mut id = String::with_capacity(48);
            match limits.compact {
                true => compact = envelope::push_time_id(&mut id, now_ms),
                false => envelope::push_new_id(&mut id),
            }
            if let Some(i) = partition {
                partitions::push_partition(&mut id, i);
            }
            id
        }
    };
    if let Some(t) = &more.trace_id {
        validate_token("trace id", t, MAX_ID_LEN)?;
    }
    let unique_for_ms = more.unique_for.as_millis() as u64;
    let unique_key = match (unique_for_ms, &more.unique_key) {
        (0, _) => None,
        (_, Some(k)) => {
            validate_token("unique key", k, MAX_ID_LEN)?;
            Some(k.as_str())
        }
        (_, None) => Some(id.as_str()),
    };
    if let Some(k) = job.key {
        validate_token("job key", k, MAX_ID_LEN)?;
    }
    let max_attempts = job.max_attempts.unwrap_or(limits.default_max_attempts).max(1);
    let retry = more.retry.as_ref().map(RetryRule::to_string);
    let env = EnvelopeOut {
        attempt: 0,
        max_attempts,
        priority: job.priority as u8,
        enqueued_at: now_ms,
        id: &id,
        kind: job.kind,
        trace_id: more.trace_id.as_deref(),
        unique_key,
        key: job.key,
        retry: retry.as_deref(),
        payload: job.payload,
        compact,
    };
    // Every string above passed `validate_token`.
    env.encode_tokens_into(buf);
    if buf.len() > limits.max_envelope_bytes {
        return Err(Error::TooLarge {
            id,
            size: buf.len(),
            limit: limits.max_envelope_bytes,
        });
    }
    let run_at_ms = more
        .run_at
        .map(|t| {
            t.duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(1)
                .max(1)
        })
        .unwrap_or(0);
    Ok(EnqueueArg {
        id,
        priority: job.priority,
        delay_ms: more.delay.as_millis() as u64,
        run_at_ms,
        // The buffer itself (sized for this envelope), not a copy of it.
        envelope: std::mem::take(buf),
        unique,
        unique_for_ms,
    })
}
