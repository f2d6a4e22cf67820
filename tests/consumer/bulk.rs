//! `Producer::bulk`: jobs of one kind whose envelopes are written straight into the
//! enqueue calls. What it stores is what `enqueue_bulk` stores for the same jobs; a
//! consumer runs every job once; bad input stops the load with a clear error and leaves
//! exactly the chunks before it enqueued.

use crate::common::*;
use crate::support::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use weir::queue::partitions::Partitions;
use weir::{Error, NewJob, Priority, Producer, Registry, handler_fn};

/// What the handler saw of each job, by payload number: (id, attempt, max_attempts).
type Ran = Arc<Mutex<BTreeMap<u64, (String, u32, u32)>>>;

#[derive(Serialize)]
struct Mail {
    n: u64,
    to: String,
}

/// The ready list of priority `p` (0 high, 1 normal, 2 low) of the queue or lane `name`.
async fn ready(ctx: &Ctx, name: &str, p: usize) -> Vec<String> {
    let keys = weir::queue::keys::QueueKeys::new(name).unwrap();
    let prio = [Priority::High, Priority::Normal, Priority::Low][p];
    ctx.cmd(&["LRANGE", keys.ready(prio), "0", "-1"]).await
}

fn field<'a>(envelope: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    &envelope[name]
}

#[tokio::test]
async fn a_bulk_load_stores_what_enqueue_bulk_would_and_each_job_runs_once() {
    let ctx = Ctx::new("bulk").await;
    const N: u64 = 2_500;
    let mails = (0..N).map(|n| Mail {
        n,
        to: format!("user-{n}@example.com \"quoted\""),
    });
    let report = ctx
        .producer()
        .bulk("mail")
        .priority(Priority::High)
        .max_attempts(3)
        .enqueue(mails)
        .await
        .unwrap();
    assert_eq!((report.enqueued, report.duplicates.len()), (N, 0));
    let items = ready(&ctx, &ctx.queue, 0).await;
    assert_eq!(items.len(), N as usize, "all in the high-priority list, in order");
    assert!(ready(&ctx, &ctx.queue, 1).await.is_empty());
    let s = ctx.stats().await;
    assert_eq!(s.counters.get("enqueued"), Some(&N));

    // Each item is byte for byte the envelope the NewJob path writes for the same job.
    for (n, item) in items.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(item).unwrap();
        let id = field(&v, "id").as_str().unwrap();
        let at = field(&v, "enqueued_at").as_u64().unwrap();
        let mail = Mail {
            n: n as u64,
            to: format!("user-{n}@example.com \"quoted\""),
        };
        let job = NewJob::new("mail", &mail)
            .unwrap()
            .id(id)
            .priority(Priority::High)
            .max_attempts(3);
        let expected = Producer::prepare_offline(job, at, &mut Vec::new()).unwrap();
        assert_eq!(item.as_bytes(), expected.envelope, "job {n}");
    }

    // A consumer runs every job once, with the load's options.
    let seen: Ran = Arc::default();
    let registry = Registry::new().on(
        "mail",
        handler_fn({
            let seen = seen.clone();
            move |job: weir::Job| {
                let n = job.payload::<serde_json::Value>().unwrap()["n"].as_u64().unwrap();
                let before = seen
                    .lock()
                    .unwrap()
                    .insert(n, (job.id.clone(), job.attempt, job.max_attempts));
                assert!(before.is_none(), "job {n} ran twice");
                async { Ok(()) }
            }
        }),
    );
    let mut cfg = config(&ctx);
    cfg.drain = true;
    let done = start(&ctx, cfg, registry).join().await;
    assert_eq!(done.acked, N);
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(seen.len(), N as usize, "every payload ran");
    assert!(seen.values().all(|(_, attempt, max)| (*attempt, *max) == (0, 3)));
    let ids: HashSet<&str> = seen.values().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids.len(), N as usize, "generated ids are distinct");
    assert_empty(&ctx, 0).await;
}

