//! Fleet-wide limits (`weir limits set --global-rate/--global-concurrency`): the fetch
//! script call by call (what it grants, what it says when it grants nothing, permits back
//! at the settle), then real `weir work` processes sharing one queue: three consumers with
//! a global rate start that many jobs per second together, a global concurrency is never
//! exceeded across processes, and a killed consumer's permits come back within a lease.

mod common;
mod faults;
#[path = "http/server.rs"]
#[allow(dead_code)] // the HTTP handler's tests use the rest
mod server;

use common::{Ctx, try_wait_until, wait_until};
use faults::{Proc, run_weir};
use server::Server;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use weir::NewJob;
use weir::limiter::Rate;
use weir::queue::scripts::{Settle, fetch, settle};
use weir::queue::settings::Settings;

const T: Duration = Duration::from_secs(60);

async fn enqueue(ctx: &Ctx, n: usize, mode: &str) {
    let jobs = (0..n).map(|i| {
        NewJob::new("hook", &serde_json::json!({ "do": mode, "n": i }))
            .unwrap()
            .id(format!("j-{i}"))
    });
    let r = ctx.producer().enqueue_bulk(jobs).await.unwrap();
    assert_eq!(r.enqueued as usize, n);
}

async fn set(ctx: &Ctx, s: Settings) {
    Settings::update(&mut ctx.c(), &ctx.queue, &s).await.unwrap();
}

fn rate(spec: &str, burst: u32) -> Option<Rate> {
    Some(spec.parse::<Rate>().unwrap().with_burst(burst))
}

#[tokio::test]
async fn global_concurrency_grants_what_the_leases_leave_and_the_settle_gives_back() {
    let ctx = Ctx::new("gl-conc").await;
    enqueue(&ctx, 20, "ok").await;
    set(
        &ctx,
        Settings {
            global_concurrency: Some(3),
            ..Settings::default()
        },
    )
    .await;
    let mut c = ctx.c();
    let first = fetch(&mut c, &ctx.keys, 2, 30_000).await.unwrap();
    assert_eq!(first.jobs.len(), 2);
    assert!(first.global.concurrency && !first.global.rate && !first.global.cut());
    let second = fetch(&mut c, &ctx.keys, 10, 30_000).await.unwrap();
    assert_eq!(second.jobs.len(), 1, "3 permits, 2 held");
    assert!(second.global.cut_by_concurrency);
    let none = fetch(&mut c, &ctx.keys, 10, 30_000).await.unwrap();
    assert!(none.jobs.is_empty() && none.global.cut_by_concurrency && !none.paused);
    assert_eq!(
        ctx.stats().await.ready_total(),
        17,
        "nothing popped when none is granted"
    );

    // Settling two gives two permits back.
    let acks: Vec<Settle> = first
        .jobs
        .iter()
        .map(|j| Settle::Ack {
            id: j.name.clone(),
            token: first.deadline_ms,
        })
        .collect();
    settle(&mut c, &ctx.keys, &acks).await.unwrap();
    let again = fetch(&mut c, &ctx.keys, 10, 30_000).await.unwrap();
    assert_eq!(again.jobs.len(), 2);

    // Lifted: the next fetch takes what it asks for.
    run_limits(&ctx, &["clear", "--global-concurrency"]);
    let free = fetch(&mut c, &ctx.keys, 10, 30_000).await.unwrap();
    assert_eq!(free.jobs.len(), 10);
    assert!(!free.global.any());
}

#[tokio::test]
async fn global_rate_grants_its_burst_then_says_when_the_next_permit_comes() {
    let ctx = Ctx::new("gl-rate").await;
    enqueue(&ctx, 100, "ok").await;
    set(
        &ctx,
        Settings {
            global_rate: rate("10/s", 5),
            ..Settings::default()
        },
    )
    .await;
    let mut c = ctx.c();
    let burst = fetch(&mut c, &ctx.keys, 50, 30_000).await.unwrap();
    assert_eq!(burst.jobs.len(), 5, "the burst");
    assert!(burst.global.rate && burst.global.cut_by_rate);
    let none = fetch(&mut c, &ctx.keys, 50, 30_000).await.unwrap();
    assert!(none.jobs.is_empty() && none.global.cut_by_rate);
    assert!(
        (1..=100).contains(&none.next_due_ms),
        "one permit every 100 ms: {}",
        none.next_due_ms
    );
    tokio::time::sleep(Duration::from_millis(none.next_due_ms + 5)).await;
    let one = fetch(&mut c, &ctx.keys, 50, 30_000).await.unwrap();
    assert_eq!(one.jobs.len(), 1, "a permit per emission interval");

    // A rate far above what is asked for cuts nothing.
    set(
        &ctx,
        Settings {
            global_rate: rate("100000/s", 10_000),
            ..Settings::default()
        },
    )
    .await;
    let all = fetch(&mut c, &ctx.keys, 50, 30_000).await.unwrap();
    assert_eq!(all.jobs.len(), 50);
    assert!(all.global.rate && !all.global.cut());
}

