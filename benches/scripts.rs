//! The hot-path scripts against a real, private redis-server: `fetch` and `settle` (ack)
//! at batch sizes 1, 10, 100 and 1000, and a fetch+ack cycle with 10,000 against
//! 1,000,000 jobs waiting (the cost per job must not grow with the backlog).
//! Reported as jobs per second.
// `criterion_main!` defines an undocumented `pub fn main`.
#![allow(missing_docs)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::time::{Duration, Instant};
use weir::Conn;
use weir::queue::keys::QueueKeys;
use weir::queue::scripts::{self, EnqueueArg, Settle};
use weir::{EmbeddedRedis, NewJob, Producer, Redis};

const VT_MS: u64 = 60_000;

struct Bench {
    conn: Conn,
    keys: QueueKeys,
    producer: Producer,
}

fn jobs(n: usize) -> Vec<EnqueueArg> {
    let payload = serde_json::json!({ "data": "x".repeat(90) });
    (0..n)
        .map(|_| {
            Producer::prepare_offline(NewJob::new("noop", &payload).unwrap(), 1, &mut Vec::new()).unwrap()
        })
        .collect()
}

impl Bench {
    async fn fill(&self, n: usize) {
        for chunk in jobs(n).chunks(1000) {
            self.producer.enqueue_args(chunk).await.unwrap();
        }
    }

    async fn fetch(&self, n: usize) -> scripts::Fetched {
        scripts::fetch(&mut self.conn.clone(), &self.keys, n, VT_MS)
            .await
            .unwrap()
    }

    async fn ack(&self, f: scripts::Fetched) {
        let items: Vec<Settle> = f
            .jobs
            .into_iter()
            .map(|j| Settle::Ack {
                id: j.name,
                token: f.deadline_ms,
            })
            .collect();
        let missed = scripts::settle(&mut self.conn.clone(), &self.keys, &items)
            .await
            .unwrap()
            .missed;
        assert!(missed.is_empty());
    }

    /// Times `iters` fetches (or acks) of `n` jobs, in rounds so the untimed set-up stays small.
    async fn timed(&self, iters: u64, n: usize, time_ack: bool) -> Duration {
        let mut total = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let round = left.min(50);
            left -= round;
            self.fill(round as usize * n).await;
            for _ in 0..round {
                let t = Instant::now();
                let f = self.fetch(n).await;
                if !time_ack {
                    total += t.elapsed();
                }
                let t = Instant::now();
                self.ack(f).await;
                if time_ack {
                    total += t.elapsed();
                }
            }
        }
        total
    }
}

fn setup(rt: &tokio::runtime::Runtime, redis: &EmbeddedRedis, queue: &str) -> Bench {
    rt.block_on(async {
        let conn = Redis::open(&redis.url()).unwrap().connect().await.unwrap();
        Bench {
            producer: Producer::new(conn.clone(), queue).unwrap(),
            keys: QueueKeys::new(queue).unwrap(),
            conn,
        }
    })
}

fn batch_sizes(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let redis = EmbeddedRedis::start().unwrap();
    let mut g = c.benchmark_group("scripts");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    for n in [1usize, 10, 100, 1000] {
        g.throughput(Throughput::Elements(n as u64));
        for (name, time_ack) in [("fetch", false), ("ack", true)] {
            let b = setup(&rt, &redis, &format!("bench-{name}-{n}"));
            g.bench_with_input(BenchmarkId::new(name, n), &n, |bench, &n| {
                bench.to_async(&rt).iter_custom(|iters| {
                    let b = &b;
                    async move { b.timed(iters, n, time_ack).await }
                })
            });
        }
    }
    g.finish();
}

fn backlog(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let redis = EmbeddedRedis::start().unwrap();
    let mut g = c.benchmark_group("backlog");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let n = 500usize;
    g.throughput(Throughput::Elements(n as u64));
    for waiting in [10_000usize, 1_000_000] {
        let b = setup(&rt, &redis, &format!("bench-backlog-{waiting}"));
        rt.block_on(b.fill(waiting));
        g.bench_with_input(
            BenchmarkId::new("fetch_ack_500", waiting),
            &waiting,
            |bench, _| {
                bench.to_async(&rt).iter_custom(|iters| {
                    let b = &b;
                    async move {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            let t = Instant::now();
                            let f = b.fetch(n).await;
                            b.ack(f).await;
                            total += t.elapsed();
                            // Refill (untimed) so the backlog stays where it was.
                            b.fill(n).await;
                        }
                        total
                    }
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, batch_sizes, backlog);
criterion_main!(benches);
