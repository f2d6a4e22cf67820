//! The bare reliable queue weir is measured against: the least Redis work a reliable,
//! batched consumer cannot avoid. Enqueue is raw RPUSH of items (chunks of [`CHUNK`], by
//! default [`IN_FLIGHT`] commands in flight: weir's bulk enqueue's chunk and pipeline);
//! the drain is [`TASKS`] tasks on one multiplexed connection, each a loop of one Lua
//! fetch (LPOP [`BATCH`] items, ZADD them to a lease set with a deadline from Redis
//! `TIME`) and one Lua ack (ZREM them). No envelope, no jobs hash, no attempts, no
//! handler: each item is the job's id and payload, and the items are the ids.

use futures_util::{StreamExt, TryStreamExt, stream};
use redis::Script;
use std::time::{Duration, Instant};
use weir::Conn;

/// Items per RPUSH: as many as weir's bulk enqueue puts in one call.
pub const CHUNK: usize = weir::producer::BULK_CHUNK;
/// RPUSH commands in flight by default: as many as weir's bulk enqueue keeps.
pub const IN_FLIGHT: usize = weir::producer::BULK_PIPELINE;
/// Fetch-and-ack loops draining at once.
pub const TASKS: usize = 4;
/// Items per fetch.
pub const BATCH: usize = 500;
/// Lease length written by the fetch (never reached: nothing reclaims here).
const LEASE_MS: u64 = 30_000;

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

/// One bare queue: its ready list and lease set.
#[derive(Clone)]
pub struct Bare {
    conn: Conn,
    ready: String,
    leases: String,
    fetch: Script,
    ack: Script,
}

impl Bare {
    /// The bare queue `name` (keys `bare:{name}:ready`, `bare:{name}:leases`) on `conn`.
    pub fn new(conn: Conn, name: &str) -> Self {
        Self {
            conn,
            ready: format!("bare:{{{name}}}:ready"),
            leases: format!("bare:{{{name}}}:leases"),
            fetch: Script::new(FETCH),
            ack: Script::new(ACK),
        }
    }

    /// Pushes `n` items, `item(i)` for `i` in `0..n`, `in_flight` commands at a time;
    /// returns the time taken.
    pub async fn enqueue(
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
    pub async fn drain(&self) -> anyhow::Result<(u64, Duration)> {
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
            let items: Vec<Vec<u8>> = self
                .fetch
                .key(&self.ready)
                .key(&self.leases)
                .arg(BATCH)
                .arg(LEASE_MS)
                .invoke_async(&mut conn)
                .await?;
            if items.is_empty() {
                return Ok(acked);
            }
            let removed: u64 = self
                .ack
                .key(&self.leases)
                .arg(&items)
                .invoke_async(&mut conn)
                .await?;
            acked += removed;
        }
    }

    /// Deletes both keys.
    pub async fn clear(&self) -> anyhow::Result<()> {
        redis::cmd("UNLINK")
            .arg(&self.ready)
            .arg(&self.leases)
            .query_async::<()>(&mut self.conn.clone())
            .await?;
        Ok(())
    }
}
