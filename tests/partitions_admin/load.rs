//! `Producer::load` on a partitioned queue: jobs pushed one at a time with their tags, a
//! job key's plain jobs all in its partition, generated ids spread over the partitions
//! and naming theirs, every tag back once with its chunk's outcome, and a job refused
//! alone.

use crate::{lane_stats, partitioned};
use futures_util::StreamExt;
use serde_json::value::RawValue;
use weir::queue::partitions::Partitions;
use weir::queue::producer::{JobParts, Load};
use weir::{Conn, NewJob, Priority, Producer};

/// What [`load`] saw: the tags that came back (sorted), the jobs stored, and the jobs
/// refused as they were pushed (tag, why).
struct Loaded {
    tags: Vec<usize>,
    stored: u64,
    refused: Vec<(usize, String)>,
}

/// Loads jobs 1 to `n` with `key`: plain ones (kind `k`, the number as payload), one with
/// an id of its own (`own-<i>`) at every 700th, and one of a bad kind at 1,234.
async fn load(p: &Producer, n: usize, key: Option<&str>) -> Loaded {
    let (mut i, mut refused) = (0, Vec::new());
    let fill = |load: &mut Load<'_, usize>| {
        if i == n {
            return false;
        }
        i += 1;
        let pushed = if i.is_multiple_of(700) {
            let job = NewJob::new("k", &i).unwrap().id(format!("own-{i}"));
            load.push(i, key.map_or(job.clone(), |k| job.key(k)))
        } else {
            let payload = RawValue::from_string(i.to_string()).unwrap();
            let kind = if i == 1_234 { "bad kind" } else { "k" };
            let job = JobParts {
                kind,
                payload: &payload,
                priority: Priority::Normal,
                max_attempts: None,
                key,
            };
            load.push_parts(i, job)
        };
        if let Err(e) = pushed {
            refused.push((i, e.to_string()));
        }
        true
    };
    let (mut tags, mut stored) = (Vec::new(), 0);
    {
        let mut chunks = std::pin::pin!(p.load(Priority::Normal, key, fill).unwrap());
        while let Some(chunk) = chunks.next().await {
            let report = chunk.result.unwrap();
            assert!(report.duplicates.is_empty(), "{report:?}");
            stored += report.enqueued;
            tags.extend(chunk.tags);
        }
    }
    tags.sort_unstable();
    Loaded {
        tags,
        stored,
        refused,
    }
}

/// Jobs ready in each partition, and in the queue's base.
async fn ready_by_lane(
    conn: &Conn,
    parts: &Partitions,
    base: &weir::queue::keys::QueueKeys,
) -> (Vec<u64>, u64) {
    let mut lanes = Vec::new();
    for i in 0..parts.count() {
        lanes.push(lane_stats(conn, parts.partition(i)).await.ready_total());
    }
    (lanes, lane_stats(conn, base).await.ready_total())
}

/// Every tag but the refused job's came back once, and that job was refused for its kind.
fn every_tag_once_but_the_refused(l: &Loaded, n: usize) {
    let expected: Vec<usize> = (1..=n).filter(|i| *i != 1_234).collect();
    assert!(l.tags == expected, "{} tags back", l.tags.len());
    assert_eq!(l.stored, n as u64 - 1);
    assert_eq!(l.refused.len(), 1, "{:?}", l.refused);
    assert_eq!(l.refused[0].0, 1_234);
    assert!(l.refused[0].1.contains("job kind"), "{:?}", l.refused);
}

#[tokio::test]
async fn a_loads_keyed_jobs_go_to_the_keys_partition() {
    let (ctx, parts) = partitioned("load-key", 4).await;
    let p = Producer::open(ctx.c(), &ctx.queue).await.unwrap();
    let n = 3_000;
    let loaded = load(&p, n, Some("tenant-7")).await;
    every_tag_once_but_the_refused(&loaded, n);
    // The plain jobs in the key's partition; an id of the caller's where the id hashes.
    let mut expected = vec![0u64; parts.count()];
    let own: Vec<String> = (1..=n)
        .filter(|i| i.is_multiple_of(700))
        .map(|i| format!("own-{i}"))
        .collect();
    expected[parts.of_key("tenant-7")] += (n - 1 - own.len()) as u64;
    for id in &own {
        expected[parts.of_id(id)] += 1;
    }
    let (lanes, base) = ready_by_lane(&ctx.c(), &parts, &ctx.keys).await;
    assert_eq!((lanes, base), (expected, 0));
    // Every envelope there names the key (a job with an id of its own is stored by id).
    let lane = parts.partition(parts.of_key("tenant-7"));
    let items = ready_items(&ctx.c(), lane).await;
    let envelopes: Vec<&String> = items.iter().filter(|e| !e.starts_with("own-")).collect();
    assert_eq!(envelopes.len(), n - 1 - own.len());
    for e in envelopes {
        assert!(e.contains(r#""key":"tenant-7","payload":"#), "{e}");
    }
}

/// The items of a lane's normal ready list.
async fn ready_items(conn: &Conn, lane: &weir::queue::keys::QueueKeys) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(lane.ready(Priority::Normal))
        .arg(0)
        .arg(-1)
        .query_async(&mut conn.clone())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_loads_generated_ids_spread_over_the_partitions_and_name_theirs() {
    let (ctx, parts) = partitioned("load-spread", 3).await;
    let p = Producer::open(ctx.c(), &ctx.queue).await.unwrap();
    let n = 6_000;
    let loaded = load(&p, n, None).await;
    every_tag_once_but_the_refused(&loaded, n);
    let (lanes, base) = ready_by_lane(&ctx.c(), &parts, &ctx.keys).await;
    assert_eq!((lanes.iter().sum::<u64>(), base), (n as u64 - 1, 0), "{lanes:?}");
    for (i, ready) in lanes.iter().enumerate() {
        assert!(*ready > 0, "partition {i} got none: {lanes:?}");
        let items = ready_items(&ctx.c(), parts.partition(i)).await;
        // An envelope, or the id of a job stored by id (an id of the caller's, and the
        // jobs the enqueue script stores with it).
        for item in &items {
            let id = match item.starts_with('{') {
                true => serde_json::from_str::<serde_json::Value>(item).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                false => item.clone(),
            };
            assert!(
                id.starts_with("own-") || id.ends_with(&format!(".p{i}")),
                "{id} in partition {i}"
            );
        }
    }
}
