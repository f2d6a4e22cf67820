//! Batch leases held whole (docs/batch-leases.md): a fetch may lease its jobs as one batch,
//! acked with one entry when every job of it is acked. Anything else that acts on some of
//! its jobs (another outcome, a start mark, an extend, a release) splits it first: in Redis
//! (`split.lua`) and here, where its jobs' leases are then held one by one, at the same
//! token, like any other.

use super::{Leases, Table};
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, GiveUp, retrying};
use std::sync::Arc;

/// A batch lease held whole.
#[derive(Debug, Clone)]
pub(crate) struct BatchLease {
    /// Its token: the deadline its fetch returned.
    pub token: u64,
    /// The ids among its items, for its ack (`scripts::BatchAck`).
    pub ids: Vec<String>,
    /// Its jobs' leases in the table.
    pub seqs: Vec<u64>,
}

impl Table {
    /// Forgets batch `name`: its jobs' leases are held one by one from now on.
    pub(crate) fn unbatch(&mut self, name: &str) -> Option<BatchLease> {
        let b = self.batches.remove(name)?;
        for seq in &b.seqs {
            if let Some(l) = self.leases.get_mut(*seq) {
                l.batch = None;
            }
        }
        Some(b)
    }
}

/// Splits the batches `names` still held whole, in Redis then in the table, retrying as
/// `give_up` says. False if it gave up: they stay whole. A batch no longer held in Redis
/// (expired and reclaimed, or split by a delete or by per-key limits) is split here too:
/// its jobs are settled one by one, and those whose lease is gone are reported missed.
pub(crate) async fn split(
    conn: &HealingConnection,
    keys: &QueueKeys,
    leases: &Leases,
    names: &[Arc<str>],
    give_up: GiveUp,
) -> bool {
    let held: Vec<(Arc<str>, u64)> = leases.with(|t| {
        names
            .iter()
            .filter_map(|n| t.batches.get(n).map(|b| (n.clone(), b.token)))
            .collect()
    });
    if held.is_empty() {
        return true;
    }
    let pairs: Vec<(&str, u64)> = held.iter().map(|(n, t)| (&**n, *t)).collect();
    let done = retrying("split", Backoff::CALL, give_up, || {
        let (mut conn, pairs) = (conn.clone(), &pairs);
        async move { scripts::split(&mut conn, keys, pairs).await }
    })
    .await;
    if done.is_err() {
        return false;
    }
    leases.with(|t| {
        for (name, _) in &held {
            t.unbatch(name);
        }
    });
    true
}
