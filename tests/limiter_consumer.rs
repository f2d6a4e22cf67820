//! The limiter inside a real consumer against a real redis-server: the adaptive limit
//! backs off from a handler that pushes back, runtime settings reach a running consumer,
//! the rate cap holds, and `weir limits` reads and writes the settings.

mod common;

use common::wait_until;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use weir::limiter::{LimiterConfig, Target};
use weir::queue::settings::{RateSetting, Settings};
use weir::{
    CancellationToken, Consumer, ConsumerConfig, EmbeddedRedis, JobError, NewJob, Producer, Redis, Registry,
};

async fn setup(queue: &str, jobs: usize) -> (EmbeddedRedis, Redis) {
    let server = EmbeddedRedis::start().unwrap();
    let redis = Redis::open(&server.url()).unwrap();
    let producer = Producer::new(redis.connect().await.unwrap(), queue).unwrap();
    let batch = (0..jobs).map(|i| NewJob::new("t", &i).unwrap().max_attempts(100));
    producer.enqueue_bulk(batch).await.unwrap();
    (server, redis)
}

fn adaptive(max: usize) -> LimiterConfig {
    let mut c = LimiterConfig::default();
    c.aimd.max = max;
    c.aimd.target = Target::Absolute(Duration::from_secs(1));
    c.window.min_samples = 20;
    c.window.min_duration = Duration::from_millis(20);
    c
}

