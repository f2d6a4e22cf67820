//! The worker pool: takes decoded jobs from the fetcher's channel, routes each by kind,
//! and runs it under the concurrency [`Limit`] (after a token from the optional rate
//! limit), catching panics and timeouts. Outcomes go to the acker; with an adaptive
//! limiter, each job's latency and outcome class also go to the [`Limiter`].
//!
//! A job's handler call is polled once in place: a call that finishes at once (a fast
//! handler) costs no task, and its outcome goes to the acker with the others of its
//! dispatch wave (the jobs started while slots were free), one message for them all. The
//! others go on in tasks of their own; the acker is told which of those started, one
//! message per wave, so their start marks travel with its writes, and each is registered (`runs.rs`),
//! so the shutdown can abort the ones that outlive it. A suspect (a job that was running
//! when a consumer died) runs alone: one at a time (its own gate, besides a concurrency
//! slot), its start marked in Redis before it runs (`pool/suspect.rs`).
//!
//! This file is the task: it takes batches, routes their jobs and starts them in waves.
//! `run.rs` is one run, from its start to its outcome; `suspect.rs` runs suspects; the
//! settings are `consumer/config/pool.rs`.

mod inline;
mod run;
pub(crate) use run::start_marker;
mod suspect;

use crate::consumer::config::PoolConfig;
pub(crate) use suspect::Suspects;

use crate::consumer::buffer::Buffer;
use crate::consumer::gate::Share;
use crate::consumer::outcomes::{AckerMsg, Done, cannot_take};
use crate::consumer::runs::Runs;
use crate::handler::{BatchHandler, Registry, Route};
use crate::limiter::limit::{Limit, Permit};
use crate::limiter::{KeyLimiters, Limiter, RateGate};
use crate::metrics::{DeferReason, QueueMetrics};
use crate::queue::envelope::Job;
use std::sync::Arc;
use std::task::Poll;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The worker pool task.
pub(crate) struct Pool {
    pub config: PoolConfig,
    /// The queue's retry rules in force (`weir retry set`), kept by the settings watch.
    pub rules: Arc<crate::queue::retry_rules::LiveRules>,
    pub registry: Arc<Registry>,
    pub limit: Arc<Limit>,
    /// Told of every finished job when the limit is adaptive (with `key_limiters`: of
    /// the jobs without a key).
    pub limiter: Option<Arc<Limiter>>,
    /// Told of every job with a key that starts and finishes, when the consumer adapts a
    /// limit per key.
    pub key_limiters: Option<Arc<KeyLimiters>>,
    /// Jobs/s cap, taken before a concurrency slot.
    pub rate: Arc<RateGate>,
    /// With a budget shared by several queues: slots come from its gate, not `limit`.
    pub share: Option<Share>,
    pub buffer: Arc<Buffer>,
    pub acker: mpsc::Sender<AckerMsg>,
    pub metrics: QueueMetrics,
    /// The runs going on, for the shutdown to abort.
    pub runs: Arc<Runs>,
    /// How suspects start.
    pub suspects: Suspects,
    /// Whether calls are polled in place first (`run.rs`).
    pub inline: inline::Inline,
    /// Tells the acker of the starts of jobs whose handler starts them later
    /// ([`run::start_marker`]).
    pub mark_start: crate::queue::envelope::MarkStart,
}

