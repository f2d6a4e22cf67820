//! samples.lua: one sample per period whoever calls, the samples say what the queue held,
//! the list keeps the newest ones, and a history key of the wrong type fails the call
//! before any write.

use crate::common::*;
use crate::{H, N};
use std::time::Duration;
use weir::queue::samples::{self, Sample, SamplesConfig};

fn config(period: Duration, kept: usize) -> SamplesConfig {
    let mut c = SamplesConfig::default();
    c.period = period;
    c.kept = kept;
    c
}

async fn samples(ctx: &Ctx) -> Vec<Sample> {
    let raw: Vec<String> = ctx.cmd(&["LRANGE", &ctx.keys.samples(), "0", "-1"]).await;
    raw.iter().map(|s| Sample::parse(s).expect("a sample")).collect()
}

#[tokio::test]
async fn a_period_gets_one_sample_whoever_calls() {
    let ctx = Ctx::new("hist-once").await;
    let hour = config(Duration::from_secs(3600), 10);
    let mut wrote = 0;
    for _ in 0..5 {
        wrote += samples::record(&mut ctx.c(), &ctx.keys, &hour).await.unwrap() as usize;
    }
    // (The first call may land at the very end of an hour: then the next one writes too.)
    let n = samples(&ctx).await.len();
    assert!((1..=2).contains(&wrote), "{wrote} writes");
    assert_eq!(n, wrote, "a write per true, none per false");
}

#[tokio::test]
async fn a_sample_holds_the_counters_and_sizes() {
    let ctx = Ctx::new("hist-shape").await;
    let state = State::default()
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 1)
        .job("c", 0, 3, 0)
        .ready(N, &["a", "b"])
        .delayed(H, &[("c", 99)])
        .job("d", 0, 3, 1)
        .lease(&[("d", 5)])
        .dead(&[("e", 1)])
        .counter("acked", 7)
        .counter("enqueued", 11)
        .counter("dead", 1);
    seed(&mut ctx.c(), &ctx.keys, &state).await;
    let before = ctx.now_ms().await;
    let c = config(Duration::from_secs(3600), 10);
    assert!(samples::record(&mut ctx.c(), &ctx.keys, &c).await.unwrap());
    let s = samples(&ctx).await[0];
    assert_eq!(
        (s.enqueued, s.acked, s.dead, s.retried),
        (11, 7, 1, 0),
        "counters"
    );
    assert_eq!(
        (s.ready, s.delayed, s.in_flight, s.dead_size),
        (2, 1, 1, 1),
        "sizes"
    );
    assert!(s.at.0 >= before && s.slot.0 <= s.at.0 && s.slot.0 % 3_600_000 == 0);
    // A reader sees it, and no rates from one sample.
    let h = ctx.admin().samples(10).await.unwrap();
    assert_eq!(h.samples, vec![s]);
    assert_eq!(h.rates, None);
}

#[tokio::test]
async fn the_list_keeps_the_newest_samples() {
    let ctx = Ctx::new("hist-bound").await;
    let c = config(Duration::from_millis(100), 3);
    let mut wrote = 0;
    while wrote < 6 {
        wrote += samples::record(&mut ctx.c(), &ctx.keys, &c).await.unwrap() as usize;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = samples(&ctx).await;
    assert_eq!(s.len(), 3, "kept 3 of 6");
    assert!(
        s.windows(2).all(|w| w[0].slot.0 > w[1].slot.0),
        "newest first, one per slot: {s:?}"
    );
    let ttl: i64 = ctx.cmd(&["PTTL", &ctx.keys.samples()]).await;
    assert!(ttl > 0 && ttl <= 600, "expires after twice its span: {ttl}");
}

#[tokio::test]
async fn a_history_of_the_wrong_type_fails_before_any_write() {
    let ctx = Ctx::new("hist-type").await;
    let _: () = ctx.cmd(&["SET", &ctx.keys.samples(), "garbage"]).await;
    let c = config(Duration::from_secs(1), 10);
    let err = samples::record(&mut ctx.c(), &ctx.keys, &c).await.unwrap_err();
    assert!(err.to_string().contains("nothing was changed"), "{err}");
    let v: String = ctx.cmd(&["GET", &ctx.keys.samples()]).await;
    assert_eq!(v, "garbage");
    // A bad argument is refused before any write too.
    let _: () = ctx.cmd(&["DEL", &ctx.keys.samples()]).await;
    let bad = weir::queue::scripts::samples_record(&mut ctx.c(), &ctx.keys, 0, 10).await;
    assert!(bad.is_err());
    assert!(samples(&ctx).await.is_empty());
}
