//! Reading and writing the retry rules in the queue's settings hash.

use super::{KIND_PREFIX, QUEUE_FIELD, RetryRule, RetryRules};
use crate::error::Result;
use crate::queue::keys::{QueueKeys, validate_token};
use crate::queue::scripts::{Notice, notify};
use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use std::collections::HashMap;

/// The hash field of `kind`'s rule, or of the queue's (no kind); the kind is checked.
fn field(kind: Option<&str>) -> Result<String> {
    Ok(match kind {
        Some(k) => {
            validate_token("job kind", k, crate::queue::envelope::MAX_ID_LEN)?;
            format!("{KIND_PREFIX}{k}")
        }
        None => QUEUE_FIELD.to_owned(),
    })
}

impl RetryRules {
    /// Reads the rules of `queue`.
    pub async fn load<C: ConnectionLike + Send + Sync>(conn: &mut C, queue: &str) -> Result<Self> {
        let h: HashMap<String, String> = conn.hgetall(QueueKeys::new(queue)?.settings()).await?;
        Self::from_hash(&h)
    }

    /// Stores `rule` for `queue`'s jobs of `kind` (none: for the queue). Running consumers
    /// apply it at once (a change notice), to every job that fails from then on.
    pub async fn set<C: ConnectionLike + Send + Sync>(
        conn: &mut C,
        queue: &str,
        kind: Option<&str>,
        rule: &RetryRule,
    ) -> Result<()> {
        let f = field(kind)?;
        let keys = QueueKeys::new(queue)?;
        let _: () = conn.hset(keys.settings(), f, rule.to_string()).await?;
        notify(conn, &keys, Notice::Settings).await;
        Ok(())
    }

    /// Removes the rule of `queue`'s jobs of `kind` (none: the queue's own).
    pub async fn clear<C: ConnectionLike + Send + Sync>(
        conn: &mut C,
        queue: &str,
        kind: Option<&str>,
    ) -> Result<()> {
        let f = field(kind)?;
        let keys = QueueKeys::new(queue)?;
        let _: () = conn.hdel(keys.settings(), f).await?;
        notify(conn, &keys, Notice::Settings).await;
        Ok(())
    }
}
