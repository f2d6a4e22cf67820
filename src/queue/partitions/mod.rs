//! Partitioned queues: one logical queue spread over several hash tags, so that on a Redis
//! Cluster it spreads over every shard instead of living in one slot.
//!
//! `weir queue create --queue Q --partitions P` stores the queue's partition map in
//! `weir:{Q}:partitions` (HASH: `count`, `tags`, `created_at`). Partition `i` is exactly
//! the layout of an ordinary queue (every key of [`QueueKeys`]) under its own tag,
//! `Q~i` (or `Q~i~s`: the tags are chosen so the partitions land evenly on the primaries,
//! and stored, so nobody computes them again). Every script still touches one slot, so
//! atomicity, leases, delays, priorities and the dead-letter queue hold per partition as
//! they hold for a queue. The queue's own layout, under `{Q}`, stays a lane of its own (the
//! *base*): producers that do not know the map (or ran before it was made) write there, and
//! consumers serve it like a partition, so nothing is ever stranded.
//!
//! A job's partition: that of its key if it has one (`of_key`: per-key order and limits
//! stay in one partition), else the one its id names (`<id>.p<i>`, what producers generate
//! for partitioned queues), else a hash of its id. Finding a job by id looks at that
//! partition first, then at the others.

use crate::error::{Error, Result};
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::Conn;
use redis::aio::ConnectionLike;
use shards::{Primary, primaries};

mod shards;

/// Most partitions a queue may have.
pub const MAX_PARTITIONS: usize = 1024;

/// Hash slots of a Redis Cluster.
const SLOTS: u16 = 16384;

/// A partitioned queue's lanes: its partitions, then its base (the queue's own layout).
#[derive(Debug, Clone)]
pub struct Partitions {
    base: QueueKeys,
    parts: Vec<QueueKeys>,
}

/// What [`Partitions::create`] did.
#[derive(Debug, Clone)]
pub struct Created {
    /// The queue's partitions (the ones it already had, if it had some).
    pub partitions: Partitions,
    /// This call made them (false: they were there).
    pub created: bool,
    /// On a cluster: for each partition, its hash slot and the address of the primary
    /// that serves it at creation time.
    pub placement: Vec<(u16, String)>,
}

impl Partitions {
    pub(crate) fn from_tags(queue: &str, tags: &str) -> Result<Self> {
        let base = QueueKeys::new(queue)?;
        let parts = tags
            .split(' ')
            .filter(|t| !t.is_empty())
            .map(QueueKeys::new)
            .collect::<Result<Vec<_>>>()?;
        if parts.is_empty() || parts.iter().any(|p| p.base_name() != queue) {
            return Err(Error::config(
                format!("queue {queue} partition map"),
                format!("names lanes of another queue ({tags})"),
            ));
        }
        Ok(Self { base, parts })
    }

    /// The partition map of `queue`, if it is partitioned.
    pub async fn read<C: ConnectionLike>(conn: &mut C, queue: &str) -> Result<Option<Self>> {
        let keys = QueueKeys::new(queue)?;
        let (count, tags): (Option<usize>, Option<String>) = redis::cmd("HMGET")
            .arg(keys.partitions())
            .arg("count")
            .arg("tags")
            .query_async(conn)
            .await?;
        match (count, tags) {
            (Some(_), Some(tags)) => Self::from_tags(queue, &tags).map(Some),
            _ => Ok(None),
        }
    }

