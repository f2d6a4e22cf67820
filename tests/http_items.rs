//! HTTP batch mode with per-item outcomes, against a real redis-server, the real `weir`
//! binary and a local batch endpoint: one answer settles each job on its own (ok, retry,
//! fail, defer), so a bad row is dead-lettered alone and its batch-mates are acked; a
//! batch answered by a plain 2xx is acked whole, as before.

mod common;

use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::convert::Infallible;
use std::process::Command;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use weir::NewJob;

/// The endpoint: per-item answers from each job's `do`, except for batches whose first job
/// says `plain` (an empty 200, the whole-batch answer).
async fn endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let deferred: Arc<Mutex<HashSet<String>>> = Arc::default();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let deferred = deferred.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let deferred = deferred.clone();
                async move {
                    let bytes = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let jobs: Vec<Value> = serde_json::from_slice(&bytes).unwrap_or_default();
                    if jobs.first().is_some_and(|j| j["payload"]["do"] == "plain") {
                        return Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())));
                    }
                    let outcomes: Vec<Value> = jobs
                        .iter()
                        .enumerate()
                        .map(|(i, j)| {
                            let first = j["attempt"] == 0;
                            match j["payload"]["do"].as_str().unwrap_or("ok") {
                                "retry_once" if first => {
                                    json!({"i": i, "status": "retry", "after_ms": 20, "error": "later"})
                                }
                                "fail" => json!({"id": j["id"], "status": "fail", "error": "bad row"}),
                                "defer_once"
                                    if deferred
                                        .lock()
                                        .unwrap()
                                        .insert(j["id"].as_str().unwrap().to_owned()) =>
                                {
                                    json!({"i": i, "status": "defer", "after_ms": 20})
                                }
                                _ => json!({"i": i, "status": "ok"}),
                            }
                        })
                        .collect();
                    let body = serde_json::to_vec(&json!({ "outcomes": outcomes })).unwrap();
                    let mut r = Response::new(Full::new(Bytes::from(body)));
                    r.headers_mut()
                        .insert("content-type", "application/json".parse().unwrap());
                    Ok(r)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), svc));
        }
    });
    format!("http://{addr}/batch")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_row_is_dead_lettered_alone_and_its_batch_mates_are_acked() {
    let ctx = Ctx::new("http-items").await;
    let url = endpoint().await;
    let p = ctx.producer();
    let mut jobs = Vec::new();
    for (mode, n) in [("ok", 100), ("retry_once", 10), ("defer_once", 10), ("fail", 5)] {
        for _ in 0..n {
            jobs.push(
                NewJob::new("hook", &json!({ "do": mode }))
                    .unwrap()
                    .max_attempts(3),
            );
        }
    }
    p.enqueue_bulk(jobs).await.unwrap();
    let queue = ctx.queue.clone();
    let redis_url = ctx.url.clone();
    let o = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args([
                "work",
                "-q",
                &queue,
                "--handler",
                &url,
                "--batch-http",
                "10",
                "--drain",
                "--no-metrics",
            ])
            .env("REDIS_URL", redis_url)
            .env_remove("WEIR_LOG")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("120 acked, 10 retried, 10 deferred, 5 dead-lettered"),
        "each job settled on its own: {out}"
    );
    let dead = ctx.admin().dead_jobs(0, 10).await.unwrap();
    assert_eq!(dead.len(), 5);
    assert!(
        dead.iter()
            .all(|d| d.reason.as_deref().unwrap_or("").contains("bad row")),
        "{dead:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_2xx_acks_the_whole_batch() {
    let ctx = Ctx::new("http-items-plain").await;
    let url = endpoint().await;
    let jobs = (0..30).map(|_| NewJob::new("hook", &json!({"do": "plain"})).unwrap());
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let queue = ctx.queue.clone();
    let redis_url = ctx.url.clone();
    let o = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args([
                "work",
                "-q",
                &queue,
                "--handler",
                &url,
                "--batch-http",
                "10",
                "--drain",
                "--no-metrics",
            ])
            .env("REDIS_URL", redis_url)
            .env_remove("WEIR_LOG")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("30 acked, 0 retried, 0 deferred, 0 dead-lettered"),
        "{out}"
    );
}
