//! The worker registry: each consumer's record (host, pid, version, start, its
//! concurrency limit, running jobs and leases held), written by its heartbeat and read by `weir
//! workers` and the UI.
//!
//! Layout (keys.rs): a ZSET per queue, worker id -> when its entry expires (ms), and a
//! HASH per worker with its record, expiring at the same time. Every beat refreshes both
//! (`worker_beat.lua`) and drops the entries of workers that stopped beating; a consumer
//! that stops removes its own. A consumer killed with -9 stays listed until its entry
//! expires: three heartbeats.

use super::Queue;
use crate::error::Result;
use crate::queue::json::{JSON_VERSION, Timestamp, Worker, WorkerList};
use crate::queue::keys::QueueKeys;
use crate::redis::conn::Conn;
use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

/// Most workers one listing returns.
pub const MAX_WORKERS: usize = 1000;

/// What a consumer says of itself in the registry; the parts that change (the limit and
/// the running jobs) are given at each beat.
#[derive(Debug, Clone)]
pub(crate) struct WorkerRecord {
    /// The consumer's tag: its worker id.
    pub(crate) id: String,
    host: String,
    pid: u32,
    started_ms: u64,
}

impl WorkerRecord {
    /// This process's record, as consumer `id`, starting now.
    pub(crate) fn new(id: String) -> Self {
        Self {
            id,
            host: host_name(),
            pid: std::process::id(),
            started_ms: Timestamp::from(SystemTime::now()).as_ms(),
        }
    }

    /// The record's fields, with the limit, running jobs and the limiter's latest
    /// decision now (an empty `limiter` field when there is none).
    pub(crate) fn fields(
        &self,
        limit: usize,
        running: usize,
        leased: usize,
        limiter: Option<String>,
    ) -> [(&'static str, String); 8] {
        [
            ("host", self.host.clone()),
            ("pid", self.pid.to_string()),
            ("version", env!("CARGO_PKG_VERSION").to_owned()),
            ("started_ms", self.started_ms.to_string()),
            ("limit", limit.to_string()),
            ("running", running.to_string()),
            ("leased", leased.to_string()),
            ("limiter", limiter.unwrap_or_default()),
        ]
    }
}

/// The host's name: the kernel's (Linux), else `$HOSTNAME`, else `unknown`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}

impl Queue {
    /// The live consumers of this queue (at most [`MAX_WORKERS`]), oldest entry first.
    /// Two round trips: the registry, then the records. A partitioned queue's consumers
    /// register on each lane they serve: their entries are merged by worker id (one
    /// process serving several lanes under one id is one worker, holding the sum of what
    /// its entries hold).
    pub async fn workers(&self) -> Result<WorkerList> {
        let (now, workers) = match self.partitions().await? {
            None => registry(&self.conn, &self.keys).await?,
            Some(p) => {
                let lanes = self.each_lane(&p, |c, k| async move { registry(&c, k).await });
                let lanes = lanes.await?;
                let now = lanes.iter().map(|(t, _)| *t).max().unwrap_or(Timestamp(0));
                (now, merge(lanes.into_iter().flat_map(|(_, w)| w)))
            }
        };
        Ok(WorkerList {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            now,
            workers,
        })
    }
}

/// One lane's registry: Redis's time and the live workers, oldest entry first.
async fn registry(conn: &Conn, keys: &QueueKeys) -> Result<(Timestamp, Vec<Worker>)> {
    let mut conn = conn.clone();
    let ((secs, micros), entries): ((u64, u64), Vec<(String, u64)>) = redis::pipe()
        .cmd("TIME")
        .cmd("ZRANGE")
        .arg(keys.workers())
        .arg(0)
        .arg(MAX_WORKERS - 1)
        .arg("WITHSCORES")
        .query_async(&mut conn)
        .await?;
    let now = secs * 1000 + micros / 1000;
    let live: Vec<(String, u64)> = entries.into_iter().filter(|(_, exp)| *exp >= now).collect();
    let mut p = redis::pipe();
    for (id, _) in &live {
        p.cmd("HGETALL").arg(keys.worker(id));
    }
    let records: Vec<HashMap<String, String>> = if live.is_empty() {
        Vec::new()
    } else {
        p.query_async(&mut conn).await?
    };
    let workers = live
        .into_iter()
        .zip(records)
        .filter(|(_, r)| !r.is_empty())
        .map(|((id, exp), r)| worker(id, exp, &r))
        .collect();
    Ok((Timestamp(now), workers))
}

/// The entries of several lanes, one per worker id: the jobs running and leased added,
/// the concurrency limit the highest entry's (the lanes of one process share its limit),
/// the earliest start, the latest beat and expiry; oldest entry first.
fn merge(entries: impl Iterator<Item = Worker>) -> Vec<Worker> {
    let mut by_id: BTreeMap<String, Worker> = BTreeMap::new();
    for w in entries {
        match by_id.get_mut(&w.id) {
            None => {
                by_id.insert(w.id.clone(), w);
            }
            Some(m) => {
                m.running += w.running;
                m.leased += w.leased;
                // The lanes of one process share its limiter: any entry's decision.
                m.limiter = m.limiter.take().or(w.limiter);
                m.concurrency_limit = m.concurrency_limit.max(w.concurrency_limit);
                m.started_at = m.started_at.min(w.started_at);
                m.last_beat = m.last_beat.max(w.last_beat);
                m.expires_at = m.expires_at.max(w.expires_at);
            }
        }
    }
    let mut out: Vec<Worker> = by_id.into_values().collect();
    out.sort_by(|a, b| (a.expires_at, &a.id).cmp(&(b.expires_at, &b.id)));
    out.truncate(MAX_WORKERS);
    out
}
fn worker(id: String, expires_ms: u64, r: &HashMap<String, String>) -> Worker {
    let num = |k: &str| r.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let text = |k: &str| r.get(k).cloned().unwrap_or_default();
    Worker {
        id,
        host: text("host"),
        pid: num("pid") as u32,
        weir_version: text("version"),
        started_at: Timestamp(num("started_ms")),
        concurrency_limit: num("limit"),
        running: num("running"),
        leased: num("leased"),
        limiter: r.get("limiter").filter(|v| !v.is_empty()).cloned(),
        last_beat: Timestamp(num("last_beat_ms")),
        expires_at: Timestamp(expires_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, limit: u64, running: u64, leased: u64, beat: u64) -> Worker {
        Worker {
            id: id.into(),
            host: "h".into(),
            pid: 7,
            weir_version: "0".into(),
            started_at: Timestamp(beat - 100),
            concurrency_limit: limit,
            running,
            leased,
            limiter: None,
            last_beat: Timestamp(beat),
            expires_at: Timestamp(beat + 3000),
        }
    }

    #[test]
    fn one_process_on_several_lanes_is_one_worker() {
        let got = merge(
            [
                entry("b", 8, 1, 2, 2000),
                entry("a", 16, 3, 4, 1000),
                entry("b", 8, 5, 6, 1500),
            ]
            .into_iter(),
        );
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].id.as_str(), got[1].id.as_str()),
            ("a", "b"),
            "oldest entry first"
        );
        let b = &got[1];
        assert_eq!((b.running, b.leased, b.concurrency_limit), (6, 8, 8));
        assert_eq!((b.started_at, b.last_beat), (Timestamp(1400), Timestamp(2000)));
    }
}
