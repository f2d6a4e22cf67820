//! The `keys` scenario's jobs and handler: which key job `i` carries (the mix), how long
//! a handler call takes for each key, and what each key's jobs did (count, handler and
//! end-to-end latency), beside the run's shared [`Observed`] (progress bar, time series).

use crate::feed::Keyer;
use crate::handler::since_enqueued_us;
use crate::histogram::{Histogram, Summary};
use crate::observed::Observed;
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use weir::{Handler, Job, JobResult};

/// The key that is slow or hot: `tenant-0`. The others are the fast keys.
pub(crate) const SPECIAL: usize = 0;

/// The name of key `k`.
pub(crate) fn key_name(k: usize) -> String {
    format!("tenant-{k}")
}

/// The index of a key name this scenario gave, if it is one.
fn key_index(name: &str) -> Option<usize> {
    name.strip_prefix("tenant-")?.parse().ok()
}

/// Which key each job carries: the fast keys `1..keys` in turn, and the special key
/// either as one key among them (`hot_share: None`) or on that share of all jobs. Without
/// the special key (`with_special: false`) the same fast keys in the same turn: the mix
/// with the special key's jobs left out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mix {
    pub keys: usize,
    pub hot_share: Option<f64>,
    pub with_special: bool,
}

impl Mix {
    /// The key index of job `i`.
    pub(crate) fn key_of(&self, i: u64) -> usize {
        let fast = (self.keys - 1) as u64;
        if !self.with_special {
            return 1 + (i % fast) as usize;
        }
        match self.hot_share {
            None => (i % self.keys as u64) as usize,
            Some(h) => {
                // Hot jobs among 0..=i: floor((i + 1) · h); job i is hot if it adds one.
                let upto = ((i + 1) as f64 * h).floor() as u64;
                if upto > (i as f64 * h).floor() as u64 {
                    SPECIAL
                } else {
                    // Not hot: floor(i · h) = upto hot jobs came before it.
                    1 + ((i - upto) % fast) as usize
                }
            }
        }
    }

    /// Jobs of each key among jobs `0..n`.
    pub(crate) fn counts(&self, n: u64) -> Vec<u64> {
        let mut c = vec![0; self.keys];
        for i in 0..n {
            c[self.key_of(i)] += 1;
        }
        c
    }

    pub(crate) fn keyer(self) -> Keyer {
        Arc::new(move |i| key_name(self.key_of(i)))
    }
}

/// What one key's jobs did.
#[derive(Debug, Default)]
struct KeyStats {
    done: AtomicU64,
    /// Handler start → end, µs.
    handler: Histogram,
    /// Enqueued → handler end, µs (the enqueue stamp has ms resolution).
    end_to_end: Histogram,
}

/// One key's figures at a moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyFigures {
    pub done: u64,
    pub handler: Summary,
    pub end_to_end: Summary,
}

/// The per-key handler latencies and accounting of one side of the run.
#[derive(Debug)]
pub(crate) struct Keyed {
    latency: Vec<Duration>,
    stats: Vec<KeyStats>,
    /// Jobs whose key is not one of this run's (none expected).
    foreign: AtomicU64,
    observed: Arc<Observed>,
}

impl Keyed {
    /// `latency[k]`: how long a handler call of key `k` takes.
    pub(crate) fn new(latency: Vec<Duration>, observed: Arc<Observed>) -> Self {
        Self {
            stats: latency.iter().map(|_| KeyStats::default()).collect(),
            latency,
            foreign: AtomicU64::new(0),
            observed,
        }
    }

    /// Every key's figures now.
    pub(crate) fn snapshot(&self) -> Vec<KeyFigures> {
        self.stats
            .iter()
            .map(|s| KeyFigures {
                done: s.done.load(Ordering::Relaxed),
                handler: s.handler.summary(),
                end_to_end: s.end_to_end.summary(),
            })
            .collect()
    }

    pub(crate) fn foreign(&self) -> u64 {
        self.foreign.load(Ordering::Relaxed)
    }

    async fn run(&self, job: Job) {
        let k = job.key.as_deref().and_then(key_index);
        let Some((s, latency)) = k.and_then(|k| self.stats.get(k).zip(self.latency.get(k))) else {
            self.foreign.fetch_add(1, Ordering::Relaxed);
            self.observed.record(None, since_enqueued_us(&job));
            return;
        };
        let started = Instant::now();
        tokio::time::sleep(*latency).await;
        let handler_us = started.elapsed().as_micros() as u64;
        let total_us = since_enqueued_us(&job);
        s.handler.record(handler_us);
        s.end_to_end.record(total_us);
        s.done.fetch_add(1, Ordering::Relaxed);
        self.observed.record(None, total_us);
    }
}

/// The handler: sleeps for its key's latency, then records the job.
#[derive(Clone)]
pub(crate) struct KeyedHandler(pub Arc<Keyed>);

impl Handler for KeyedHandler {
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult> {
        let keyed = self.0.clone();
        Box::pin(async move {
            keyed.run(job).await;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_mix_gives_every_key_its_share() {
        let m = Mix {
            keys: 4,
            hot_share: None,
            with_special: true,
        };
        assert_eq!(m.counts(400), vec![100; 4]);
        let without = Mix {
            with_special: false,
            ..m
        };
        assert_eq!(without.counts(300), vec![0, 100, 100, 100]);
    }

    #[test]
    fn hot_share_goes_to_the_special_key_and_the_rest_evenly() {
        let m = Mix {
            keys: 5,
            hot_share: Some(0.5),
            with_special: true,
        };
        assert_eq!(m.counts(800), vec![400, 100, 100, 100, 100]);
        assert_eq!((0..4).map(|i| m.key_of(i)).collect::<Vec<_>>(), [1, 0, 2, 0]);
        let q = Mix {
            hot_share: Some(0.25),
            ..m
        };
        assert_eq!(q.counts(1600), vec![400, 300, 300, 300, 300]);
        assert_eq!(key_index(&key_name(17)), Some(17));
    }
}
