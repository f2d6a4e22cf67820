//! The queue registry: every queue in this Redis, for `weir queues` and the UI's overview.
//!
//! `enqueue` adds a queue's name to the registry set (`keys::QUEUES`) in the same call that
//! stores its jobs, so it is found without `KEYS` or `SCAN`. Queues created before the
//! registry existed are found once by a SCAN of the key space ([`Queues::rescan`]), which
//! records that it ran (`keys::QUEUES_SCANNED`); [`Queues::list`] runs it the first time.
//!
//! A partitioned queue is listed once, by its name, with its figures summed over its
//! lanes; a lane's tag (`Q~3`) found in the registry is taken for its queue's name.

use super::Queue;
use crate::error::Result;
use crate::queue::json::{JSON_VERSION, QueueList, QueueSummary, Rates, ReadyCounts, Timestamp};
use crate::queue::keys::{QUEUES, QUEUES_SCANNED, QueueKeys, queue_of_key};
use crate::queue::scripts::Stats;
use crate::redis::conn::Conn;
use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

/// How much of a bad registry entry is shown.
const SHOWN: usize = 200;

/// Keys asked for per SCAN step of the one-off migration.
const SCAN_COUNT: usize = 1000;

/// Admin handle on the set of queues.
#[derive(Clone)]
pub struct Queues {
    pub(super) conn: Conn,
}

impl std::fmt::Debug for Queues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queues").finish_non_exhaustive()
    }
}

impl Queues {
    /// A handle over `conn`.
    pub fn new(conn: Conn) -> Self {
        Self { conn }
    }

    /// The registered queue names, sorted. A partition's tag stands for its queue (a
    /// producer writing to one lane registers the tag). Entries that are not queue names
    /// are left out ([`Queues::entries`] reports them).
    pub async fn names(&self) -> Result<Vec<String>> {
        Ok(self.entries().await?.0)
    }

    /// The registry read whole: the queue names, sorted, and the entries that are not
    /// queue names (written by hand or by a hostile `FCALL weir_enqueue` before the
    /// function checked them), each cut to 200 characters. A bad entry never fails
    /// a listing: the readers skip it and say so, and `weir queues --forget` removes it.
    pub async fn entries(&self) -> Result<(Vec<String>, Vec<String>)> {
        let raw: Vec<Vec<u8>> = redis::cmd("SMEMBERS")
            .arg(QUEUES)
            .query_async(&mut self.conn.clone())
            .await?;
        let mut queues = BTreeSet::new();
        let mut invalid = BTreeSet::new();
        for entry in raw {
            let Ok(n) = String::from_utf8(entry.clone()) else {
                invalid.insert(String::from_utf8_lossy(&entry).chars().take(SHOWN).collect());
                continue;
            };
            match QueueKeys::new(&n) {
                Ok(k) if k.is_partition() => queues.insert(k.base_name().to_owned()),
                Ok(_) => queues.insert(n),
                Err(_) => invalid.insert(n.chars().take(SHOWN).collect()),
            };
        }
        Ok((queues.into_iter().collect(), invalid.into_iter().collect()))
    }

    /// Whether the one-off SCAN for queues older than the registry has run.
    pub async fn scanned(&self) -> Result<bool> {
        let n: u64 = redis::cmd("EXISTS")
            .arg(QUEUES_SCANNED)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    /// Finds queues by a SCAN of every key (`weir:{Q}:*`), adds them to the registry and
    /// records that it ran; returns how many names were new. A one-off migration: it walks
    /// the whole key space, in steps of 1000 keys, so Redis is never blocked
    /// for long, but it takes a while on a big Redis.
    pub async fn rescan(&self) -> Result<u64> {
        let mut conn = self.conn.clone();
        let mut cursor: u64 = 0;
        let mut found = BTreeSet::new();
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg("weir:{*}:*")
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(&mut conn)
                .await?;
            found.extend(keys.iter().filter_map(|k| queue_of_key(k)).map(str::to_owned));
            if next == 0 {
                break;
            }
            cursor = next;
        }
        let mut added = 0;
        if !found.is_empty() {
            added = redis::cmd("SADD")
                .arg(QUEUES)
                .arg(&found)
                .query_async(&mut conn)
                .await?;
        }
        let now = Timestamp::from(SystemTime::now()).as_ms();
        redis::cmd("SET")
            .arg(QUEUES_SCANNED)
            .arg(now)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(added)
    }

