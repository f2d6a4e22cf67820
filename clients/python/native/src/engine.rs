//! `weir._weir.Engine`: the consumer's settings, and `run`, which drains the queues with
//! the GIL released.

use crate::handlers::{AsyncHandler, SyncHandler, SyncPool};
use crate::inbox::Inbox;
use crate::job::{Done, PyJob};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir::limiter::limit::Limit;
use weir::{
    CancellationToken, Consumer, ConsumerConfig, LimiterOptions, MultiConsumer, Redis, Registry,
    WeightedQueue,
};

/// The engine of one `weir.Worker`.
#[pyclass(module = "weir", frozen)]
pub struct Engine {
    url: String,
    queues: Vec<WeightedQueue>,
    config: ConsumerConfig,
    metrics_addr: Option<std::net::SocketAddr>,
    inbox: Arc<Inbox>,
    stop: CancellationToken,
    /// The consumer's limit while it runs (one queue): see `hold`.
    limit: Mutex<Option<Arc<Limit>>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("url", &weir::redis::conn::redact_url(&self.url))
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

/// The most threads running plain functions at once (tokio's blocking pool had as many).
const MAX_SYNC_THREADS: usize = 512;

/// One queue's counts after a run: (queue, acked, retried, deferred, dead).
type QueueReport = (String, u64, u64, u64, u64);

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| value_error(format!("{what} must be a number of seconds >= 0, not {s}")))
}

#[pymethods]
impl Engine {
    /// Checks and keeps the settings; `weir.Worker` passes them all by keyword.
    #[new]
    #[pyo3(signature = (url, queues, *, concurrency, adaptive, min_concurrency=None,
        max_concurrency=None, target_p95=None, rate=None, burst=None, visibility_timeout,
        job_timeout=None, shutdown_timeout, drain, metrics_addr=None, batch=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        url: String,
        queues: Vec<(String, u32)>,
        concurrency: usize,
        adaptive: bool,
        min_concurrency: Option<usize>,
        max_concurrency: Option<usize>,
        target_p95: Option<String>,
        rate: Option<String>,
        burst: Option<u32>,
        visibility_timeout: f64,
        job_timeout: Option<f64>,
        shutdown_timeout: f64,
        drain: bool,
        metrics_addr: Option<String>,
        batch: Option<usize>,
    ) -> PyResult<Self> {
        let queues: Vec<WeightedQueue> = queues
            .into_iter()
            .map(|(q, w)| WeightedQueue::new(q, w))
            .collect();
        let Some(first) = queues.first() else {
            return Err(value_error("at least one queue is needed"));
        };
        let mut limits = LimiterOptions::default();
        limits.adaptive = adaptive;
        limits.min_concurrency = min_concurrency;
        limits.max_concurrency = max_concurrency;
        limits.target_p95 = target_p95.map(|t| t.parse()).transpose().map_err(value_error)?;
        limits.rate = rate.map(|r| r.parse()).transpose().map_err(value_error)?;
        limits.burst = burst;
        let mut c = ConsumerConfig::new(first.queue.clone());
        c.concurrency = concurrency;
        c.limiter = limits.limiter().map_err(value_error)?;
        c.rate = limits.rate();
        c.lease = seconds("visibility_timeout", visibility_timeout)?;
        c.pool.job_timeout = job_timeout.map(|s| seconds("job_timeout", s)).transpose()?;
        c.shutdown_timeout = seconds("shutdown_timeout", shutdown_timeout)?;
        c.drain = drain;
        if let Some(b) = batch {
            c.fetcher.batch = b;
        }
        c.metrics = metrics_addr.is_some();
        for q in &queues {
            q.validate().map_err(value_error)?;
            let mut one = c.clone();
            one.queue = q.queue.clone();
            one.validate().map_err(value_error)?;
        }
        let metrics_addr = metrics_addr.map(|a| a.parse()).transpose().map_err(value_error)?;
        Redis::open(&url).map_err(value_error)?;
        Ok(Self {
            url,
            queues,
            config: c,
            metrics_addr,
            inbox: Arc::new(Inbox::default()),
            stop: CancellationToken::new(),
            limit: Mutex::new(None),
        })
    }

    /// Drains the queues until `stop()`, SIGINT or SIGTERM (graceful: running jobs finish
    /// within the shutdown timeout), or until nothing is left with `drain`. `asyncs` are
    /// the kinds whose handlers are coroutine functions (their jobs reach the loop through
    /// `take`, which is woken by a byte on `wake_fd`); `syncs` maps kinds to plain
    /// functions, each called as `call_sync(function, job)`. Returns, per queue, its
    /// counts: acked, retried, deferred, dead.
    #[pyo3(signature = (asyncs, wake_fd, syncs, call_sync, signals=true))]
    fn run(
        &self,
        py: Python<'_>,
        asyncs: Vec<String>,
        wake_fd: Option<i32>,
        syncs: Vec<(String, Py<PyAny>)>,
        call_sync: Py<PyAny>,
        signals: bool,
    ) -> PyResult<Vec<QueueReport>> {
        let mut registry = Registry::new();
        for kind in asyncs {
            registry = registry.on(kind, AsyncHandler(self.inbox.clone()));
        }
        let pool = SyncPool::new(call_sync, MAX_SYNC_THREADS);
        for (kind, function) in syncs {
            let h = SyncHandler {
                function: Arc::new(function),
                pool: pool.clone(),
            };
            registry = registry.on(kind, h);
        }
        self.inbox.set_wake(wake_fd);
        let result = py.allow_threads(|| {
            let result = self.drain(registry, signals);
            // Its threads end once idle (a function still running past the shutdown
            // timeout keeps its thread until it returns).
            pool.stop();
            result
        });
        self.inbox.set_wake(None);
        result
    }

    /// Asks `run` to stop, gracefully (from any thread, or a handler).
    fn stop(&self) {
        self.stop.cancel();
    }

    /// The async handlers' jobs waiting, each with its `Done` and whether the loop may
    /// hold it before it runs it (`Done.start()` then marks its start): the asyncio loop
    /// calls this when woken.
    fn take(&self) -> PyResult<Vec<(PyJob, Done, bool)>> {
        Ok(self
            .inbox
            .take()
            .into_iter()
            .map(|(job, tx)| {
                let view = PyJob::new(&job);
                let done = Done::new(tx, job);
                let holdable = done.holdable();
                (view, done, holdable)
            })
            .collect())
    }

    /// Lets the engine hand the loop `k` async jobs beyond the concurrency, which the loop
    /// holds until one of its slots frees (their starts marked then): the limit becomes
    /// concurrency + `k`. False when it cannot: not running, an adaptive limit, or
    /// several queues.
    fn hold(&self, k: usize) -> bool {
        let limit = self.limit.lock().unwrap_or_else(|e| e.into_inner());
        match limit.as_ref() {
            Some(l) if self.config.limiter.is_none() => {
                l.set(self.config.concurrency + k);
                true
            }
            _ => false,
        }
    }
}

