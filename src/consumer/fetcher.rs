//! The fetcher: keeps several `fetch` script calls in flight while the buffer has room
//! and the consumer holds fewer leases than their cap ([`Leases::cap`]: when settles fall
//! behind, fetching slows), decodes what they return, adds the leases to the table and
//! hands the jobs to the pool. Envelopes that do not decode go straight to the dead-letter
//! queue; a weir envelope over this consumer's size limit is deferred for a consumer with a
//! larger one (see [`crate::PoolConfig::unknown_kind_grace`]). What happens to a
//! reply is `fetcher/deliver.rs`; this file is the loop of calls and waits.
//!
//! When a fetch comes back empty, or takes the last ready job, the fetcher goes idle: no
//! Redis traffic until an enqueue publishes on the queue's wake channel (the subscription
//! is `wake.rs`), the next delayed job falls due, or a safety timeout passes.

use crate::consumer::buffer::Buffer;
use crate::consumer::leases::Leases;
use crate::consumer::outcomes::AckerMsg;
use crate::consumer::partitioned::Role;
use crate::consumer::signals::Signals;
use crate::consumer::wake::Wake;
use crate::limiter::RateGate;
use crate::limiter::limit::Limit;
use crate::metrics::QueueMetrics;
use crate::queue::envelope::Job;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts::{self, Fetched};
use crate::redis::conn::HealingConnection;
use crate::redis::conn::Redis;
use crate::redis::retry::{Backoff, Streak};
use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

mod deliver;
mod pace;
use crate::consumer::config::FetcherConfig;
use pace::Pace;

/// Longest an idle fetcher waits without a wake message before it looks again: a safety
/// net only, since a fetcher whose wake subscription was down looks again once it is back
/// (`Wake::next`), and every write that readies a job (or adds a delayed one) publishes a
/// wake message.
const IDLE_RECHECK: Duration = Duration::from_secs(30);

/// The fetcher task.
pub(crate) struct Fetcher {
    pub config: FetcherConfig,
    pub redis: Redis,
    pub conn: HealingConnection,
    pub keys: QueueKeys,
    pub limit: Arc<Limit>,
    /// Under a rate cap, prefetch no more than about a second's worth.
    pub rate: Arc<RateGate>,
    pub buffer: Arc<Buffer>,
    /// The leases held: the fetcher adds to it, and stops at its cap.
    pub leases: Arc<Leases>,
    /// The acker's flush size, which sets the lease cap with the limit.
    pub flush_max: usize,
    /// Written: `queue_backlog` and `concurrency_set` from each fetch; told:
    /// `drain_check`, when a fetch comes back empty, and `activity`, of work seen.
    pub signals: Signals,
    pub pool: mpsc::UnboundedSender<Vec<Job>>,
    pub acker: mpsc::Sender<AckerMsg>,
    pub metrics: QueueMetrics,
    /// Lease length of each fetched job.
    pub lease: Duration,
    /// How long an envelope over the size limit is deferred before it is dead-lettered
    /// ([`crate::PoolConfig::unknown_kind_grace`]).
    pub unknown_kind_grace: Duration,
    /// The consumer adapts a limit per job key: fetches hold keys to their shares.
    pub adaptive_per_key: bool,
    /// In a partitioned queue's consumer: whether this lane is fetched now.
    pub role: Option<Arc<Role>>,
    /// Set once a fetch is answered ([`crate::Handle::ready`]).
    pub ready: Arc<tokio::sync::watch::Sender<bool>>,
    /// The slots come from a budget shared with other queues (a [`crate::MultiConsumer`]):
    /// the buffer keeps two jobs per slot ([`Buffer::shared_capacity`]).
    pub shared: bool,
}

/// A fetch call: how many jobs it asked for, when it was sent, what it brought.
type FetchFuture =
    Pin<Box<dyn std::future::Future<Output = (usize, Instant, crate::Result<Fetched>)> + Send>>;

