//! The producer side: enqueues jobs `lt-0, lt-1, …` in bulk with the real weir producer,
//! never past the accounting's capacity; optionally each with a key (`keys` scenario).

use crate::accounting::job_id;
use futures_util::StreamExt;
use rand::{Rng, SeedableRng};
use serde_json::value::RawValue;
use std::sync::Arc;
use weir::Conn;
use weir::{NewJob, Producer};

/// Kind of every load-test job.
pub const KIND: &str = "loadtest";

/// The key of job `i` ([`NewJob::key`]).
pub type Keyer = Arc<dyn Fn(u64) -> String + Send + Sync>;

pub struct Feed {
    producer: Producer,
    keyer: Option<Keyer>,
    payload: Box<RawValue>,
    next: u64,
    cap: u64,
    max_attempts: u32,
}

/// A JSON payload of about `bytes` bytes: `{"p":"<random letters>"}`.
pub fn payload(bytes: usize, seed: u64) -> Box<RawValue> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let fill: String = (0..bytes.saturating_sub(8))
        .map(|_| rng.sample(rand::distr::Alphanumeric) as char)
        .collect();
    RawValue::from_string(format!("{{\"p\":\"{fill}\"}}")).expect("letters make valid JSON")
}

impl Feed {
    /// A feed of at most `cap` jobs. `max_attempts` is high where jobs may fail or be
    /// reclaimed many times (downstream errors, kills) so none is dead-lettered.
    pub async fn new(
        conn: Conn,
        queue: &str,
        payload: Box<RawValue>,
        cap: u64,
        max_attempts: u32,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            // A partitioned queue's jobs spread over its partitions.
            producer: Producer::open(conn, queue).await?,
            keyer: None,
            payload,
            next: 0,
            cap,
            max_attempts,
        })
    }

    /// The same feed, giving job `i` the key `keyer(i)`.
    pub fn with_keys(mut self, keyer: Keyer) -> Self {
        self.keyer = Some(keyer);
        self
    }

    /// Jobs enqueued so far (indexes `0..enqueued`).
    pub fn enqueued(&self) -> u64 {
        self.next
    }

    /// Jobs still allowed.
    pub fn remaining(&self) -> u64 {
        self.cap - self.next
    }

    /// Enqueues the next `n` jobs (fewer at the cap) in one bulk call; returns how many.
    /// Each job is prepared as the producer pulls it (as `weir enqueue` streams its
    /// input), so encoding overlaps the calls in flight.
    pub async fn push(&mut self, n: u64) -> anyhow::Result<u64> {
        let n = n.min(self.remaining());
        if n == 0 {
            return Ok(0);
        }
        let now = weir::envelope::unix_ms();
        let failed = std::sync::Mutex::new(None);
        let (producer, keyer, payload, max_attempts) =
            (&self.producer, &self.keyer, &self.payload, self.max_attempts);
        let mut buf = Vec::new();
        let args = (self.next..self.next + n).map_while(|i| {
            let job = NewJob::from_raw(KIND, payload.clone())
                .id(job_id(i))
                .max_attempts(max_attempts);
            let job = match keyer {
                Some(k) => job.key(k(i)),
                None => job,
            };
            match producer.prepare(job, now, &mut buf) {
                // The harness's ids are unique by construction (`lt-<i>` on a fresh
                // queue), as weir's generated ones are: they take the same bulk path,
                // without an existence check per id, so the figures are those of
                // `weir enqueue`.
                Ok(arg) => Some(((), weir::scripts::EnqueueArg { unique: false, ..arg })),
                Err(e) => {
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    None
                }
            }
        });
        {
            let mut chunks = std::pin::pin!(producer.enqueue_tagged(args));
            while let Some(chunk) = chunks.next().await {
                chunk.result?;
            }
        }
        if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e.into());
        }
        self.next += n;
        Ok(n)
    }

    /// Enqueues everything up to the cap, in slices so the prepared envelopes never all
    /// sit in memory at once.
    pub async fn push_all(&mut self) -> anyhow::Result<()> {
        while self.remaining() > 0 {
            self.push(50_000).await?;
        }
        Ok(())
    }
}