impl Engine {
    fn drain(&self, registry: Registry, signals: bool) -> PyResult<Vec<QueueReport>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("weir")
            .build()
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the runtime: {e}")))?;
        let stop = self.stop.clone();
        runtime.block_on(async move {
            if let Some(addr) = self.metrics_addr {
                weir::metrics::install(addr).map_err(value_error)?;
            }
            if signals {
                tokio::spawn(watch_signals(stop.clone()));
            }
            let redis = Redis::open(&self.url).map_err(value_error)?;
            let reports = match self.queues.as_slice() {
                [one] => {
                    let mut c = self.config.clone();
                    c.queue = one.queue.clone();
                    let consumer = Consumer::new(c, redis, registry).map_err(value_error)?;
                    *self.limit.lock().unwrap_or_else(|e| e.into_inner()) = Some(consumer.handle().limit);
                    let report = consumer.run(stop).await;
                    *self.limit.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    vec![(one.queue.clone(), report)]
                }
                queues => {
                    let multi = MultiConsumer::new(self.config.clone(), queues.to_vec(), redis, registry)
                        .map_err(value_error)?;
                    match multi.run(stop).await {
                        Ok(all) => all.into_iter().map(|(q, r)| (q, Ok(r))).collect(),
                        Err(e) => vec![(String::new(), Err(e))],
                    }
                }
            };
            reports
                .into_iter()
                .map(|(q, r)| {
                    let r = r.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
                    Ok((q, r.acked, r.retried, r.deferred, r.dead))
                })
                .collect()
        })
    }
}

/// First SIGINT/SIGTERM: stop gracefully, as `weir work` does. Second: exit at once (the
/// running jobs come back when their leases expire).
async fn watch_signals(stop: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        eprintln!("weir: cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = stop.cancelled() => return,
    }
    eprintln!("weir: signal received: shutting down gracefully (send again to exit now)");
    stop.cancel();
    tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
    eprintln!("weir: second signal: exiting now; leased jobs come back when their leases expire");
    std::process::exit(130);
}
