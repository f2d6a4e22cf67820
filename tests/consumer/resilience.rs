//! A consumer rides out dropped connections: its calls reconnect and its wake
//! subscription comes back.

use crate::common::*;
use crate::support::*;
use std::time::Duration;

async fn kill_clients(ctx: &Ctx, kind: &str) -> u64 {
    // a fresh connection, so the kill also takes the test's own multiplexed one
    let client = redis::Client::open(ctx.url.as_str()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg(kind)
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut c)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_survives_dropped_connections() {
    let ctx = Ctx::private("reconnect").await;
    let seen = Seen::default();
    let registry = seen.acking("k");
    let c = start(&ctx, config(&ctx), registry);
    ctx.producer().enqueue_bulk(jobs("k", "a", 50)).await.unwrap();
    wait_until("first jobs", SOON, || async { seen.ids() == 50 }).await;

    assert!(
        kill_clients(&ctx, "pubsub").await >= 1,
        "the wake subscription was dropped"
    );
    assert!(
        kill_clients(&ctx, "normal").await >= 1,
        "the consumer's connection was dropped"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    // the test's own connection reconnects too (its first call may fail)
    let p = ctx.producer();
    let mut sent = false;
    for _ in 0..20 {
        if p.enqueue_bulk(jobs("k", "b", 50)).await.is_ok() {
            sent = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(sent, "the producer reconnects");
    wait_until("jobs after the drop", SOON, || async { seen.ids() == 100 }).await;
    let channel = ctx.keys.wake_channel().to_owned();
    wait_until("the wake subscription is back", SOON, || async {
        let (_, n): (String, u64) = ctx.cmd(&["PUBSUB", "NUMSUB", &channel]).await;
        n == 1
    })
    .await;
    wait_stats(&ctx, "all acked", |s| s.counters.get("acked") == Some(&100)).await;
    assert_eq!(c.stop().await.acked, 100);
    assert_empty(&ctx, 0).await;
}
