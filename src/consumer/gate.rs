//! The weighted gate of a [`MultiConsumer`](crate::MultiConsumer): one process-wide
//! budget (the concurrency [`Limit`] and the jobs/s [`RateGate`]) shared by the pools of
//! several queues, granted slot by slot in proportion to the queues' weights.
//!
//! A queue's pool asks for a slot when it has a job to start ([`Gate::acquire`]); a pool
//! with nothing buffered asks for nothing, so its share goes to the others and no slot
//! sits idle while any queue has work. One task ([`Gate::run`]) takes a rate token, then a
//! slot, and hands the slot to the waiting queue whose turn it is, by stride scheduling:
//! each queue has a pass, the waiting queue with the lowest pass gets the slot and its
//! pass grows by `STRIDE / weight`. So over any stretch where several queues wait, their
//! grants are in the ratio of their weights. A queue that starts waiting again begins no
//! lower than the pass of the last grant: it cannot bank the turns it did not use.
//!
//! The gate only orders starts: which jobs of a queue run first is still its fetch
//! script's business (highest priority first).

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
    /// Told when a queue starts waiting.
    waiting: Notify,
}

#[derive(Debug)]
struct Lanes {
    lanes: Vec<Lane>,
    /// The pass of the last grant: where a queue that starts waiting again begins.
    now: u64,
}

/// One queue's place at the gate.
#[derive(Debug)]
struct Lane {
    stride: u64,
    pass: u64,
    /// Its pool's requests (a suspect asks beside the pool's dispatch), oldest first.
    waiters: VecDeque<oneshot::Sender<Permit>>,
}

impl Lane {
    /// Whether anyone still waits here (a request whose future was dropped does not).
    fn waiting(&mut self) -> bool {
        self.waiters.retain(|w| !w.is_closed());
        !self.waiters.is_empty()
    }
}

/// One queue's way to the shared budget: its lane at the gate, and the count of its own
/// running jobs.
#[derive(Debug, Clone)]
pub(crate) struct Share {
    gate: Arc<Gate>,
    lane: usize,
    running: Arc<Limit>,
}

impl Share {
    /// The queue of `lane` at `gate`.
    pub(crate) fn new(gate: Arc<Gate>, lane: usize) -> Self {
        Self {
            gate,
            lane,
            // Never acquired from: it only counts (`Limit::count`).
            running: Limit::new(1),
        }
    }

    /// This queue's running jobs.
    pub(crate) fn running(&self) -> &Arc<Limit> {
        &self.running
    }

