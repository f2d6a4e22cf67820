//! The drain watch (drain mode): stops the consumer once the queue has nothing ready,
//! delayed or leased. It looks (one cheap stats call) when this process holds nothing (no
//! job running, no lease unsettled): as soon as a flush or an empty fetch says so, and
//! every 50 ms besides (for what other consumers hold, and delayed jobs falling due).
//! Delayed jobs keep it going unless it ignores them (`--drain-ignore-delayed`); once
//! nothing has been ready for [`TELL_AFTER`] while jobs remain, it logs once what it waits
//! for: the delayed jobs and when the next falls due, the jobs in flight and who runs them.

use crate::consumer::leases::Leases;
use crate::limiter::limit::Limit;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often an idle consumer looks whether the queue is empty.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// How long the queue has nothing ready, but jobs remain, before the watch says what it
/// waits for.
pub(crate) const TELL_AFTER: Duration = Duration::from_secs(2);

/// The drain watch task.
pub(crate) struct DrainWatch {
    /// Stop with delayed jobs left.
    ignore_delayed: bool,
    conn: HealingConnection,
    keys: QueueKeys,
    limit: Arc<Limit>,
    leases: Arc<Leases>,
    /// [`Signals::drain_check`](crate::consumer::signals::Signals::drain_check): told after
    /// each flush and each empty fetch.
    drain_check: Arc<Notify>,
}

impl DrainWatch {
    pub(crate) fn new(
        conn: HealingConnection,
        keys: QueueKeys,
        limit: Arc<Limit>,
        leases: Arc<Leases>,
        drain_check: Arc<Notify>,
    ) -> Self {
        Self {
            ignore_delayed: false,
            conn,
            keys,
            limit,
            leases,
            drain_check,
        }
    }

    /// Stops with delayed jobs left when `yes`.
    pub(crate) fn ignoring_delayed(mut self, yes: bool) -> Self {
        self.ignore_delayed = yes;
        self
    }

    /// Cancels `stop` (the consumer's "stop fetching") once the queue is empty, or
    /// returns when something else cancelled it. A failed stats call is tried again at
    /// the next check.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        // Since when nothing was ready while jobs remained; None once told.
        let mut waiting: Option<Option<tokio::time::Instant>> = Some(None);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(CHECK_EVERY) => {}
                _ = self.drain_check.notified() => {}
            }
            if self.limit.in_flight() > 0 || self.leases.len() > 0 {
                continue;
            }
            let Ok(s) = scripts::stats(&mut self.conn, &self.keys).await else {
                continue;
            };
            let left = match self.ignore_delayed {
                true => s.ready_total() + s.in_flight,
                false => s.pending(),
            };
            if left == 0 {
                if s.delayed > 0 {
                    tracing::info!(delayed = s.delayed, "drained; delayed jobs left for a later run");
                }
                stop.cancel();
                return;
            }
            if let Some(since) = &mut waiting {
                if s.ready_total() > 0 {
                    *since = None;
                } else if since.get_or_insert_with(tokio::time::Instant::now).elapsed() >= TELL_AFTER {
                    self.tell(s.delayed, s.in_flight).await;
                    waiting = None;
                }
            }
        }
    }
}

impl DrainWatch {
    /// Logs what the drain waits for: `delayed` jobs and when the next falls due, the
    /// `in_flight` ones and the consumers running the first few.
    async fn tell(&mut self, delayed: u64, in_flight: u64) {
        let next_due = crate::queue::admin::next_due_of(&mut self.conn, &self.keys)
            .await
            .ok()
            .flatten();
        let next_due = next_due.map(|ms| {
            humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        });
        let held = crate::queue::admin::in_flight_sample(&mut self.conn, &self.keys, 5)
            .await
            .unwrap_or_default();
        let held: Vec<String> = held
            .into_iter()
            .map(|(id, by)| format!("{id} ({})", by.as_deref().unwrap_or("not started")))
            .collect();
        tracing::info!(
            delayed,
            next_due = next_due.as_deref().unwrap_or("-"),
            in_flight,
            running = %held.join(", "),
            "drain: nothing ready; waiting for delayed jobs to fall due and jobs in flight to settle (--drain-ignore-delayed leaves delayed ones)"
        );
    }
}
