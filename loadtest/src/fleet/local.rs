//! One consumer inside the harness process: its handler writes straight into the
//! parent's accounting.

use super::{GaugeReader, Spec, Totals};
use crate::handler::{self, LoadHandler, Sink, Work};
use crate::observed::{Gauges, Observed};
use crate::running::Probe;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use weir::{CancellationToken, Consumer, ConsumerConfig, Handle, Handler, Redis, Registry, Report};

pub(crate) struct Local {
    handle: Handle,
    running: Arc<Probe>,
    shutdown: CancellationToken,
    task: JoinHandle<weir::Result<Report>>,
}

impl Local {
    pub(crate) fn start(spec: &Spec, observed: Arc<Observed>) -> anyhow::Result<Self> {
        let work = match &spec.downstream {
            Some((opts, seed, epoch)) => {
                let config = opts.config(*seed).map_err(anyhow::Error::msg)?;
                Work::Downstream(handler::downstream(config, *epoch))
            }
            None => Work::Noop,
        };
        let h = LoadHandler {
            work,
            sink: Sink::Local(observed),
        };
        Self::with_handler(spec, h)
    }

    /// A consumer running `handler` for every job (the scenario's own accounting).
    pub(crate) fn with_handler(spec: &Spec, h: impl Handler + 'static) -> anyhow::Result<Self> {
        let mut config = ConsumerConfig::new(spec.queue.clone());
        config.concurrency = spec.concurrency;
        config.limiter = spec.limiter.clone();
        config.key_limiter = spec.key_limiter.clone();
        config.rate = spec.rate;
        config.drain = spec.drain;
        super::tune(&mut config, spec.batch, spec.pipeline, spec.visibility);
        let consumer = Consumer::new(config, Redis::open(&spec.redis_url)?, Registry::new().fallback(h))?;
        let handle = consumer.handle();
        let limit = handle.limit.clone();
        let running = Arc::new(Probe::start(move || limit.in_flight() as u64));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(consumer.run(shutdown.clone()));
        Ok(Self {
            handle,
            running,
            shutdown,
            task,
        })
    }

    pub(crate) fn gauges(&self) -> GaugeReader {
        let (limit, running) = (self.handle.limit.clone(), self.running.clone());
        Arc::new(move || {
            let r = running.take(limit.in_flight() as u64);
            Gauges {
                limit: limit.get() as u64,
                in_flight: r.mean,
                in_flight_max: r.max,
            }
        })
    }

    /// Waits until the consumer is up, up to `timeout`.
    /// A consumer that ends first says why (a library of another build loaded, say).
    pub(crate) async fn ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        tokio::select! {
            _ = self.handle.ready() => Ok(()),
            ended = &mut self.task => {
                let why = match ended {
                    Ok(Ok(_)) => "it returned".to_owned(),
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => e.to_string(),
                };
                anyhow::bail!("the consumer stopped before it was up: {why}")
            }
            _ = tokio::time::sleep(timeout) => anyhow::bail!("the consumer not up after {timeout:?}"),
        }
    }

    pub(crate) fn target_p95(&self) -> Option<Duration> {
        self.handle.limiter.as_ref().and_then(|l| l.target())
    }

    pub(crate) async fn wait(mut self, timeout: Duration) -> anyhow::Result<(Totals, bool)> {
        match tokio::time::timeout(timeout, &mut self.task).await {
            Ok(joined) => Ok((totals(joined??), true)),
            Err(_) => Ok((self.stop().await?, false)),
        }
    }

    pub(crate) async fn stop(self) -> anyhow::Result<Totals> {
        self.shutdown.cancel();
        Ok(totals(self.task.await??))
    }
}

fn totals(r: Report) -> Totals {
    let mut t = Totals::default();
    t.add([r.acked, r.retried, r.dead, r.lost_leases, r.released]);
    t
}
