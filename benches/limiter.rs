//! Cost of the limiter on the job path: `Limiter::record` per finished job (the lock, a
//! counter, a push), the same from two threads at once, and closing a full window (the
//! O(n) percentile selection, once per window).
// `criterion_main!` defines an undocumented `pub fn main`.
#![allow(missing_docs)]

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use weir::limiter::limit::Limit;
use weir::limiter::{Limiter, LimiterConfig, Signal, Window, WindowConfig};

fn record(c: &mut Criterion) {
    let mut g = c.benchmark_group("limiter");
    g.throughput(Throughput::Elements(1));
    let limiter = Limiter::new(LimiterConfig::default(), Limit::new(64)).unwrap();
    let started = Instant::now();
    let mut i = 0u64;
    g.bench_function("record", |b| {
        b.iter(|| {
            i += 1;
            // Completions 0–1 ms after the window opened: the window stays open.
            limiter.record(started, Duration::from_nanos(i % 1_000_000), Signal::Success)
        })
    });
    let shared = Arc::new(Limiter::new(LimiterConfig::default(), Limit::new(64)).unwrap());
    g.bench_function("record, two threads", |b| {
        b.iter_custom(|iters| {
            let other = {
                let l = shared.clone();
                std::thread::spawn(move || {
                    for i in 0..iters {
                        l.record(started, Duration::from_nanos(i % 1_000_000), Signal::Success);
                    }
                })
            };
            let t = std::time::Instant::now();
            for i in 0..iters {
                shared.record(started, Duration::from_nanos(i % 1_000_000), Signal::Success);
            }
            let e = t.elapsed();
            other.join().unwrap();
            e
        })
    });
    g.finish();

    let mut g = c.benchmark_group("window");
    let n = WindowConfig::default().max_kept;
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("close 16384 latencies", |b| {
        b.iter_batched(
            || {
                let t0 = Instant::now();
                let mut w = Window::new(WindowConfig::default(), t0).unwrap();
                for i in 0..n as u64 {
                    w.record(t0, Duration::from_micros((i * 7919) % 100_000), Signal::Success);
                }
                (w, t0)
            },
            |(mut w, t0)| w.close(t0 + Duration::from_secs(1), 64),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, record);
criterion_main!(benches);
