//! Periodic jobs: the two scripts call by call (claim and enqueue in one call, a tick
//! never twice, a changed or removed schedule not fired), `weir cron add|list|remove`,
//! and real `weir work` consumers firing a schedule of `--every 1s`: three at once, one of
//! them restarted, give exactly one job per tick; a stretch with no consumer gives one
//! job on recovery, not one per missed tick.

mod common;
mod faults;

use common::{Ctx, wait_until};
use faults::{Proc, printed_ids, run_weir};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;
use weir::NewJob;
use weir::queue::cron::{Added, Schedule, Schedules, When};
use weir::queue::scripts::{cron_fire, cron_set};

const T: Duration = Duration::from_secs(60);

fn every_second(name: &str) -> Schedule {
    Schedule::new(name, When::Every(Duration::from_secs(1)), "tick", r#"{"n":1}"#).unwrap()
}

async fn fired(ctx: &Ctx, name: &str) -> Option<u64> {
    let v: Option<String> = ctx.cmd(&["HGET", &ctx.keys.cron_fired(), name]).await;
    v.map(|s| s.parse().unwrap())
}

#[tokio::test]
async fn fire_claims_each_tick_once_and_enqueues_in_the_same_call() {
    let ctx = Ctx::new("cron-fire").await;
    let (keys, mut c) = (&ctx.keys, ctx.c());
    let s = every_second("t");
    let json = serde_json::to_string(
        &serde_json::json!({"every_ms": 1000, "kind": "tick", "payload": {"n": 1}, "priority": 1}),
    )
    .unwrap();
    let t0 = ctx.now_ms().await;
    assert_eq!(cron_set(&mut c, keys, "t", &json).await.unwrap(), 2, "new");
    let added = fired(&ctx, "t").await.unwrap();
    assert!(added >= t0, "ticks up to the add count as fired");
    assert_eq!(cron_set(&mut c, keys, "t", &json).await.unwrap(), 0, "unchanged");
    assert_eq!(fired(&ctx, "t").await, Some(added), "unchanged keeps the state");

    let tick = added + 5_000;
    let job = |tick: u64| {
        weir::Producer::prepare_offline(
            NewJob::new("tick", &1).unwrap().id(format!("cron:t:{tick}")),
            0,
            &mut Vec::new(),
        )
        .unwrap()
    };
    let fire = |tick: u64, spec: String| {
        let mut c = ctx.c();
        async move {
            cron_fire(&mut c, keys, "t", &spec, tick, &job(tick))
                .await
                .unwrap()
        }
    };
    assert_eq!(fire(added, json.clone()).await, 0, "a tick at or before the add");
    assert_eq!(fire(tick, json.clone()).await, 1, "fired");
    assert_eq!(fire(tick, json.clone()).await, 0, "the same tick again");
    assert_eq!(fire(tick - 1000, json.clone()).await, 0, "an older tick");
    assert_eq!(fired(&ctx, "t").await, Some(tick));
    assert_eq!(fire(tick + 1000, "{}".into()).await, -1, "a spec that changed");
    let st = ctx.snapshot().await;
    assert_eq!(st.ready[1], vec![format!("cron:t:{tick}")]);
    assert_eq!(st.counters.get("enqueued"), Some(&1));

    // Removed: not fired; added again: a tick whose job is still queued is not doubled.
    assert_eq!(cron_set(&mut c, keys, "t", "").await.unwrap(), 1);
    assert_eq!(cron_set(&mut c, keys, "t", "").await.unwrap(), 0);
    assert_eq!(fired(&ctx, "t").await, None);
    assert_eq!(fire(tick + 1000, json.clone()).await, -1, "removed");
    assert_eq!(cron_set(&mut c, keys, "t", &json).await.unwrap(), 2);
    let _: () = ctx.cmd(&["HSET", &keys.cron_fired(), "t", "0"]).await;
    assert_eq!(fire(tick, json.clone()).await, 1);
    assert_eq!(ctx.snapshot().await.ready[1].len(), 1, "one job per tick id");

    // The library's form is what the consumers read.
    let schedules = Schedules::new(ctx.c(), &ctx.queue).unwrap();
    assert_eq!(
        schedules.add(&s).await.unwrap(),
        Added::Unchanged,
        "the same JSON"
    );
    let high = s.clone().priority(weir::Priority::High);
    assert_eq!(schedules.add(&high).await.unwrap(), Added::Changed);
    let listed = schedules.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0.when(), When::Every(Duration::from_secs(1)));
}