/// A liveness bound for settings to reach a running consumer, not a speed figure.
const APPLIED: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_limit_backs_off_from_a_handler_that_pushes_back() {
    let (_server, redis) = setup("pushback", 2000).await;
    let running = Arc::new(AtomicUsize::new(0));
    let handler = weir::handler_fn({
        let running = running.clone();
        move |_job| {
            let running = running.clone();
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                let r = if now > 8 {
                    Err(JobError::backpressure("429", Some(Duration::from_millis(5))))
                } else {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    Ok(())
                };
                running.fetch_sub(1, Ordering::SeqCst);
                r
            }
        }
    });
    let mut config = ConsumerConfig::new("pushback");
    config.concurrency = 64;
    config.limiter = Some(adaptive(100));
    config.drain = true;
    let consumer = Consumer::new(config, redis, Registry::new().fallback(handler)).unwrap();
    let handle = consumer.handle();
    let report = consumer.run(CancellationToken::new()).await.unwrap();
    assert_eq!(report.acked, 2000, "{report:?}");
    let limit = handle.limit.get();
    assert!(
        (1..=16).contains(&limit),
        "limit {limit}: 429s past 8 at once should hold it near 8"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_settings_reach_a_running_consumer() {
    let (_server, redis) = setup("tuned", 0).await;
    let mut conn = redis.connect().await.unwrap();
    let mut config = ConsumerConfig::new("tuned");
    config.concurrency = 50;
    config.limiter = Some(adaptive(100));
    config.settings_poll = Some(Duration::from_millis(50));
    let noop = weir::handler_fn(|_| async { Ok(()) });
    let consumer = Consumer::new(config, redis, Registry::new().fallback(noop)).unwrap();
    let h = consumer.handle();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(consumer.run(shutdown.clone()));

    let set = Settings {
        max: Some(5),
        target_p95: Some(Target::Relative(3.0)),
        rate: Some(RateSetting::Limit("10/s".parse().unwrap())),
        ..Settings::default()
    };
    set.store(&mut conn, "tuned").await.unwrap();
    wait_until("max 5 applied", APPLIED, || async { h.limit.get() == 5 }).await;
    wait_until("rate applied", APPLIED, || async { h.rate.rate().is_some() }).await;
    let limiter = h.limiter.clone().unwrap();
    assert_eq!(limiter.config().aimd.target, Target::Relative(3.0));

    Settings::clear(&mut conn, "tuned").await.unwrap();
    wait_until("rate lifted", APPLIED, || async { h.rate.rate().is_none() }).await;
    wait_until("max back to 100", APPLIED, || async {
        limiter.config().aimd.max == 100
    })
    .await;

    // A contradictory setting is refused and the current ones stay. It is stored with a
    // rate in the same write: once the rate is in force, the watch has read the refused
    // bound too.
    Settings {
        min: Some(500),
        rate: Some(RateSetting::Limit("7/s".parse().unwrap())),
        ..Settings::default()
    }
    .store(&mut conn, "tuned")
    .await
    .unwrap();
    wait_until("the write read", APPLIED, || async {
        h.rate.rate().map(|r| r.count) == Some(7.0)
    })
    .await;
    let aimd = &limiter.config().aimd;
    assert_eq!((aimd.min, aimd.max), (1, 100), "the refused bound is not applied");
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_caps_jobs_per_second() {
    let (_server, redis) = setup("paced", 20).await;
    let mut config = ConsumerConfig::new("paced");
    config.rate = Some("50/s".parse::<weir::Rate>().unwrap().with_burst(1));
    config.drain = true;
    let noop = weir::handler_fn(|_| async { Ok(()) });
    let consumer = Consumer::new(config, redis, Registry::new().fallback(noop)).unwrap();
    let started = Instant::now();
    let report = consumer.run(CancellationToken::new()).await.unwrap();
    assert_eq!(report.acked, 20);
    // GCRA at 50/s with burst 1: job n starts no sooner than n × 20 ms. A lower bound only.
    assert!(
        started.elapsed() >= Duration::from_millis(380),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn weir_limits_set_get_clear() {
    let server = EmbeddedRedis::start().unwrap();
    let weir = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(args)
            .args(["--queue", "cli", "--redis-url", &server.url()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let (ok, out) = weir(&[
        "limits",
        "--create",
        "set",
        "--max-concurrency",
        "5",
        "--rate",
        "30/m",
        "--burst",
        "3",
    ]);
    assert!(ok, "{out}");
    assert!(
        out.contains("max_concurrency=5") && out.contains("rate=30/m burst=3"),
        "{out}"
    );
    let (ok, out) = weir(&[
        "limits",
        "set",
        "--target-p95",
        "250ms",
        "--error-threshold",
        "0.1",
    ]);
    assert!(
        ok && out.contains("target_p95=250ms") && out.contains("max_concurrency=5"),
        "{out}"
    );
    let (ok, out) = weir(&["limits", "set", "--min-concurrency", "9"]);
    assert!(
        !ok && out.contains("max concurrency must be between min concurrency"),
        "{out}"
    );
    let (ok, out) = weir(&["limits", "set", "--rate", "fast"]);
    assert!(!ok && out.contains("500/s"), "{out}");
    let (ok, out) = weir(&["limits", "get"]);
    assert!(
        ok && out.contains("error_threshold=0.1") && !out.contains("min_concurrency"),
        "{out}"
    );
    let (ok, out) = weir(&["limits", "clear"]);
    assert!(ok && out.contains("no runtime settings"), "{out}");
    let (ok, out) = weir(&["work", "--handler", "noop", "--target-p95", "2x"]);
    assert!(
        !ok && out.contains("--adaptive"),
        "limiter flags need --adaptive: {out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_capped_consumer_leaves_the_backlog_to_its_peers() {
    let (_server, redis) = setup("shared", 100).await;
    let mut config = ConsumerConfig::new("shared");
    config.concurrency = 64;
    config.rate = Some("4/s".parse().unwrap());
    let started = Arc::new(AtomicUsize::new(0));
    let noop = weir::handler_fn({
        let started = started.clone();
        move |_| {
            started.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        }
    });
    let consumer = Consumer::new(config, redis.clone(), Registry::new().fallback(noop)).unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(consumer.run(shutdown.clone()));
    let q = weir::Queue::new(redis.connect().await.unwrap(), "shared").unwrap();
    // Once its burst of 4 has started, it has fetched: it holds what it fetched.
    wait_until("the burst started", APPLIED, || async {
        started.load(Ordering::SeqCst) >= 4
    })
    .await;
    // Without the cap it would lease 2 × 64 = 128 jobs at once (all 100) and sit on them.
    let s = q.stats().await.unwrap();
    assert!(s.in_flight <= 8, "leased {} jobs at 4/s", s.in_flight);
    let ran = started.load(Ordering::SeqCst) as u64;
    assert!(s.ready_total() + ran >= 90, "{ran} started; {s:?}");
    shutdown.cancel();
    let report = running.await.unwrap().unwrap();
    let after = q.stats().await.unwrap();
    assert_eq!(
        after.ready_total() + report.acked,
        100,
        "un-started jobs handed back: {report:?}"
    );
}

/// `weir limits get` shows each live consumer of the queue with its limit and, for an
/// adaptive one, the rule's latest decision with its reason and the window's figures,
/// from the worker registry the heartbeat writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_get_explains_each_consumers_latest_decision() {
    let (server, redis) = setup("explain", 20_000).await;
    let slow = || {
        weir::handler_fn(|_| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(())
        })
    };
    // An adaptive consumer whose jobs (20 ms) never meet its 5 ms target: every window
    // is a latency cut (down to the floor), and says so.
    let mut config = ConsumerConfig::new("explain");
    config.concurrency = 8;
    config.lease = Duration::from_millis(600);
    let mut limiter = adaptive(8);
    limiter.aimd.target = Target::Absolute(Duration::from_millis(5));
    limiter.aimd.min = 2;
    config.limiter = Some(limiter);
    let adaptive_one = Consumer::new(config, redis.clone(), Registry::new().fallback(slow())).unwrap();
    // And one with a fixed limit of 3: no decision to show.
    let mut config = ConsumerConfig::new("explain");
    config.concurrency = 3;
    config.lease = Duration::from_millis(600);
    let fixed = Consumer::new(config, redis, Registry::new().fallback(slow())).unwrap();
    let shutdown = CancellationToken::new();
    let a = tokio::spawn(adaptive_one.run(shutdown.clone()));
    let f = tokio::spawn(fixed.run(shutdown.clone()));
    let get = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
            .args([
                "limits",
                "get",
                "--queue",
                "explain",
                "--redis-url",
                &server.url(),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let explained = |out: &str| {
        out.contains("limit 2\n")
            && out.contains("latency: p95")
            && out.contains("over the 5ms target")
            && out.contains("target 5.0ms")
            && out.contains("overload 0.0%")
    };
    wait_until(
        "limits get shows the latency cuts at the floor",
        APPLIED,
        || async { explained(&get()) },
    )
    .await;
    let out = get();
    assert!(out.contains("consumers:"), "{out}");
    assert_eq!(out.matches("  consumer ").count(), 2, "{out}");
    assert!(out.contains("limit 2\n"), "the adaptive one at its floor: {out}");
    assert!(
        out.contains("limit 3\n") && out.contains("limiter: no decision (a fixed limit"),
        "{out}"
    );
    // The figures are the window's: 20 ms jobs, so a p95 of at least 20 ms.
    let line = out.lines().find(|l| l.contains("latency: p95")).unwrap();
    let p95: f64 = line
        .split("p95 ")
        .nth(2)
        .and_then(|s| s.strip_suffix("ms").or_else(|| s.split("ms").next()))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no window p95 in {line}"));
    assert!(p95 >= 20.0, "{line}");
    shutdown.cancel();
    a.await.unwrap().unwrap();
    f.await.unwrap().unwrap();
}