impl Pool {
    /// Runs jobs until `shutdown`; un-started jobs are left to the acker to release.
    pub(crate) async fn run(self, mut jobs: mpsc::UnboundedReceiver<Vec<Job>>, shutdown: CancellationToken) {
        let this = Arc::new(self);
        loop {
            if let Some(share) = &this.share
                && jobs.is_empty()
            {
                // Nothing more to start for now: slots parked for this queue go back.
                share.unpark();
            }
            let batch = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                b = jobs.recv() => match b { Some(b) => b, None => break },
            };
            if !this.dispatch(batch, &shutdown).await {
                break;
            }
        }
        if let Some(share) = &this.share {
            share.close();
        }
    }

    /// Starts every job of a fetched batch; false if shutdown came first. The outcomes of
    /// jobs that finished in place reach the acker either way: a job that ran must never
    /// be released as if it had not.
    async fn dispatch(self: &Arc<Self>, batch: Vec<Job>, shutdown: &CancellationToken) -> bool {
        // A wave's outcomes are at most the batch, and at most the limit (each holds its
        // permit until they are sent).
        let mut wave = Wave::sized(batch.len().min(self.limit.get()));
        let started = self.start_all(batch, &mut wave, shutdown).await;
        self.send_done(&mut wave).await;
        started
    }

    async fn start_all(
        self: &Arc<Self>,
        batch: Vec<Job>,
        wave: &mut Wave,
        shutdown: &CancellationToken,
    ) -> bool {
        self.metrics.channel_received.increment(batch.len() as u64);
        let mut groups: Vec<(Arc<dyn BatchHandler>, Vec<Job>)> = Vec::new();
        for job in batch {
            if job.is_suspect() && self.registry.route(&job.kind).is_some() {
                tokio::spawn(self.clone().run_suspect(job, shutdown.clone()));
                continue;
            }
            match self.registry.route(&job.kind) {
                None => {
                    self.buffer.take(1);
                    let why = format!("unknown job kind {:?}: no handler for it", job.kind);
                    let grace = self.config.unknown_kind_grace;
                    let done = AckerMsg::Done(Done {
                        id: job.id,
                        lease: job.lease,
                        outcome: cannot_take(grace, DeferReason::UnknownKind, why),
                    });
                    if !self.tell(done, shutdown).await {
                        return false;
                    }
                }
                Some(Route::One(h)) => {
                    let Some(permit) = self.permit_reporting(wave, shutdown).await else {
                        return false;
                    };
                    self.buffer.take(1);
                    self.start_one(h.clone(), job, permit, wave);
                }
                Some(Route::Batch(h)) => {
                    let max = h.max_batch().max(1);
                    let i = match groups.iter().position(|(g, _)| Arc::ptr_eq(g, h)) {
                        Some(i) => i,
                        None => {
                            groups.push((h.clone(), Vec::with_capacity(max)));
                            groups.len() - 1
                        }
                    };
                    groups[i].1.push(job);
                    if groups[i].1.len() >= max {
                        let (h, jobs) = groups.swap_remove(i);
                        if !self.start_batch(h, jobs, wave, shutdown).await {
                            return false;
                        }
                    }
                }
            }
        }
        for (h, jobs) in groups {
            if !self.start_batch(h, jobs, wave, shutdown).await {
                return false;
            }
        }
        self.report(wave, shutdown).await
    }

    /// Sends `msg` to the acker; false if shutdown came first (the acker's channel is
    /// bounded: a full one waits for its writes).
    async fn tell(&self, msg: AckerMsg, shutdown: &CancellationToken) -> bool {
        tokio::select! {
            biased;
            r = self.acker.send(msg) => r.is_ok(),
            _ = shutdown.cancelled() => false,
        }
    }

    /// Tells the acker what `wave` holds (and empties it): the outcomes of the jobs that
    /// finished in place, whose permits go after them, and the jobs that started.
    async fn report(&self, wave: &mut Wave, shutdown: &CancellationToken) -> bool {
        self.send_done(wave).await;
        wave.started.is_empty()
            || self
                .tell(AckerMsg::Started(std::mem::take(&mut wave.started)), shutdown)
                .await
    }

    /// Sends the outcomes of `wave`'s jobs that finished in place, even at shutdown (as a
    /// spawned run sends its own), then lets their permits go.
    async fn send_done(&self, wave: &mut Wave) {
        if !wave.done.is_empty() {
            // The acker outlives every worker; a closed channel means the process is
            // exiting and the leases bring the jobs back.
            // The rest of the wave, if any, gathers in a list of the same size.
            let next = Vec::with_capacity(wave.done.len());
            let done = std::mem::replace(&mut wave.done, next);
            let _ = self.acker.send(AckerMsg::Dones(done)).await;
        }
        // Outcome first, permit after: see `spawn_call`.
        wave.permits.clear();
    }

    /// [`Self::permit`]; if none is free at once, the wave so far is reported before
    /// waiting for one (its permits may be the ones to wait for): a wave is two messages
    /// at most, not one per job.
    async fn permit_reporting(&self, wave: &mut Wave, shutdown: &CancellationToken) -> Option<Permit> {
        // The common case, without the futures below: no rate, no shared budget, a free slot.
        if self.share.is_none() && self.rate.is_unlimited() {
            if shutdown.is_cancelled() {
                return None;
            }
            if let Some(p) = self.limit.try_acquire() {
                return Some(p);
            }
        }
        let permit = self.permit(shutdown);
        tokio::pin!(permit);
        if let Poll::Ready(p) = futures_util::poll!(&mut permit) {
            return p;
        }
        if !self.report(wave, shutdown).await {
            return None;
        }
        permit.await
    }

    /// A rate token, then a slot. In that order: a job waiting on the rate must not hold
    /// a slot, or the concurrency limit would look binding and grow for nothing. (With a
    /// shared budget, the gate takes the process-wide token and slot in the same order.)
    pub(crate) async fn permit(&self, shutdown: &CancellationToken) -> Option<Permit> {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => None,
            p = async {
                match &self.share {
                    None => {
                        self.rate.until_ready().await;
                        Some(self.limit.acquire().await)
                    }
                    Some(share) => {
                        let token = self.rate.until_ready();
                        tokio::pin!(token);
                        if futures_util::poll!(&mut token).is_pending() {
                            // Held back by its own rate: no shared slot parked for it
                            // meanwhile (`gate.rs`).
                            let _held = share.hold();
                            token.await;
                        }
                        share.acquire().await
                    }
                }
            } => p,
        }
    }

    async fn start_batch(
        self: &Arc<Self>,
        h: Arc<dyn BatchHandler>,
        jobs: Vec<Job>,
        wave: &mut Wave,
        shutdown: &CancellationToken,
    ) -> bool {
        let Some(permit) = self.permit_reporting(wave, shutdown).await else {
            return false;
        };
        self.buffer.take(jobs.len());
        wave.started.extend(jobs.iter().map(|j| j.lease));
        self.spawn_batch(h, jobs, permit);
        true
    }
}

/// What one dispatch wave has to tell the acker.
pub(crate) struct Wave {
    /// The leases of jobs started whose runs go on.
    started: Vec<u64>,
    /// Outcomes of jobs that finished in place: at most the concurrency limit, as each
    /// holds its permit until they are sent.
    done: Vec<Done>,
    /// The permits of the jobs that finished in place, held until their outcomes are sent.
    permits: Vec<Permit>,
}

impl Wave {
    /// A wave of up to `n` jobs finishing in place, its lists sized for them: grown from
    /// empty, they were copied about nine times a batch.
    fn sized(n: usize) -> Self {
        Self {
            started: Vec::new(),
            done: Vec::with_capacity(n),
            permits: Vec::with_capacity(n),
        }
    }
}
