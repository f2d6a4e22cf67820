//! The operations the model test draws at random, and their proptest strategy. Each op
//! names its target by a small number (`pick`), taken modulo whatever the op picks from
//! when it runs (the consumer's leases, the ids seen so far), so any sequence is valid and
//! a shrunk one still means something.

use proptest::prelude::*;

/// One step of a case.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Enqueue one job through the producer's script path (`Producer::enqueue`).
    Enqueue {
        /// 0 high, 1 normal, 2 low.
        priority: u8,
        /// Due in an hour instead of now.
        delayed: bool,
        /// A chosen id out of a small pool (`x0`..`x3`), so ids collide and come back.
        id: Option<u8>,
        /// The job key (`k0`..`k2`) per-key limits count it against.
        key: Option<u8>,
        /// A unique key (`u0`..`u2`) with an hour's window.
        unique: Option<u8>,
        /// Attempts allowed (1..=3).
        max_attempts: u8,
        /// An envelope over `INLINE_MAX_BYTES`: stored by id, and read after the fetch
        /// script rather than through it.
        large: bool,
    },
    /// A bulk load of generated ids ready now (`Producer::enqueue_bulk`): inline jobs.
    Bulk {
        /// How many jobs.
        n: u8,
        /// Their job key.
        key: Option<u8>,
        /// Compact envelopes (`Producer::compact_envelopes`): the default attempts (5),
        /// which the compact form implies; else 2 attempts, in the full form.
        compact: bool,
    },
    /// Fetch up to `n` jobs.
    Fetch { n: u8 },
    /// Fetch up to `n` jobs as one batch lease where the queue allows it (docs/batch-leases.md).
    /// Every op on one job of a batch splits the batch first, as a consumer does.
    FetchBatch { n: u8 },
    /// Ack every job of held batch number `pick` with one batch ack; one by one if the
    /// batch was split meanwhile, as a consumer does.
    AckBatch(u8),
    /// The last settle call sent again, as a consumer does when its reply was lost.
    Replay,
    /// Ack a held lease.
    Ack(u8),
    /// Retry a held lease (attempt + 1): due `now`, or in an hour.
    Retry { pick: u8, now: bool },
    /// Dead-letter a held lease.
    Fail(u8),
    /// Defer a held lease (uncharged): due `now`, or in an hour.
    Defer { pick: u8, now: bool },
    /// Mark a held lease's run as started (a suspect's with `start_suspect`).
    Start(u8),
    /// Extend a held lease.
    Extend(u8),
    /// A held lease's deadline passes; the reclaimer runs.
    Expire(u8),
    /// The consumer dies: every lease's deadline passes, the reclaimer runs, and the
    /// consumer forgets its leases.
    Die,
    /// Every delayed job falls due.
    Advance,
    /// `weir job delete` of an id seen so far.
    Delete(u8),
    /// `weir job run-now` of an id seen so far.
    RunNow(u8),
    /// `weir dlq requeue` of every dead job.
    Requeue,
    /// `weir dlq purge`.
    Purge,
    /// `weir limits set/clear`: the global and per-key concurrency (None: cleared).
    Limits { global: Option<u8>, per_key: Option<u8> },
    /// `weir limits set --keep-completed-count N` (None: `clear --keep-completed`), then a
    /// reclaim (housekeeping's, which trims what is kept to the setting).
    Keep(Option<u8>),
    /// `weir pause` / `weir resume`.
    Pause(bool),
    /// `FUNCTION FLUSH` and `SCRIPT FLUSH`, then the library reloaded as a consumer does.
    Flush,
}

fn enqueue() -> impl Strategy<Value = Op> {
    (
        0..3u8,
        prop::bool::weighted(0.2),
        prop::option::weighted(0.3, 0..4u8),
        prop::option::weighted(0.5, 0..3u8),
        prop::option::weighted(0.2, 0..3u8),
        1..=3u8,
        prop::bool::weighted(0.25),
    )
        .prop_map(
            |(priority, delayed, id, key, unique, max_attempts, large)| Op::Enqueue {
                priority,
                delayed,
                id,
                key,
                unique,
                max_attempts,
                large,
            },
        )
}

/// One op, weighted toward the ones that move jobs (enqueue, fetch, settle).
pub(crate) fn op() -> impl Strategy<Value = Op> {
    let pick = any::<u8>;
    prop_oneof![
        8 => enqueue(),
        2 => (1..4u8, prop::option::of(0..3u8), any::<bool>()).prop_map(|(n, key, compact)| Op::Bulk { n, key, compact }),
        5 => (1..5u8).prop_map(|n| Op::Fetch { n }),
        5 => (1..6u8).prop_map(|n| Op::FetchBatch { n }),
        3 => pick().prop_map(Op::AckBatch),
        4 => pick().prop_map(Op::Ack),
        2 => Just(Op::Replay),
        3 => (pick(), any::<bool>()).prop_map(|(pick, now)| Op::Retry { pick, now }),
        2 => pick().prop_map(Op::Fail),
        3 => (pick(), any::<bool>()).prop_map(|(pick, now)| Op::Defer { pick, now }),
        4 => pick().prop_map(Op::Start),
        1 => pick().prop_map(Op::Extend),
        3 => pick().prop_map(Op::Expire),
        1 => Just(Op::Die),
        2 => Just(Op::Advance),
        1 => pick().prop_map(Op::Delete),
        1 => pick().prop_map(Op::RunNow),
        1 => Just(Op::Requeue),
        1 => Just(Op::Purge),
        2 => (prop::option::of(1..4u8), prop::option::of(1..3u8))
            .prop_map(|(global, per_key)| Op::Limits { global, per_key }),
        2 => prop::option::of(1..4u8).prop_map(Op::Keep),
        1 => any::<bool>().prop_map(Op::Pause),
        1 => Just(Op::Flush),
    ]
}

/// A case: up to `max` ops.
pub(crate) fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..=max)
}

/// How an enqueued job is made: due in an hour rather than now; with an envelope over
/// `INLINE_MAX_BYTES`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub delayed: bool,
    pub large: bool,
}
