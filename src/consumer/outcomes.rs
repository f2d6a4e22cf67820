//! What the fetcher and the pool tell the acker: a wave of starts, or finished jobs with
//! their outcomes; and the outcome of a job this consumer cannot take (an unknown kind,
//! from the pool; an envelope over the size limit, from the fetcher).

use crate::metrics::DeferReason;
use crate::queue::retry_policy::DeferralBudget;
use std::time::Duration;

/// What the acker is told.
#[derive(Debug)]
pub(crate) enum AckerMsg {
    /// The pool started these jobs (one message per dispatch wave).
    Started(Vec<u64>),
    /// Jobs of a handler that starts them later ([`crate::Handler::starts_later`])
    /// started: their leases wait in this list, and the message is sent by the start that
    /// found it empty (one message for the starts gathered until the acker takes them).
    StartedLater(StartedLater),
    /// A job is finished.
    Done(Done),
    /// Jobs are finished (the ones of a dispatch wave that finished in place).
    Dones(Vec<Done>),
}

/// A finished job.
#[derive(Debug)]
pub(crate) struct Done {
    pub id: String,
    /// Its lease in the lease table ([`Job::lease`](crate::Job)).
    pub lease: u64,
    pub outcome: Outcome,
}

/// How a job finished.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Ack,
    /// `spent`: this was the job's last attempt, so the settle script dead-letters it
    /// (the same test the script makes); it is counted as dead, not retried.
    /// `max`: the runs a retry rule allows, in place of the envelope's count.
    Retry {
        delay_ms: u64,
        error: String,
        spent: bool,
        max: Option<u32>,
    },
    /// Put back after `delay_ms` without charging an attempt; dead (`reason` in the
    /// dead-letter reason) once the job's deferrals are over `budget`. `cause` labels the
    /// deferral metric.
    Defer {
        delay_ms: u64,
        reason: String,
        budget: DeferralBudget,
        cause: DeferReason,
    },
    Dead {
        reason: String,
    },
}

/// Longest wait between two deferrals of a job no handler here can take.
const CANNOT_TAKE_MAX_DELAY: Duration = Duration::from_secs(10);

/// The outcome of a job this consumer cannot take (`why` says which: an unknown kind, an
/// envelope over the size limit): deferred every tenth of `grace` (at most every 10 s)
/// until `grace` has passed since the first deferral, then dead with `why`.
pub(crate) fn cannot_take(grace: Duration, cause: DeferReason, why: String) -> Outcome {
    Outcome::Defer {
        delay_ms: (grace / 10).min(CANNOT_TAKE_MAX_DELAY).as_millis() as u64,
        reason: why,
        budget: DeferralBudget::for_time(grace),
        cause,
    }
}

/// The leases of jobs started later than their call, waiting for the acker
/// ([`AckerMsg::StartedLater`]).
pub(crate) type StartedLater = std::sync::Arc<std::sync::Mutex<Vec<u64>>>;
