//! The history sampler in consumers' housekeeping: two consumers of a queue write one
//! sample per period between them, the list stays bounded, and readers get rates from it.

use crate::common::*;
use crate::support::*;
use std::time::Duration;
use weir::queue::samples::Sample;

#[tokio::test]
async fn two_consumers_write_one_sample_per_period_and_keep_the_newest() {
    let ctx = Ctx::new("samples").await;
    let period = Duration::from_millis(200);
    let mut cfg = config(&ctx);
    cfg.samples.period = period;
    cfg.samples.kept = 5;
    let seen = Seen::default();
    let a = start(&ctx, cfg.clone(), seen.acking("k"));
    let b = start(&ctx, cfg, seen.acking("k"));
    ctx.producer().enqueue_bulk(jobs("k", "h", 40)).await.unwrap();
    let read = || async {
        let raw: Vec<String> = ctx.cmd(&["LRANGE", &ctx.keys.samples(), "0", "-1"]).await;
        raw.iter().map(|s| Sample::parse(s).unwrap()).collect::<Vec<_>>()
    };
    // Run for 12 periods at least after the first sample.
    let first = {
        wait_until("a first sample", SOON, || async { !read().await.is_empty() }).await;
        read().await.last().unwrap().slot.0
    };
    wait_until("twelve periods of samples", SOON, || async {
        read().await.first().is_some_and(|s| s.slot.0 >= first + 12 * 200)
    })
    .await;
    wait_stats(&ctx, "every job acked", |s| s.counters.get("acked") == Some(&40)).await;
    a.stop().await;
    b.stop().await;
    let s = read().await;
    assert_eq!(s.len(), 5, "the newest 5 kept: {s:?}");
    for w in s.windows(2) {
        assert!(
            w[0].slot.0 > w[1].slot.0,
            "one sample per period, newest first: {s:?}"
        );
        assert_eq!(w[0].slot.0 % 200, 0, "slots on the period's clock");
    }
    assert_eq!(s[0].acked, 40, "the newest sample saw every ack");
    // The admin reader: oldest first, the same samples.
    let h = ctx.admin().samples(100).await.unwrap();
    assert_eq!(h.samples.iter().rev().copied().collect::<Vec<_>>(), s);
}
