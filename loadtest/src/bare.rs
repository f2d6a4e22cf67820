//! The bare reliable queue weir is measured against: the least Redis work a reliable,
//! batched consumer cannot avoid. Enqueue is raw RPUSH of items (chunks of [`CHUNK`], by
//! default [`IN_FLIGHT`] commands in flight: weir's bulk enqueue's chunk and pipeline);
//! the drain is [`TASKS`] tasks on one multiplexed connection, each a loop of one Lua
//! fetch (LPOP [`BATCH`] items, ZADD them to a lease set with a deadline from Redis
//! `TIME`) and one Lua ack (ZREM them). No envelope, no jobs hash, no attempts, no
//! handler: each item is the job's id and payload, and the items are the ids.
//!
//! Under a steady feed ([`Bare::push_and_wake`], [`Bare::consume`]) it wakes as weir does:
//! each push publishes on a wake channel in the same transaction, and a loop that finds
//! the list empty waits for that message instead of polling.

use futures_util::{StreamExt, TryStreamExt, stream};
use redis::Script;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use weir::{CancellationToken, Conn};

/// Items per RPUSH: as many as weir's bulk enqueue puts in one call.
pub(crate) const CHUNK: usize = weir::queue::producer::BULK_CHUNK;
/// RPUSH commands in flight by default: as many as weir's bulk enqueue keeps.
pub(crate) const IN_FLIGHT: usize = weir::queue::producer::BULK_PIPELINE;
/// Fetch-and-ack loops draining at once.
pub(crate) const TASKS: usize = 4;
/// Items per fetch.
pub(crate) const BATCH: usize = 500;
/// Lease length written by the fetch (never reached: nothing reclaims here).
const LEASE_MS: u64 = 30_000;
/// Longest a consumer loop that found the list empty waits without a wake message.
const IDLE_RECHECK: Duration = Duration::from_millis(100);

/// LPOP up to ARGV[1] items from KEYS[1]; lease them in KEYS[2] until TIME + ARGV[2] ms.
/// ZADD takes at most 2 × [`BATCH`] arguments, far below Lua's `unpack` limit.
const FETCH: &str = r"
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
local items = redis.call('LPOP', KEYS[1], ARGV[1])
if not items then return {} end
local args = {}
for i = 1, #items do
  args[2 * i - 1] = deadline
  args[2 * i] = items[i]
end
redis.call('ZADD', KEYS[2], unpack(args))
return items
";

/// ZREM the acked items (ARGV) from the lease set KEYS[1].
const ACK: &str = "return redis.call('ZREM', KEYS[1], unpack(ARGV))";

/// The bare item of job `i`: its id and payload, as one JSON object.
pub(crate) fn item(i: u64, payload_json: &str) -> Vec<u8> {
    // Written as `accounting::job_id` writes an id: no formatting machinery per item.
    const HEAD: &[u8] = br#"{"id":""#;
    const MID: &[u8] = br#"","payload":"#;
    let mut n = itoa::Buffer::new();
    let digits = n.format(i).as_bytes();
    let prefix = crate::accounting::ID_PREFIX.as_bytes();
    let mut item =
        Vec::with_capacity(HEAD.len() + prefix.len() + digits.len() + MID.len() + payload_json.len() + 1);
    item.extend_from_slice(HEAD);
    item.extend_from_slice(prefix);
    item.extend_from_slice(digits);
    item.extend_from_slice(MID);
    item.extend_from_slice(payload_json.as_bytes());
    item.push(b'}');
    item
}

/// The push stamp (µs since the epoch) in the payload of an [`item`], if it has one.
pub(crate) fn item_stamp(item: &[u8]) -> Option<u64> {
    let json = std::str::from_utf8(item).ok()?;
    let at = json.find(PAYLOAD_AT)? + PAYLOAD_AT.len();
    crate::feed::stamp_us(&json[at..])
}

const PAYLOAD_AT: &str = r#""payload":"#;

/// One bare queue: its ready list and lease set.
#[derive(Clone)]
pub(crate) struct Bare {
    conn: Conn,
    ready: String,
    leases: String,
    wake: String,
    /// The wake channel is sharded pub/sub (SPUBLISH), as consumers on a Redis Cluster
    /// listen there (`weir::Redis::subscribe`).
    sharded: bool,
    fetch: Script,
    ack: Script,
}

