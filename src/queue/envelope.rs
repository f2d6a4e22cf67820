//! The job envelope: what a job looks like in Redis, and its decoded form, [`Job`].
//!
//! Encoded with serde; the field order is part of the format: every envelope opens with
//! `{"attempt":N,"max_attempts":M,"priority":P,"enqueued_at":T,` so scripts can read and
//! bump the attempt count with a pattern (`scripts/lib.lua`) instead of re-encoding JSON.
//!
//! A *compact* envelope leaves those four fields out and opens with `{"id":`: attempt 0,
//! [`DEFAULT_MAX_ATTEMPTS`] attempts, normal
//! priority, and the enqueue time its id holds (a time id, [`time_of_id`]). It is 61 bytes
//! shorter than the full form with a plain id: about a fifth less of Redis's CPU to store a
//! small job. A producer writes it only where it says exactly what the full form would, for
//! a fresh job with a generated id, and only when told to
//! ([`Producer::compact_envelopes`](crate::Producer::compact_envelopes)): consumers older
//! than this form refuse it. Every reader here and in the scripts reads both forms; a retry
//! writes the full form back (`with_attempt` in `scripts/lib.lua`). docs/protocol.md has
//! the format.
//!
//! Decoding: the header read by hand where it is exactly as weir writes it (`header.rs`),
//! by serde_json otherwise, with the same result; the payload kept as raw JSON, checked
//! by serde_json but not parsed into values (the consumer only needs the header). The
//! handler's typed decode, [`Job::payload`], parses the payload once; with the `simd` feature it uses simd-json
//! where simd-json wins in `benches/envelope.rs` (large number-heavy payloads, see
//! [`SIMD_PAYLOAD_MIN_BYTES`]) and serde_json elsewhere; both give the same values and
//! errors.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

mod decode;
mod header;
mod id;
mod payload;
mod result;
mod start;
mod write;
pub(crate) use decode::decode_inline;
pub use decode::{DecodeError, decode};
pub use id::{new_id, time_of_id};
pub(crate) use id::{push_new_id, push_time_id};
#[cfg(feature = "simd")]
pub use payload::payload_simd_json;
pub use payload::{
    SIMD_MIN_DIGIT_PCT, SIMD_PAYLOAD_MIN_BYTES, SIMD_SNIFF_BYTES, payload_serde_json, prefers_simd,
};
pub(crate) use result::ResultSlot;
pub(crate) use start::MarkStart;
pub use start::Start;
pub(crate) use write::head;

/// Default envelope size limit: 1 MiB.
pub const DEFAULT_MAX_ENVELOPE_BYTES: usize = 1 << 20;
/// Attempts a job gets unless told otherwise, and those a compact envelope implies.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Longest job id or kind.
pub const MAX_ID_LEN: usize = 128;
/// Deepest nesting of arrays and objects accepted in a payload: serde_json's own recursion
/// limit, so every payload weir hands to a handler can be parsed with [`Job::payload`].
pub const MAX_PAYLOAD_DEPTH: usize = 128;

/// Job priority: high jobs are fetched before normal, normal before low.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[repr(u8)]
pub enum Priority {
    /// Fetched first.
    High = 0,
    /// The default.
    #[default]
    Normal = 1,
    /// Fetched when nothing else is ready.
    Low = 2,
}

impl Priority {
    /// From the numeric form stored in envelopes (0, 1, 2; anything higher is low).
    pub fn from_u8(v: u8) -> Self {
        match v {
            0 => Priority::High,
            1 => Priority::Normal,
            _ => Priority::Low,
        }
    }
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "high" | "0" => Ok(Priority::High),
            "normal" | "1" => Ok(Priority::Normal),
            "low" | "2" => Ok(Priority::Low),
            _ => Err(format!("unknown priority {s:?}: use high, normal or low")),
        }
    }
}

/// The envelope as written; borrowed so encoding copies nothing twice.
#[derive(Serialize, Clone, Copy)]
pub(crate) struct EnvelopeOut<'a> {
    pub attempt: u32,
    pub max_attempts: u32,
    pub priority: u8,
    pub enqueued_at: u64,
    pub id: &'a str,
    pub kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<&'a str>,
    /// Set when the job has a uniqueness window: the key it holds (`scripts/lib.lua`
    /// reads it to free the key when the job is dead-lettered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<&'a str>,
    /// The job's key for per-key limits (a tenant, a customer, a destination host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<&'a str>,
    /// The job's own retry rule, as `RetryRule`'s spec (`fixed:1m,10m,attempts=3`): it
    /// wins over its kind's and its queue's rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<&'a str>,
    pub payload: &'a RawValue,
    /// Written compact where that says the same ([`EnvelopeOut::is_compact`]): set only
    /// for an id made by [`push_time_id`] of `enqueued_at`, whose time it holds.
    #[serde(skip)]
    pub compact: bool,
}

