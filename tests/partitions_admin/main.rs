//! The operator surface of a partitioned queue (`weir queue create --partitions P`): every
//! admin call and command acts on all the queue's lanes, its partitions and its base, as
//! one queue. The library's calls against states seeded lane by lane (`calls.rs`,
//! `by_id.rs`, `limits.rs`), the `weir` commands (`commands.rs`), and stats and the
//! dead-letter queue on a three-primary Redis Cluster, where the lanes live on different
//! nodes (`cluster.rs`); and a producer's tagged load spread over the lanes (`load.rs`).

#[path = "../common/mod.rs"]
mod common;
#[path = "../faults/mod.rs"]
mod faults;

mod by_id;
mod calls;
mod cluster;
mod commands;
mod limits;
mod load;
mod uniqueness;

use common::{Ctx, State, seed};
use std::time::Duration;
use weir::queue::keys::QueueKeys;
use weir::queue::partitions::Partitions;
use weir::queue::scripts::{self, Settle};
use weir::{Conn, NewJob, Producer};

/// A bound on every command and wait: generous for a loaded 2-core machine.
pub(crate) const T: Duration = Duration::from_secs(60);

/// A fresh queue made partitioned in `n` partitions.
pub(crate) async fn partitioned(label: &str, n: usize) -> (Ctx, Partitions) {
    let ctx = Ctx::new(label).await;
    let made = Partitions::create(&mut ctx.c(), &ctx.queue, n).await.unwrap();
    assert!(made.created);
    (ctx, made.partitions)
}

/// An envelope as weir writes it, of `kind` (fixed `enqueued_at`, payload `{"n":1}`).
pub(crate) fn envelope(id: &str, kind: &str) -> String {
    common::env(id, 0, 5, 1).replace(r#""kind":"k""#, &format!(r#""kind":"{kind}""#))
}

/// Seeds lane `lane` of `parts` with dead-lettered jobs: (id, kind, dead-lettered-at ms).
pub(crate) async fn seed_dead(conn: &mut Conn, keys: &QueueKeys, dead: &[(&str, &str, u64)]) {
    let mut s = State::default();
    for (id, kind, at) in dead {
        s = s
            .raw_job(id, &envelope(id, kind))
            .error(id, &format!("broke {id}"));
        s.dead.push((id.to_string(), *at));
    }
    seed(conn, keys, &s).await;
}

/// Seeds lane `keys` with ready jobs of normal priority: (id, kind).
pub(crate) async fn seed_ready(conn: &mut Conn, keys: &QueueKeys, ready: &[(&str, &str)]) {
    let mut s = State::default();
    for (id, kind) in ready {
        s = s.raw_job(id, &envelope(id, kind));
        s.ready[1].push(id.to_string());
    }
    seed(conn, keys, &s).await;
}

/// Enqueues jobs `ids` of kind `kind` into lane `lane` (a Producer on a lane's name writes
/// that lane).
pub(crate) async fn enqueue(conn: &Conn, lane: &str, kind: &str, ids: &[&str]) {
    let p = Producer::new(conn.clone(), lane).unwrap();
    let jobs = ids.iter().map(|id| NewJob::new(kind, &1).unwrap().id(*id));
    let r = p.enqueue_bulk(jobs).await.unwrap();
    assert_eq!(r.enqueued as usize, ids.len(), "{r:?}");
}

/// Enqueues `ids` into lane `keys`, then fetches that lane and dead-letters them there
/// the way a consumer does (fatal failures), handing back anything else it fetched.
pub(crate) async fn bury(conn: &Conn, keys: &QueueKeys, ids: &[&str]) {
    enqueue(conn, keys.name(), "k", ids).await;
    let mut c = conn.clone();
    let f = scripts::fetch(&mut c, keys, 1000, 60_000).await.unwrap();
    let (mine, others): (Vec<_>, Vec<_>) = f.jobs.iter().partition(|j| ids.contains(&j.name.as_str()));
    let items: Vec<Settle> = mine
        .iter()
        .map(|j| Settle::Dead {
            id: j.name.clone(),
            token: f.deadline_ms,
            reason: format!("broke {}", j.name),
        })
        .collect();
    scripts::settle(&mut c, keys, &items).await.unwrap();
    let back: Vec<(&str, u64, weir::Priority)> = others
        .iter()
        .map(|j| (j.name.as_str(), f.deadline_ms, weir::Priority::Normal))
        .collect();
    scripts::release(&mut c, keys, &back).await.unwrap();
}

/// One lane's snapshot, read on that lane alone.
pub(crate) async fn lane_stats(conn: &Conn, keys: &QueueKeys) -> weir::Stats {
    scripts::stats(&mut conn.clone(), keys).await.unwrap()
}

/// `weir args... --redis-url url`: (exit code, stdout, stderr).
pub(crate) fn weir(url: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = args.to_vec();
    all.extend(["--redis-url", url]);
    faults::run_weir(&all, None, T)
}
