//! No script fails after its first write: Redis keeps a script's writes up to an error, so
//! every script checks its arguments and the types of the keys it writes first. Each test
//! builds a state made to make scripts fail (a queue key of the wrong type, garbage
//! settings, counters and envelopes), calls every script through its wrapper, and checks
//! that a call that errors left every key under the queue's hash tag exactly as it was
//! (compared by `DUMP`), and that a call that succeeded left the planted key alone.
//! `atomicity_values.rs` covers garbage values and scripts' extra keys, `atomicity_big.rs`
//! huge sets, lists and argument lists.

use crate::common::*;
use crate::{H, L, N};
use std::collections::BTreeMap;
use std::time::Duration;
use weir::metrics::DeferReason;
use weir::queue::keys::QueueKeys;
use weir::queue::scripts::{self, EnqueueArg, Settle, StartMarks};
use weir::{Conn, DeferralBudget, Priority};

pub(crate) const VT: u64 = 30_000;

/// Every key under the queue's hash tag: name -> (type, DUMP, whether it expires).
pub(crate) type Dump = BTreeMap<String, (String, Vec<u8>, bool)>;

pub(crate) async fn dump_all(conn: &mut Conn, keys: &QueueKeys) -> Dump {
    let pattern = format!("*{{{}}}*", keys.name());
    let (mut cursor, mut out) = (0u64, Dump::new());
    loop {
        let (next, found): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .unwrap();
        for k in found {
            let (t, d, ttl): (String, Vec<u8>, i64) = redis::pipe()
                .cmd("TYPE")
                .arg(&k)
                .cmd("DUMP")
                .arg(&k)
                .cmd("PTTL")
                .arg(&k)
                .query_async(conn)
                .await
                .unwrap();
            out.insert(k, (t, d, ttl > 0));
        }
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

/// One call of each script, on the state [`rich`] seeds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Call {
    Enqueue,
    Fetch,
    SettleAcks,
    SettleRare,
    Reclaim,
    Extend,
    Release,
    StartSuspect,
    DlqList,
    DlqRequeue,
    DlqPurge,
    Pause,
    Stats,
    JobsPage,
    JobShow,
    JobsDelete,
    JobRunNow,
    DlqBulk,
    WorkerBeat,
    CronSet,
    CronFire,
    KeyShares,
}

pub(crate) const CALLS: [Call; 22] = {
    use Call::*;
    [
        Enqueue,
        Fetch,
        SettleAcks,
        SettleRare,
        Reclaim,
        Extend,
        Release,
        StartSuspect,
        DlqList,
        DlqRequeue,
        DlqPurge,
        Pause,
        Stats,
        JobsPage,
        JobShow,
        JobsDelete,
        JobRunNow,
        DlqBulk,
        WorkerBeat,
        CronSet,
        CronFire,
        KeyShares,
    ]
};

pub(crate) fn new_job(id: &str, priority: Priority) -> EnqueueArg {
    EnqueueArg {
        id: id.into(),
        priority,
        delay_ms: 0,
        run_at_ms: 0,
        envelope: env(id, 0, 3, priority as u8).into_bytes(),
        unique: true,
        unique_for_ms: 0,
    }
}

fn budget() -> DeferralBudget {
    DeferralBudget::for_time(Duration::from_secs(60))
}

/// The inline job of [`rich`], leased by its envelope.
fn inline() -> String {
    env("in1", 0, 3, 1)
}

/// Runs `call` on queue `k`; the reply is dropped (only the state matters here).
pub(crate) async fn run(call: Call, mut c: Conn, k: QueueKeys) -> weir::Result<()> {
    let c = &mut c;
    let k = &k;
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match call {
        Call::Enqueue => {
            let mut later = new_job("new2", Priority::Low);
            later.delay_ms = 5_000;
            scripts::enqueue(c, k, &[new_job("new1", Priority::High), later])
                .await
                .map(drop)
        }
        Call::Fetch => scripts::fetch(c, k, 10, VT).await.map(drop),
        Call::SettleAcks => {
            let acks = [
                Settle::Ack {
                    id: "l1".into(),
                    token: FUTURE,
                },
                Settle::Ack {
                    id: inline(),
                    token: FUTURE,
                },
            ];
            scripts::settle(c, k, &acks).await.map(drop)
        }
        Call::SettleRare => {
            let items = [
                Settle::Retry {
                    id: "l2".into(),
                    token: FUTURE,
                    priority: Priority::Normal,
                    delay_ms: 10,
                    error: "e".into(),
                },
                Settle::Defer {
                    id: "l3".into(),
                    token: FUTURE,
                    priority: Priority::Low,
                    delay_ms: 10,
                    reason: "busy".into(),
                    budget: budget(),
                    cause: DeferReason::Backpressure,
                },
                Settle::Dead {
                    id: "l4".into(),
                    token: FUTURE,
                    reason: "fatal".into(),
                },
            ];
            let started = [("l1".to_string(), FUTURE)];
            let marks = StartMarks {
                tag: "c1",
                started: &started,
                ended: &[],
            };
            scripts::settle_marked(c, k, &items, marks).await.map(drop)
        }
        Call::Reclaim => scripts::reclaim(c, k, 100, budget()).await.map(drop),
        Call::Extend => scripts::extend(c, k, VT, &[("l1", FUTURE), ("l2", FUTURE)])
            .await
            .map(drop),
        Call::Release => scripts::release(c, k, &[("l1", FUTURE, Priority::Normal)])
            .await
            .map(drop),
        Call::StartSuspect => scripts::start_suspect(c, k, "l1", FUTURE, "c1").await.map(drop),
        Call::DlqList => scripts::dlq_list(c, k, 0, 10).await.map(drop),
        Call::DlqRequeue => scripts::dlq_requeue(c, k, 10, &[]).await.map(drop),
        Call::DlqPurge => scripts::dlq_purge(c, k, 10).await.map(drop),
        Call::Pause => scripts::pause(c, k, true).await.map(drop),
        Call::Stats => scripts::stats(c, k).await.map(drop),
        Call::JobsPage => scripts::jobs_page(c, k, "ready", [0, 0, 0], 10, 10, "", "")
            .await
            .map(drop),
        Call::JobShow => scripts::job_show(c, k, "d1").await.map(drop),
        Call::JobsDelete => scripts::jobs_delete(c, k, false, &ids(&["r1", "d1", "l2", "in2"]))
            .await
            .map(drop),
        Call::JobRunNow => scripts::job_run_now(c, k, "d1").await.map(drop),
        Call::DlqBulk => scripts::dlq_bulk(c, k, false, 0, 10, 0, "").await.map(drop),
        Call::WorkerBeat => {
            let fields = [("host", "h".to_string())];
            scripts::worker_beat(c, k, "w1", 60_000, &fields).await.map(drop)
        }
        Call::CronSet => scripts::cron_set(c, k, "nightly", "0 0 * * *").await.map(drop),
        Call::CronFire => {
            let job = new_job("cron1", Priority::Normal);
            scripts::cron_fire(c, k, "nightly", "0 0 * * *", 1_000, &job)
                .await
                .map(drop)
        }
        Call::KeyShares => scripts::key_shares(c, k, "c1", 60_000, &[("tenant".into(), 2)])
            .await
            .map(drop),
    }
}

/// A queue in which every script has work: ready jobs (one inline), due delayed jobs,
/// held and expired leases with marks and tokens, dead-lettered jobs past a cap of 1, a
/// suspect, deferral records and counters.
pub(crate) fn rich() -> State {
    State::default()
        .ready(H, &["r1"])
        .ready(N, &["r2", &env("in2", 0, 3, 1)])
        .ready(L, &["r3"])
        .delayed(N, &[("y1", 1_000)])
        .delayed(L, &[("y2", 2_000)])
        .lease(&[
            ("l1", FUTURE),
            ("l2", FUTURE),
            ("l3", FUTURE),
            ("l4", FUTURE),
            (&inline(), FUTURE),
            ("x1", PAST),
            ("x2", PAST),
        ])
        .started("x2", "c9")
        .lease_token("l2", FUTURE)
        .dead(&[("d1", 10), ("d2", 20)])
        .error("d1", "boom")
        .suspects(&["s1"])
        .deferral("l3", 1, 1_000)
        .setting("dead_cap", "1")
        .counter("acked", 5)
        .jobs_named(&[
            "r1", "r2", "r3", "y1", "y2", "l1", "l2", "l3", "l4", "x1", "x2", "d1", "d2", "s1",
        ])
}

trait Named {
    fn jobs_named(self, ids: &[&str]) -> Self;
}

impl Named for State {
    fn jobs_named(mut self, ids: &[&str]) -> Self {
        for id in ids {
            self = self.job(id, 0, 3, 1);
        }
        self
    }
}

/// Seeds `state` in a fresh queue, lets `plant` spoil it, calls `call`, and checks that an
/// error left every key as it was and a success left `kept` (the spoiled keys) alone.
/// Returns whether the call succeeded.
pub(crate) async fn check_call(
    ctx: &Ctx,
    what: &str,
    state: &State,
    call: Call,
    plant: &[(&str, &[&str])],
) -> bool {
    let (_, keys) = ctx.other_queue("atom");
    let mut c = ctx.c();
    seed(&mut c, &keys, state).await;
    for (key, args) in plant {
        let key = key.replace("{Q}", &format!("{{{}}}", keys.name()));
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut c).await.unwrap();
        let _: redis::Value = redis::cmd(args[0])
            .arg(&key)
            .arg(&args[1..])
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let before = dump_all(&mut c, &keys).await;
    let r = run(call, ctx.c(), keys.clone()).await;
    let after = dump_all(&mut c, &keys).await;
    match r {
        Err(e) => {
            assert!(
                before == after,
                "{what}, {call:?}: failed ({e}) and changed the state"
            );
            false
        }
        Ok(()) => {
            for (key, _) in plant {
                let key = key.replace("{Q}", &format!("{{{}}}", keys.name()));
                assert_eq!(
                    before.get(&key),
                    after.get(&key),
                    "{what}, {call:?}: touched {key}"
                );
            }
            true
        }
    }
}

/// The queue's own keys (keys.rs), each with a value of a type weir never keeps there.
fn wrong_types(keys: &QueueKeys) -> Vec<(String, &'static [&'static str])> {
    let all = keys.all();
    let mut out = Vec::new();
    for (i, key) in all.iter().enumerate() {
        // KEYS[13] is a channel and KEYS[19] a prefix, not keys; KEYS[11] (paused) is
        // read for existence only.
        if [10, 12, 18].contains(&i) {
            continue;
        }
        let templated = key.replace(&format!("{{{}}}", keys.name()), "{Q}");
        // (each is a list, a set or a hash: a string is wrong for every one)
        out.push((templated, &["SET", "garbage"][..]));
    }
    out
}

#[tokio::test]
async fn a_queue_key_of_the_wrong_type_fails_a_call_before_any_write() {
    let ctx = Ctx::new("atom-types").await;
    let state = rich();
    let mut refused = 0;
    for (key, plant) in wrong_types(&ctx.keys) {
        for call in CALLS {
            let ok = check_call(
                &ctx,
                &format!("{key} as {}", plant[0]),
                &state,
                call,
                &[(&key, plant)],
            )
            .await;
            refused += usize::from(!ok);
        }
    }
    assert!(refused > 50, "most calls meet the planted key: {refused}");
}

#[tokio::test]
async fn every_call_succeeds_on_the_rich_state() {
    let ctx = Ctx::new("atom-rich").await;
    for call in CALLS {
        assert!(
            check_call(&ctx, "rich", &rich(), call, &[]).await,
            "{call:?} succeeds"
        );
    }
}
