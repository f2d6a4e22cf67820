//! The change notices of a consumer: a subscription to the queue's notices channel
//! ([`QueueKeys::notices_channel`]), on which `weir limits set`, `weir retry set` and
//! `weir cron` publish what they changed. It wakes the housekeeping task that reads it
//! (the settings watch, the cron task), so they need only a slow safety poll; after the
//! subscription was down (and while it is), every task is woken, since a notice may have
//! been missed, and so is the Functions library check, since Redis may have restarted
//! without it.

use crate::queue::keys::QueueKeys;
use crate::queue::scripts::Notice;
use crate::redis::conn::Redis;
use crate::redis::retry::{Backoff, Streak};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often a subscription that is down is tried again; meanwhile the tasks are woken at
/// this pace (they poll as often as they did before notices).
const RETRY: Duration = Duration::from_secs(1);

/// What the subscription wakes: each task waits on its own (a permit is kept while the
/// task is busy, so a notice is never missed between two waits).
#[derive(Debug, Default, Clone)]
pub(crate) struct Board {
    pub(crate) settings: Arc<Notify>,
    pub(crate) cron: Arc<Notify>,
    pub(crate) library: Arc<Notify>,
}

impl Board {
    fn all(&self) {
        self.settings.notify_one();
        self.cron.notify_one();
        self.library.notify_one();
    }
}

/// The notices task.
pub(crate) struct Notices {
    redis: Redis,
    channel: String,
    board: Board,
}

impl Notices {
    pub(crate) fn new(redis: Redis, keys: &QueueKeys, board: Board) -> Self {
        Self {
            redis,
            channel: keys.notices_channel(),
            board,
        }
    }

    /// Listens until `stop`, reconnecting after a second when the subscription is down.
    pub(crate) async fn run(self, stop: CancellationToken) {
        let mut errors = Streak::new(
            "notices subscription",
            Backoff {
                first: RETRY,
                max: RETRY,
            },
        );
        loop {
            match self.redis.subscribe(&self.channel).await {
                Ok(mut messages) => {
                    errors.succeeded();
                    // Before it was up (the tasks' first reads came first: the settings
                    // bind from the first fetch), or while it was down, anything may have
                    // changed unannounced: every task reads once more.
                    self.board.all();
                    loop {
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            m = messages.next() => match m {
                                Some(m) => self.dispatch(m.get_payload_bytes()),
                                None => break,
                            },
                        }
                    }
                    tracing::warn!("notices subscription closed; reconnecting");
                }
                Err(e) => {
                    errors.failed(&e);
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(RETRY) => {}
            }
            // Down: the tasks read as they did before notices, once per try.
            self.board.all();
        }
    }

    fn dispatch(&self, message: &[u8]) {
        match Notice::parse(message) {
            Some(Notice::Settings) => self.board.settings.notify_one(),
            Some(Notice::Cron) => self.board.cron.notify_one(),
            None => {
                tracing::debug!(message = %String::from_utf8_lossy(message), "unknown change notice ignored")
            }
        }
    }
}
