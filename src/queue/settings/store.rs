//! Reading and writing a queue's settings hash: [`Settings::load`], [`Settings::store`],
//! [`Settings::update`] and the clears; every change ends by writing a partitioned
//! queue's partitions their share (`lanes.rs`).

use super::hash::key_fields;
use super::{Cleared, Settings, lanes};
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts::{Notice, notify};
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use std::collections::HashMap;

impl Settings {
    /// Reads the settings of `queue`.
    pub async fn load<C: ConnectionLike + Send + Sync>(conn: &mut C, queue: &str) -> Result<Self> {
        let key = QueueKeys::new(queue)?.settings();
        let h: HashMap<String, String> = conn.hgetall(&key).await?;
        Self::from_hash(&h)
    }

    /// Writes the settings that are set, leaving the others as they are, and tells running
    /// consumers (a change notice).
    pub async fn store<C: ConnectionLike + Send + Sync>(&self, conn: &mut C, queue: &str) -> Result<()> {
        let keys = QueueKeys::new(queue)?;
        let key = keys.settings();
        let fields = self.to_fields();
        if !fields.is_empty() {
            // HSET with several pairs, not HMSET: the minimal ACL (docs/security.md) has
            // `hset` only.
            let _: () = redis::cmd("HSET")
                .arg(&key)
                .arg(&fields)
                .query_async(conn)
                .await?;
            notify(conn, &keys, Notice::Settings).await;
        }
        Ok(())
    }

    /// Stores `update`'s set fields for `queue` once the settings they make (the stored
    /// ones with `update` on top) pass [`Settings::validate`]; returns those settings. What
    /// `weir limits set` and the web UI's limits form do: nothing is written when the
    /// result would be refused. A partitioned queue's partitions get their share
    /// ([`Settings::share`]).
    pub async fn update<C: ConnectionLike + Send + Sync>(
        conn: &mut C,
        queue: &str,
        update: &Settings,
    ) -> Result<Settings> {
        let merged = Self::load(conn, queue).await?.merge(update);
        merged.validate()?;
        update.store(conn, queue).await?;
        lanes::spread(conn, queue).await?;
        Ok(merged)
    }

    /// Removes every setting of `queue` (and of its partitions).
    pub async fn clear<C: ConnectionLike + Send + Sync>(conn: &mut C, queue: &str) -> Result<()> {
        let keys = QueueKeys::new(queue)?;
        let _: () = conn.del(keys.settings()).await?;
        notify(conn, &keys, Notice::Settings).await;
        lanes::spread(conn, queue).await
    }

    /// Removes some settings of `queue`, leaving the others: each of `which` is a hash
    /// group of fields.
    pub async fn clear_some<C: ConnectionLike + Send + Sync>(
        conn: &mut C,
        queue: &str,
        which: &[Cleared],
    ) -> Result<()> {
        let mut fields: Vec<String> = which
            .iter()
            .flat_map(|c| c.fields().iter().map(|f| f.to_string()))
            .collect();
        if which.contains(&Cleared::PerKey) {
            let stored = Self::load(conn, queue).await?;
            fields.extend(key_fields(stored.key_overrides.keys()));
        }
        if !fields.is_empty() {
            let keys = QueueKeys::new(queue)?;
            let _: () = conn.hdel(keys.settings(), fields).await?;
            notify(conn, &keys, Notice::Settings).await;
        }
        lanes::spread(conn, queue).await
    }

    /// Removes the limits of their own of `keys` (they go back to the per-key defaults).
    pub async fn clear_keys<C: ConnectionLike + Send + Sync>(
        conn: &mut C,
        queue: &str,
        keys: &[String],
    ) -> Result<()> {
        let queue_keys = QueueKeys::new(queue)?;
        let settings = queue_keys.settings();
        let fields: Vec<String> = key_fields(keys.iter()).collect();
        if !fields.is_empty() {
            let _: () = conn.hdel(&settings, fields).await?;
        }
        if Self::load(conn, queue).await?.key_overrides.is_empty() {
            let _: () = conn.hdel(&settings, "key_overrides").await?;
        }
        notify(conn, &queue_keys, Notice::Settings).await;
        lanes::spread(conn, queue).await
    }
}
