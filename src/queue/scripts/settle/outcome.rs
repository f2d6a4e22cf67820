//! [`Settle`]: one outcome a settle call carries, and the bound of a kept result.

use super::is_inline;
use crate::metrics::DeferReason;
use crate::queue::envelope::Priority;
use crate::queue::retry_policy::DeferralBudget;

/// One outcome for [`settle`](super::settle).
#[derive(Debug, Clone, PartialEq)]
pub enum Settle {
    /// Delete the job: it is done.
    Ack {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
    },
    /// [`Settle::Ack`], with the job's result: kept with the job when the queue keeps
    /// completed jobs (cut to [`RESULT_MAX_BYTES`]), dropped otherwise. (A consumer sends
    /// one only while the queue keeps completed jobs: acks carry no result otherwise.)
    AckResult {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
        /// The result, as text (a handler's return value as JSON, a body snippet).
        result: String,
    },
    /// Back to delayed after `delay_ms` with attempt + 1, or dead once attempts are spent.
    Retry {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
        /// Priority to return at.
        priority: Priority,
        /// Backoff, ms.
        delay_ms: u64,
        /// The error, kept as the job's last error.
        error: String,
    },
    /// Back to delayed after `delay_ms` without charging an attempt (the downstream pushed
    /// back, or this consumer cannot take the job); dead once the job's deferrals are
    /// over `budget`.
    Defer {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
        /// Priority to return at.
        priority: Priority,
        /// How long to wait, ms.
        delay_ms: u64,
        /// Why, kept as the job's last error (and in the dead-letter reason if the
        /// budget is spent).
        reason: String,
        /// How many deferrals, or how long since the first, before the job is dead.
        budget: DeferralBudget,
        /// Why, as a cause: each cause spends its own budget (backpressure does not use
        /// up the grace of a kind this consumer lacks, and the other way round).
        cause: DeferReason,
    },
    /// As [`Settle::Retry`], but dead once `max_attempts` runs are spent, whatever the
    /// envelope's `max_attempts` (a retry rule's count, `weir retry set`).
    RetryWithin {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
        /// Priority to return at.
        priority: Priority,
        /// Backoff, ms.
        delay_ms: u64,
        /// The error, kept as the job's last error.
        error: String,
        /// Runs allowed in all, at least 1.
        max_attempts: u32,
    },
    /// To the dead-letter queue now.
    Dead {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
        /// Why.
        reason: String,
    },
}

impl Settle {
    /// The job id: the lease's name in Redis, which for an inline job (see
    /// [`FetchedJob::name`](super::FetchedJob::name)) is its envelope.
    pub fn id(&self) -> &str {
        match self {
            Settle::Ack { id, .. }
            | Settle::AckResult { id, .. }
            | Settle::Retry { id, .. }
            | Settle::RetryWithin { id, .. }
            | Settle::Defer { id, .. }
            | Settle::Dead { id, .. } => id,
        }
    }

    /// Whether it names an inline job's lease (by its envelope: JSON opens with `{`,
    /// which no job id holds).
    pub fn is_inline(&self) -> bool {
        is_inline(self.id())
    }

    /// The lease token.
    pub fn token(&self) -> u64 {
        match self {
            Settle::Ack { token, .. }
            | Settle::AckResult { token, .. }
            | Settle::Retry { token, .. }
            | Settle::RetryWithin { token, .. }
            | Settle::Defer { token, .. }
            | Settle::Dead { token, .. } => *token,
        }
    }
}

/// The most bytes of a completed job's result kept (`lib.lua`'s RESULT_MAX): a longer one
/// is cut at a character's start.
pub const RESULT_MAX_BYTES: usize = 4096;

/// `text` cut to at most `max` bytes, at a character's start.
pub fn cut_text(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
