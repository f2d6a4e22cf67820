//! The weighted gate of a [`MultiConsumer`](crate::MultiConsumer): one process-wide
//! budget (the concurrency [`Limit`] and the jobs/s [`RateGate`]) shared by the pools of
//! several queues, granted slot by slot in proportion to the queues' weights.
//!
//! One task ([`Gate::run`]) takes a rate token, then a slot, and hands the slot to the
//! queue whose turn it is, by stride scheduling: each queue has a pass, the queue of
//! lowest pass among those that want a slot gets it, and its pass grows by
//! `STRIDE / weight`. So over any stretch where several queues want slots, their grants
//! are in the ratio of their weights. A queue that comes back after wanting nothing starts
//! from the pass of the last grant: it cannot bank the turns it did not use.
//!
//! A queue wants a slot while its pool asks for one ([`Gate::acquire`]) or while it holds
//! fetched jobs that are not yet granted one: a slot granted then is parked for the pool,
//! which takes it at its next ask. Without parking, slots that free up together (jobs
//! that finish in the same timer tick) would all go to whichever pools happen to be
//! asking at that instant, not by weight. A queue that holds nothing wants nothing, so its
//! share goes to the others and no slot sits idle while any queue has work. Parked slots
//! go back to the limit (and their pass is refunded) when the pool has no more jobs to
//! start ([`Share::unpark`]): a job that needed none (a kind without a handler, the jobs of
//! one batch-handler call) must not keep a slot from the other queues. Nor does a queue
//! held back by a limit of its own (its stored jobs/s rate): while its pool waits for a
//! rate token ([`Share::hold`]) its parked slots go back and its buffer wants none, so the
//! slots it could not use run the other queues' jobs; it asks again once it has a token.
//!
//! The gate only orders starts: which jobs of a queue run first is still its fetch
//! script's business (highest priority first).

use crate::consumer::buffer::Buffer;
use crate::limiter::RateGate;
use crate::limiter::limit::{Limit, Permit};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

/// The pass one grant adds to a queue of weight 1 (a queue of weight `w` adds `STRIDE / w`;
/// weights stay far below it, so the rounding is negligible).
const STRIDE: u64 = 1 << 32;

/// The shared budget and whose turn it is.
#[derive(Debug)]
pub(crate) struct Gate {
    limit: Arc<Limit>,
    rate: Arc<RateGate>,
    lanes: Mutex<Lanes>,
    /// Told when a pool asks for a slot.
    asked: Notify,
}

#[derive(Debug)]
struct Lanes {
    lanes: Vec<Lane>,
    /// The pass of the last grant: where a queue that wanted nothing comes back.
    now: u64,
}

/// One queue's place at the gate.
#[derive(Debug)]
struct Lane {
    stride: u64,
    pass: u64,
    /// Its pool's requests (a suspect asks beside the pool's dispatch), oldest first.
    waiters: VecDeque<oneshot::Sender<Permit>>,
    /// Slots granted ahead of the pool's ask.
    parked: Vec<Permit>,
    /// The queue's fetched, un-started jobs.
    buffer: Arc<Buffer>,
    /// Its pool has stopped: it wants nothing more.
    closed: bool,
    /// Its pool's asks that wait on the queue's own rate ([`Share::hold`]): while any
    /// does, its buffer wants no slot.
    held: usize,
}

impl Lane {
    /// Whether this queue wants a slot: its pool asks (a request whose future was dropped
    /// does not count), or it holds more fetched jobs than parked slots and is not held
    /// back by its own rate.
    fn wants(&mut self) -> bool {
        if self.closed {
            return false;
        }
        self.waiters.retain(|w| !w.is_closed());
        !self.waiters.is_empty() || (self.held == 0 && self.buffer.len() > self.parked.len())
    }

    /// Gives back the parked slots, their pass refunded.
    fn unpark(&mut self) {
        let n = self.parked.len() as u64;
        self.pass = self.pass.saturating_sub(n * self.stride);
        // Dropped under the lock: a permit's drop takes no lock of the gate's, the slots
        // go straight back to the limit.
        self.parked.clear();
    }
}

/// One queue's way to the shared budget: its lane at the gate, its buffer (which the gate
/// reads), and the count of its own running jobs.
#[derive(Debug, Clone)]
pub(crate) struct Share {
    gate: Arc<Gate>,
    lane: usize,
    buffer: Arc<Buffer>,
    running: Arc<Limit>,
}

impl Share {
    /// The queue of `lane` at `gate`.
    pub(crate) fn new(gate: Arc<Gate>, lane: usize) -> Self {
        let buffer = gate.lock().lanes[lane].buffer.clone();
        Self {
            gate,
            lane,
            buffer,
            // Never acquired from: it only counts (`Limit::count`).
            running: Limit::new(1),
        }
    }

    /// This queue's running jobs.
    pub(crate) fn running(&self) -> &Arc<Limit> {
        &self.running
    }

