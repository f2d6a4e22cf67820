//! Several queues in one process, with weights: one [`Consumer`] pipeline per queue (its
//! own fetcher, buffer, pool, acker, leases, heartbeat and housekeeping), all drawing on
//! one process-wide budget (the concurrency limit, the adaptive limiter, the jobs/s cap)
//! through the weighted gate (`gate.rs`).
//!
//! Each queue's shutdown order is the one written in `mod.rs`; they run side by side. A
//! queue whose consumer fails stops the others the same way (each still settles what it
//! holds), and the failure is returned.

use crate::consumer::gate::{Gate, Share};
use crate::consumer::{Consumer, ConsumerConfig, Handle, Report};
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::limiter::{Limiter, RateGate};
use crate::metrics::LimiterMetrics;
use crate::redis::conn::Redis;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::collections::HashSet;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A queue and its weight: its share of the process's slots while other queues have
/// work too. As text, `NAME` (weight 1) or `NAME:WEIGHT`.
///
/// The text after the last `:` is always the weight, so a queue whose name holds a `:`
/// is written with its weight: `emails:high:1`.
///
/// ```
/// let q: weir::WeightedQueue = "reports:3".parse().unwrap();
/// assert_eq!((q.queue.as_str(), q.weight), ("reports", 3));
/// assert_eq!("emails".parse::<weir::WeightedQueue>().unwrap().weight, 1);
/// assert!("emails:0".parse::<weir::WeightedQueue>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedQueue {
    /// Queue name.
    pub queue: String,
    /// Weight, 1..=1000 (default 1).
    pub weight: u32,
}

impl WeightedQueue {
    /// The largest weight.
    pub const MAX_WEIGHT: u32 = 1000;

    /// `queue` with `weight`.
    pub fn new(queue: impl Into<String>, weight: u32) -> Self {
        Self {
            queue: queue.into(),
            weight,
        }
    }

    /// Checks the name and the weight's range.
    pub fn validate(&self) -> Result<()> {
        crate::queue::keys::validate_queue_name(&self.queue)?;
        if !(1..=Self::MAX_WEIGHT).contains(&self.weight) {
            return Err(Error::config(
                format!("queue {} weight", self.queue),
                format!("must be between 1 and {}, not {}", Self::MAX_WEIGHT, self.weight),
            ));
        }
        Ok(())
    }
}

impl std::str::FromStr for WeightedQueue {
    type Err = Error;

    /// `NAME` or `NAME:WEIGHT`, checked. The text after the last `:` is the weight when it
    /// looks like a number (digits, or a sign: `a:0` and `a:-1` are bad weights), and part
    /// of the name otherwise (`emails:high` is the queue `emails:high`, weight 1); a name
    /// that ends in `:digits` is written with its weight (`jobs:2:1`).
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        let weighted = s.rsplit_once(':').filter(|(_, w)| {
            w.is_empty() || w.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+')
        });
        let q = match weighted {
            None => Self::new(s, 1),
            Some((name, w)) => {
                let weight = w.parse::<u32>().map_err(|_| {
                    Error::config(
                        format!("queue {s:?} weight {w:?}"),
                        format!(
                            "is not a whole number between 1 and {} (write NAME or NAME:WEIGHT; \
                             a name that ends in ':' and a number takes a weight: {s}:1)",
                            Self::MAX_WEIGHT
                        ),
                    )
                })?;
                Self::new(name, weight)
            }
        };
        q.validate()?;
        Ok(q)
    }
}

impl std::fmt::Display for WeightedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.queue, self.weight)
    }
}

