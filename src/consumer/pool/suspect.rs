//! Suspects: jobs that were running when a consumer died (see `reclaim.lua`). One of them
//! may be what killed it, so each runs alone: at most one suspect at a time in a consumer
//! (a gate of one permit, besides the concurrency slot), with its start marked in Redis
//! before it runs (`start_suspect`, one call per suspect: the rare path). If it kills this
//! consumer too, reclaim charges it, and only it; the jobs running beside it go back to
//! the suspects list uncharged.

use super::Pool;
use crate::consumer::leases::Leases;
use crate::handler::Route;
use crate::queue::envelope::Job;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, GiveUp, retrying};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// What a suspect needs to start.
#[derive(Debug)]
pub(crate) struct Suspects {
    /// One permit: one suspect at a time.
    gate: Arc<Semaphore>,
    conn: HealingConnection,
    keys: QueueKeys,
    /// This consumer run's tag.
    tag: String,
    leases: Arc<Leases>,
}

/// How marking a suspect's start went.
enum Marked {
    Yes,
    /// This consumer no longer holds the lease: the job is someone else's now.
    Lost,
    Shutdown,
}

impl Suspects {
    pub(crate) fn new(conn: HealingConnection, keys: QueueKeys, tag: String, leases: Arc<Leases>) -> Self {
        Self {
            gate: Arc::new(Semaphore::new(1)),
            conn,
            keys,
            tag,
            leases,
        }
    }

    /// Marks the start of the suspect of lease `seq` in Redis (retried until it lands, or
    /// shutdown).
    async fn mark(&self, seq: u64, shutdown: &CancellationToken) -> Marked {
        let Some((token, name)) = self.leases.token(seq) else {
            return Marked::Lost;
        };
        let call = retrying("start_suspect", Backoff::CALL, GiveUp::NEVER, || {
            let mut conn = self.conn.clone();
            let (keys, tag, name) = (&self.keys, self.tag.as_str(), name.as_str());
            async move { scripts::start_suspect(&mut conn, keys, name, token, tag).await }
        });
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => Marked::Shutdown,
            r = call => match r {
                Ok(true) => {
                    self.leases.set_marked(seq);
                    Marked::Yes
                }
                Ok(false) | Err(_) => Marked::Lost,
            },
        }
    }
}

impl Pool {
    /// Runs suspect `job` alone (its own task: other jobs are dispatched meanwhile). A
    /// suspect not started by shutdown stays un-started, and is released with the others.
    pub(crate) async fn run_suspect(self: Arc<Self>, job: Job, shutdown: CancellationToken) {
        let gate = tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            g = self.suspects.gate.clone().acquire_owned() => g.expect("the suspect gate never closes"),
        };
        let Some(permit) = self.permit(&shutdown).await else {
            return;
        };
        match self.suspects.mark(job.lease, &shutdown).await {
            Marked::Yes => {}
            Marked::Lost => {
                self.buffer.take(1);
                return;
            }
            Marked::Shutdown => return,
        }
        self.buffer.take(1);
        let run = match self.registry.route(&job.kind) {
            Some(Route::One(h)) => self.spawn_one(h.clone(), job, permit),
            Some(Route::Batch(h)) => self.spawn_batch(h.clone(), vec![job], permit),
            None => return, // dispatch sends only known kinds here
        };
        // The gate opens when the run ends, or is aborted at shutdown.
        let _ = run.await;
        drop(gate);
    }
}
