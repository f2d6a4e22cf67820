//! The key shares task (`--adaptive-per-key`): writes this consumer's shares of the
//! adaptive per-key limits ([`crate::limiter::per_key`]) to Redis, where the fetch script
//! holds each key to the sum of the live shares. A round every [`EVERY`] writes the shares
//! that changed and refreshes the active keys' ones, one script call per [`CHUNK`] keys;
//! a quiet consumer writes nothing. At shutdown it withdraws its shares, so the fleet's
//! limits do not count a consumer that is gone (one that dies loses them within
//! [`SHARE_TTL`]).

use crate::limiter::KeyLimiters;
use crate::limiter::per_key::SHARE_TTL;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often shares are written: how soon a key's cut reaches the fleet.
pub(crate) const EVERY: Duration = Duration::from_millis(250);
/// How long the shutdown waits to withdraw the shares.
const WITHDRAW_WITHIN: Duration = Duration::from_secs(2);
/// Keys per script call.
const CHUNK: usize = 500;

/// The key shares task.
pub(crate) struct KeyShares {
    pub conn: HealingConnection,
    pub keys: QueueKeys,
    /// This consumer's tag (its worker id): the field its shares are written under.
    pub tag: String,
    pub limiters: Arc<KeyLimiters>,
}

impl KeyShares {
    /// Writes shares until `shutdown`, then withdraws them.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            let due = self.limiters.due(Instant::now());
            if let Err(e) = self.write(&due).await {
                tracing::warn!(error = %e, keys = due.len(), "cannot write per-key limits; trying again");
                self.limiters.unwritten(due.iter().map(|(k, _)| k.as_str()));
            }
        }
        let gone: Vec<(String, usize)> = self.limiters.keys().into_iter().map(|k| (k, 0)).collect();
        match tokio::time::timeout(WITHDRAW_WITHIN, self.write(&gone)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot withdraw per-key limits; they expire by themselves")
            }
            Err(_) => tracing::warn!("per-key limits not withdrawn in time; they expire by themselves"),
        }
    }

    async fn write(&mut self, shares: &[(String, usize)]) -> crate::Result<()> {
        let ttl = SHARE_TTL.as_millis() as u64;
        for chunk in shares.chunks(CHUNK) {
            scripts::key_shares(&mut self.conn, &self.keys, &self.tag, ttl, chunk).await?;
        }
        Ok(())
    }
}