    /// A shared slot when this queue's turn comes, counted among its running jobs; none
    /// once the gate has stopped.
    pub(crate) async fn acquire(&self) -> Option<Permit> {
        let slot = self.gate.acquire(self.lane).await?;
        Some(self.running.count(slot))
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
            })
            .collect();
        Arc::new(Self {
            limit,
            rate,
            lanes: Mutex::new(Lanes { lanes, now: 0 }),
            waiting: Notify::new(),
        })
    }

    /// A slot of the shared limit for the queue of `lane`, when its turn comes; none once
    /// the gate has stopped. Cancel-safe: a request dropped before its grant takes nothing.
    pub(crate) async fn acquire(&self, lane: usize) -> Option<Permit> {
        let (tx, rx) = oneshot::channel();
        {
            let mut l = self.lock();
            let now = l.now;
            let me = &mut l.lanes[lane];
            if !me.waiting() {
                me.pass = me.pass.max(now);
            }
            me.waiters.push_back(tx);
        }
        self.waiting.notify_one();
        rx.await.ok()
    }

    /// Grants slots until `stop`: a rate token, then a slot, then to the waiting queue of
    /// lowest pass.
    pub(crate) async fn run(self: Arc<Self>, stop: CancellationToken) {
        loop {
            loop {
                let wake = self.waiting.notified();
                if self.lock().lanes.iter_mut().any(Lane::waiting) {
                    break;
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = wake => {}
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

    /// Hands `permit` to the waiting queue of lowest pass (ties: the first listed); with
    /// nobody waiting any more, it goes back to the limit.
    fn grant(&self, mut permit: Permit) {
        let mut l = self.lock();
        loop {
            let next = l
                .lanes
                .iter_mut()
                .enumerate()
                .filter_map(|(i, lane)| lane.waiting().then_some((lane.pass, i)))
                .min();
            let Some((pass, i)) = next else { return };
            let lane = &mut l.lanes[i];
            let tx = lane.waiters.pop_front().expect("a waiting lane has a request");
            match tx.send(permit) {
                Ok(()) => {
                    lane.pass += lane.stride;
                    l.now = pass;
                    return;
                }
                // Dropped since: the next request has it.
                Err(p) => permit = p,
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Lanes> {
        // Plain numbers and channels behind it: a panic elsewhere leaves them usable.
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    /// Keeps every lane waiting and counts which one each of `n` grants went to.
    async fn grants(weights: &[u32], n: usize) -> Vec<usize> {
        let limit = Limit::new(1);
        let gate = Gate::new(limit.clone(), Arc::new(RateGate::default()), weights);
        let stop = CancellationToken::new();
        let task = tokio::spawn(gate.clone().run(stop.clone()));
        let mut asks: Vec<_> = (0..weights.len()).map(|i| Box::pin(gate.acquire(i))).collect();
        let mut counts = vec![0; weights.len()];
        for _ in 0..n {
            let (p, i, _) = futures_util::future::select_all(asks.iter_mut()).await;
            let permit = p.expect("granted");
            counts[i] += 1;
            asks[i] = Box::pin(gate.acquire(i));
            // Every lane asks again before the slot comes back.
            for a in asks.iter_mut() {
                assert!(a.as_mut().now_or_never().is_none(), "one slot only");
            }
            drop(permit);
        }
        stop.cancel();
        task.await.unwrap();
        counts
    }

    #[tokio::test]
    async fn grants_follow_the_weights_while_every_queue_waits() {
        // Strides are rounded: a grant more or less than the exact share.
        let close = |got: Vec<usize>, want: &[usize]| {
            let ok = got.iter().zip(want).all(|(&g, &w)| g.abs_diff(w) <= 1);
            assert!(ok, "{got:?} against {want:?}");
        };
        close(grants(&[1, 3], 400).await, &[100, 300]);
        close(grants(&[2, 1, 1], 400).await, &[200, 100, 100]);
        close(grants(&[5, 1], 600).await, &[500, 100]);
    }

    #[tokio::test]
    async fn a_queue_that_does_not_wait_leaves_its_share_and_banks_nothing() {
        let limit = Limit::new(1);
        let gate = Gate::new(limit.clone(), Arc::new(RateGate::default()), &[1, 1]);
        let stop = CancellationToken::new();
        let task = tokio::spawn(gate.clone().run(stop.clone()));
        // Only lane 0 waits: it gets every slot.
        for _ in 0..10 {
            drop(gate.acquire(0).await.expect("granted"));
        }
        // Lane 1 joins: from then on they alternate, no catch-up burst for lane 1.
        let held = gate.acquire(0).await.expect("granted");
        let (mut a, mut b) = (Box::pin(gate.acquire(0)), Box::pin(gate.acquire(1)));
        tokio::task::yield_now().await;
        drop(held);
        let mut order = Vec::new();
        for _ in 0..6 {
            let p = tokio::select! {
                p = &mut a => { order.push(0); a = Box::pin(gate.acquire(0)); p }
                p = &mut b => { order.push(1); b = Box::pin(gate.acquire(1)); p }
            };
            tokio::task::yield_now().await;
            drop(p);
        }
        let ones = order.iter().filter(|&&i| i == 1).count();
        assert_eq!(ones, 3, "{order:?}");
        stop.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_dropped_request_takes_nothing() {
        let limit = Limit::new(1);
        let gate = Gate::new(limit.clone(), Arc::new(RateGate::default()), &[1, 1]);
        let stop = CancellationToken::new();
        let task = tokio::spawn(gate.clone().run(stop.clone()));
        let held = gate.acquire(0).await.expect("granted");
        drop(Box::pin(gate.acquire(1)).now_or_never());
        let next = tokio::spawn({
            let gate = gate.clone();
            async move { gate.acquire(0).await.is_some() }
        });
        drop(held);
        assert!(next.await.unwrap());
        assert_eq!(limit.in_flight(), 0);
        stop.cancel();
        task.await.unwrap();
    }
}