impl Bare {
    /// The bare queue `name` (keys `bare:{name}:ready`, `bare:{name}:leases`, wake
    /// channel `bare:{name}:wake`) on `conn`.
    pub(crate) fn new(conn: Conn, name: &str) -> Self {
        Self {
            conn,
            ready: format!("bare:{{{name}}}:ready"),
            leases: format!("bare:{{{name}}}:leases"),
            wake: format!("bare:{{{name}}}:wake"),
            sharded: false,
            fetch: Script::new(FETCH),
            ack: Script::new(ACK),
        }
    }

    /// Wakes with SPUBLISH: on a Redis Cluster, where [`Bare::consume`]'s subscription is
    /// sharded (a plain PUBLISH never reached it, and every wake waited for the recheck).
    pub(crate) fn sharded(mut self, yes: bool) -> Self {
        self.sharded = yes;
        self
    }

    /// Pushes `n` items, `item(i)` for `i` in `0..n`, `in_flight` commands at a time;
    /// returns the time taken.
    pub(crate) async fn enqueue(
        &self,
        n: u64,
        in_flight: usize,
        item: impl Fn(u64) -> Vec<u8>,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let chunks = (0..n).step_by(CHUNK).map(|from| {
            let to = (from + CHUNK as u64).min(n);
            let mut cmd = redis::cmd("RPUSH");
            cmd.arg(&self.ready);
            for i in from..to {
                cmd.arg(item(i));
            }
            let mut conn = self.conn.clone();
            async move { cmd.query_async::<u64>(&mut conn).await }
        });
        stream::iter(chunks)
            .buffer_unordered(in_flight.max(1))
            .try_for_each(|_| async { Ok(()) })
            .await?;
        Ok(started.elapsed())
    }

    /// Drains the ready list with [`TASKS`] fetch-and-ack loops; returns the items acked
    /// and the time taken.
    pub(crate) async fn drain(&self) -> anyhow::Result<(u64, Duration)> {
        // Loaded first, so no loop pays the NOSCRIPT round trip inside the timing.
        let mut conn = self.conn.clone();
        self.fetch.prepare_invoke().load_async(&mut conn).await?;
        self.ack.prepare_invoke().load_async(&mut conn).await?;
        let started = Instant::now();
        let loops: Vec<_> = (0..TASKS)
            .map(|_| tokio::spawn(self.clone().drain_loop()))
            .collect();
        let mut acked = 0;
        for l in loops {
            acked += l.await??;
        }
        Ok((acked, started.elapsed()))
    }

    async fn drain_loop(self) -> anyhow::Result<u64> {
        let mut conn = self.conn.clone();
        let mut acked = 0;
        loop {
            let items = self.fetch(&mut conn).await?;
            if items.is_empty() {
                return Ok(acked);
            }
            acked += self.ack(&mut conn, &items).await?;
        }
    }

    /// One fetch: up to [`BATCH`] items, leased.
    async fn fetch(&self, conn: &mut Conn) -> anyhow::Result<Vec<Vec<u8>>> {
        Ok(self
            .fetch
            .key(&self.ready)
            .key(&self.leases)
            .arg(BATCH)
            .arg(LEASE_MS)
            .invoke_async(conn)
            .await?)
    }

    /// Ends the leases of `items`; returns how many it found.
    async fn ack(&self, conn: &mut Conn, items: &[Vec<u8>]) -> anyhow::Result<u64> {
        Ok(self.ack.key(&self.leases).arg(items).invoke_async(conn).await?)
    }

