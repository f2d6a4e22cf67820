//! The HTTP handler end to end against a local server (tests/http/server.rs) that can be
//! told to answer 2xx, slow down, 429 with Retry-After, 503, 500, 400 or hang: what each
//! answer does to the job, keep-alive, batches, and a consumer draining a real queue.
//! Backpressure (429/503) is not failure: it defers the job without charging an attempt,
//! within a deferral budget.

mod common;
mod faults;
#[path = "http/server.rs"]
mod server;

use server::Server;
use std::sync::atomic::Ordering;
use std::time::Duration;
use weir::handler::http::{HttpConfig, HttpHandler};
use weir::limiter::{AimdConfig, LimiterConfig, Signal, Target};
use weir::queue::json::JobState;
use weir::{BatchHandler, CancellationToken, Consumer, ConsumerConfig, EmbeddedRedis, Handler, Job, NewJob};
use weir::{JobErrorKind, Producer, Queue, Redis, Registry};

fn job(id: &str, mode: &str, attempt: u32) -> Job {
    let env = format!(
        r#"{{"attempt":{attempt},"max_attempts":5,"priority":1,"enqueued_at":0,"id":"{id}","kind":"hook","payload":{{"do":"{mode}"}}}}"#
    );
    serde_json::from_str(&env).unwrap()
}

fn handler(s: &Server) -> HttpHandler {
    let mut config = HttpConfig::new(s.url());
    config.timeout = Duration::from_millis(300);
    HttpHandler::new(config).unwrap()
}

#[tokio::test]
async fn each_answer_maps_to_an_outcome() {
    let s = Server::start().await;
    let h = handler(&s);
    assert_eq!(Handler::call(&h, job("a", "ok", 0)).await, Ok(()));
    let seen = s.seen().pop().unwrap();
    assert_eq!(seen.idempotency_key.as_deref(), Some("a"));
    assert_eq!(seen.content_type.as_deref(), Some("application/json"));
    assert_eq!(seen.body["payload"]["do"], "ok");
    assert_eq!(
        (seen.body["id"].as_str(), seen.body["kind"].as_str()),
        (Some("a"), Some("hook"))
    );

    let e = Handler::call(&h, job("b", "429", 0)).await.unwrap_err();
    assert!(e.kind == JobErrorKind::Backpressure, "{e:?}");
    assert_eq!(e.retry_after, Some(Duration::from_secs(7)));
    assert!(
        e.message.starts_with("HTTP 429 Too Many Requests: busy"),
        "{}",
        e.message
    );

    let e = Handler::call(&h, job("c", "503", 0)).await.unwrap_err();
    assert!(
        e.kind == JobErrorKind::Backpressure && e.retry_after.is_none(),
        "{e:?}"
    );

    assert_eq!(e.status, Some(503));

    // A plain 500 is the job's failure: retried, carrying its status, which the
    // limiter counts as overload only when the operator lists it.
    let e = Handler::call(&h, job("d", "500", 0)).await.unwrap_err();
    assert!(e.kind == JobErrorKind::Retry, "{e:?}");
    assert_eq!(Signal::of(&Err(e)), Signal::Status(500));
    let limiter = AimdConfig::default();
    assert_eq!(limiter.classify(Signal::Status(500)), Signal::Failure);
    assert_eq!(limiter.classify(Signal::Status(429)), Signal::Overload);

    let e = Handler::call(&h, job("e", "400", 0)).await.unwrap_err();
    assert!(e.kind == JobErrorKind::Fatal && e.status == Some(400), "{e:?}");
    assert!(
        e.message.starts_with("HTTP 400 Bad Request: bad field 'x'yyy"),
        "{}",
        e.message
    );
    assert!(
        e.message.len() <= 600,
        "snippet bounded: {} bytes",
        e.message.len()
    );

    let before = s.seen().len();
    let e = Handler::call(&h, job("r", "redirect", 0)).await.unwrap_err();
    assert!(
        e.kind == JobErrorKind::Fatal && e.message.starts_with("HTTP 302"),
        "{e:?}"
    );
    assert_eq!(s.seen().len(), before + 1, "the redirect is not followed");

    let e = Handler::call(&h, job("f", "hang", 0)).await.unwrap_err();
    assert!(
        e.kind == JobErrorKind::Overloaded && e.message.contains("timed out after 300ms"),
        "{e:?}"
    );
    assert_eq!(Signal::of(&Err(e)), Signal::Overload, "a timeout is congestion");

    // A slow answer inside the timeout is a success.
    assert_eq!(Handler::call(&h, job("g", "slow:50", 0)).await, Ok(()));
}