/// `weir limits <args>` on the test's queue; asserts it succeeds; returns its output.
fn run_limits(ctx: &Ctx, args: &[&str]) -> String {
    faults::weir_on(&ctx.url, &ctx.queue, &[&["limits"][..], args].concat())
}

#[tokio::test]
async fn limits_set_get_and_clear_the_global_limits() {
    let ctx = Ctx::new("gl-cli").await;
    let out = run_limits(
        &ctx,
        // --create: the queue has no jobs yet, and limits refuse a name never seen.
        &[
            "set",
            "--create",
            "--global-rate",
            "200/s",
            "--global-concurrency",
            "10",
        ],
    );
    assert!(
        out.contains("global_rate=200/s global_burst=20 global_concurrency=10"),
        "{out}"
    );
    assert!(
        out.contains("fleet: 0 leased of a global concurrency of 10"),
        "{out}"
    );
    let out = run_limits(&ctx, &["set", "--global-rate", "30/m", "--global-burst", "7"]);
    assert!(out.contains("global_rate=30/m global_burst=7"), "{out}");
    let out = run_limits(&ctx, &["clear", "--global-rate"]);
    assert!(
        !out.contains("global_rate") && out.contains("global_concurrency=10"),
        "{out}"
    );

    let stats = faults::run_weir(&["stats", "--redis-url", &ctx.url, "-q", &ctx.queue], None, T);
    assert!(
        stats.1.contains("in flight  0 (global concurrency 10)"),
        "{stats:?}"
    );

    // Bad values: one clear line, nothing stored.
    let bad = [
        &["limits", "--redis-url", &ctx.url, "-q", &ctx.queue, "set"][..],
        &["--global-concurrency", "0"],
    ]
    .concat();
    let (code, out, err) = run_weir(&bad, None, T);
    assert_ne!(code, 0);
    assert!(
        err.contains("global concurrency must be at least 1"),
        "{out}{err}"
    );
    let (code, _, err) = run_weir(
        &[
            "limits",
            "--redis-url",
            &ctx.url,
            "-q",
            &ctx.queue,
            "set",
            "--global-burst",
            "5",
        ],
        None,
        T,
    );
    assert_ne!(code, 0);
    assert!(err.contains("--global-rate"), "{err}");
    let s = Settings::load(&mut ctx.c(), &ctx.queue).await.unwrap();
    assert_eq!((s.global_rate, s.global_concurrency), (None, Some(10)));
}

/// A `weir work` consumer of the test's queue posting each job to `server`.
fn consumer(ctx: &Ctx, server: &Server, dir: &std::path::Path, i: usize, extra: &[&str]) -> Proc {
    let url = server.url();
    let args = [
        &[
            "work",
            "--redis-url",
            &ctx.url,
            "-q",
            &ctx.queue,
            "--handler",
            &url,
            "--concurrency",
            "16",
            "--no-metrics",
        ][..],
        extra,
    ]
    .concat();
    Proc::weir(&args, &dir.join(format!("out{i}")), &dir.join(format!("err{i}")))
}