    /// Pushes `items` in one transaction: RPUSH (in commands of [`CHUNK`]) and a PUBLISH
    /// on the wake channel, as weir's bulk enqueue writes a chunk and its wake.
    pub(crate) async fn push_and_wake(&self, items: &[Vec<u8>]) -> anyhow::Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        for chunk in items.chunks(CHUNK) {
            pipe.cmd("RPUSH").arg(&self.ready).arg(chunk).ignore();
        }
        pipe.cmd(if self.sharded { "SPUBLISH" } else { "PUBLISH" })
            .arg(&self.wake)
            .arg("")
            .ignore();
        pipe.query_async::<()>(&mut self.conn.clone()).await?;
        Ok(())
    }

    /// Consumes what [`Bare::push_and_wake`] pushes, with [`TASKS`] fetch-and-ack loops
    /// that wait for a wake message whenever a fetch comes back empty; `seen` is called
    /// on every item fetched, before its ack; `up` is told once it is subscribed and its
    /// loops run. Returns the items acked once `stop` is cancelled and the list is found
    /// empty.
    pub(crate) async fn consume(
        &self,
        redis: &weir::Redis,
        stop: CancellationToken,
        up: tokio::sync::oneshot::Sender<()>,
        seen: impl Fn(&[u8]) + Send + Sync + 'static,
    ) -> anyhow::Result<u64> {
        let mut sub = redis.subscribe(&self.wake).await?;
        let mut conn = self.conn.clone();
        self.fetch.prepare_invoke().load_async(&mut conn).await?;
        self.ack.prepare_invoke().load_async(&mut conn).await?;
        let woken = Arc::new(Notify::new());
        let listener = tokio::spawn({
            let woken = woken.clone();
            async move {
                while sub.next().await.is_some() {
                    woken.notify_waiters();
                }
            }
        });
        let seen = Arc::new(seen);
        let loops: Vec<_> = (0..TASKS)
            .map(|_| {
                let (q, stop, woken, seen) = (self.clone(), stop.clone(), woken.clone(), seen.clone());
                tokio::spawn(async move {
                    let r = q.consume_loop(&stop, &woken, &*seen).await;
                    if r.is_err() {
                        stop.cancel(); // the others finish what is left and end
                    }
                    r
                })
            })
            .collect();
        let _ = up.send(());
        let mut acked = 0;
        let mut failed = None;
        for l in loops {
            match l.await? {
                Ok(n) => acked += n,
                Err(e) => failed = Some(e),
            }
        }
        listener.abort();
        match failed {
            Some(e) => Err(e),
            None => Ok(acked),
        }
    }

    /// One of [`Bare::consume`]'s loops.
    async fn consume_loop(
        &self,
        stop: &CancellationToken,
        woken: &Notify,
        seen: &(impl Fn(&[u8]) + ?Sized),
    ) -> anyhow::Result<u64> {
        let mut conn = self.conn.clone();
        let mut acked = 0;
        loop {
            // Listening from before the fetch: a push while it runs wakes us.
            let wake = woken.notified();
            tokio::pin!(wake);
            wake.as_mut().enable();
            let items = self.fetch(&mut conn).await?;
            if items.is_empty() {
                if stop.is_cancelled() {
                    return Ok(acked);
                }
                tokio::select! {
                    _ = wake => {}
                    _ = tokio::time::sleep(IDLE_RECHECK) => {}
                    _ = stop.cancelled() => {}
                }
                continue;
            }
            for item in &items {
                seen(item);
            }
            acked += self.ack(&mut conn, &items).await?;
        }
    }

    /// Deletes both keys.
    pub(crate) async fn clear(&self) -> anyhow::Result<()> {
        redis::cmd("UNLINK")
            .arg(&self.ready)
            .arg(&self.leases)
            .query_async::<()>(&mut self.conn.clone())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_carry_the_push_stamp_of_their_payload() {
        let body = crate::feed::payload(100, 1);
        let stamped = crate::feed::stamped(&body, 1_796_000_000_123_456);
        let it = item(7, stamped.get());
        let v: serde_json::Value = serde_json::from_slice(&it).unwrap();
        assert_eq!(v["id"], "lt-7");
        assert_eq!(item_stamp(&it), Some(1_796_000_000_123_456));
        // No stamp yet (zeros), no payload, not UTF-8: none.
        assert_eq!(item_stamp(&item(7, body.get())), None);
        assert_eq!(item_stamp(br#"{"id":"x"}"#), None);
        assert_eq!(item_stamp(&[0xff, 0xfe]), None);
    }
}
