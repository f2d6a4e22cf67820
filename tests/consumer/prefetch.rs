//! How many jobs a consumer holds ahead of its free slots: long jobs are not hoarded by
//! the consumer that fetched first while another one has slots free.

use crate::common::*;
use crate::support::*;
use std::time::Duration;

/// Two consumers of 20 slots, woken together by 40 jobs of a second each: each runs a
/// share. A consumer that held two jobs per slot fetched all 40 (20 running, 20 waiting
/// in its buffer) and the other ran none, so the run took two waves instead of one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_share_long_jobs_instead_of_one_hoarding_them() {
    let ctx = Ctx::new("hoard").await;
    let mut cfg = config(&ctx);
    cfg.concurrency = 20;
    // one fetch could take every job
    cfg.fetcher.batch = 50;
    let slow = |_| async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(())
    };
    let (seen_a, seen_b) = (Seen::default(), Seen::default());
    let a = start(&ctx, cfg.clone(), seen_a.recording("k", slow));
    let b = start(&ctx, cfg, seen_b.recording("k", slow));
    for c in [&a, &b] {
        tokio::time::timeout(SOON, c.handle.ready())
            .await
            .expect("both consumers are up, idle on the empty queue");
    }
    ctx.producer().enqueue_bulk(jobs("k", "j", 40)).await.unwrap();
    wait_stats(&ctx, "all 40 jobs acked", |s| {
        s.counters.get("acked") == Some(&40)
    })
    .await;
    let (ran_a, ran_b) = (seen_a.ids(), seen_b.ids());
    a.stop().await;
    b.stop().await;
    assert_eq!(ran_a + ran_b, 40);
    // Each took at most its free slots (and what runs during a fetch's round trip: none
    // for jobs of a second); both woke within milliseconds of each other, so each ran
    // about 20. The bound leaves room for one consumer waking late.
    assert!(
        ran_a >= 10 && ran_b >= 10,
        "one consumer hoarded the jobs: {ran_a} and {ran_b} ran"
    );
    assert_empty(&ctx, 0).await;
}