impl Fetcher {
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut wake = Wake::new(self.redis.clone(), self.keys.wake_channel().to_owned());
        // An inactive lane subscribes when it first goes idle (`Wake::next` connects).
        if self.active() {
            wake.connect().await;
        }
        let mut inflight: FuturesUnordered<FetchFuture> = FuturesUnordered::new();
        let mut reserved = 0usize;
        // Some(t): idle (or backing off after an error) until t or a wake message.
        let mut idle_until: Option<Instant> = None;
        let mut errors = Streak::new("fetch", Backoff::FETCH);
        let batch = self.config.batch;
        let mut pace = Pace::new(Instant::now());
        let mut up = false;
        loop {
            let active = self.active();
            if idle_until.is_none() && active {
                while inflight.len() < self.config.pipeline.max(1) {
                    let limit = self.limit.get();
                    // Jobs held ahead of the free slots only under a backlog (the last
                    // fetch came back full), and only what the pool runs through in a
                    // fetch round trip: near an empty queue they buy nothing, and jobs
                    // longer than a round trip are better left for a consumer with free
                    // slots than held here.
                    let ahead = if self.signals.queue_backlog.load(Ordering::Relaxed) {
                        pace.ahead(batch, self.config.ahead_bytes)
                    } else {
                        0
                    }
                    .max(self.config.prefetch);
                    let capacity = if self.shared {
                        Buffer::shared_capacity(limit, ahead)
                    } else {
                        Buffer::capacity(limit, self.limit.in_flight(), ahead)
                    }
                    .min(self.rate.prefetch());
                    let held_cap = Leases::cap(capacity, limit, self.flush_max);
                    let free = capacity
                        .saturating_sub(self.buffer.len() + reserved)
                        .min(held_cap.saturating_sub(self.leases.len() + reserved));
                    // All the room allows, up to a batch: Redis pops what is there, so
                    // a large request near an empty queue costs no more than a small
                    // one, and a burst comes in one call. (Fetches that started at 16
                    // and doubled while full took a burst in a ramp of round trips:
                    // `weir-loadtest steady --enqueue-rate 150000`, 300 jobs every 2 ms,
                    // median p50 1.78 ms with the ramp, 1.58 ms without, alternating.)
                    let want = free.min(batch);
                    // Wait for a worthwhile batch unless the pipeline is empty.
                    if want == 0 || (!inflight.is_empty() && want < batch.min(capacity / 2).max(1)) {
                        break;
                    }
                    wake.drain();
                    reserved += want;
                    inflight.push(self.fetch(want));
                }
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some((want, sent, result)) = inflight.next() => {
                    reserved -= want;
                    pace.round_trip(sent.elapsed());
                    match result {
                        Ok(fetched) => {
                            errors.succeeded();
                            if !up {
                                // Connected, subscribed (above) and the scripts loaded.
                                up = true;
                                self.ready.send_replace(true);
                            }
                            if !fetched.paused {
                                self.signals.concurrency_set.store(
                                    fetched.global.concurrency_set || fetched.global.keep_completed,
                                    Ordering::Relaxed,
                                );
                            }
                            let got = fetched.jobs.len() + fetched.bad_ids.len();
                            self.count_global(&fetched, want, got);
                            if let Some(r) = &self.role {
                                r.saw(got > 0);
                            }
                            // A full fetch left jobs behind: the queue holds a backlog.
                            // Jobs held back by their keys' limits were there.
                            self.signals.queue_backlog.store(got >= want || fetched.global.held_by_key, Ordering::Relaxed);
                            if fetched.jobs.is_empty() && fetched.global.held_by_key {
                                // Every job popped was held back by its key's limits: the
                                // ones behind them may be of other keys. Look again now.
                                idle_until = None;
                            } else if fetched.jobs.is_empty() && fetched.global.cut() {
                                // The global limits granted nothing: wait for the rate's
                                // next permit, or for a lease to end (settle wakes us).
                                idle_until = Some(Instant::now() + throttled_wait(&fetched));
                            } else if fetched.jobs.is_empty() {
                                // Go idle now, even with calls still in flight: refilling the
                                // pipeline here would keep one call always in flight, so an
                                // empty queue would be polled without pause. The wake and
                                // timer arms wait for the calls in flight to come back; one
                                // that brings jobs ends the idle spell.
                                idle_until = Some(Instant::now() + idle_wait(&fetched));
                                pace.idle();
                                self.signals.drain_check.notify_one();
                            } else {
                                // A fetch that took the last ready job goes idle as an empty
                                // one does (every write that readies a job publishes a wake
                                // message) instead of asking again only to be told the queue
                                // is empty: a round trip and a script call per burst saved
                                // near an empty queue. (The drain watch needs no `drain_check`
                                // here: these jobs' flush gives it one.)
                                idle_until = fetched.emptied.then(|| Instant::now() + idle_wait(&fetched));
                                pace.saw(fetched.jobs.len(), Instant::now());
                                pace.sizes(fetched.jobs.iter().map(|j| j.envelope().len()).sum(), fetched.jobs.len());
                                self.signals.activity.saw();
                                self.deliver(fetched, sent, &shutdown).await;
                            }
                        }
                        Err(e) => {
                            idle_until = Some(Instant::now() + errors.failed(&e));
                        }
                    }
                }
                _ = self.buffer.room(), if idle_until.is_none() && active => {}
                _ = self.leases.room(), if idle_until.is_none() && active => {}
                _ = self.limit.freed(), if idle_until.is_none() && active && !self.shared => {}
                _ = changed(&self.role), if !active => {}
                _ = wake.next(), if idle_until.is_some() && inflight.is_empty() => {
                    self.signals.activity.saw();
                    idle_until = None;
                }
                _ = sleep_until(idle_until.unwrap_or_else(Instant::now)), if idle_until.is_some() && inflight.is_empty() => {
                    idle_until = None;
                }
            }
        }
        // Shutdown: calls in flight may still lease jobs; register them so they are released.
        while let Some((_, sent, result)) = inflight.next().await {
            if let Ok(f) = result {
                self.register(&f, sent);
            }
        }
    }

    /// This lane is fetched now (always, outside a partitioned queue).
    fn active(&self) -> bool {
        self.role.as_ref().is_none_or(|r| r.active())
    }

    fn fetch(&self, want: usize) -> FetchFuture {
        let mut conn = self.conn.clone();
        let keys = self.keys.clone();
        let vt = self.lease.as_millis() as u64;
        let sent = Instant::now();
        let per_key = self.adaptive_per_key;
        let batch = self.config.batch_leases.then(batch_name);
        async move {
            (
                want,
                sent,
                scripts::fetch_batch(&mut conn, &keys, want, vt, per_key, batch.as_deref()).await,
            )
        }
        .boxed()
    }

    /// Counts the jobs the queue's global limits granted and denied this fetch.
    fn count_global(&self, f: &Fetched, want: usize, got: usize) {
        let g = f.global;
        if !g.any() {
            return;
        }
        self.metrics.global_granted.increment(got as u64);
        if g.cut() {
            let denied = want.saturating_sub(got) as u64;
            self.metrics.global_denied[usize::from(g.cut_by_concurrency)].increment(denied);
        }
    }
}

