//! How a [`crate::Producer`] spreads jobs over a partitioned queue's partitions
//! (`queue/partitions.rs`). Uniqueness is checked within one partition, so whatever a
//! job must be unique by decides where it goes:
//! - a job with an id of the caller's goes where the id hashes, whatever its key or
//!   unique key (one id, one partition: never two copies, and found by id);
//! - a job with a generated id and a unique key (with a window) goes to its unique key's
//!   partition (every job that may hold the key is checked there);
//! - else a job with a key goes to its key's partition (per-key order and limits stay in
//!   one partition);
//! - else a job with a generated id goes, in a bulk load, to the next partition in turn
//!   (so partitions fill evenly), and alone, to the shallower of two partitions sampled
//!   at random (power of two choices) by their ready depths, cached for a second and
//!   refreshed in the background.
//!
//! A generated id names its partition (`<id>.p<i>`).

use crate::queue::partitions::{Partitions, names_partition, ready_depth};
use crate::queue::scripts::EnqueueArg;
use crate::redis::conn::Conn;
use rand::Rng;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a partition's cached depth is good for.
const DEPTH_TTL: Duration = Duration::from_secs(1);

/// A producer's view of the partitions it writes.
#[derive(Debug)]
pub(crate) struct Spread {
    parts: Partitions,
    next: AtomicUsize,
    /// Each partition's ready depth as last read (plus what this producer sent since).
    depths: Vec<AtomicU64>,
    /// When the depths were last read, ms since `epoch` (0: never).
    read_at: AtomicU64,
    refreshing: AtomicBool,
    epoch: Instant,
}

impl Spread {
    pub(crate) fn new(parts: Partitions) -> Arc<Self> {
        let n = parts.count();
        Arc::new(Self {
            next: AtomicUsize::new(rand::rng().random_range(0..n)),
            depths: (0..n).map(|_| AtomicU64::new(0)).collect(),
            read_at: AtomicU64::new(0),
            refreshing: AtomicBool::new(false),
            epoch: Instant::now(),
            parts,
        })
    }

    pub(crate) fn parts(&self) -> &Partitions {
        &self.parts
    }

    /// The partition of the next generated-id job of a bulk load: each in turn.
    pub(crate) fn next(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.parts.count()
    }

    /// The partition of a generated-id job enqueued alone: the shallower of two sampled,
    /// by the cached depths (refreshed in the background when older than a second).
    pub(crate) fn pick(self: &Arc<Self>, conn: &Conn) -> usize {
        let n = self.parts.count();
        let mut rng = rand::rng();
        let a = rng.random_range(0..n);
        let b = rng.random_range(0..n);
        let depth = |i: usize| self.depths[i].load(Ordering::Relaxed);
        let chosen = if depth(b) < depth(a) { b } else { a };
        self.depths[chosen].fetch_add(1, Ordering::Relaxed);
        self.refresh_if_stale(conn);
        chosen
    }

    /// The partition of a generated-id job: that of `key` (its unique key, else its job
    /// key) when it has one, so a unique key is held in one place and a key's jobs stay
    /// together; else the shallower of two for a job `alone`, the next in turn in a bulk
    /// load.
    pub(crate) fn route(self: &Arc<Self>, key: Option<&str>, alone: bool, conn: &Conn) -> usize {
        match key {
            Some(k) => self.parts.of_key(k),
            None if alone => self.pick(conn),
            None => self.next(),
        }
    }

    /// The partition a prepared job goes to: for an id of the caller's, or one that names
    /// its partition, the one the id names or hashes to; else its key's, else its id's.
    pub(crate) fn lane_of(&self, arg: &EnqueueArg) -> usize {
        if arg.unique || names_partition(&arg.id) {
            return self.parts.of_id(&arg.id);
        }
        match key_of(&arg.envelope) {
            Some(k) => self.parts.of_key(k),
            None => self.parts.of_id(&arg.id),
        }
    }

    fn refresh_if_stale(self: &Arc<Self>, conn: &Conn) {
        let now = self.epoch.elapsed().as_millis() as u64 + 1;
        let read = self.read_at.load(Ordering::Relaxed);
        let stale = read == 0 || now.saturating_sub(read) > DEPTH_TTL.as_millis() as u64;
        if !stale || self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (me, conn) = (self.clone(), conn.clone());
        tokio::spawn(async move {
            me.read_depths(conn).await;
            me.read_at
                .store(me.epoch.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
            me.refreshing.store(false, Ordering::Release);
        });
    }

    /// Reads every partition's ready depth, one round trip per partition, side by side.
    async fn read_depths(&self, conn: Conn) {
        let reads = (0..self.parts.count()).map(|i| {
            let mut conn = conn.clone();
            async move { (i, ready_depth(&mut conn, self.parts.partition(i)).await) }
        });
        for (i, depth) in futures_util::future::join_all(reads).await {
            match depth {
                Ok(d) => self.depths[i].store(d, Ordering::Relaxed),
                Err(e) => tracing::debug!(error = %e, partition = i, "cannot read a partition's depth"),
            }
        }
    }
}

/// A bulk load's jobs in enqueue chunks of at most `max_jobs` jobs or `max_bytes` of
/// envelopes; for a partitioned queue every chunk holds jobs of one partition only (one
/// call, not one per partition), gathered per partition as the input comes, and no more
/// than `4 × max_jobs` jobs held back at once (past that, the fullest partition goes).
pub(crate) struct Chunks<T, I: Iterator<Item = (T, EnqueueArg)>> {
    jobs: std::iter::Fuse<I>,
    spread: Option<Arc<Spread>>,
    lanes: Vec<Gathered<T>>,
    held: usize,
    max_jobs: usize,
    max_bytes: usize,
}

struct Gathered<T> {
    tags: Vec<T>,
    args: Vec<EnqueueArg>,
    bytes: usize,
}

impl<T> Default for Gathered<T> {
    fn default() -> Self {
        Self {
            tags: Vec::new(),
            args: Vec::new(),
            bytes: 0,
        }
    }
}

impl<T, I: Iterator<Item = (T, EnqueueArg)>> Chunks<T, I> {
    pub(crate) fn new(jobs: I, spread: Option<Arc<Spread>>, max_jobs: usize, max_bytes: usize) -> Self {
        let lanes = spread.as_ref().map_or(1, |s| s.parts.count());
        Self {
            jobs: jobs.fuse(),
            spread,
            lanes: (0..lanes).map(|_| Gathered::default()).collect(),
            held: 0,
            max_jobs,
            max_bytes,
        }
    }