    /// Makes `queue` partitioned, in `count` partitions (1..=[`MAX_PARTITIONS`]).
    /// Idempotent: a queue that has partitions keeps them, and asking for another count
    /// is an error. On a cluster the tags are picked so that partition `i` lands on the
    /// `i mod N`-th of the N primaries (ordered by their first slot).
    pub async fn create(conn: &mut Conn, queue: &str, count: usize) -> Result<Created> {
        if !(1..=MAX_PARTITIONS).contains(&count) {
            return Err(Error::config(
                "partitions",
                format!("must be between 1 and {MAX_PARTITIONS}, not {count}"),
            ));
        }
        let keys = QueueKeys::new(queue)?;
        let primaries = if conn.is_cluster() {
            primaries(conn).await?
        } else {
            Vec::new()
        };
        let mut tags = Vec::with_capacity(count);
        let mut placement = Vec::new();
        for i in 0..count {
            let (tag, slot) = pick_tag(queue, i, &primaries);
            if let Some(p) = primaries.get(i % primaries.len().max(1)) {
                placement.push((slot, p.addr.clone()));
            }
            tags.push(tag);
        }
        let (have, tags, created) = scripts::partitions(conn, &keys, count, &tags.join(" ")).await?;
        if have != count {
            return Err(Error::config(
                format!("queue {queue}"),
                format!("already has {have} partitions; changing the count is not supported"),
            ));
        }
        let partitions = Self::from_tags(queue, &tags)?;
        if !created {
            placement.clear();
        }
        Ok(Created {
            partitions,
            created,
            placement,
        })
    }

    /// The queue's name.
    pub fn queue(&self) -> &str {
        self.base.name()
    }

    /// How many partitions.
    pub fn count(&self) -> usize {
        self.parts.len()
    }

    /// Partition `i`'s keys.
    pub fn partition(&self, i: usize) -> &QueueKeys {
        &self.parts[i]
    }

    /// The base lane: the queue's own layout, under `{Q}`.
    pub fn base(&self) -> &QueueKeys {
        &self.base
    }

    /// Every lane: the partitions in order, then the base.
    pub fn lanes(&self) -> impl Iterator<Item = &QueueKeys> {
        self.parts.iter().chain(std::iter::once(&self.base))
    }

    /// Lanes in all (partitions + the base).
    pub fn lane_count(&self) -> usize {
        self.parts.len() + 1
    }

    /// The lane at `i` in [`Partitions::lanes`] order.
    pub fn lane(&self, i: usize) -> &QueueKeys {
        self.parts.get(i).unwrap_or(&self.base)
    }

    /// The partition of job key `key`.
    pub fn of_key(&self, key: &str) -> usize {
        (fnv1a(key.as_bytes()) % self.parts.len() as u64) as usize
    }

    /// The partition job id `id` names (`<id>.p<i>`), else a hash of the id.
    pub fn of_id(&self, id: &str) -> usize {
        match named_partition(id) {
            Some(i) if i < self.parts.len() => i,
            _ => (fnv1a(id.as_bytes()) % self.parts.len() as u64) as usize,
        }
    }

    /// The lanes to look in for job `id`, the likeliest first.
    pub fn search_order(&self, id: &str) -> Vec<usize> {
        let first = self.of_id(id);
        std::iter::once(first)
            .chain((0..self.lane_count()).filter(|&i| i != first))
            .collect()
    }
}

/// The jobs a lane has ready to run (its three ready lists and its suspects): one round
/// trip, to the lane's shard. What producers and consumers of a partitioned queue compare
/// lanes by.
pub(crate) async fn ready_depth<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys) -> Result<u64> {
    let (high, normal, low, suspects): (u64, u64, u64, u64) = redis::pipe()
        .cmd("LLEN")
        .arg(keys.ready(crate::Priority::High))
        .cmd("LLEN")
        .arg(keys.ready(crate::Priority::Normal))
        .cmd("LLEN")
        .arg(keys.ready(crate::Priority::Low))
        .cmd("LLEN")
        .arg(keys.suspects())
        .query_async(conn)
        .await?;
    Ok(high + normal + low + suspects)
}

/// An id that names partition `i`: `<id>.p<i>`.
pub fn id_in(id: &str, i: usize) -> String {
    let mut named = String::with_capacity(id.len() + 6);
    named.push_str(id);
    push_partition(&mut named, i);
    named
}

/// Makes the id in `id` name partition `i`, as [`id_in`] does, in place.
pub(crate) fn push_partition(id: &mut String, i: usize) {
    id.push_str(".p");
    id.push_str(itoa::Buffer::new().format(i));
}