/// How long a fetcher the global limits granted nothing waits before it asks again: until
/// the rate's next permit; under the global concurrency, until a settle says a lease ended
/// (a wake message), or this long at most.
const CONCURRENCY_RECHECK: Duration = Duration::from_millis(100);

fn throttled_wait(f: &Fetched) -> Duration {
    if f.global.cut_by_rate && f.next_due_ms > 0 {
        Duration::from_millis(f.next_due_ms).min(IDLE_RECHECK)
    } else {
        CONCURRENCY_RECHECK
    }
}

/// Resolves when the lane's role changes (never without one).
async fn changed(role: &Option<Arc<Role>>) {
    match role {
        Some(r) => r.changed().await,
        None => std::future::pending().await,
    }
}

/// A name for a fetch's batch lease no other fetch uses: this process's random number and
/// a count of its fetches.
fn batch_name() -> String {
    static PROCESS: std::sync::LazyLock<u64> = std::sync::LazyLock::new(rand::random);
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{:016x}:{n}", *PROCESS)
}

fn idle_wait(f: &Fetched) -> Duration {
    if f.global.parked {
        // Parked jobs come back as their keys' jobs finish, not when a delay falls due.
        CONCURRENCY_RECHECK
    } else if f.next_due_ms > 0 {
        Duration::from_millis(f.next_due_ms).min(IDLE_RECHECK)
    } else {
        IDLE_RECHECK
    }
}
