//! The handler every load-test consumer runs: do the work (nothing, or a call to the
//! simulated downstream), then report the job to a sink: the parent's [`Observed`]
//! directly (in-process) or the stdout pipe (in a consumer process).

use crate::accounting::parse_index;
use crate::downstream::{Downstream, Failure, unix_ms};
use crate::feed::{stamp_us, unix_us};
use crate::observed::Observed;
use crate::pipe_sink::PipeSink;
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir::{Handler, Job, JobError, JobResult};

/// Retry delay after a downstream failure: short, so retried jobs come back within the
/// run; the limiter, not the backoff, is what should slow things down.
const RETRY_AFTER: Duration = Duration::from_millis(50);

/// Where processed jobs are reported.
#[derive(Clone)]
pub(crate) enum Sink {
    /// The parent's accounting, in this process.
    Local(Arc<Observed>),
    /// Frames on stdout, read by the parent.
    Pipe(Arc<PipeSink>),
}

/// The work a job stands for.
#[derive(Clone)]
pub(crate) enum Work {
    /// Nothing: measures the queue itself. Latency reported: enqueued → done.
    Noop,
    /// One call to the simulated downstream. Latency reported: the call's.
    Downstream(Arc<Downstream>),
}

/// The load-test handler.
#[derive(Clone)]
pub(crate) struct LoadHandler {
    pub work: Work,
    pub sink: Sink,
}

/// Time since the job was pushed, µs: from the feed's stamp in its payload, else from the
/// envelope's `enqueued_at` (whole ms).
pub(crate) fn since_enqueued_us(job: &Job) -> u64 {
    let pushed = stamp_us(job.payload_json()).unwrap_or(job.enqueued_at_ms * 1000);
    unix_us().saturating_sub(pushed)
}

impl Handler for LoadHandler {
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult> {
        let index = match &self.sink {
            // Untracked runs skip the id parsing too: `--no-track` prices all of it.
            Sink::Local(obs) if obs.tracker.is_none() => None,
            _ => parse_index(&job.id),
        };
        match (&self.work, &self.sink) {
            // The hot path of `drain`: no future to run, no allocation beyond the box.
            (Work::Noop, Sink::Local(obs)) => {
                obs.record(index, since_enqueued_us(&job));
                Box::pin(std::future::ready(Ok(())))
            }
            (Work::Noop, Sink::Pipe(pipe)) => {
                let pipe = pipe.clone();
                let latency = since_enqueued_us(&job);
                Box::pin(async move {
                    pipe.record(index, latency).await;
                    Ok(())
                })
            }
            (Work::Downstream(ds), sink) => Box::pin(call_downstream(ds.clone(), sink.clone(), index)),
        }
    }
}

async fn call_downstream(ds: Arc<Downstream>, sink: Sink, index: Option<u64>) -> JobResult {
    let started = Instant::now();
    let result = ds.call().await;
    let latency = started.elapsed().as_micros() as u64;
    match result {
        Ok(()) => {
            match sink {
                Sink::Local(obs) => obs.record(index, latency),
                Sink::Pipe(pipe) => pipe.record(index, latency).await,
            }
            Ok(())
        }
        Err(f) => {
            match &sink {
                Sink::Local(obs) => {
                    obs.error();
                    if f == Failure::Overloaded {
                        obs.shed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                Sink::Pipe(pipe) => pipe.error(),
            }
            Err(match f {
                Failure::Overloaded => {
                    JobError::backpressure("downstream overloaded (503)", Some(RETRY_AFTER))
                }
                // As the HTTP handler reports an answer: its status, and for an overload
                // answer the Retry-After it carried.
                Failure::Failed(status) => {
                    let retry_after = if matches!(status, 429 | 503) {
                        ds.config().retry_after
                    } else {
                        RETRY_AFTER
                    };
                    JobError {
                        retry_after: Some(retry_after),
                        ..JobError::retry(format!("downstream answered {status}")).with_status(status)
                    }
                }
            })
        }
    }
}

/// A downstream whose script starts at `epoch_ms` (0: now).
pub(crate) fn downstream(config: crate::downstream::Config, epoch_ms: u64) -> Arc<Downstream> {
    let epoch = if epoch_ms == 0 { unix_ms() } else { epoch_ms };
    Arc::new(Downstream::new(config, epoch))
}