/// Whether `id` names a partition (`<id>.p<i>`), as generated ids of a partitioned
/// queue's jobs do.
pub(crate) fn names_partition(id: &str) -> bool {
    named_partition(id).is_some()
}

/// The partition an id names, if it ends in `.p<digits>` (no leading zero).
fn named_partition(id: &str) -> Option<usize> {
    let (_, n) = id.rsplit_once(".p")?;
    if n.is_empty() || n.len() > 4 || (n.len() > 1 && n.starts_with('0')) {
        return None;
    }
    n.parse().ok()
}

/// FNV-1a, 64 bits: the partition hash of keys and ids (docs/protocol.md gives it, so
/// producers in other languages place jobs the same way).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The tag of partition `i`: `Q~i`, or on a cluster the first of `Q~i`, `Q~i~1`, ...
/// whose slot the `i mod N`-th primary serves. Returns the tag and its slot.
fn pick_tag(queue: &str, i: usize, primaries: &[Primary]) -> (String, u16) {
    let plain = format!("{queue}~{i}");
    let Some(want) = primaries.get(i % primaries.len().max(1)) else {
        return (plain.clone(), slot(&plain));
    };
    for s in 0..100_000u32 {
        let tag = if s == 0 {
            plain.clone()
        } else {
            format!("{plain}~{s}")
        };
        let slot = slot(&tag);
        if want.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)) {
            return (tag, slot);
        }
    }
    (plain.clone(), slot(&plain))
}

/// The cluster hash slot of keys tagged `{tag}`.
fn slot(tag: &str) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(n: usize) -> Partitions {
        let tags: Vec<String> = (0..n).map(|i| format!("q~{i}")).collect();
        Partitions::from_tags("q", &tags.join(" ")).unwrap()
    }

    #[test]
    fn ids_that_name_a_partition_go_there_others_by_hash() {
        let p = parts(6);
        assert_eq!(p.of_id(&id_in("0123456789abcdef-1f", 4)), 4);
        assert_eq!(p.of_id("order.p5"), 5);
        // Out of range, a leading zero, or no digits: hashed like any id.
        for id in ["order.p6", "order.p05", "order.p", "order"] {
            assert_eq!(p.of_id(id), (fnv1a(id.as_bytes()) % 6) as usize, "{id}");
        }
        let order = p.search_order("order.p2");
        assert_eq!(order[0], 2);
        assert_eq!(order.len(), 7, "every partition and the base");
    }

    #[test]
    fn keys_spread_evenly_over_partitions() {
        let p = parts(8);
        let mut n = [0usize; 8];
        for k in 0..8000 {
            n[p.of_key(&format!("tenant-{k}"))] += 1;
        }
        assert!(n.iter().all(|&c| (800..1200).contains(&c)), "{n:?}");
    }

    #[test]
    fn tags_land_on_the_primary_asked_for() {
        let primaries = vec![
            Primary {
                addr: "a".into(),
                slots: vec![(0, 5460)],
            },
            Primary {
                addr: "b".into(),
                slots: vec![(5461, 10922)],
            },
            Primary {
                addr: "c".into(),
                slots: vec![(10923, 16383)],
            },
        ];
        for i in 0..12 {
            let (tag, s) = pick_tag("emails", i, &primaries);
            assert!(tag.starts_with(&format!("emails~{i}")), "{tag}");
            let (a, b) = primaries[i % 3].slots[0];
            assert!((a..=b).contains(&s), "partition {i}: slot {s}");
            assert_eq!(slot(&tag), s);
        }
        // Redis's own hash: CLUSTER KEYSLOT foo is 12182.
        assert_eq!(slot("foo"), 12182);
    }

    #[test]
    fn a_map_of_another_queue_is_refused() {
        assert!(Partitions::from_tags("q", "other~0 other~1").is_err());
        assert!(Partitions::from_tags("q", "").is_err());
        let p = Partitions::from_tags("q", "q~0 q~1~7").unwrap();
        assert_eq!(p.partition(1).name(), "q~1~7");
        assert_eq!(p.lane(2).name(), "q");
    }
}
