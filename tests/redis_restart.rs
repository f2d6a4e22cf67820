//! Redis restarts mid-run (AOF, `appendfsync everysec`): stopped and started again three
//! times, then killed outright, on the same port and directory, while two `weir work`
//! processes drain and a producer enqueues. The consumers and the producer reconnect by
//! themselves, acks are retried, the scripts are loaded again (NOSCRIPT), no job the
//! server persisted is lost, and each outage is logged a few times, not in a loop.

mod common;
mod faults;

use faults::{Proc, printed_ids};
use std::collections::HashMap;
use std::time::Duration;
use weir::{EmbeddedRedis, NewJob, Producer, Redis};

const QUEUE: &str = "restarts";
const BATCHES: usize = 40;
const PER_BATCH: usize = 150;

/// Enqueues BATCHES batches, one every 100 ms, each retried until Redis takes it (the
/// explicit ids make a retry of a batch that did land harmless). Returns the ids.
async fn produce(url: String) -> Vec<String> {
    let conn = Redis::open(&url).unwrap().connect().await.unwrap();
    let producer = Producer::new(conn, QUEUE).unwrap();
    let mut ids = Vec::new();
    for b in 0..BATCHES {
        let batch: Vec<String> = (0..PER_BATCH).map(|i| format!("p-{b}-{i}")).collect();
        let mut tries = 0;
        loop {
            let jobs = batch
                .iter()
                .map(|id| NewJob::new("k", &b).unwrap().id(id.clone()));
            match producer.enqueue_bulk(jobs).await {
                Ok(_) => break,
                Err(e) => {
                    tries += 1;
                    assert!(tries < 300, "the producer never got back in: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        ids.extend(batch);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_and_producers_ride_out_redis_restarts() {
    let mut redis =
        EmbeddedRedis::start_with(&["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""])
            .unwrap();
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    let consumers: Vec<Proc> = (0..2)
        .map(|c| {
            Proc::weir(
                &[
                    "work",
                    "--redis-url",
                    &url,
                    "-q",
                    QUEUE,
                    "--no-metrics",
                    "--handler",
                    "print:2ms",
                    "--concurrency",
                    "8",
                    "--visibility-timeout",
                    "2s",
                ],
                &dir.path().join(format!("out-{c}")),
                &dir.path().join(format!("err-{c}")),
            )
        })
        .collect();
    // Both consumers connected ("working" is logged once they are) before the first
    // outage: one that cannot reach Redis at its start exits at once, by design.
    let err = |c: usize| std::fs::read_to_string(dir.path().join(format!("err-{c}"))).unwrap_or_default();
    common::wait_until("both consumers working", Duration::from_secs(30), || async {
        (0..2).all(|c| err(c).contains("working"))
    })
    .await;
    let producer = tokio::spawn(produce(url.clone()));

    let mut outages = 0;
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(800)).await;
        // SIGTERM: Redis writes its AOF and exits; down for 700 ms, then back.
        tokio::task::block_in_place(|| redis.stop()).unwrap();
        tokio::time::sleep(Duration::from_millis(700)).await;
        tokio::task::block_in_place(|| redis.restart()).unwrap();
        outages += 1;
    }
    let ids = tokio::time::timeout(Duration::from_secs(60), producer)
        .await
        .unwrap()
        .unwrap();
    // Everything acknowledged is written to the AOF file (and fsynced within a second):
    // a SIGKILL now loses nothing the server had persisted.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    tokio::task::block_in_place(|| {
        redis.kill()?;
        redis.restart()
    })
    .unwrap();
    outages += 1;

    let queue = faults::queue(&url, QUEUE).await;
    let done = common::try_wait_until(Duration::from_secs(60), || async {
        let s = queue.stats().await.unwrap();
        s.pending() == 0 && ran(dir.path()).len() >= ids.len()
    })
    .await;
    let runs = ran(dir.path());
    let missing: Vec<_> = ids.iter().filter(|id| !runs.contains_key(*id)).collect();
    assert!(
        done && missing.is_empty(),
        "{} jobs never ran: {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending(), stats.dead), (0, 0), "{stats:?}");

    for (c, mut p) in consumers.into_iter().enumerate() {
        p.sigterm();
        let status = p
            .wait_timeout(Duration::from_secs(30))
            .expect("exits after SIGTERM");
        let log = std::fs::read_to_string(dir.path().join(format!("err-{c}"))).unwrap();
        assert!(status.success(), "consumer {c}: {status:?}\n{log}");
        assert!(!log.contains("NOSCRIPT"), "scripts are reloaded silently:\n{log}");
        check_log_is_quiet(&log, outages);
    }
    let dups = runs.values().filter(|n| **n > 1).count();
    println!(
        "redis restarts survived: {outages} (3 SIGTERM, 1 SIGKILL); jobs enqueued {}, lost {}, run twice {dups}",
        ids.len(),
        missing.len()
    );
}

fn ran(dir: &std::path::Path) -> HashMap<String, usize> {
    let mut all = printed_ids(&dir.join("out-0"));
    for (id, n) in printed_ids(&dir.join("out-1")) {
        *all.entry(id).or_insert(0) += n;
    }
    all
}

/// Each warning is logged at most a few times per outage: no line repeats in a loop.
fn check_log_is_quiet(log: &str, outages: usize) {
    let mut by_message: HashMap<String, usize> = HashMap::new();
    for line in log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")) {
        let plain: String = strip_ansi(line);
        let message = plain
            .split_once("WARN")
            .or_else(|| plain.split_once("ERROR"))
            .map(|(_, m)| m.split(" error=").next().unwrap_or(m).trim().to_owned())
            .unwrap_or_default();
        *by_message.entry(message).or_insert(0) += 1;
    }
    for (message, n) in &by_message {
        assert!(
            n <= &(3 * outages),
            "{message:?} logged {n} times in {outages} outages:\n{log}"
        );
    }
    println!("warnings per message over {outages} outages: {by_message:?}");
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A restarted (or `SCRIPT FLUSH`ed) Redis has forgotten weir's scripts: every call gets
/// NOSCRIPT once, loads its script again and goes on. Flushed three times mid-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_loaded_again_after_the_cache_is_flushed() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use weir::{CancellationToken, Consumer, ConsumerConfig, Registry, handler_fn};
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
    let mut admin = faults::raw(&url).await;
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let registry = Registry::new().fallback(handler_fn(move |_| {
        let d = d.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            d.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }));
    let mut config = ConsumerConfig::new("noscript");
    config.concurrency = 4;
    config.metrics = false;
    let stop = CancellationToken::new();
    let consumer = Consumer::new(config, Redis::open(&url).unwrap(), registry).unwrap();
    let run = tokio::spawn(consumer.run(stop.clone()));
    for round in 0..3 {
        faults::enqueue_range(&url, "noscript", "k", &format!("r{round}"), 0, 500).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    let all = common::try_wait_until(Duration::from_secs(30), || async {
        done.load(Ordering::Relaxed) >= 1500
    })
    .await;
    stop.cancel();
    let report = run.await.unwrap().unwrap();
    assert!(all, "{} of 1500 ran; {report:?}", done.load(Ordering::Relaxed));
    assert_eq!(report.acked, 1500, "{report:?}");
}
