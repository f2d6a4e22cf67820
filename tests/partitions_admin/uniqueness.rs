//! Uniqueness on a partitioned queue: what a job is unique by decides its partition, so
//! a unique key or an id of the caller's is checked in one place and never stored twice.

use crate::{lane_stats, partitioned, weir};
use std::time::Duration;
use weir::queue::partitions::Partitions;
use weir::{Conn, Error, NewJob, Producer};

const HOUR: Duration = Duration::from_secs(3600);

/// The lanes (partitions) whose jobs hash holds `id`.
async fn lanes_holding(conn: &Conn, parts: &Partitions, id: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for i in 0..parts.count() {
        let n: u32 = redis::cmd("HEXISTS")
            .arg(parts.partition(i).jobs())
            .arg(id)
            .query_async(&mut conn.clone())
            .await
            .unwrap();
        if n == 1 {
            out.push(i);
        }
    }
    out
}

/// Jobs ready in all the partitions.
async fn ready(conn: &Conn, parts: &Partitions) -> u64 {
    let mut n = 0;
    for i in 0..parts.count() {
        n += lane_stats(conn, parts.partition(i)).await.ready_total();
    }
    n
}

#[tokio::test]
async fn one_unique_key_is_one_job_across_partitions() {
    let (ctx, parts) = partitioned("uniq-key", 6).await;
    let p = Producer::open(ctx.c(), &ctx.queue).await.unwrap();
    let jobs = (0..6).map(|i| {
        NewJob::new("k", &i)
            .unwrap()
            .unique_key("order-7")
            .unique_for(HOUR)
    });
    let r = p.enqueue_bulk(jobs).await.unwrap();
    assert_eq!((r.enqueued, r.duplicates.len()), (1, 5), "{r:?}");
    // One at a time (each alone would go to the shallower of two partitions).
    let mut stored = 0;
    for i in 0..6 {
        let job = NewJob::new("k", &i)
            .unwrap()
            .unique_key("order-8")
            .unique_for(HOUR);
        match p.enqueue(job).await {
            Ok(_) => stored += 1,
            Err(Error::Duplicate(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(stored, 1);
    assert_eq!(ready(&ctx.c(), &parts).await, 2);

    // weir enqueue, six lines with one unique key.
    let file = tempfile::NamedTempFile::new().unwrap();
    let line = r#"{"kind":"k","payload":1,"unique_key":"order-9","unique_for":"1h"}"#;
    std::fs::write(file.path(), format!("{line}\n").repeat(6)).unwrap();
    let path = file.path().to_str().unwrap();
    let (code, out, err) = weir(&ctx.url, &["enqueue", "-q", &ctx.queue, path]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("enqueued 1 job "), "{out}");
    assert_eq!(ready(&ctx.c(), &parts).await, 3);
}

#[tokio::test]
async fn an_id_of_the_callers_is_one_job_whatever_its_key() {
    let (ctx, parts) = partitioned("uniq-id", 6).await;
    let p = Producer::open(ctx.c(), &ctx.queue).await.unwrap();
    let mut stored = 0;
    for key in ["tenant-a", "tenant-b", "tenant-c"] {
        let job = NewJob::new("k", &1).unwrap().id("caller-1").key(key);
        match p.enqueue(job).await {
            Ok(_) => stored += 1,
            Err(Error::Duplicate(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(stored, 1);
    let jobs =
        ["tenant-a", "tenant-b", "tenant-c"].map(|k| NewJob::new("k", &1).unwrap().id("caller-2").key(k));
    let r = p.enqueue_bulk(jobs).await.unwrap();
    assert_eq!((r.enqueued, r.duplicates.len()), (1, 2), "{r:?}");
    for id in ["caller-1", "caller-2"] {
        assert_eq!(
            lanes_holding(&ctx.c(), &parts, id).await.len(),
            1,
            "{id}: one copy"
        );
        let shown = ctx.admin().job(id).await.unwrap();
        assert!(shown.is_some(), "job show finds {id}");
    }
    let (code, out, err) = weir(
        &ctx.url,
        &["job", "delete", "caller-1", "--yes", "-q", &ctx.queue],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        ctx.admin().job("caller-1").await.unwrap().is_none(),
        "no copy left"
    );
    assert_eq!(ready(&ctx.c(), &parts).await, 1);
}
