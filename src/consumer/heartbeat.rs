//! The heartbeat: extends the leases this process holds, on a fixed schedule, every third
//! of the lease length. It has its own task and its own connection, so neither a flood of
//! outcomes nor a slow settle call can delay it: a job that runs longer than its lease
//! keeps it.
//!
//! The schedule is `tokio::time::interval` with [`MissedTickBehavior::Skip`]: beats fall
//! on fixed instants measured from the start, not from the end of the previous beat (a
//! slow beat does not push the next ones later, as `Delay` would), and beats missed while
//! a call was stuck are not fired back to back afterwards (as `Burst` would: a burst
//! extends the same leases several times for nothing). Each call may take at most one
//! beat; a failed beat leaves a lease at least a third of its length before it expires.

use crate::consumer::leases::Leases;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, Streak};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// Most ids per `extend` call.
const EXTEND_CHUNK: usize = 2000;

/// The heartbeat task.
pub(crate) struct Heartbeat {
    conn: HealingConnection,
    keys: QueueKeys,
    /// Lease length: leases are extended by it, every third of it.
    lease: Duration,
    leases: Arc<Leases>,
    /// Failed beats: the first of a run is logged, and the recovery.
    errors: Streak,
}

impl Heartbeat {
    pub(super) fn new(
        conn: HealingConnection,
        keys: QueueKeys,
        lease: Duration,
        leases: Arc<Leases>,
    ) -> Self {
        Self {
            conn,
            keys,
            lease,
            leases,
            // The wait it computes is not used: the next try is the next beat.
            errors: Streak::new("heartbeat", Backoff::CALL),
        }
    }

    /// Beats until `stop` (after the acker's last write: leases whose outcome could not be
    /// written are kept until then).
    pub(super) async fn run(mut self, stop: CancellationToken) {
        let every = (self.lease / 3).max(Duration::from_millis(10));
        let mut beats = tokio::time::interval_at(Instant::now() + every, every);
        beats.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                _ = beats.tick() => self.beat(every).await,
            }
        }
    }

    /// Extends the leases that need it: those whose deadline was set at least half a beat
    /// ago (a lease taken since has nearly its whole length ahead). Lost leases are
    /// forgotten.
    async fn beat(&mut self, every: Duration) {
        let Some(old) = Instant::now().checked_sub(every / 2) else {
            return;
        };
        let due: Vec<(String, u64)> = self.leases.with(|t| {
            t.leases
                .iter()
                .filter(|(_, l)| l.renewed <= old)
                .map(|(id, l)| (id.clone(), l.token))
                .collect()
        });
        let vt = self.lease.as_millis() as u64;
        for chunk in due.chunks(EXTEND_CHUNK) {
            let pairs: Vec<(&str, u64)> = chunk.iter().map(|(id, t)| (id.as_str(), *t)).collect();
            let sent = Instant::now();
            let call = scripts::extend(&mut self.conn, &self.keys, vt, &pairs);
            match tokio::time::timeout(every, call).await {
                Ok(Ok((_, lost))) => {
                    self.errors.succeeded();
                    self.leases.with(|t| {
                        for (id, _) in chunk {
                            if let Some(l) = t.leases.get_mut(id) {
                                l.renewed = sent;
                            }
                        }
                        for id in &lost {
                            t.leases.remove(id);
                        }
                    });
                    if !lost.is_empty() {
                        tracing::warn!(
                            count = lost.len(),
                            "leases lost: they expired before the heartbeat reached them; their jobs run again"
                        );
                    }
                }
                // Tried again at the next beat, with the same tokens: if this call was
                // applied and only its reply lost, the leases are still this process's.
                Ok(Err(e)) => {
                    self.errors.failed(&e);
                }
                Err(_) => {
                    self.errors.failed(&"no reply within a beat");
                }
            }
        }
    }
}
