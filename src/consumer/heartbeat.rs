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
//!
//! Each beat also refreshes this consumer's entry in the queue's worker registry (`weir
//! workers`: its limit and running jobs now), sent together with the first extend call so
//! a beat stays one round trip; the entry is written when the heartbeat starts and removed
//! when it stops, and expires after three beats (at least [`MIN_WORKER_TTL`]) if the
//! process dies.

use crate::consumer::leases::{self, Leases};
use crate::limiter::Limiter;
use crate::limiter::limit::Limit;
use crate::queue::admin::WorkerRecord;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, GiveUp, Streak};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// Most ids per `extend` call.
const EXTEND_CHUNK: usize = 2000;

/// The shortest time a worker registry entry lives without a beat: short leases beat
/// often, and one late beat must not make a live consumer vanish from `weir workers`.
pub(crate) const MIN_WORKER_TTL: Duration = Duration::from_secs(2);

/// How long the removal of the registry entry may take at shutdown (it expires anyway).
const DEREGISTER_TIMEOUT: Duration = Duration::from_secs(1);

/// This consumer in the worker registry: its record and what changes in it.
pub(crate) struct Registration {
    pub(crate) record: WorkerRecord,
    pub(crate) limit: Arc<Limit>,
    /// The consumer's running jobs (with a limit shared by several queues, its own).
    pub(crate) running: Arc<Limit>,
    /// Whether this entry reports `running`: a partitioned queue's consumer reports it on
    /// its base lane only, since `weir workers` adds a worker's lanes up.
    pub(crate) reports_running: bool,
    /// The adaptive limiter driving `limit`, whose latest decision the entry shows.
    pub(crate) limiter: Option<Arc<Limiter>>,
}

/// The heartbeat task.
pub(crate) struct Heartbeat {
    conn: HealingConnection,
    keys: QueueKeys,
    /// Lease length: leases are extended by it, every third of it.
    lease: Duration,
    leases: Arc<Leases>,
    /// Failed beats: the first of a run is logged, and the recovery.
    errors: Streak,
    registration: Registration,
    /// Failed registry writes, logged the same way.
    registry_errors: Streak,
}

impl Heartbeat {
    pub(super) fn new(
        conn: HealingConnection,
        keys: QueueKeys,
        lease: Duration,
        leases: Arc<Leases>,
        registration: Registration,
    ) -> Self {
        Self {
            conn,
            keys,
            lease,
            leases,
            // The wait it computes is not used: the next try is the next beat.
            errors: Streak::new("heartbeat", Backoff::CALL),
            registration,
            registry_errors: Streak::new("worker registry", Backoff::CALL),
        }
    }

