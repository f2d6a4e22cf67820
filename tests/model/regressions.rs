//! The bugs the model found, each as the shrunk sequence of ops that showed it, run with
//! every known-bug switch off. A test of a bug not fixed yet is ignored, its reason naming
//! the bug; once fixed, the `ignore` goes and the random runs drop the switch.

use crate::ops::Op;

fn job(key: Option<u8>) -> Op {
    Op::Enqueue {
        priority: 1,
        delayed: false,
        id: None,
        key,
        unique: None,
        max_attempts: 3,
        large: false,
    }
}

fn run(ops: &[Op]) -> Result<(), String> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    crate::run_case(&rt, ops, true)
}

/// A key's job leased before a per-key concurrency of 1 was set still holds the key's
/// one slot: a fetch must not lease a second job of the key.
#[test]
fn key_limit_counts_the_leases_taken_before_it() {
    let ops = [
        job(Some(0)),
        Op::Fetch { n: 1 },
        Op::Limits {
            global: None,
            per_key: Some(1),
        },
        job(Some(0)),
        Op::Fetch { n: 1 },
    ];
    run(&ops).unwrap();
}

fn chosen(id: u8, key: u8) -> Op {
    Op::Enqueue {
        priority: 1,
        delayed: false,
        id: Some(id),
        key: Some(key),
        unique: None,
        max_attempts: 3,
        large: false,
    }
}

/// A job parked twice (run now, then held back again) leaves a stale entry on its key's
/// parked list: once it is retried with a backoff, that entry must not bring it back
/// before the backoff ends.
#[test]
fn a_stale_parked_entry_cuts_a_retry_backoff_short() {
    let ops = [
        Op::Limits {
            global: None,
            per_key: Some(1),
        },
        chosen(0, 0),
        chosen(1, 0),
        Op::Fetch { n: 2 },
        Op::RunNow(1),
        Op::Fetch { n: 1 },
        Op::Ack(0),
        Op::Fetch { n: 1 },
        Op::Retry { pick: 0, now: false },
        Op::Fetch { n: 1 },
    ];
    run(&ops).unwrap();
}

/// Completed jobs kept stay within the queue's count: the sequence the model shrank to
/// when settle did not trim what it keeps (two acks kept under a count of one).
#[test]
fn completed_jobs_kept_stay_within_the_count() {
    let ops = [
        Op::Keep(Some(1)),
        job(None),
        job(None),
        Op::Fetch { n: 2 },
        Op::Ack(0),
        Op::Ack(0),
        Op::Keep(None),
    ];
    run(&ops).unwrap();
}

/// A job deferred four times, twice by reclaims of leases that expired before its run
/// started (the last when its consumer died) and twice by its handler (backpressure):
/// each cause spends its own budget of 3 (`lib.lua`'s `defer`), so it is not dead. (The
/// reference model kept one budget for all causes, and the first long run with batch
/// fetches found the difference.)
#[test]
fn each_cause_of_deferral_spends_its_own_budget() {
    let one = |priority| Op::Enqueue {
        priority,
        delayed: false,
        id: None,
        key: None,
        unique: None,
        max_attempts: 1,
        large: false,
    };
    let ops = [
        one(0),
        one(1),
        one(1),
        Op::Fetch { n: 3 },
        one(0),
        Op::Ack(0),
        Op::Expire(0),
        Op::Fetch { n: 2 },
        Op::Ack(12),
        Op::Defer { pick: 17, now: true },
        Op::Fetch { n: 1 },
        Op::Defer { pick: 203, now: true },
        Op::Fetch { n: 1 },
        Op::Die,
    ];
    run(&ops).unwrap();
}