impl EnvelopeOut<'_> {
    /// Whether this envelope is written in the compact form: allowed (its id holds its
    /// enqueue time), and the form's implied values are this envelope's own (a fresh job,
    /// the default attempts, normal priority).
    pub(crate) fn is_compact(&self) -> bool {
        debug_assert!(!self.compact || time_of_id(self.id) == Some(self.enqueued_at));
        self.compact
            && self.attempt == 0
            && self.max_attempts == DEFAULT_MAX_ATTEMPTS
            && self.priority == Priority::Normal as u8
    }

    /// Encodes into `buf` (cleared first) the bytes serde_json would write, by hand
    /// (`write.rs`; preparing a job takes 40% fewer instructions), for an envelope whose
    /// strings are all tokens that `validate_token` accepted (a prepared job's): they need
    /// no escape, so nothing is checked again.
    pub(crate) fn encode_tokens_into(&self, buf: &mut Vec<u8>) {
        buf.clear();
        write::tokens(self, buf);
    }
}

/// A job as a handler sees it.
#[derive(Debug, Clone, Deserialize)]
pub struct Job {
    /// Failed attempts so far (0 on the first run).
    #[serde(default)]
    pub attempt: u32,
    /// Runs allowed in all; the job is dead-lettered when they are spent.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Priority, numeric (0 high, 1 normal, 2 low).
    #[serde(rename = "priority", default = "normal")]
    priority_raw: u8,
    /// When the producer enqueued it, ms since the Unix epoch (producer's clock); 0 when
    /// unknown (a compact envelope whose id holds no time).
    #[serde(rename = "enqueued_at", default)]
    pub enqueued_at_ms: u64,
    /// The job's id, unique in its queue while the job exists.
    pub id: String,
    /// The job kind, which picks the handler.
    pub kind: String,
    /// Optional trace id carried from the producer.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// The unique key the job holds, when it was enqueued with a uniqueness window
    /// ([`NewJob::unique_for`](crate::NewJob::unique_for)).
    #[serde(default)]
    pub unique_key: Option<String>,
    /// The job's key, when the producer gave one ([`NewJob::key`](crate::NewJob::key)):
    /// the tenant, customer or destination that per-key limits count it against.
    #[serde(default)]
    pub key: Option<String>,
    /// The job's own retry rule, when the producer gave one
    /// ([`NewJob::retry`](crate::NewJob::retry)), as a spec that
    /// [`RetryRule`](crate::queue::retry_rules::RetryRule) parses: it wins over the kind's
    /// and the queue's rules.
    #[serde(default)]
    pub retry: Option<String>,
    /// The payload, as raw JSON text.
    pub payload: Box<RawValue>,
    /// The job was running when a consumer died (not part of the envelope: the fetch says
    /// so). It runs alone, see [`Job::is_suspect`].
    #[serde(skip)]
    pub(crate) suspect: bool,
    /// The lease this run holds in its consumer's lease table (its fetch sequence
    /// number, `consumer/leases.rs`), set by the fetcher; not part of the envelope.
    #[serde(skip)]
    pub(crate) lease: u64,
    /// Where the handler leaves the job's result ([`Job::set_result`]): there only while
    /// the queue keeps completed jobs (the fetch says so), so that otherwise a result
    /// costs nothing.
    #[serde(skip)]
    pub(crate) result: Option<ResultSlot>,
    /// The run's start, for a handler that starts jobs later
    /// ([`Handler::starts_later`](crate::Handler::starts_later)); set by the pool.
    #[serde(skip)]
    pub(crate) start: Option<Start>,
}

impl Job {
    /// Whether this run is a suspect's: the job was running when a consumer died, so it
    /// may be what killed it. The consumer runs suspects one at a time, its start written
    /// to Redis first, so that a crash during this run is charged to this job alone (and
    /// a job that kills every consumer ends dead-lettered without taking other jobs'
    /// attempts with it).
    pub fn is_suspect(&self) -> bool {
        self.suspect
    }

    /// This run's [`Start`], for a handler that starts jobs later
    /// ([`Handler::starts_later`](crate::Handler::starts_later)): fire it when the run
    /// really starts. None for other handlers, for a suspect (which starts at once), and
    /// once taken.
    pub fn take_start(&mut self) -> Option<Start> {
        self.start.take()
    }

    /// The payload deserialized into `T`: by serde_json, or with the `simd` feature by
    /// simd-json for large number-heavy payloads, where it is faster (see
    /// [`SIMD_PAYLOAD_MIN_BYTES`]). The same value either way; an error is always
    /// serde_json's.
    pub fn payload<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        let json = self.payload.get();
        #[cfg(feature = "simd")]
        if prefers_simd(json) {
            return payload_simd_json(json);
        }
        payload_serde_json(json)
    }

    /// The payload as JSON text.
    pub fn payload_json(&self) -> &str {
        self.payload.get()
    }

    /// The job's priority.
    pub fn priority(&self) -> Priority {
        Priority::from_u8(self.priority_raw)
    }
}

/// The attempts of a compact envelope, which does not say.
pub(crate) fn default_max_attempts() -> u32 {
    DEFAULT_MAX_ATTEMPTS
}

/// The priority of a compact envelope, which does not say.
pub(crate) fn normal() -> u8 {
    Priority::Normal as u8
}

/// Milliseconds since the Unix epoch, by this machine's clock (used only for
/// `enqueued_at`, which is informational).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
