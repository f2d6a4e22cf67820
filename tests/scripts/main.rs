//! Every Lua script, table style: seed a queue's state, make one call, check the reply and
//! every key of the queue afterwards (see `common::run_case`).

#[path = "../common/mod.rs"]
mod common;

mod admin;
mod atomicity;
mod atomicity_big;
mod atomicity_values;
mod batch;
mod big;
mod call_record;
mod compact;
mod compact_enqueue;
mod defer;
mod defer_causes;
mod dlq;
mod enqueue;
mod fetch;
mod functions;
mod history;
mod inline_find;
mod inline_lease;
mod inspect;
mod inspect_inline;
mod key_park;
mod lease;
mod oom;
mod reclaim;
mod samples;
mod settle;
mod trim;
mod unique;
mod wake;

/// An ack of every job `f` leased, each with the fetch's token.
pub fn acks_of(f: &weir::queue::scripts::Fetched) -> Vec<weir::queue::scripts::Settle> {
    f.jobs
        .iter()
        .map(|j| weir::queue::scripts::Settle::Ack {
            id: j.name.clone(),
            token: f.deadline_ms,
        })
        .collect()
}

/// Index of the high-priority key among the per-priority keys.
pub const H: usize = 0;
/// Index of the normal-priority key.
pub const N: usize = 1;
/// Index of the low-priority key.
pub const L: usize = 2;