/// Stops the consumers with SIGTERM and waits for them, off the test's runtime: it serves
/// the HTTP requests of their last jobs meanwhile.
async fn stop(procs: Vec<Proc>) {
    tokio::task::spawn_blocking(move || {
        for p in &procs {
            p.sigterm();
        }
        for mut p in procs {
            let status = p.wait_timeout(T).expect("the consumer stops");
            assert!(status.success(), "{status:?}");
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn three_consumers_with_a_global_rate_start_that_many_jobs_per_second_together() {
    let ctx = Ctx::new("gl-rate-fleet").await;
    let server = Server::start().await;
    enqueue(&ctx, 1_600, "ok").await;
    run_limits(&ctx, &["set", "--global-rate", "200/s"]);
    let dir = tempfile::tempdir().unwrap();
    let procs: Vec<Proc> = (0..3)
        .map(|i| consumer(&ctx, &server, dir.path(), i, &[]))
        .collect();
    let arrivals = || server.arrivals.lock().unwrap().clone();
    wait_until("the first job", T, || async { !arrivals().is_empty() }).await;
    // Past the burst, a steady window of 5 s.
    let first = arrivals()[0];
    let (from, to) = (first + Duration::from_secs(1), first + Duration::from_secs(6));
    wait_until("the window to pass", T, || async { Instant::now() > to }).await;
    let in_window = arrivals().iter().filter(|t| **t >= from && **t < to).count();
    let per_s = in_window as f64 / 5.0;
    eprintln!("global rate 200/s: the fleet of three started {per_s:.1} jobs/s over 5 s");
    stop(procs).await;
    assert!(
        (180.0..=220.0).contains(&per_s),
        "the fleet started {per_s:.0} jobs/s under a global rate of 200/s"
    );
    let acked = ctx.stats().await.counters.get("acked").copied().unwrap_or(0);
    assert_eq!(
        acked as usize,
        arrivals().len(),
        "every job started was acked once"
    );
}

#[tokio::test]
async fn a_global_concurrency_binds_across_processes() {
    let ctx = Ctx::new("gl-conc-fleet").await;
    let server = Server::start().await;
    enqueue(&ctx, 300, "slow:40").await;
    run_limits(&ctx, &["set", "--global-concurrency", "10"]);
    let dir = tempfile::tempdir().unwrap();
    let procs: Vec<Proc> = (0..3)
        .map(|i| consumer(&ctx, &server, dir.path(), i, &[]))
        .collect();
    wait_until("every job acked", T, || async {
        ctx.stats().await.counters.get("acked").copied().unwrap_or(0) == 300
    })
    .await;
    stop(procs).await;
    let peak = server.peak_in_flight.load(Ordering::SeqCst);
    assert!(
        peak <= 10,
        "{peak} jobs ran at once under a global concurrency of 10"
    );
    // 48 local slots in all: the fleet used the permits, not a single consumer's few.
    assert!(peak >= 6, "only {peak} ran at once");
    assert_eq!(server.arrivals.lock().unwrap().len(), 300, "each job ran once");
}

#[tokio::test]
async fn a_killed_consumers_permits_come_back_within_a_lease() {
    let ctx = Ctx::new("gl-kill").await;
    let server = Server::start().await;
    enqueue(&ctx, 40, "slow:60000").await;
    run_limits(&ctx, &["set", "--global-concurrency", "10"]);
    let dir = tempfile::tempdir().unwrap();
    let lease = ["--visibility-timeout", "2s", "--shutdown-timeout", "1s"];
    let mut a = consumer(&ctx, &server, dir.path(), 0, &lease);
    let arrived = || server.arrivals.lock().unwrap().len();
    wait_until("the first consumer holds every permit", T, || async {
        arrived() == 10
    })
    .await;
    let b = consumer(&ctx, &server, dir.path(), 1, &lease);
    // The second consumer is up (registered, its fetcher running beside its heartbeat)
    // and gets nothing while the first holds the permits.
    let admin = weir::Queue::new(ctx.c(), &ctx.queue).unwrap();
    wait_until("the second consumer registered", T, || async {
        admin.workers().await.unwrap().workers.len() == 2
    })
    .await;
    assert_eq!(arrived(), 10);
    assert_eq!(ctx.stats().await.in_flight, 10);

    a.kill9();
    let killed = Instant::now();
    let back = try_wait_until(Duration::from_secs(8), || async { arrived() > 10 }).await;
    let after = killed.elapsed();
    assert!(back, "no permit came back {after:?} after the kill");
    // One lease (2 s) plus the reclaimer's tick and the wake: well inside 8 s.
    assert!(ctx.stats().await.in_flight <= 10);
    stop(vec![b]).await;
}