    /// The lane's chunk. The lane starts its next one sized as this one was: a bulk load's
    /// chunks are alike, and a chunk list regrown from empty each time cost a tenth of
    /// the client's work per job (each regrowth copies every job gathered so far).
    fn take(&mut self, lane: usize) -> (Vec<T>, Vec<EnqueueArg>) {
        let n = self.lanes[lane].args.len();
        let g = std::mem::replace(
            &mut self.lanes[lane],
            Gathered {
                tags: Vec::with_capacity(n),
                args: Vec::with_capacity(n),
                bytes: 0,
            },
        );
        self.held -= g.args.len();
        (g.tags, g.args)
    }
}

impl<T, I: Iterator<Item = (T, EnqueueArg)>> Iterator for Chunks<T, I> {
    type Item = (Vec<T>, Vec<EnqueueArg>);

    fn next(&mut self) -> Option<Self::Item> {
        while let Some((tag, arg)) = self.jobs.next() {
            let lane = self.spread.as_ref().map_or(0, |s| s.lane_of(&arg));
            let g = &mut self.lanes[lane];
            g.bytes += arg.envelope.len();
            g.tags.push(tag);
            g.args.push(arg);
            self.held += 1;
            if g.args.len() >= self.max_jobs || g.bytes >= self.max_bytes {
                return Some(self.take(lane));
            }
            if self.held > 4 * self.max_jobs {
                let fullest = (0..self.lanes.len()).max_by_key(|l| self.lanes[*l].args.len())?;
                return Some(self.take(fullest));
            }
        }
        // The input is done: what is gathered goes, partition by partition.
        let lane = (0..self.lanes.len()).find(|l| !self.lanes[*l].args.is_empty())?;
        Some(self.take(lane))
    }
}

/// The job key in an envelope weir wrote (the `key` field, between the header and the
/// payload), found the way the scripts find it (`job_key` in `scripts/lib.lua`).
pub(crate) fn key_of(envelope: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(envelope).ok()?;
    let stop = text.find(",\"payload\":")?;
    let head = &text[..stop];
    let start = head.find(",\"key\":\"")? + ",\"key\":\"".len();
    let end = head[start..].find('"')? + start;
    Some(&head[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: String) -> EnqueueArg {
        let env = format!(
            r#"{{"attempt":0,"max_attempts":5,"priority":1,"enqueued_at":1,"id":"{id}","kind":"k","payload":1}}"#
        );
        EnqueueArg {
            id,
            priority: crate::Priority::Normal,
            delay_ms: 0,
            run_at_ms: 0,
            envelope: env.into_bytes(),
            unique: false,
            unique_for_ms: 0,
        }
    }

    #[test]
    fn chunks_hold_one_partition_each_and_hold_back_little() {
        let tags: Vec<String> = (0..4).map(|i| format!("q~{i}")).collect();
        let spread = Spread::new(Partitions::from_tags("q", &tags.join(" ")).unwrap());
        let jobs = (0..10_000).map(|i| (i, job(crate::queue::partitions::id_in("x", i % 4))));
        let mut seen = 0;
        for (tags, args) in Chunks::new(jobs, Some(spread.clone()), 100, 1 << 20) {
            let lane = spread.lane_of(&args[0]);
            assert!(
                args.iter().all(|a| spread.lane_of(a) == lane),
                "one partition per chunk"
            );
            assert!(args.len() <= 100 && tags.len() == args.len());
            seen += args.len();
        }
        assert_eq!(seen, 10_000);
        // Unpartitioned: plain chunks in order.
        let chunks: Vec<_> =
            Chunks::new((0..250).map(|i| (i, job(format!("j{i}")))), None, 100, 1 << 20).collect();
        assert_eq!(
            chunks.iter().map(|c| c.1.len()).collect::<Vec<_>>(),
            [100, 100, 50]
        );
        assert_eq!(chunks[1].0[0], 100);
    }

    #[test]
    fn finds_the_key_before_the_payload_only() {
        let env = br#"{"attempt":0,"max_attempts":5,"priority":1,"enqueued_at":1,"id":"a","kind":"k","key":"acme","payload":{"key":"x"}}"#;
        assert_eq!(key_of(env), Some("acme"));
        let none = br#"{"attempt":0,"max_attempts":5,"priority":1,"enqueued_at":1,"id":"a","kind":"k","payload":{"key":"x"}}"#;
        assert_eq!(key_of(none), None);
        assert_eq!(key_of(b"not json"), None);
    }
}
