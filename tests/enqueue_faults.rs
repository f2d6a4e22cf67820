//! The producer under faults that a plain retry gets wrong: a chunk's reply lost after
//! Redis stored it (through the TCP fault proxy), and Redis out of memory.

mod common;
mod faults;

use faults::proxy::Proxy;
use std::time::Duration;
use weir::{EmbeddedRedis, Error, NewJob, Producer, Redis};

/// The end of a MULTI/EXEC transaction: the proxy loses the reply to the request that
/// carries it, after Redis ran the transaction.
const EXEC: &[u8] = b"$4\r\nEXEC\r\n";

async fn producer(url: &str, queue: &str) -> Producer {
    Producer::new(Redis::open(url).unwrap().connect().await.unwrap(), queue).unwrap()
}

/// A bulk chunk's reply is lost (Redis stored its jobs; the producer never heard back),
/// on each path of the bulk load: a [`weir::queue::producer::Bulk`] load and
/// `Producer::enqueue_bulk` (plain transactions with a chunk token), and jobs that run
/// the enqueue script (delayed, generated ids). The retry does not store them again:
/// every job is stored exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_enqueue_reply_stores_the_chunk_once() {
    let redis = EmbeddedRedis::start().unwrap();
    let proxy = Proxy::start(redis.port());
    let queue = "lost-enqueue";
    let p = producer(&proxy.url(), queue).await;
    let admin = faults::queue(&redis.url(), queue).await;

    proxy.lose_reply_to(EXEC);
    let r = p.bulk("k").enqueue(0..1000).await.unwrap();
    assert!(proxy.reply_lost(), "the proxy lost a Bulk chunk's reply");
    assert_eq!(r.enqueued, 1000);
    assert_eq!(
        admin.stats().await.unwrap().ready_total(),
        1000,
        "Bulk: each job once"
    );

    let before = proxy.counts().lost.load(std::sync::atomic::Ordering::SeqCst);
    proxy.lose_reply_to(EXEC);
    let jobs = (0..1000).map(|i| NewJob::new("k", &i).unwrap());
    let r = p.enqueue_bulk(jobs).await.unwrap();
    assert_eq!(
        proxy.counts().lost.load(std::sync::atomic::Ordering::SeqCst),
        before + 1
    );
    assert_eq!(r.enqueued, 1000);
    assert_eq!(
        admin.stats().await.unwrap().ready_total(),
        2000,
        "enqueue_bulk: each job once"
    );

    // The script's path (a chunk with one delayed job takes it whole): a first call loads
    // the script, then the next EVALSHA's reply is lost. A resent id would be pushed to
    // the ready list a second time.
    let hour = Duration::from_secs(3600);
    p.enqueue_bulk([NewJob::new("k", &0).unwrap().delay(hour)])
        .await
        .unwrap();
    proxy.lose_reply_to(b"EVALSHA");
    let ready = (1..1000).map(|i| NewJob::new("k", &i).unwrap());
    let mixed = [NewJob::new("k", &0).unwrap().delay(hour)]
        .into_iter()
        .chain(ready);
    let r = p.enqueue_bulk(mixed).await.unwrap();
    assert_eq!(
        proxy.counts().lost.load(std::sync::atomic::Ordering::SeqCst),
        before + 2
    );
    assert_eq!((r.enqueued, r.duplicates.len()), (1000, 0), "{r:?}");
    let stats = admin.stats().await.unwrap();
    assert_eq!(
        (stats.ready_total(), stats.delayed),
        (2999, 2),
        "the script's path: each job once"
    );
}

/// Redis full (`maxmemory` reached, policy `noeviction`): a bulk load stops at once with
/// `Error::OutOfMemory` (inside `BulkStopped` for a `Bulk` load), rather than retrying
/// the refused chunks for minutes; what it stored is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_refused_for_memory_stops_at_once() {
    let ctx = common::Ctx::private("oom").await;
    let url = ctx.url.clone();
    let mut conn = faults::raw(&url).await;
    let used: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .unwrap();
    let used: u64 = used
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used + 4_000_000)
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query_async(&mut conn)
        .await
        .unwrap();
    let p = producer(&url, &ctx.queue).await;
    let payload = "x".repeat(200);
    let jobs = (0..200_000).map(|_| NewJob::new("k", &payload).unwrap());
    let e = p.enqueue_bulk(jobs).await.unwrap_err();
    assert!(matches!(e, Error::OutOfMemory(_)), "{e}");
    assert!(e.to_string().contains("out of memory"), "{e}");
    let stored = ctx.stats().await.ready_total();
    assert!(stored > 0 && stored < 200_000, "{stored}");
    // Each refused chunk was sent once: at most the chunks in flight were refused.
    let refused = refused_transactions(&mut conn).await;
    assert!(
        refused <= weir::queue::producer::BULK_PIPELINE as u64,
        "{refused} refused calls"
    );

    let e = p
        .bulk("k")
        .enqueue((0..200_000).map(|_| &payload))
        .await
        .unwrap_err();
    let Error::BulkStopped { enqueued, source, .. } = &e else {
        panic!("{e}")
    };
    assert!(matches!(**source, Error::OutOfMemory(_)), "{e}");
    assert_eq!(*enqueued, ctx.stats().await.ready_total() - stored, "{e}");
    let refused = refused_transactions(&mut conn).await;
    assert!(
        refused <= weir::queue::producer::BULK_PIPELINE as u64,
        "{refused} refused calls"
    );
}

/// Transactions Redis refused since the last call (`EXECABORT` in `INFO errorstats`),
/// resetting the count.
async fn refused_transactions(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query_async(&mut *conn)
        .await
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("errorstat_EXECABORT:count="))
        .map_or(0, |n| n.trim().parse().unwrap())
}
