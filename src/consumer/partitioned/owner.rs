//! The owner task of a partitioned queue's consumer: which lanes this consumer fetches.
//!
//! Every consumer of the queue registers in the base lane's worker registry (its heartbeat
//! does, under one worker id for all its lanes). Each round the owner reads the live
//! entries and gives every lane to one of them by rendezvous hashing (the consumer whose
//! `hash(id, lane)` is highest): no coordinator, and when a consumer comes or goes only the
//! lanes it owned move. This consumer's own lanes are its *home* lanes, always fetched.
//!
//! When every home lane came back empty (or it has none), the consumer steals: it samples
//! two other lanes, reads their ready depths, and fetches from the deeper one until that
//! comes back empty too. So a lane whose owner died is served before its registry entry
//! expires (one lease), and consumers that run dry help where the work is.
//!
//! A view of the registry that lags behind another consumer's gives a lane two owners or
//! none for a round: two fetch it (harmless), or it waits a round (`EVERY`).

use super::role::Role;
use crate::queue::partitions::{Partitions, fnv1a, ready_depth};
use crate::redis::conn::HealingConnection;
use rand::seq::IndexedRandom;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the owner looks at the registry and at its lanes.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// The owner task.
pub(crate) struct Owner {
    pub conn: HealingConnection,
    pub parts: Partitions,
    /// This consumer's worker id (the same in every lane).
    pub tag: String,
    /// Each lane's role, in [`Partitions::lanes`] order.
    pub roles: Vec<Arc<Role>>,
}

impl Owner {
    /// Assigns lanes every [`EVERY`] until `stop`.
    pub(crate) async fn run(self, stop: CancellationToken) {
        let mut stolen = BTreeSet::new();
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let live = match self.live().await {
                Ok(live) => live,
                // Keep the last roles: the next round tries again.
                Err(e) => {
                    tracing::debug!(error = %e, "cannot read the consumers of the queue");
                    continue;
                }
            };
            let home = home_lanes(&live, &self.tag, self.roles.len());
            stolen.retain(|l| !home.contains(l) && !self.roles[*l].dry());
            let dry = home.iter().all(|l| self.roles[*l].dry());
            if dry && let Some(l) = self.steal(&home, &stolen).await {
                stolen.insert(l);
            }
            for (l, role) in self.roles.iter().enumerate() {
                role.set_active(home.contains(&l) || stolen.contains(&l));
            }
        }
    }

    /// The worker ids whose registry entry in the base lane has not expired (by Redis's
    /// clock), this consumer's among them.
    async fn live(&self) -> crate::Result<Vec<String>> {
        let (time, entries): ((u64, u64), Vec<(String, u64)>) = redis::pipe()
            .cmd("TIME")
            .cmd("ZRANGE")
            .arg(self.parts.base().workers())
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut self.conn.clone())
            .await?;
        let now_ms = time.0 * 1000 + time.1 / 1000;
        let mut live: Vec<String> = entries
            .into_iter()
            .filter(|(_, expires)| *expires > now_ms)
            .map(|(id, _)| id)
            .collect();
        if !live.contains(&self.tag) {
            live.push(self.tag.clone());
        }
        Ok(live)
    }

    /// Of two lanes sampled among those neither home nor stolen, the deeper, if it holds
    /// ready jobs.
    async fn steal(&self, home: &BTreeSet<usize>, stolen: &BTreeSet<usize>) -> Option<usize> {
        let others: Vec<usize> = (0..self.roles.len())
            .filter(|l| !home.contains(l) && !stolen.contains(l))
            .collect();
        let picks: Vec<usize> = others.choose_multiple(&mut rand::rng(), 2).copied().collect();
        let mut best = None;
        for l in picks {
            let depth = self.depth(l).await.unwrap_or(0);
            if depth > 0 && best.is_none_or(|(_, d)| depth > d) {
                best = Some((l, depth));
            }
        }
        best.map(|(l, _)| l)
    }

    /// Ready jobs (and suspects) of lane `l`.
    async fn depth(&self, l: usize) -> crate::Result<u64> {
        ready_depth(&mut self.conn.clone(), self.parts.lane(l)).await
    }
}

/// The lanes (of `lanes`) whose rendezvous owner among `live` is `me`.
pub(crate) fn home_lanes(live: &[String], me: &str, lanes: usize) -> BTreeSet<usize> {
    (0..lanes)
        .filter(|l| {
            live.iter()
                .max_by_key(|id| (weight(id, *l), id.as_str()))
                .is_some_and(|owner| owner == me)
        })
        .collect()
}

/// Consumer `id`'s rendezvous weight for lane `l`: FNV-1a, then MurmurHash3's finalizer,
/// so that every bit of the weight depends on every byte (FNV-1a alone barely moves its
/// high bits, which decide the comparison, on the last bytes: the lane number).
fn weight(id: &str, l: usize) -> u64 {
    let mut h = fnv1a(format!("{id}/{l}").as_bytes());
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::home_lanes;

    #[test]
    fn every_lane_has_one_owner_and_few_move_when_a_consumer_goes() {
        let ids: Vec<String> = (0..5).map(|i| format!("{i:016x}")).collect();
        let lanes = 64;
        let homes: Vec<_> = ids.iter().map(|me| home_lanes(&ids, me, lanes)).collect();
        for l in 0..lanes {
            assert_eq!(homes.iter().filter(|h| h.contains(&l)).count(), 1, "lane {l}");
        }
        assert!(homes.iter().all(|h| (4..=24).contains(&h.len())), "{homes:?}");
        // Consumer 4 goes: only its lanes move; the others keep theirs.
        let fewer = &ids[..4];
        for (i, me) in fewer.iter().enumerate() {
            let now = home_lanes(fewer, me, lanes);
            assert!(homes[i].is_subset(&now), "consumer {i} lost a lane");
        }
        assert_eq!(home_lanes(&[], "x", 3).len(), 0);
        assert_eq!(home_lanes(&["x".into()], "x", 3).len(), 3);
    }
}
