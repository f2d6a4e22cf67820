//! The wake subscription of an idle fetcher: an enqueue publishes on the queue's wake
//! channel, and the fetcher, idle after an empty fetch, looks again at once instead of at
//! its next timeout.

use crate::redis::conn::Redis;
use crate::redis::retry::{Backoff, Streak};
use futures_util::{FutureExt, Stream, StreamExt};
use std::pin::Pin;
use std::time::Duration;
use tokio::time::{Instant, sleep_until};

/// The wake subscription, reconnected on demand. While it is down, `next` waits a second,
/// which turns the idle wait into slow polling until it is back.
pub(crate) struct Wake {
    redis: Redis,
    channel: String,
    stream: Option<Pin<Box<dyn Stream<Item = redis::Msg> + Send>>>,
    retry_at: Instant,
    /// Failed connects: the first is logged, and the recovery.
    errors: Streak,
}

/// How often a wake subscription that is down is tried again (the idle fetcher polls at
/// the same pace meanwhile).
const WAKE_RETRY: Duration = Duration::from_secs(1);

impl Wake {
    pub(super) fn new(redis: Redis, channel: String) -> Self {
        Self {
            redis,
            channel,
            stream: None,
            retry_at: Instant::now(),
            errors: Streak::new(
                "wake subscription",
                Backoff {
                    first: WAKE_RETRY,
                    max: WAKE_RETRY,
                },
            ),
        }
    }

    /// Subscribes; on failure, the next try is due a second later.
    pub(super) async fn connect(&mut self) {
        match self.redis.subscribe(&self.channel).await {
            Ok(ps) => {
                self.errors.succeeded();
                self.stream = Some(ps);
            }
            Err(e) => self.retry_at = Instant::now() + self.errors.failed(&e),
        }
    }

    /// Drops wake messages already received (a fetch is about to look anyway).
    pub(super) fn drain(&mut self) {
        if let Some(s) = self.stream.as_mut() {
            while let Some(m) = s.next().now_or_never() {
                if m.is_none() {
                    self.stream = None;
                    break;
                }
            }
        }
    }

    /// Waits for a wake message, reconnecting first if a try is due. Returns at once after
    /// a reconnection: a message published while the subscription was down is lost, so the
    /// fetcher looks again.
    pub(super) async fn next(&mut self) {
        if self.stream.is_none() && Instant::now() >= self.retry_at {
            self.connect().await;
            if self.stream.is_some() {
                return;
            }
        }
        match self.stream.as_mut() {
            Some(s) => {
                if s.next().await.is_none() {
                    tracing::warn!("wake subscription closed; reconnecting");
                    self.stream = None;
                }
            }
            None => sleep_until(self.retry_at.max(Instant::now() + WAKE_RETRY)).await,
        }
    }
}
