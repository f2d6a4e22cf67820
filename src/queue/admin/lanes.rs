//! A partitioned queue's lanes, for the operator calls of `admin.rs`: a call on every lane
//! at once, the snapshot and the dead-letter queue over all of them, and the routing of
//! job ids to the lane each is in.
//!
//! Every lane is the layout of a queue under its own tag, so one script call acts on one
//! lane (on a Redis Cluster, on the node that serves it). The calls on several lanes run
//! concurrently: on the multiplexed connection they are pipelined, on a cluster each goes
//! to its own node.

use super::Queue;
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use crate::queue::partitions::Partitions;
use crate::queue::scripts::{self, DeadJob, Stats};
use crate::redis::conn::Conn;
use futures_util::future::try_join_all;
use std::collections::BTreeMap;
use std::future::Future;

impl Queue {
    /// `f(conn, lane)` on every lane at once, in [`Partitions::lanes`] order.
    pub(super) async fn each_lane<'a, T, F, Fut>(&self, parts: &'a Partitions, f: F) -> Result<Vec<T>>
    where
        F: Fn(Conn, &'a QueueKeys) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        try_join_all(parts.lanes().map(|k| f(self.conn.clone(), k))).await
    }

    /// Each lane's snapshot, by lane name.
    pub(super) async fn lane_stats(&self, parts: &Partitions) -> Result<Vec<(String, Stats)>> {
        self.each_lane(parts, |mut c, k| async move {
            Ok((k.name().to_owned(), scripts::stats(&mut c, k).await?))
        })
        .await
    }

    /// Dead-lettered jobs over every lane, newest first: each lane's newest
    /// `offset + count`, merged. What a page costs grows with its offset, as a page of
    /// one queue's dead-letter queue does.
    pub(super) async fn lane_dead_jobs(
        &self,
        parts: &Partitions,
        offset: usize,
        count: usize,
    ) -> Result<Vec<DeadJob>> {
        let want = offset.saturating_add(count);
        let lanes = self
            .each_lane(parts, |mut c, k| async move {
                let mut dead = scripts::dlq_list(&mut c, k, 0, want).await?;
                for d in &mut dead {
                    d.lane = Some(k.name().to_owned());
                }
                Ok(dead)
            })
            .await?;
        // Newest first; ties in lane order, as each lane lists them.
        let mut all: Vec<(usize, usize, DeadJob)> = lanes
            .into_iter()
            .enumerate()
            .flat_map(|(lane, dead)| dead.into_iter().enumerate().map(move |(i, d)| (lane, i, d)))
            .collect();
        all.sort_by(|a, b| {
            b.2.dead_at_ms
                .cmp(&a.2.dead_at_ms)
                .then((a.0, a.1).cmp(&(b.0, b.1)))
        });
        Ok(all
            .into_iter()
            .skip(offset)
            .take(count)
            .map(|(_, _, d)| d)
            .collect())
    }

    /// Requeues the `limit` oldest dead-lettered jobs over every lane: each lane's share of
    /// them is found from the lanes' sizes (or, past `limit` in all, their oldest `limit`
    /// entries' times), then each lane requeues its own oldest that many in one call.
    pub(super) async fn lane_requeue_oldest(
        &self,
        parts: &Partitions,
        limit: usize,
    ) -> Result<(u64, Vec<String>)> {
        let sizes = self
            .each_lane(parts, |mut c, k| async move {
                let n: usize = redis::cmd("ZCARD").arg(k.dead()).query_async(&mut c).await?;
                Ok(n)
            })
            .await?;
        let shares = if sizes.iter().sum::<usize>() <= limit {
            sizes
        } else {
            self.oldest_shares(parts, limit).await?
        };
        let done = try_join_all(parts.lanes().zip(shares).filter(|(_, n)| *n > 0).map(|(k, n)| {
            let mut c = self.conn.clone();
            async move { scripts::dlq_requeue(&mut c, k, n, &[]).await }
        }))
        .await?;
        // Entries that went between the count and the requeue are not reported: no id was
        // asked for.
        Ok((done.iter().map(|(n, _)| n).sum(), Vec::new()))
    }

    /// How many of the `limit` oldest dead-lettered jobs over every lane each lane holds.
    async fn oldest_shares(&self, parts: &Partitions, limit: usize) -> Result<Vec<usize>> {
        let heads = self
            .each_lane(parts, |mut c, k| async move {
                let h: Vec<(String, f64)> = redis::cmd("ZRANGE")
                    .arg(k.dead())
                    .arg(0)
                    .arg(limit - 1)
                    .arg("WITHSCORES")
                    .query_async(&mut c)
                    .await?;
                Ok(h)
            })
            .await?;
        let mut all: Vec<(u64, usize)> = heads
            .iter()
            .enumerate()
            .flat_map(|(lane, h)| h.iter().map(move |(_, at)| (*at as u64, lane)))
            .collect();
        all.sort_unstable();
        let mut shares = vec![0; parts.lane_count()];
        for (_, lane) in all.into_iter().take(limit) {
            shares[lane] += 1;
        }
        Ok(shares)
    }

    /// Requeues dead-lettered jobs by id, each in the lane it is found in.
    pub(super) async fn lane_requeue(
        &self,
        parts: &Partitions,
        ids: &[String],
    ) -> Result<(u64, Vec<String>)> {
        let found = self
            .route(parts, ids, |mut c, k, ids| async move {
                let (_, missing) = scripts::dlq_requeue(&mut c, k, 1, &ids).await?;
                Ok(found_unless(&ids, missing))
            })
            .await?;
        let requeued = found.iter().filter(|f| f.is_some()).count() as u64;
        let missing = ids
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        Ok((requeued, missing))
    }

    /// Acts on `ids` in the lanes they are in. Each id is tried in its likeliest lane first
    /// ([`Partitions::search_order`]), the ones not found there in their next lane, and so
    /// on: a round per lane at most, each round one call per lane that has ids to try,
    /// all at once. `act(conn, lane, ids)` says, for each id in order, what it did, or
    /// `None` for an id not in that lane. Returns, for each id in order, its lane (in
    /// [`Partitions::lanes`] order) and what was done, or `None` if no lane has it.
    pub(super) async fn route<'a, T, F, Fut>(
        &self,
        parts: &'a Partitions,
        ids: &[String],
        act: F,
    ) -> Result<Vec<Option<(usize, T)>>>
    where
        F: Fn(Conn, &'a QueueKeys, Vec<String>) -> Fut,
        Fut: Future<Output = Result<Vec<Option<T>>>>,
    {
        // Each id's lanes still to try, the likeliest first.
        let mut orders: Vec<_> = ids.iter().map(|id| parts.search_order(id).into_iter()).collect();
        let mut out: Vec<Option<(usize, T)>> = ids.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..ids.len()).collect();
        loop {
            let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for &i in &pending {
                if let Some(lane) = orders[i].next() {
                    groups.entry(lane).or_default().push(i);
                }
            }
            if groups.is_empty() {
                break;
            }
            let calls = groups.iter().map(|(&lane, members)| {
                let batch = members.iter().map(|&i| ids[i].clone()).collect();
                act(self.conn.clone(), parts.lane(lane), batch)
            });
            let replies = try_join_all(calls).await?;
            pending.clear();
            for ((&lane, members), reply) in groups.iter().zip(replies) {
                let mut reply = reply.into_iter();
                for &i in members {
                    match reply.next().flatten() {
                        Some(t) => out[i] = Some((lane, t)),
                        None => pending.push(i),
                    }
                }
            }
        }
        Ok(out)
    }
}

/// For each of `ids`, `Some(())` unless it is among `missing` (each missing id accounts
/// for one occurrence: the script acts on the first of two equal ids and misses the
/// second).
fn found_unless(ids: &[String], missing: Vec<String>) -> Vec<Option<()>> {
    let mut missing: BTreeMap<String, usize> = missing.into_iter().fold(BTreeMap::new(), |mut m, id| {
        *m.entry(id).or_default() += 1;
        m
    });
    let mut out = vec![Some(()); ids.len()];
    // The last occurrences are the missed ones.
    for (i, id) in ids.iter().enumerate().rev() {
        if let Some(n) = missing.get_mut(id).filter(|n| **n > 0) {
            *n -= 1;
            out[i] = None;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_ids_are_the_later_of_equal_ones() {
        let ids: Vec<String> = ["a", "b", "a", "c"].map(String::from).to_vec();
        let got = found_unless(&ids, vec!["a".into(), "c".into()]);
        assert_eq!(got, [Some(()), Some(()), None, None]);
        assert_eq!(found_unless(&ids, Vec::new()), [Some(()); 4]);
    }
}
