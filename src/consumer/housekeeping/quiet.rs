//! Quiet spells: the reclaimer and the stats sampler keep their pace (each second by
//! default) while the consumer sees work, and on an idle queue wait longer, up to their
//! own bound, or until work shows up: the fetcher reports it ([`Activity`]), since every
//! write that readies a job publishes a wake message and every lease is taken by a fetch.
//! An idle fleet then costs Redis a few commands a minute per consumer, not a few a
//! second.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until};

/// Work seen by the consumer's fetcher: a wake message, or a fetch that brought jobs.
#[derive(Debug, Clone)]
pub(crate) struct Activity(Arc<watch::Sender<u64>>);

impl Default for Activity {
    fn default() -> Self {
        Self(Arc::new(watch::channel(0).0))
    }
}

impl Activity {
    /// The fetcher saw work.
    pub(crate) fn saw(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A watcher that sees the work reported from now on.
    pub(crate) fn watch(&self) -> Watcher {
        Watcher(self.0.subscribe())
    }
}

/// A housekeeping task's view of [`Activity`].
#[derive(Debug)]
pub(crate) struct Watcher(watch::Receiver<u64>);

impl Watcher {
    /// Whether work was seen since the last look.
    pub(crate) fn saw_work(&mut self) -> bool {
        let seen = self.0.has_changed().unwrap_or(false);
        self.0.borrow_and_update();
        seen
    }

    /// Waits `wait`; when that is longer than `pace` and work shows up meanwhile, only
    /// until `pace` has passed. Returns whether work was seen.
    pub(crate) async fn sleep(&mut self, pace: Duration, wait: Duration) -> bool {
        let start = Instant::now();
        if wait <= pace {
            sleep(wait).await;
            return self.saw_work();
        }
        tokio::select! {
            _ = sleep(wait) => self.saw_work(),
            // (With the fetcher gone, at shutdown, this ends at once: the pace is kept.)
            _ = self.0.changed() => {
                sleep_until(start + pace).await;
                self.0.borrow_and_update();
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_quiet_wait_ends_at_the_pace_once_work_is_seen() {
        let activity = Activity::default();
        let mut w = activity.watch();
        let (pace, long) = (Duration::from_secs(1), Duration::from_secs(10));
        // Nothing seen: the whole wait.
        let t0 = Instant::now();
        assert!(!w.sleep(pace, long).await);
        assert_eq!(t0.elapsed(), long);
        // Work 300 ms in: the wait ends a second after it began.
        let t0 = Instant::now();
        let a = activity.clone();
        tokio::spawn(async move {
            sleep(Duration::from_millis(300)).await;
            a.saw();
        });
        assert!(w.sleep(pace, long).await);
        assert_eq!(t0.elapsed(), pace);
        // Work before a short wait is reported after it.
        activity.saw();
        assert!(w.sleep(pace, pace).await);
        assert!(!w.saw_work());
    }
}