#[tokio::test]
async fn connection_refused_is_retryable() {
    let port = common::free_port();
    let h = HttpHandler::new(HttpConfig::new(format!("http://127.0.0.1:{port}/"))).unwrap();
    let e = Handler::call(&h, job("a", "ok", 0)).await.unwrap_err();
    assert!(
        e.kind == JobErrorKind::Overloaded && e.message.contains("cannot connect"),
        "{e:?}"
    );
    assert_eq!(
        Signal::of(&Err(e)),
        Signal::Overload,
        "a refused connection is congestion"
    );
}

#[tokio::test]
async fn connections_are_kept_alive() {
    let s = Server::start().await;
    let h = handler(&s);
    for i in 0..20 {
        assert_eq!(Handler::call(&h, job(&format!("k{i}"), "ok", 0)).await, Ok(()));
    }
    // Error answers with bodies must not cost the connection either.
    for i in 0..5 {
        let _ = Handler::call(&h, job(&format!("e{i}"), "500", 0)).await;
    }
    assert_eq!(
        s.connections.load(Ordering::SeqCst),
        1,
        "25 sequential requests, one connection"
    );
}

#[tokio::test]
async fn batches_post_an_array_and_share_the_outcome() {
    let s = Server::start().await;
    let b = handler(&s).batched();
    let jobs = vec![job("a", "ok", 0), job("b", "ok", 0), job("c", "ok", 0)];
    assert_eq!(BatchHandler::call(&b, jobs).await, vec![Ok(()), Ok(()), Ok(())]);
    let seen = s.seen().pop().unwrap();
    assert_eq!(seen.body.as_array().map(Vec::len), Some(3));
    assert_eq!(seen.idempotency_key, None);
    let rs = BatchHandler::call(&b, vec![job("d", "503", 0), job("e", "ok", 0)]).await;
    assert!(
        rs.iter()
            .all(|r| r.as_ref().is_err_and(|e| e.kind == JobErrorKind::Backpressure)),
        "{rs:?}"
    );
    assert_eq!(b.max_batch(), 100);
}

