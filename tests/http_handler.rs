//! The HTTP handler end to end against a local server (tests/http/server.rs) that can be
//! told to answer 2xx, slow down, 429 with Retry-After, 503, 500, 400 or hang: what each
//! answer does to the job, keep-alive, batches, and a consumer draining a real queue.

mod common;
#[path = "http/server.rs"]
mod server;

use server::Server;
use std::sync::atomic::Ordering;
use std::time::Duration;
use weir::http::{HttpConfig, HttpHandler};
use weir::limiter::{LimiterConfig, Target};
use weir::{BatchHandler, CancellationToken, Consumer, ConsumerConfig, EmbeddedRedis, Handler, Job, NewJob};
use weir::{Producer, Queue, Redis, Registry};

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
    assert!(e.retryable && e.backpressure, "{e:?}");
    assert_eq!(e.retry_after, Some(Duration::from_secs(7)));
    assert!(
        e.message.starts_with("HTTP 429 Too Many Requests: busy"),
        "{}",
        e.message
    );

    let e = Handler::call(&h, job("c", "503", 0)).await.unwrap_err();
    assert!(e.retryable && e.backpressure && e.retry_after.is_none(), "{e:?}");

    let e = Handler::call(&h, job("d", "500", 0)).await.unwrap_err();
    assert!(e.retryable && !e.backpressure, "{e:?}");

    let e = Handler::call(&h, job("e", "400", 0)).await.unwrap_err();
    assert!(!e.retryable, "{e:?}");
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
    assert!(!e.retryable && e.message.starts_with("HTTP 302"), "{e:?}");
    assert_eq!(s.seen().len(), before + 1, "the redirect is not followed");

    let e = Handler::call(&h, job("f", "hang", 0)).await.unwrap_err();
    assert!(
        e.retryable && e.message.contains("timed out after 300ms"),
        "{e:?}"
    );

    // A slow answer inside the timeout is a success.
    assert_eq!(Handler::call(&h, job("g", "slow:50", 0)).await, Ok(()));
}

#[tokio::test]
async fn connection_refused_is_retryable() {
    let port = common::free_port();
    let h = HttpHandler::new(HttpConfig::new(format!("http://127.0.0.1:{port}/"))).unwrap();
    let e = Handler::call(&h, job("a", "ok", 0)).await.unwrap_err();
    assert!(
        e.retryable && !e.backpressure && e.message.contains("cannot connect"),
        "{e:?}"
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
        rs.iter().all(|r| r.as_ref().is_err_and(|e| e.backpressure)),
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
        (report.acked, report.dead, report.retried),
        (34, 1, 4),
        "{report:?}"
    );
    let q = Queue::new(redis.connect().await.unwrap(), "hooks").unwrap();
    let dead = q.dead_jobs(0, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert!(
        format!("{dead:?}").contains("HTTP 400 Bad Request: bad field"),
        "{dead:?}"
    );
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
        .args(["work", "--queue", "cli", "--redis-url", &server.url(), "--drain"])
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