    /// Removes `name` from the registry (its keys stay; a later enqueue adds it back).
    /// True if it was registered. Any entry can be removed, a name that is not a queue
    /// name too: that is how a bad entry goes.
    pub async fn forget(&self, name: &str) -> Result<bool> {
        let n: u64 = redis::cmd("SREM")
            .arg(QUEUES)
            .arg(name)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    /// Every registered queue with its sizes (running the one-off [`Queues::rescan`] if it
    /// never ran; a user that may not SCAN gets the registry alone, with a warning).
    /// Without a `rate_window`, each queue's rates are those of its history
    /// ([`Queue::samples`]: the two newest samples its consumers wrote, `None` when no
    /// consumer sampled it lately), the same for every reader. With one, the counters are
    /// read a second time that much later and the rates are the counters' differences
    /// over the time between the two reads, measured on this process's monotonic clock
    /// (from reply to reply, so it is off by at most one round trip).
    pub async fn list(&self, rate_window: Option<Duration>) -> Result<QueueList> {
        if !self.scanned().await? {
            match self.rescan().await {
                Ok(_) => {}
                // The worker role has no SCAN (docs/security.md): the registry alone.
                Err(crate::Error::Redis(e)) if e.code() == Some("NOPERM") => tracing::warn!(
                    "cannot look for queues older than the registry (SCAN refused): run \
                     `weir queues --rescan` once as a user that may; listing the registry"
                ),
                Err(e) => return Err(e),
            }
        }
        let (names, invalid) = self.entries().await?;
        let handles = names
            .iter()
            .map(|n| Queue::new(self.conn.clone(), n))
            .collect::<Result<Vec<_>>>()?;
        let first = read_all(&handles).await?;
        let mut queues: Vec<QueueSummary> = first.iter().map(summary).collect();
        let rates = futures_util::future::try_join_all(
            handles
                .iter()
                .map(|q| async move { Ok::<_, crate::Error>(q.samples(2).await?.rates) }),
        );
        for (q, r) in queues.iter_mut().zip(rates.await?) {
            q.rates = r;
        }
        if let Some(window) = rate_window.filter(|w| !w.is_zero()) {
            let at = Instant::now();
            tokio::time::sleep(window).await;
            let second = read_all(&handles).await?;
            let took = at.elapsed();
            queues = first
                .iter()
                .zip(&second)
                .map(|(a, b)| QueueSummary {
                    rates: Some(Rates::between(&a.1.counters, &b.1.counters, took)),
                    ..summary(b)
                })
                .collect();
        }
        Ok(QueueList {
            version: JSON_VERSION,
            now: Timestamp::from(SystemTime::now()),
            queues,
            invalid,
        })
    }
}

/// One queue's read: its name, its stats, its partition count if it is partitioned.
type Read = (String, Stats, Option<usize>);

/// Every queue's stats, read concurrently (pipelined on the shared connection).
async fn read_all(handles: &[Queue]) -> Result<Vec<Read>> {
    let reads = handles.iter().map(|q| async move {
        let parts = q.partitions().await?;
        let s = q.stats_of(parts.as_ref()).await?;
        Ok::<_, crate::Error>((q.keys().name().to_owned(), s, parts.map(|p| p.count())))
    });
    futures_util::future::try_join_all(reads).await
}

fn summary((name, s, partitions): &Read) -> QueueSummary {
    QueueSummary {
        name: name.to_owned(),
        ready: ReadyCounts {
            high: s.ready[0],
            normal: s.ready[1],
            low: s.ready[2],
            total: s.ready_total(),
        },
        delayed: s.delayed,
        in_flight: s.in_flight,
        dead: s.dead,
        paused: s.paused,
        oldest_ready_age_ms: s.oldest_ready_age_ms,
        rates: None,
        counters: s.counters.clone(),
        partitions: *partitions,
    }
}