/// A consumer of several queues with weights, under one process-wide budget.
///
/// Every queue gets a pipeline of its own, as a [`Consumer`] of that queue would run:
/// its own leases, reclaim, outcomes (written to the job's own queue), delayed-job
/// promotion, pause/resume, runtime rate, cron schedules, worker-registry entry and
/// metrics labels. What they share is the budget: `concurrency` (or the adaptive
/// `limiter`) and `rate` of the [`ConsumerConfig`] bound the whole process, across its
/// queues.
///
/// While several queues have jobs ready, the slots are granted in proportion to their
/// weights (stride scheduling over the queues that wait for one); a queue with nothing
/// ready takes no slot, nor does one waiting on its own stored rate, so the others have
/// its share and no slot sits idle while any queue has work it may start. Within a queue, jobs still start highest priority first. The weights
/// divide the budget: when neither the limit nor the rate binds (handlers that finish at
/// once), every queue simply goes as fast as its own fetches.
///
/// A queue's stored runtime rate (`weir limits set --rate`) caps that queue's starts;
/// stored concurrency bounds are not applied (the limit is the process's, not one
/// queue's). The adaptive limiter's metrics carry the queue names joined by commas as
/// their `queue` label; every other metric is the queue's own. In drain mode each queue's
/// pipeline stops once its queue is empty, and [`MultiConsumer::run`] returns when all
/// have.
///
/// ```no_run
/// # async fn demo(redis: weir::Redis, registry: weir::Registry) -> weir::Result<()> {
/// use weir::{ConsumerConfig, MultiConsumer, WeightedQueue};
/// let mut config = ConsumerConfig::default();
/// config.concurrency = 32;
/// let queues = vec![WeightedQueue::new("emails", 1), WeightedQueue::new("reports", 3)];
/// let consumer = MultiConsumer::new(config, queues, redis, registry)?;
/// let reports = consumer.run(weir::CancellationToken::new()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MultiConsumer {
    consumers: Vec<Consumer>,
    queues: Vec<WeightedQueue>,
    gate: Arc<Gate>,
    rate: Arc<RateGate>,
    /// The process-wide adaptive limiter, if any, and whether metrics are recorded.
    limiter: (Option<Arc<Limiter>>, bool),
}

impl MultiConsumer {
    /// A consumer of `queues` (at least one, each named once) with `config` for each (its
    /// `queue` field is not used), on `redis`, running jobs with `registry`.
    pub fn new(
        config: ConsumerConfig,
        queues: Vec<WeightedQueue>,
        redis: Redis,
        registry: Registry,
    ) -> Result<Self> {
        check_queues(&queues)?;
        let mut first = config.clone();
        first.queue = queues[0].queue.clone();
        first.validate()?;
        if registry.is_empty() {
            return Err(Error::config("handlers", "are missing: no handler registered"));
        }
        let (limit, limiter, rate) = super::budget(&config)?;
        let weights: Vec<u32> = queues.iter().map(|q| q.weight).collect();
        let gate = Gate::new(limit.clone(), rate.clone(), &weights);
        let registry = Arc::new(registry);
        let consumers = queues
            .iter()
            .enumerate()
            .map(|(lane, q)| {
                let mut c = config.clone();
                c.queue = q.queue.clone();
                let budget = (limit.clone(), limiter.clone());
                let share = Share::new(gate.clone(), lane);
                Consumer::sharing(c, redis.clone(), registry.clone(), budget, share)
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            consumers,
            queues,
            gate,
            rate,
            limiter: (limiter, config.metrics),
        })
    }

    /// The queues, in the order given.
    pub fn queues(&self) -> &[WeightedQueue] {
        &self.queues
    }

    /// Each queue's handles: the limit and limiter are the process-wide ones, shared by
    /// all; `rate` is the queue's own cap (see [`MultiConsumer::rate`] for the process's);
    /// the tally and the in-memory counts are the queue's.
    pub fn handles(&self) -> Vec<(String, Handle)> {
        self.queues
            .iter()
            .zip(&self.consumers)
            .map(|(q, c)| (q.queue.clone(), c.handle()))
            .collect()
    }

    /// The process-wide jobs/s cap; [`RateGate::set`] changes it live.
    pub fn rate(&self) -> Arc<RateGate> {
        self.rate.clone()
    }

