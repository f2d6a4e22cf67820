//! A partitioned queue's settings: the queue's own values in its base lane, each
//! partition its share of the fleet-wide limits, kept in step by every change; the fetch
//! script of a partition holds that partition to its share.

use crate::*;
use std::collections::HashMap;
use weir::limiter::Rate;
use weir::queue::settings::{Cleared, Settings};

async fn hash(ctx: &Ctx, keys: &QueueKeys) -> HashMap<String, String> {
    ctx.cmd(&["HGETALL", &keys.settings()]).await
}

#[tokio::test]
async fn fleet_limits_are_split_over_the_partitions() {
    let (ctx, parts) = partitioned("plimits", 3).await;
    let queue_level = Settings {
        max: Some(40),
        global_rate: Some("300/s".parse::<Rate>().unwrap().with_burst(30)),
        global_concurrency: Some(10),
        dead_cap: Some(1000),
        key_concurrency: Some(2),
        ..Settings::default()
    };
    Settings::update(&mut ctx.c(), &ctx.queue, &queue_level)
        .await
        .unwrap();
    assert_eq!(
        Settings::load(&mut ctx.c(), &ctx.queue).await.unwrap(),
        queue_level
    );
    let mut concurrency = Vec::new();
    for i in 0..3 {
        let lane = parts.partition(i).name();
        let s = Settings::load(&mut ctx.c(), lane).await.unwrap();
        assert_eq!(s, queue_level.share(3, i), "{lane}");
        assert_eq!(s.global_rate.unwrap().per_second(), 100.0);
        assert_eq!(
            (s.max, s.key_concurrency),
            (Some(40), Some(2)),
            "copied as they are"
        );
        concurrency.push(s.global_concurrency.unwrap());
    }
    assert_eq!(concurrency.iter().sum::<u64>(), 10);
    // The dead-letter caps in force add up: the base's and the partitions' shares.
    assert_eq!(ctx.admin().stats().await.unwrap().dead_cap, 2000);

    // A partition's fetch is held to its share of the global concurrency.
    let ids: Vec<String> = (0..10).map(|i| format!("j{i}.p0")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    enqueue(&ctx.c(), parts.partition(0).name(), "k", &ids).await;
    let f = scripts::fetch(&mut ctx.c(), parts.partition(0), 100, 60_000)
        .await
        .unwrap();
    assert_eq!(f.jobs.len() as u64, concurrency[0], "{:?}", f.global);

    // Lifting a limit lifts every share of it; clearing clears every lane.
    Settings::clear_some(&mut ctx.c(), &ctx.queue, &[Cleared::GlobalRate])
        .await
        .unwrap();
    for i in 0..3 {
        let h = hash(&ctx, parts.partition(i)).await;
        assert!(
            !h.contains_key("global_rate") && !h.contains_key("global_burst"),
            "{h:?}"
        );
        assert!(h.contains_key("global_concurrency"), "{h:?}");
    }
    Settings::clear(&mut ctx.c(), &ctx.queue).await.unwrap();
    for lane in parts.lanes() {
        assert!(hash(&ctx, lane).await.is_empty(), "{}", lane.name());
    }
}

#[tokio::test]
async fn a_queue_that_is_not_partitioned_keeps_one_settings_hash() {
    let ctx = Ctx::new("plain-limits").await;
    let s = Settings {
        global_concurrency: Some(3),
        ..Settings::default()
    };
    Settings::update(&mut ctx.c(), &ctx.queue, &s).await.unwrap();
    let pattern = format!("weir:{{{}~*", ctx.queue);
    let lanes: Vec<String> = ctx.cmd(&["KEYS", &pattern]).await;
    assert!(lanes.is_empty(), "{lanes:?}");
    assert_eq!(hash(&ctx, &ctx.keys).await["global_concurrency"], "3");
}