#[tokio::test]
async fn a_bulk_load_with_ids_keeps_them_and_spreads_over_partitions() {
    let ctx = Ctx::new("bulk-parts").await;
    let parts = Partitions::create(&mut ctx.c(), &ctx.queue, 3)
        .await
        .unwrap()
        .partitions;
    let producer = Producer::open(ctx.c(), &ctx.queue).await.unwrap();

    // Caller ids: each job in the partition its id hashes to.
    let jobs = (0..1_500).map(|i| (format!("m-{i}"), serde_json::json!({ "i": i })));
    let r = producer.bulk("k").enqueue_with_ids(jobs).await.unwrap();
    assert_eq!(r.enqueued, 1_500);
    let mut ids = HashSet::new();
    for (lane, keys) in (0..parts.count()).map(|i| parts.partition(i)).enumerate() {
        for item in ready(&ctx, keys.name(), 1).await {
            let v: serde_json::Value = serde_json::from_str(&item).unwrap();
            let id = field(&v, "id").as_str().unwrap().to_owned();
            assert_eq!(parts.of_id(&id), lane, "{id} in partition {lane}");
            let i: u64 = id.strip_prefix("m-").unwrap().parse().unwrap();
            assert_eq!(field(&v, "payload")["i"], i);
            assert!(ids.insert(id));
        }
    }
    assert_eq!(ids.len(), 1_500, "every id stored once");

    // Generated ids: each chunk to the next partition in turn, its ids naming it. (Run
    // in a task of its own: a load's future can be spawned.)
    let load = tokio::spawn(async move { producer.bulk("k").enqueue(vec![7u8; 3_000]).await });
    let r = load.await.unwrap().unwrap();
    assert_eq!(r.enqueued, 3_000);
    for (lane, keys) in (0..parts.count()).map(|i| parts.partition(i)).enumerate() {
        let named: Vec<String> = ready(&ctx, keys.name(), 1)
            .await
            .iter()
            .map(|item| serde_json::from_str::<serde_json::Value>(item).unwrap())
            .filter(|v| !field(v, "id").as_str().unwrap().starts_with("m-"))
            .map(|v| field(&v, "id").as_str().unwrap().to_owned())
            .collect();
        assert_eq!(named.len(), 1_000, "partition {lane}: one chunk");
        assert!(named.iter().all(|id| parts.of_id(id) == lane), "partition {lane}");
    }
}

#[tokio::test]
async fn a_bulk_load_stops_at_bad_input_with_the_chunks_before_it_enqueued() {
    let ctx = Ctx::new("bulk-bad").await;
    let producer = ctx.producer().max_envelope_bytes(400);

    // A bad id in the second chunk: the first chunk is stored, nothing after it.
    let jobs = (0..2_500).map(|i| {
        let id = if i == 1_500 {
            "no spaces".to_owned()
        } else {
            format!("m-{i}")
        };
        (id, i)
    });
    let e = producer.bulk("k").enqueue_with_ids(jobs).await.unwrap_err();
    let Error::BulkStopped { enqueued, at, source } = &e else {
        panic!("{e}");
    };
    assert_eq!((*enqueued, *at), (1_000, 1_500), "{e}");
    assert!(
        matches!(**source, Error::InvalidName { what: "job id", .. }),
        "{e}"
    );
    let stored = ready(&ctx, &ctx.queue, 1).await;
    let expected: Vec<String> = (0..1_000).map(|i| format!(r#""id":"m-{i}""#)).collect();
    assert_eq!(stored.len(), 1_000);
    assert!(
        stored
            .iter()
            .zip(&expected)
            .all(|(item, id)| item.contains(id.as_str()))
    );

    // An envelope over the limit, and a payload that is not JSON-serializable, stop the
    // load before anything of theirs is sent.
    let big = "x".repeat(500);
    let payloads = (0..10).map(|i| if i == 5 { big.as_str() } else { "small" });
    let e = producer.bulk("k").enqueue(payloads).await.unwrap_err();
    assert!(
        matches!(&e, Error::BulkStopped { enqueued: 0, at: 5, source } if matches!(**source, Error::TooLarge { limit: 400, .. })),
        "{e}"
    );
    let not_json: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
    let e = producer.bulk("k").enqueue([not_json]).await.unwrap_err();
    assert!(
        matches!(&e, Error::BulkStopped { enqueued: 0, at: 0, source } if matches!(**source, Error::Encode(_))),
        "{e}"
    );
    // A bad kind is refused before anything.
    let e = producer.bulk("bad kind").enqueue([1, 2]).await.unwrap_err();
    assert!(matches!(e, Error::InvalidName { what: "job kind", .. }), "{e}");
    assert_eq!(
        ready(&ctx, &ctx.queue, 1).await.len(),
        1_000,
        "nothing more stored"
    );
}
