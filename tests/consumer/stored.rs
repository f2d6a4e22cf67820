//! Limits stored for a queue (`weir limits set`) bind a consumer from its first job on:
//! it reads them before its first fetch, not a settings poll later.

use crate::common::*;
use crate::support::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use weir::queue::settings::{RateSetting, Settings};
use weir::{Registry, handler_fn};

/// What the handler saw: when each job started, and the most that ran at once.
#[derive(Clone, Default)]
struct Starts {
    at: Arc<Mutex<Vec<Instant>>>,
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Starts {
    /// A registry whose handler for `k` records its start, then takes `hold`.
    fn registry(&self, hold: Duration) -> Registry {
        let s = self.clone();
        Registry::new().on(
            "k",
            handler_fn(move |_job| {
                let s = s.clone();
                async move {
                    s.at.lock().unwrap().push(Instant::now());
                    let now = s.running.fetch_add(1, Ordering::SeqCst) + 1;
                    s.peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(hold).await;
                    s.running.fetch_sub(1, Ordering::SeqCst);
                    Ok(())
                }
            }),
        )
    }

    fn count(&self) -> usize {
        self.at.lock().unwrap().len()
    }

    /// How many of the starts from the `from`th on came within `window` of that one.
    fn within_first(&self, from: usize, window: Duration) -> usize {
        let at = &self.at.lock().unwrap()[from..];
        at.iter().filter(|t| **t - at[0] < window).count()
    }
}

/// A stored rate of 5/s (burst 5) holds from the first job on. GCRA lets at most burst +
/// rate × w jobs start in any stretch of w: 7.5 in the 500 ms after the first start. A
/// consumer that ran unthrottled until its first settings poll starts hundreds there.
/// (A slow machine only starts fewer: the bound cannot fail for want of speed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_rate_binds_from_the_first_job() {
    let ctx = Ctx::new("stored-rate").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 3000)).await.unwrap();
    Settings {
        rate: Some(RateSetting::Limit("5/s".parse().unwrap())),
        ..Settings::default()
    }
    .store(&mut ctx.c(), &ctx.queue)
    .await
    .unwrap();
    let starts = Starts::default();
    let mut cfg = config(&ctx);
    cfg.concurrency = 64;
    // Every start of a consumer reads the stored settings, the first and a restart alike.
    for _ in 0..2 {
        let before = starts.count();
        let c = start(&ctx, cfg.clone(), starts.registry(Duration::ZERO));
        wait_until("a second's worth of starts", SOON, || async {
            starts.count() >= before + 10
        })
        .await;
        c.stop().await;
        let first = starts.within_first(before, Duration::from_millis(500));
        assert!(
            first <= 8,
            "{first} jobs started in the first 500 ms of a start under a stored rate of 5/s"
        );
    }
    let stats = ctx.stats().await;
    let acked = stats.counters.get("acked").copied().unwrap_or(0);
    assert_eq!(acked, starts.count() as u64, "every started job acked");
}

/// A stored max concurrency holds an adaptive consumer from its first job on: never more
/// running at once than the stored bound, though its own configuration allows 64.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_max_concurrency_binds_from_the_first_job() {
    let ctx = Ctx::new("stored-max").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 300)).await.unwrap();
    Settings {
        max: Some(2),
        ..Settings::default()
    }
    .store(&mut ctx.c(), &ctx.queue)
    .await
    .unwrap();
    let starts = Starts::default();
    let mut cfg = config(&ctx);
    cfg.concurrency = 64;
    let mut limiter = weir::limiter::LimiterConfig::default();
    limiter.aimd.max = 64;
    cfg.limiter = Some(limiter);
    let c = start(&ctx, cfg, starts.registry(Duration::from_millis(20)));
    wait_until("40 starts", SOON, || async { starts.count() >= 40 }).await;
    let limit = c.handle.limit.get();
    c.stop().await;
    assert_eq!(limit, 2, "the stored bound in force");
    let peak = starts.peak.load(Ordering::SeqCst);
    assert!(
        peak <= 2,
        "{peak} jobs ran at once under a stored max concurrency of 2"
    );
}
