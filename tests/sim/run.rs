//! Runs a scenario: a pool of simulated jobs bounded by the real [`Limit`], fed either
//! from an endless backlog or by Poisson arrivals, each job a call to the simulated
//! downstream; completions go to the real [`Limiter`] (window + AIMD rule), to Netflix's
//! rule, or nowhere (fixed limit). Everything runs under paused tokio time.

use super::downstream::{Downstream, Profile};
use super::netflix::NetflixAimd;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{Instant, sleep, sleep_until};
use weir::JobError;
use weir::limiter::limit::{Limit, Permit};
use weir::limiter::{AimdConfig, Limiter, LimiterConfig, Signal};

/// Who sets the limit.
#[derive(Debug, Clone)]
pub(crate) enum Control {
    /// weir's limiter.
    Adaptive(LimiterConfig),
    /// A fixed limit.
    Fixed(usize),
    /// Netflix's `AIMDLimit` defaults, with this max.
    Netflix(usize),
}

/// Where jobs come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Load {
    /// An endless backlog: a job starts whenever the limit allows.
    Backlog,
    /// Poisson arrivals at this many jobs/s; arrivals wait for a slot.
    Poisson(f64),
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub name: &'static str,
    /// Downstream phases by start time; the first starts at zero.
    pub phases: Vec<(Duration, Profile)>,
    pub load: Load,
    pub duration: Duration,
    /// Starting limit (the consumer's `concurrency`).
    pub initial: usize,
    pub job_timeout: Option<Duration>,
    /// The p95 the limiter defends (for reports; the control carries its own copy).
    pub target: Duration,
    pub seed: u64,
}

/// A finished job: when it ended, its latency, how it counted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    pub end: Duration,
    pub latency: Duration,
    pub signal: Signal,
}

/// What a run produced.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    pub records: Vec<Record>,
    /// (time, limit, in-flight) every 100 ms.
    pub limits: Vec<(Duration, usize, usize)>,
    /// Window decisions of weir's limiter: (time, from, to).
    pub decisions: Vec<(Duration, usize, usize)>,
    /// Their reasons, in the same order.
    pub reasons: Vec<weir::limiter::Reason>,
}

struct Ctx {
    start: Instant,
    limit: Arc<Limit>,
    limiter: Option<Limiter>,
    netflix: Option<Mutex<NetflixAimd>>,
    downstream: Downstream,
    job_timeout: Option<Duration>,
    /// Which answered statuses are overload (the limiter's setting, else the default),
    /// for every control alike.
    statuses: AimdConfig,
    trace: Mutex<Trace>,
}

impl Ctx {
    async fn job(self: Arc<Self>, permit: Permit) {
        let started = Instant::now();
        let (latency, result) = self.downstream.begin(started - self.start);
        let result = match self.job_timeout {
            Some(t) if latency > t => {
                sleep(t).await;
                Err(JobError::overloaded("timed out"))
            }
            _ => {
                sleep(latency).await;
                result
            }
        };
        self.downstream.end();
        let in_flight = self.limit.in_flight();
        drop(permit);
        let elapsed = started.elapsed();
        let signal = Signal::of(&result);
        let signal = self.statuses.classify(signal);
        let end = started + elapsed - self.start;
        let mut trace = self.trace.lock().unwrap();
        if let Some(l) = &self.limiter
            && let Some(d) = l.record(started, elapsed, signal)
        {
            trace.decisions.push((end, d.from, d.to));
            trace.reasons.push(d.reason);
        }
        if let Some(n) = &self.netflix {
            let to = n
                .lock()
                .unwrap()
                .update(elapsed, in_flight, signal == Signal::Overload);
            self.limit.set(to);
        }
        trace.records.push(Record {
            end,
            latency: elapsed,
            signal,
        });
    }
}

/// Runs `s` under `control`. Call from a paused-time runtime.
pub(crate) async fn run(s: &Scenario, control: &Control) -> Trace {
    let initial = match control {
        Control::Fixed(n) => *n,
        Control::Netflix(_) => 20,
        Control::Adaptive(_) => s.initial,
    };
    let limit = Limit::new(initial);
    let start = Instant::now();
    let ctx = Arc::new(Ctx {
        start,
        limiter: match control {
            Control::Adaptive(c) => Some(Limiter::new(c.clone(), limit.clone()).expect("valid config")),
            _ => None,
        },
        netflix: match control {
            Control::Netflix(max) => Some(Mutex::new(NetflixAimd::new(*max))),
            _ => None,
        },
        limit,
        downstream: Downstream::new(s.phases.clone(), s.seed),
        job_timeout: s.job_timeout,
        statuses: match control {
            Control::Adaptive(c) => c.aimd.clone(),
            _ => AimdConfig::default(),
        },
        trace: Mutex::default(),
    });
    let deadline = start + s.duration;
    let sampler = tokio::spawn(sample(ctx.clone(), deadline));
    match s.load {
        Load::Backlog => loop {
            let permit = tokio::select! {
                p = ctx.limit.acquire() => p,
                _ = sleep_until(deadline) => break,
            };
            tokio::spawn(ctx.clone().job(permit));
        },
        Load::Poisson(rate) => {
            use rand::{Rng, SeedableRng};
            let mut rng = rand::rngs::StdRng::seed_from_u64(s.seed ^ 0x9e37_79b9);
            // Absolute arrival times: the timer's 1 ms resolution must not add up.
            let mut next = start;
            loop {
                next += Duration::from_secs_f64(-(1.0 - rng.random::<f64>()).ln() / rate);
                sleep_until(next).await;
                if next >= deadline {
                    break;
                }
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    let permit = ctx.limit.acquire().await;
                    ctx.job(permit).await
                });
            }
        }
    }
    sampler.await.unwrap();
    std::mem::take(&mut *ctx.trace.lock().unwrap())
}

async fn sample(ctx: Arc<Ctx>, deadline: Instant) {
    while Instant::now() < deadline {
        let t = Instant::now() - ctx.start;
        let row = (t, ctx.limit.get(), ctx.limit.in_flight());
        ctx.trace.lock().unwrap().limits.push(row);
        sleep(Duration::from_millis(100)).await;
    }
}
