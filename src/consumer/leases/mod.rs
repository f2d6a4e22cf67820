//! The table of leases this process holds: every job fetched and not yet settled,
//! released or lost, with what the consumer knows of it. The fetcher adds leases (before
//! the pool sees their jobs, so a lease is always known before its outcome); the acker
//! writes start marks and outcomes and removes settled leases; the heartbeat extends
//! leases and forgets lost ones. Each locks it briefly, never across an await.
//!
//! The table is bounded: the fetcher takes no more leases while it holds [`Leases::cap`]
//! (the buffer, the running jobs and two settle calls' worth of outcomes), so when settles
//! fall behind, fetching slows down instead of memory growing with the backlog in Redis.

mod batches;
mod lease;
mod map;

pub(crate) use batches::{BatchLease, split};
pub(crate) use lease::Lease;

use crate::consumer::counters::InMemory;
use crate::queue::envelope::{Priority, ResultSlot};
use crate::queue::scripts::FetchedBatch;
use map::LeaseMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The table and its room signal.
#[derive(Debug)]
pub(crate) struct Leases {
    table: Mutex<Table>,
    room: Notify,
    in_memory: Arc<InMemory>,
}

/// The leases by fetch sequence number (a job's [`Job::lease`](crate::Job), which the
/// fetcher sets; `leases/map.rs`), and the next one. Sequence numbers order a release
/// (jobs go back in the order they were fetched), and a drain, which looks every job up
/// three times (fetch, outcome, settle), finds each by an index. Two runs of one job in
/// this process (its lease expired and this consumer fetched it again) hold two leases,
/// each settled with its own token.
#[derive(Debug, Default)]
pub(crate) struct Table {
    pub leases: LeaseMap,
    next_seq: u64,
    /// The batch leases held whole, by name (`batches.rs`).
    pub batches: std::collections::HashMap<Arc<str>, BatchLease>,
}

impl Leases {
    pub(crate) fn new(in_memory: Arc<InMemory>) -> Self {
        Self {
            table: Mutex::default(),
            room: Notify::new(),
            in_memory,
        }
    }

    /// The most leases the fetcher takes at a concurrency `limit` with room for `buffer`
    /// jobs fetched ahead: a full buffer, the running jobs, and two settle calls of
    /// `flush_max` outcomes (one being written, one gathering).
    pub(crate) fn cap(buffer: usize, limit: usize, flush_max: usize) -> usize {
        buffer + limit + 2 * flush_max
    }

    /// Leases held now.
    pub(crate) fn len(&self) -> usize {
        self.in_memory.held()
    }

    /// Locks the table for `f`; the held gauge follows, and the fetcher is told of room.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Table) -> R) -> R {
        let mut t = lock(&self.table);
        let before = t.leases.len();
        let r = f(&mut t);
        let after = t.leases.len();
        drop(t);
        if after != before {
            self.in_memory.set_held(after);
        }
        if after < before {
            self.room.notify_one();
        }
        r
    }

    /// Adds the leases of one fetch (asked for at `sent`), in fetch order: each job's id,
    /// priority and, for an inline job, its envelope (its lease's name); `batch`: the
    /// batch lease they all are in, if the fetch took one. Returns the sequence number of
    /// the first; the others follow it one by one.
    pub(crate) fn add(
        &self,
        token: u64,
        sent: Instant,
        jobs: impl IntoIterator<Item = (String, Priority, Option<String>, Option<ResultSlot>)>,
        batch: Option<&FetchedBatch>,
    ) -> u64 {
        self.with(|t| {
            let first = t.next_seq;
            let name: Option<Arc<str>> = batch.map(|b| Arc::from(b.name.as_str()));
            for (id, priority, item, result) in jobs {
                let lease = Lease {
                    id,
                    token,
                    priority,
                    renewed: sent,
                    marked: false,
                    outcome: false,
                    item,
                    extend_sent: false,
                    result,
                    batch: name.clone(),
                };
                t.leases.insert(t.next_seq, lease);
                t.next_seq += 1;
            }
            if let (Some(name), Some(b)) = (name, batch) {
                let lease = BatchLease {
                    token,
                    ids: b.ids.clone(),
                    seqs: (first..t.next_seq).collect(),
                };
                t.batches.insert(name, lease);
            }
            first
        })
    }

    /// The token and the name of lease `seq` (see [`Lease::name`]), if still held.
    pub(crate) fn token(&self, seq: u64) -> Option<(u64, String)> {
        lock(&self.table)
            .leases
            .get(seq)
            .map(|l| (l.token, l.name().to_string()))
    }

    /// Records that lease `seq`'s start mark was written.
    pub(crate) fn set_marked(&self, seq: u64) {
        if let Some(l) = lock(&self.table).leases.get_mut(seq) {
            l.marked = true;
        }
    }

    /// Resolves after leases leave the table.
    pub(crate) async fn room(&self) {
        self.room.notified().await
    }
}

fn lock(m: &Mutex<Table>) -> MutexGuard<'_, Table> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fetch_of_a_job_holds_its_own_lease() {
        let leases = Leases::new(Arc::default());
        let now = Instant::now();
        let one = |id: &str| vec![(id.to_string(), Priority::Normal, None, None)];
        let first = leases.add(
            100,
            now,
            [("a", None), ("b", Some("{env}"))]
                .map(|(id, item)| (id.to_string(), Priority::High, item.map(str::to_string), None)),
            None,
        );
        assert_eq!(leases.token(first), Some((100, "a".to_string())));
        assert_eq!(
            leases.token(first + 1),
            Some((100, "{env}".to_string())),
            "inline: named by its envelope"
        );
        // "a" fetched again (its lease expired meanwhile): a second lease, its own token.
        let again = leases.add(200, now, one("a"), None);
        assert_eq!(again, first + 2);
        assert_eq!(leases.token(first).map(|t| t.0), Some(100));
        assert_eq!(leases.token(again).map(|t| t.0), Some(200));
        assert_eq!(leases.len(), 3);
        leases.set_marked(again);
        leases.with(|t| {
            assert!(t.leases.get(again).unwrap().marked && !t.leases.get(first).unwrap().marked);
            t.leases.remove(first);
        });
        assert_eq!(leases.len(), 2);
        assert_eq!(leases.token(first), None);
        assert_eq!(leases.token(again).map(|t| t.0), Some(200));
    }
}