    /// The buffer the queue's fetcher and pool must use: the gate reads it.
    pub(crate) fn buffer(&self) -> &Arc<Buffer> {
        &self.buffer
    }

    /// A shared slot when this queue's turn comes, counted among its running jobs; none
    /// once the gate or this queue's lane has stopped.
    pub(crate) async fn acquire(&self) -> Option<Permit> {
        let slot = self.gate.acquire(self.lane).await?;
        Some(self.running.count(slot))
    }

    /// Gives back the slots parked for this queue: its pool has nothing more to start now.
    pub(crate) fn unpark(&self) {
        self.gate.lock().lanes[self.lane].unpark();
    }

    /// The queue's pool waits for a token of the queue's own rate: until the returned
    /// guard drops, its parked slots go back and its fetched jobs want none (a slot it
    /// cannot use must run the other queues' jobs meanwhile).
    pub(crate) fn hold(&self) -> Held<'_> {
        let mut l = self.gate.lock();
        let lane = &mut l.lanes[self.lane];
        lane.held += 1;
        lane.unpark();
        Held(self)
    }

    /// The queue's pool has stopped: its parked slots go back, and it wants no more.
    pub(crate) fn close(&self) {
        let mut l = self.gate.lock();
        let lane = &mut l.lanes[self.lane];
        lane.closed = true;
        lane.parked.clear();
        lane.waiters.clear();
    }
}

/// A pool's wait on its queue's own rate ([`Share::hold`]); its drop ends the hold, and
/// the gate looks again at what the queue wants.
pub(crate) struct Held<'a>(&'a Share);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let share = self.0;
        let lane = &mut share.gate.lock().lanes[share.lane];
        lane.held = lane.held.saturating_sub(1);
        share.gate.asked.notify_one();
    }
}

impl Gate {
    /// A gate over `limit` and `rate` for queues of these `weights` (each at least 1; the
    /// lane of a queue is its index here).
    pub(crate) fn new(limit: Arc<Limit>, rate: Arc<RateGate>, weights: &[u32]) -> Arc<Self> {
        let lanes = weights
            .iter()
            .map(|&w| Lane {
                stride: STRIDE / u64::from(w.max(1)),
                pass: 0,
                waiters: VecDeque::new(),
                parked: Vec::new(),
                buffer: Arc::default(),
                closed: false,
                held: 0,
            })
            .collect();
        Arc::new(Self {
            limit,
            rate,
            lanes: Mutex::new(Lanes { lanes, now: 0 }),
            asked: Notify::new(),
        })
    }

    /// A slot of the shared limit for the queue of `lane`: a parked one at once, else when
    /// its turn comes; none once the gate or the lane has stopped. Cancel-safe: a request
    /// dropped before its grant takes nothing.
    async fn acquire(&self, lane: usize) -> Option<Permit> {
        let (tx, rx) = oneshot::channel();
        {
            let mut l = self.lock();
            let me = &mut l.lanes[lane];
            if me.closed {
                return None;
            }
            if let Some(p) = me.parked.pop() {
                return Some(p);
            }
            me.waiters.push_back(tx);
        }
        self.asked.notify_one();
        rx.await.ok()
    }

    /// Grants slots until `stop`: a rate token, then a slot, then to the queue of lowest
    /// pass among those that want one.
    pub(crate) async fn run(self: Arc<Self>, stop: CancellationToken) {
        loop {
            loop {
                let asked = self.asked.notified();
                if self.lock().lanes.iter_mut().any(Lane::wants) {
                    break;
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = asked => {}
                }
            }
            let permit = tokio::select! {
                _ = stop.cancelled() => return,
                p = async {
                    self.rate.until_ready().await;
                    self.limit.acquire().await
                } => p,
            };
            self.grant(permit);
        }
    }

    /// Hands `permit` to the queue of lowest pass that wants one (ties: the first listed):
    /// to its oldest request, or parked for its next. With no queue wanting one any more,
    /// it goes back to the limit.
    fn grant(&self, mut permit: Permit) {
        let mut l = self.lock();
        let now = l.now;
        loop {
            let next = l
                .lanes
                .iter_mut()
                .enumerate()
                .filter_map(|(i, lane)| lane.wants().then_some((lane.pass.max(now), i)))
                .min();
            let Some((pass, i)) = next else { return };
            let lane = &mut l.lanes[i];
            lane.pass = pass + lane.stride;
            l.now = pass;
            let lane = &mut l.lanes[i];
            match lane.waiters.pop_front() {
                None => {
                    lane.parked.push(permit);
                    return;
                }
                Some(tx) => match tx.send(permit) {
                    Ok(()) => return,
                    // Dropped since: the turn goes on.
                    Err(p) => permit = p,
                },
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Lanes> {
        // Plain numbers and channels behind it: a panic elsewhere leaves them usable.
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests;