async fn enqueue(redis: &Redis, queue: &str, modes: &[(&str, usize)]) {
    let p = Producer::new(redis.connect().await.unwrap(), queue).unwrap();
    let jobs = modes.iter().flat_map(|(m, n)| {
        (0..*n).map(move |_| NewJob::new("hook", &serde_json::json!({ "do": m })).unwrap())
    });
    p.enqueue_bulk(jobs).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_delivers_a_queue_to_the_server() {
    let s = Server::start().await;
    let server = EmbeddedRedis::start().unwrap();
    let redis = Redis::open(&server.url()).unwrap();
    enqueue(
        &redis,
        "hooks",
        &[("ok", 30), ("400", 1), ("429-once", 2), ("500-once", 2)],
    )
    .await;
    let mut config = ConsumerConfig::new("hooks");
    config.drain = true;
    config.pool.retry.base = Duration::from_millis(10);
    let consumer = Consumer::new(config, redis.clone(), Registry::new().fallback(handler(&s))).unwrap();
    let report = consumer.run(CancellationToken::new()).await.unwrap();
    assert_eq!(
        (report.acked, report.dead, report.retried, report.deferred),
        (34, 1, 2, 2),
        "the 500s are retried, the 429s deferred: {report:?}"
    );
    let q = Queue::new(redis.connect().await.unwrap(), "hooks").unwrap();
    let dead = q.dead_jobs(0, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(
        format!("{dead:?}").contains("HTTP 400 Bad Request: bad field"),
        "{dead:?}"
    );
}

/// On a queue that keeps completed jobs, a 2xx answer's first 512 bytes are the job's
/// result (a job answered 500 once keeps its second answer's); a dead-lettered job keeps
/// its reason and no result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_job_keeps_the_start_of_its_answer() {
    let s = Server::start().await;
    let server = EmbeddedRedis::start().unwrap();
    let redis = Redis::open(&server.url()).unwrap();
    let keep = weir::queue::settings::Settings {
        keep_completed_count: Some(100),
        ..Default::default()
    };
    weir::queue::settings::Settings::update(&mut redis.connect().await.unwrap(), "kept", &keep)
        .await
        .unwrap();
    enqueue(&redis, "kept", &[("echo", 3), ("500-once", 2), ("400", 1)]).await;
    let mut config = ConsumerConfig::new("kept");
    config.drain = true;
    config.pool.retry.base = Duration::from_millis(10);
    let consumer = Consumer::new(config, redis.clone(), Registry::new().fallback(handler(&s))).unwrap();
    let report = consumer.run(CancellationToken::new()).await.unwrap();
    assert_eq!(
        (report.acked, report.dead, report.retried),
        (5, 1, 2),
        "{report:?}"
    );
    let q = Queue::new(redis.connect().await.unwrap(), "kept").unwrap();
    let done = q.jobs(JobState::Done, None, 10, None).await.unwrap();
    assert_eq!(done.jobs.len(), 5);
    for j in &done.jobs {
        let detail = q.job(&j.id).await.unwrap().unwrap();
        let env: serde_json::Value = serde_json::from_str(detail.envelope.unwrap().get()).unwrap();
        let result = j.result.as_deref().expect("a result");
        if env["payload"]["do"] == "echo" {
            assert_eq!(result.len(), 512, "the body's first 512 bytes");
            assert!(
                result.starts_with(&format!("{{\"id\":\"{}\",\"pad\":\"zzz", j.id)),
                "{result}"
            );
        } else {
            assert_eq!(result, "{\"ok\":true}");
            assert_eq!(detail.job.attempt, Some(1), "retried once, then answered");
        }
    }
    let dead = q.jobs(JobState::Dead, None, 10, None).await.unwrap();
    assert_eq!(dead.jobs.len(), 1);
    assert!(dead.jobs[0].last_error.as_deref().unwrap().contains("HTTP 400"));
    let detail = q.job(&dead.jobs[0].id).await.unwrap().unwrap();
    assert_eq!(detail.job.result, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adaptive_limit_follows_429s_from_the_server() {
    let s = Server::start().await;
    s.max_in_flight.store(4, Ordering::SeqCst);
    let server = EmbeddedRedis::start().unwrap();
    let redis = Redis::open(&server.url()).unwrap();
    enqueue(&redis, "paced", &[("slow:2", 400)]).await;
    let mut limiter = LimiterConfig::default();
    limiter.aimd.target = Target::Absolute(Duration::from_secs(1));
    limiter.window.min_samples = 20;
    limiter.window.min_duration = Duration::from_millis(20);
    let mut config = ConsumerConfig::new("paced");
    config.concurrency = 64;
    config.drain = true;
    config.limiter = Some(limiter);
    config.pool.retry.base = Duration::from_millis(5);
    let consumer = Consumer::new(config, redis, Registry::new().fallback(handler(&s))).unwrap();
    let h = consumer.handle();
    let report = consumer.run(CancellationToken::new()).await.unwrap();
    assert_eq!(report.acked, 400, "{report:?}");
    let limit = h.limit.get();
    assert!(
        (1..=8).contains(&limit),
        "limit {limit}: the server takes 4 at once"
    );
}

#[tokio::test]
async fn weir_work_posts_batches_from_the_cli() {
    let s = Server::start().await;
    let server = EmbeddedRedis::start().unwrap();
    let redis = Redis::open(&server.url()).unwrap();
    enqueue(&redis, "cli", &[("ok", 25)]).await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "work",
            "--queue",
            "cli",
            "--redis-url",
            &server.url(),
            "--drain",
            "--no-metrics",
        ])
        .args([
            "--handler",
            &s.url(),
            "--batch-http",
            "10",
            "--adaptive",
            "--target-p95",
            "2x",
        ])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("25 acked"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sizes: Vec<usize> = s
        .seen()
        .iter()
        .map(|r| r.body.as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 25);
    assert!(sizes.iter().all(|n| (1..=10).contains(n)), "{sizes:?}");
}

/// `weir work` as a new user runs it, against a service that answers 429 (Retry-After: 1)
/// for a few seconds and then 200, with jobs of `max_attempts 2`: backpressure is not
/// failure, so every job is acked, none is dead-lettered, and none was charged an attempt
/// (every request the service saw carried attempt 0). Before deferrals, each 429 cost an
/// attempt and the jobs were dead-lettered on the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_answers_429_for_a_while_loses_no_job() {
    let s = Server::start().await;
    let server = EmbeddedRedis::start().unwrap();
    let redis = Redis::open(&server.url()).unwrap();
    let p = Producer::new(redis.connect().await.unwrap(), "busy").unwrap();
    let jobs = (0..40).map(|i| {
        NewJob::new("hook", &serde_json::json!({ "do": "ok" }))
            .unwrap()
            .id(format!("j{i}"))
            .max_attempts(2)
    });
    p.enqueue_bulk(jobs).await.unwrap();
    s.busy_for(Duration::from_secs(3));
    let url = server.url();
    let args = [
        "work",
        "-q",
        "busy",
        "--redis-url",
        &url,
        "--drain",
        "--no-metrics",
    ];
    let (code, out, err) = faults::run_weir(
        &[&args[..], &["--handler", &s.url()]].concat(),
        None,
        Duration::from_secs(60),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("40 acked, 0 retried") && out.contains(" 0 dead-lettered"),
        "{out}"
    );
    let seen = s.seen();
    assert!(seen.len() > 40, "the 429 phase was met: {} requests", seen.len());
    assert!(
        seen.iter().all(|r| r.body["attempt"] == 0),
        "no request carried a charged attempt"
    );
    let stats = Queue::new(redis.connect().await.unwrap(), "busy")
        .unwrap()
        .stats()
        .await
        .unwrap();
    assert_eq!(
        (stats.dead, stats.pending(), stats.deferred),
        (0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.counters.get("acked"), Some(&40));
    assert_eq!(stats.counters.get("retried"), None);
    assert!(stats.counters["deferred"] >= 40, "{stats:?}");
}

/// A service that never stops answering 429: each job is deferred until its deferral
/// budget (`--max-deferrals 2`) is spent, then dead-lettered with a reason that says so.
/// The deferrals show in the metrics (by reason) and in `weir stats`, text and JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferrals_past_the_budget_are_dead_lettered_and_counted() {
    let s = Server::start().await;
    s.busy_for(Duration::from_secs(3600));
    let server = EmbeddedRedis::start().unwrap();
    let url = server.url();
    enqueue(&Redis::open(&url).unwrap(), "budget", &[("ok", 5)]).await;
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut work = faults::Proc::weir(
        &[
            "work",
            "-q",
            "budget",
            "--redis-url",
            &url,
            "--handler",
            &s.url(),
            "--max-deferrals",
            "2",
            "--metrics-addr",
            &addr,
        ],
        &out,
        &err,
    );
    let q = faults::queue(&url, "budget").await;
    common::wait_until("every job dead", Duration::from_secs(30), || async {
        q.stats().await.unwrap().dead == 5
    })
    .await;
    let deferred = r#"queue="budget""#;
    common::wait_until("the metrics to count them", Duration::from_secs(10), || async {
        let m = common::scrape(port);
        common::sample(
            &m,
            "weir_jobs_deferred_total",
            &[deferred, r#"reason="backpressure""#],
        ) == Some(10.0)
            && common::sample(&m, "weir_jobs_dead_lettered_total", &[deferred]) == Some(5.0)
    })
    .await;
    work.sigterm();
    assert!(
        work.wait_timeout(Duration::from_secs(30))
            .is_some_and(|s| s.success())
    );
    let summary = std::fs::read_to_string(&out).unwrap();
    assert!(
        summary.contains("0 acked, 0 retried, 10 deferred, 5 dead-lettered"),
        "{summary}{}",
        std::fs::read_to_string(&err).unwrap()
    );
    for d in q.dead_jobs(0, 10).await.unwrap() {
        let reason = d.reason.unwrap_or_default();
        assert!(
            reason.starts_with("deferral budget spent (2 deferrals over ")
                && reason.contains("HTTP 429 Too Many Requests: busy"),
            "{reason}"
        );
        assert!(
            d.envelope.unwrap().starts_with(r#"{"attempt":0,"#),
            "never charged"
        );
    }
    let (code, text, _) = faults::run_weir(
        &["stats", "-q", "budget", "--redis-url", &url],
        None,
        Duration::from_secs(30),
    );
    assert_eq!(code, 0);
    assert!(
        text.contains("deferred   0 (put back uncharged, 10 times so far)")
            && text.contains("dead       5 (cap 10000; 0 trimmed so far)"),
        "{text}"
    );
    let (code, json, _) = faults::run_weir(
        &["stats", "-q", "budget", "--redis-url", &url, "--json"],
        None,
        Duration::from_secs(30),
    );
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["stats"]["counters"]["deferred"], 10, "{json}");
    assert_eq!(
        (v["stats"]["deferred"].as_u64(), v["stats"]["dead_cap"].as_u64()),
        (Some(0), Some(10_000))
    );
}