    /// Beats until `stop` (after the acker's last write: leases whose outcome could not be
    /// written are kept until then).
    pub(super) async fn run(mut self, stop: CancellationToken) {
        let every = (self.lease / 3).max(Duration::from_millis(10));
        let mut beats = tokio::time::interval_at(Instant::now() + every, every);
        beats.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let ttl = (every * 3).max(MIN_WORKER_TTL);
        let registered = self.register(ttl);
        self.registered(tokio::time::timeout(every, registered).await);
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                _ = beats.tick() => self.beat(every, ttl).await,
            }
        }
        let gone = self.register(Duration::ZERO);
        self.registered(tokio::time::timeout(DEREGISTER_TIMEOUT, gone).await);
    }

    /// Writes this consumer's registry entry to live `ttl` (zero: removes it). A future
    /// of its own, on a clone of the connection, so a beat sends it beside an extend.
    fn register(&self, ttl: Duration) -> impl Future<Output = crate::Result<u64>> + use<> {
        let (mut conn, keys) = (self.conn.clone(), self.keys.clone());
        let r = &self.registration;
        let (id, fields) = (
            r.record.id.clone(),
            r.record.fields(
                r.limit.get(),
                if r.reports_running {
                    r.running.in_flight()
                } else {
                    0
                },
                self.leases.len(),
                r.limiter.as_ref().and_then(|l| l.explain()),
            ),
        );
        async move { scripts::worker_beat(&mut conn, &keys, &id, ttl.as_millis() as u64, &fields).await }
    }

    fn registered(&mut self, r: Result<crate::Result<u64>, tokio::time::error::Elapsed>) {
        match r {
            Ok(Ok(_)) => self.registry_errors.succeeded(),
            Ok(Err(e)) => {
                self.registry_errors.failed(&e);
            }
            Err(_) => {
                self.registry_errors.failed(&"no reply within a beat");
            }
        }
    }

    /// Extends the leases that need it: those whose deadline was set at least half a beat
    /// ago (a lease taken since has nearly its whole length ahead). Lost leases are
    /// forgotten.
    async fn beat(&mut self, every: Duration, ttl: Duration) {
        let mut due: Vec<Due> = match Instant::now().checked_sub(every / 2) {
            Some(old) => self.due(old),
            None => Vec::new(),
        };
        self.split_due(&mut due, every).await;
        let registered = tokio::time::timeout(every, self.register(ttl));
        let mut chunks = due.chunks(EXTEND_CHUNK);
        let Some(first) = chunks.next() else {
            return self.registered(registered.await);
        };
        // Both requests go out together on the multiplexed connection: one round trip.
        let (registered, ()) = tokio::join!(registered, self.extend(first, every));
        self.registered(registered);
        for chunk in chunks {
            self.extend(chunk, every).await;
        }
    }

    /// Splits the batch leases among `due` first (a batch is extended job by job); leaves
    /// out of `due` the jobs of a batch whose split did not get through within a beat
    /// (their batch stays whole in Redis: an extend by job would find no lease).
    async fn split_due(&mut self, due: &mut Vec<Due>, every: Duration) {
        let batches: std::collections::HashSet<Arc<str>> = self.leases.with(|t| {
            due.iter()
                .filter_map(|d| t.leases.get(d.seq).and_then(|l| l.batch.clone()))
                .collect()
        });
        if batches.is_empty() {
            return;
        }
        let names: Vec<Arc<str>> = batches.into_iter().collect();
        let give_up = GiveUp::at(Instant::now() + every);
        leases::split(&self.conn, &self.keys, &self.leases, &names, give_up).await;
        self.leases
            .with(|t| due.retain(|d| t.leases.get(d.seq).is_some_and(|l| l.batch.is_none())));
    }

    /// The leases whose deadline was set at or before `old`.
    fn due(&self, old: Instant) -> Vec<Due> {
        self.leases.with(|t| {
            t.leases
                .iter_mut()
                .filter(|(_, l)| l.renewed <= old)
                .map(|(seq, l)| {
                    // Sent now, whatever becomes of the reply (see Lease::extend_sent).
                    l.extend_sent = true;
                    Due {
                        seq,
                        name: l.name().to_string(),
                        token: l.token,
                    }
                })
                .collect()
        })
    }

    /// Extends the leases of `chunk` in one call.
    async fn extend(&mut self, chunk: &[Due], every: Duration) {
        let vt = self.lease.as_millis() as u64;
        let pairs: Vec<(&str, u64)> = chunk.iter().map(|d| (d.name(), d.token)).collect();
        let sent = Instant::now();
        let call = scripts::extend(&mut self.conn, &self.keys, vt, &pairs);
        match tokio::time::timeout(every, call).await {
            Ok(Ok((_, lost))) => {
                self.errors.succeeded();
                let lost: std::collections::HashSet<&str> = lost.iter().map(String::as_str).collect();
                self.leases.with(|t| {
                    for d in chunk {
                        if lost.contains(d.name()) {
                            t.leases.remove(d.seq);
                        } else if let Some(l) = t.leases.get_mut(d.seq) {
                            l.renewed = sent;
                        }
                    }
                });
                if !lost.is_empty() {
                    tracing::warn!(
                        count = lost.len(),
                        "leases lost: they expired before the heartbeat reached them (their jobs run again), or their jobs were deleted"
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

/// A lease the heartbeat extends: its key in the lease table, its name in Redis (the job's
/// id, or an inline job's envelope) and its token.
struct Due {
    seq: u64,
    /// As `Lease::name`.
    name: String,
    token: u64,
}

impl Due {
    fn name(&self) -> &str {
        &self.name
    }
}