    /// Runs every queue's pipeline until `shutdown` is cancelled (in drain mode, until
    /// each queue is empty); returns each queue's report, in the order given. If one
    /// queue's consumer fails, the others stop as if shut down and the first failure is
    /// returned.
    pub async fn run(self, shutdown: CancellationToken) -> Result<Vec<(String, Report)>> {
        let stop = shutdown.child_token();
        if let (Some(l), true) = &self.limiter {
            // One limiter for the process: its metrics carry every queue's name.
            let names: Vec<&str> = self.queues.iter().map(|q| q.queue.as_str()).collect();
            l.attach_metrics(LimiterMetrics::new(&names.join(",")));
        }
        // The gate grants until every pipeline is done (or this future is dropped).
        let gate_stop = CancellationToken::new();
        let _gate_guard = gate_stop.clone().drop_guard();
        let gate = tokio::spawn(self.gate.clone().run(gate_stop.clone()));
        let mut runs: FuturesUnordered<_> = self
            .consumers
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let stop = stop.clone();
                async move { (i, c.run(stop).await) }
            })
            .collect();
        let mut reports = vec![Report::default(); self.queues.len()];
        let mut failure = None;
        while let Some((i, r)) = runs.next().await {
            match r {
                Ok(report) => reports[i] = report,
                Err(e) => {
                    tracing::error!(queue = %self.queues[i].queue, error = %e, "queue consumer failed; stopping the others");
                    stop.cancel();
                    failure.get_or_insert(e);
                }
            }
        }
        gate_stop.cancel();
        let _ = gate.await;
        match failure {
            Some(e) => Err(e),
            None => Ok(self.queues.into_iter().map(|q| q.queue).zip(reports).collect()),
        }
    }
}

/// At least one queue, each valid and named once.
fn check_queues(queues: &[WeightedQueue]) -> Result<()> {
    if queues.is_empty() {
        return Err(Error::config("queues", "are missing: no queue to consume"));
    }
    let mut seen = HashSet::new();
    for q in queues {
        q.validate()?;
        if !seen.insert(q.queue.as_str()) {
            return Err(Error::config(
                format!("queue {}", q.queue),
                "is listed twice: give each queue once, with its weight (NAME:WEIGHT)",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_weights_and_names_what_is_wrong() {
        let q = |s: &str| s.parse::<WeightedQueue>();
        assert_eq!(q("a").unwrap(), WeightedQueue::new("a", 1));
        assert_eq!(q("b:3").unwrap(), WeightedQueue::new("b", 3));
        assert_eq!(q("emails:high:2").unwrap(), WeightedQueue::new("emails:high", 2));
        // A ':' before something that is not a number is part of the name.
        assert_eq!(q("emails:high").unwrap(), WeightedQueue::new("emails:high", 1));
        assert_eq!(q("a:x").unwrap(), WeightedQueue::new("a:x", 1));
        assert_eq!(q("jobs:2:1").unwrap(), WeightedQueue::new("jobs:2", 1));
        for (bad, says) in [
            ("a:0", "weight must be between 1 and 1000, not 0"),
            ("a:1001", "weight must be between 1 and 1000"),
            ("a:2x", "weight \"2x\" is not a whole number"),
            ("a:-1", "weight \"-1\" is not a whole number"),
            ("a:", "weight \"\" is not a whole number"),
            (":2", "invalid queue name"),
            ("a b:2", "invalid queue name"),
        ] {
            let e = q(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(WeightedQueue::new("b", 3).to_string(), "b:3");
    }

    #[test]
    fn queues_are_listed_once() {
        assert!(check_queues(&[]).unwrap_err().to_string().contains("no queue"));
        let twice = [WeightedQueue::new("a", 1), WeightedQueue::new("a", 2)];
        let e = check_queues(&twice).unwrap_err().to_string();
        assert!(e.contains("queue a is listed twice"), "{e}");
        assert!(check_queues(&[WeightedQueue::new("a", 1), WeightedQueue::new("b", 2)]).is_ok());
    }
}