#[tokio::test]
async fn the_cron_command_adds_lists_and_removes() {
    let ctx = Ctx::new("cron-cli").await;
    let weir = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--redis-url", &ctx.url, "-q", &ctx.queue]);
        run_weir(&all, None, T)
    };
    let add = [
        "cron",
        "add",
        "--name",
        "nightly",
        "--cron",
        "0 3 * * *",
        "--tz",
        "Europe/Berlin",
    ];
    let first = [
        &add[..],
        &["--kind", "report", "--payload", r#"{"a":1}"#, "--create"],
    ]
    .concat();
    let (code, out, err) = weir(&first);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("schedule nightly added"), "{out}");
    let (code, out, _) = weir(&[&add[..], &["--kind", "report", "--payload", r#"{"a":1}"#]].concat());
    assert_eq!((code, out.contains("unchanged")), (0, true), "{out}");
    let (code, out, err) = weir(&["cron", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["when"]["cron"], "0 3 * * *");
    assert_eq!(v["when"]["tz"], "Europe/Berlin");
    assert_eq!(v["payload"]["a"], 1);
    assert!(v["next_ms"].as_u64().unwrap() > v["last_fired_ms"].as_u64().unwrap());

    for (args, want) in [
        (vec!["--cron", "61 * * * *"], "invalid cron pattern"),
        (
            vec!["--cron", "0 3 * * *", "--tz", "Mars/Olympus"],
            "unknown time zone",
        ),
        (vec!["--every", "500ms"], "at least 1s"),
        (
            vec!["--every", "1h", "--payload", "{nope"],
            "--payload is not valid JSON",
        ),
        (vec![], "--every"),
    ] {
        let base = ["cron", "add", "--name", "x", "--kind", "k"];
        let (code, _, err) = weir(&[&base[..], &args].concat());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let (code, out, _) = weir(&["cron", "remove", "--name", "nightly"]);
    assert_eq!((code, out.contains("removed")), (0, true), "{out}");
    let (code, out, _) = weir(&["cron", "list"]);
    assert_eq!((code, out.as_str()), (0, ""));
}

/// A `weir work --handler print` consumer of the test's queue, printing to `out`.
fn consumer(ctx: &Ctx, out: &Path, err: &Path) -> Proc {
    let args = [
        "work",
        "--redis-url",
        &ctx.url,
        "-q",
        &ctx.queue,
        "--handler",
        "print",
        "--no-metrics",
    ];
    Proc::weir(&args, out, err)
}

fn stop(p: &mut Proc) {
    p.sigterm();
    let status = p.wait_timeout(T).expect("the consumer stops");
    assert!(status.success(), "{status:?}");
}

/// The ticks of schedule `name` in the jobs the consumers printed and those still ready
/// (fired during a consumer's shutdown, after it stopped fetching), sorted; panics on a
/// job printed twice.
async fn ticks(ctx: &Ctx, files: &[&Path], name: &str) -> Vec<u64> {
    let mut all: HashMap<String, usize> = HashMap::new();
    for f in files {
        for (id, n) in printed_ids(f) {
            *all.entry(id).or_insert(0) += n;
        }
    }
    for id in ctx.snapshot().await.ready[1].clone() {
        *all.entry(id).or_insert(0) += 1;
    }
    let twice: Vec<_> = all.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "jobs run twice: {twice:?}");
    let prefix = format!("cron:{name}:");
    let mut t: Vec<u64> = all
        .keys()
        .filter_map(|id| id.strip_prefix(&prefix)?.parse().ok())
        .collect();
    t.sort();
    t
}

/// Waits until the consumer printing to `out` has printed more than `n` jobs.
async fn printed_more_than(out: &Path, n: usize) {
    wait_until("a job printed", T, || async move { printed_ids(out).len() > n }).await;
}

#[tokio::test]
async fn three_consumers_and_a_restart_fire_each_tick_exactly_once() {
    let ctx = Ctx::new("cron-three").await;
    Schedules::new(ctx.c(), &ctx.queue)
        .unwrap()
        .add(&every_second("beat"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let f = |n: &str| dir.path().join(n);
    let mut procs: Vec<Proc> = (0..3)
        .map(|i| consumer(&ctx, &f(&format!("out{i}")), &f("err")))
        .collect();
    tokio::time::sleep(Duration::from_secs(6)).await;
    stop(&mut procs[0]);
    procs[0] = consumer(&ctx, &f("out0"), &f("err"));
    tokio::time::sleep(Duration::from_secs(6)).await;
    for p in &mut procs {
        stop(p);
    }
    let outs: Vec<_> = (0..3).map(|i| f(&format!("out{i}"))).collect();
    let t = ticks(
        &ctx,
        &outs.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
        "beat",
    )
    .await;
    let log = std::fs::read_to_string(f("err")).unwrap();
    assert!(t.len() >= 9, "{} ticks in 12 s: {t:?}\n{log}", t.len());
    let steps: Vec<u64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        steps.iter().all(|d| *d == 1000),
        "every tick once, none missed: {steps:?}"
    );
    let s = ctx.stats().await;
    assert_eq!(
        s.counters.get("enqueued").copied(),
        Some(t.len() as u64),
        "one job per tick"
    );
    assert_eq!(fired(&ctx, "beat").await, t.last().copied());
    let by_consumer: Vec<usize> = outs.iter().map(|o| printed_ids(o).len()).collect();
    eprintln!("jobs run per consumer: {by_consumer:?}");
}

#[tokio::test]
async fn a_stretch_without_consumers_fires_once_on_recovery() {
    let ctx = Ctx::new("cron-missed").await;
    Schedules::new(ctx.c(), &ctx.queue)
        .unwrap()
        .add(&every_second("gap"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut p = consumer(&ctx, &out, &err);
    printed_more_than(&out, 0).await;
    stop(&mut p);
    let before = ticks(&ctx, &[&out], "gap").await;
    // About four ticks pass with no consumer.
    tokio::time::sleep(Duration::from_millis(4200)).await;
    let restart = ctx.now_ms().await;
    let mut p = consumer(&ctx, &out, &err);
    printed_more_than(&out, before.len()).await;
    stop(&mut p);
    let all = ticks(&ctx, &[&out], "gap").await;
    let after: Vec<u64> = all
        .iter()
        .copied()
        .filter(|t| *t > *before.last().unwrap())
        .collect();
    // The first job after the gap is for the latest tick at the restart (or the one
    // after, if the restart crossed a second): none for the ticks missed before it.
    let latest_at_restart = restart - restart % 1000;
    assert!(
        after[0] == latest_at_restart || after[0] == latest_at_restart + 1000,
        "missed ticks fired on recovery: before {before:?}, after {after:?}, restart at {restart}"
    );
    assert!(after[0] - before.last().unwrap() >= 4000, "{before:?} {after:?}");
    let s = ctx.stats().await;
    assert_eq!(s.counters.get("enqueued").copied(), Some(all.len() as u64));
}
