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
pub(crate) const KIND: &str = "loadtest";

/// The key of job `i` ([`NewJob::key`]).
pub(crate) type Keyer = Arc<dyn Fn(u64) -> String + Send + Sync>;

pub(crate) struct Feed {
    producer: Producer,
    keyer: Option<Keyer>,
    payload: Box<RawValue>,
    next: u64,
    cap: u64,
    max_attempts: u32,
}

/// A JSON payload of about `bytes` bytes (at least [`STAMPED`]):
/// `{"t":"<16 digits>","p":"<random letters>"}`. `t` is where [`Feed::push`] writes the
/// time of the push in µs since the epoch, so the handler measures end-to-end latency in
/// µs (the envelope's `enqueued_at` is whole ms, which added 0-1 ms to every figure);
/// zeros here, for payloads that travel without a feed.
pub(crate) fn payload(bytes: usize, seed: u64) -> Box<RawValue> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let fill: String = (0..bytes.saturating_sub(STAMPED))
        .map(|_| rng.sample(rand::distr::Alphanumeric) as char)
        .collect();
    RawValue::from_string(format!(
        "{STAMP_AT}{}\",\"p\":\"{fill}\"}}",
        "0".repeat(STAMP_DIGITS)
    ))
    .expect("letters make valid JSON")
}

/// What opens a [`payload`]: its stamp's digits follow.
const STAMP_AT: &str = r#"{"t":""#;
/// Digits of the stamp: µs since the epoch, zero-padded (16 digits last until 2286).
const STAMP_DIGITS: usize = 16;
/// The length of a [`payload`] with no letters.
pub(crate) const STAMPED: usize = STAMP_AT.len() + STAMP_DIGITS + r#"","p":""}"#.len();

/// `payload` with its stamp set to `us` (µs since the epoch); unchanged if it has none.
pub(crate) fn stamped(payload: &RawValue, us: u64) -> Box<RawValue> {
    let json = payload.get();
    let digits = format!("{us:0STAMP_DIGITS$}");
    match json.strip_prefix(STAMP_AT) {
        Some(rest) if digits.len() == STAMP_DIGITS && rest.len() > STAMP_DIGITS => {
            let json = format!("{STAMP_AT}{digits}{}", &rest[STAMP_DIGITS..]);
            RawValue::from_string(json).expect("digits for digits keep the JSON valid")
        }
        _ => payload.to_owned(),
    }
}

/// The stamp [`Feed::push`] wrote into a payload: µs since the epoch.
pub(crate) fn stamp_us(payload_json: &str) -> Option<u64> {
    let digits = payload_json.strip_prefix(STAMP_AT)?.get(..STAMP_DIGITS)?;
    digits.parse().ok().filter(|&us| us > 0)
}

/// Now, in µs since the epoch.
pub(crate) fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl Feed {
    /// A feed of at most `cap` jobs. `max_attempts` is high where jobs may fail or be
    /// reclaimed many times (downstream errors, kills) so none is dead-lettered.
    pub(crate) async fn new(
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
    pub(crate) fn with_keys(mut self, keyer: Keyer) -> Self {
        self.keyer = Some(keyer);
        self
    }

    /// Jobs enqueued so far (indexes `0..enqueued`).
    pub(crate) fn enqueued(&self) -> u64 {
        self.next
    }

    /// Jobs still allowed.
    pub(crate) fn remaining(&self) -> u64 {
        self.cap - self.next
    }

    /// Enqueues the next `n` jobs (fewer at the cap) in one bulk load; returns how many.
    /// Each job is written as the producer pulls it (as `weir enqueue` streams its input),
    /// so encoding overlaps the calls in flight.
    pub(crate) async fn push(&mut self, n: u64) -> anyhow::Result<u64> {
        let n = n.min(self.remaining());
        if n == 0 {
            return Ok(0);
        }
        let stamp = unix_us();
        let payload = &stamped(&self.payload, stamp);
        let range = self.next..self.next + n;
        match &self.keyer {
            // The harness's ids are unique by construction (`lt-<i>` on a fresh queue),
            // as weir's generated ones are: they take the same bulk path, without an
            // existence check per id, so the figures are those of a `Producer::bulk` load.
            None => {
                let jobs = range.map(|i| (job_id(i), payload));
                self.producer
                    .bulk(KIND)
                    .max_attempts(self.max_attempts)
                    .enqueue_with_ids(jobs)
                    .await?;
            }
            Some(keyer) => self.push_keyed(range, payload, stamp / 1000, keyer).await?,
        }
        self.next += n;
        Ok(n)
    }

    /// Enqueues jobs `range` with keys: each job built and prepared as the producer pulls
    /// it (`Producer::bulk` has no per-job key).
    async fn push_keyed(
        &self,
        range: std::ops::Range<u64>,
        payload: &RawValue,
        now: u64,
        keyer: &Keyer,
    ) -> anyhow::Result<()> {
        let failed = std::sync::Mutex::new(None);
        let (producer, max_attempts) = (&self.producer, self.max_attempts);
        let mut buf = Vec::new();
        let args = range.map_while(|i| {
            let job = NewJob::from_raw(KIND, payload.to_owned())
                .id(job_id(i))
                .max_attempts(max_attempts)
                .key(keyer(i));
            match producer.prepare(job, now, &mut buf) {
                // Unique by construction, as above.
                Ok(arg) => Some(((), weir::queue::scripts::EnqueueArg { unique: false, ..arg })),
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
        Ok(())
    }

    /// Enqueues everything up to the cap, in slices so the prepared envelopes never all
    /// sit in memory at once.
    pub(crate) async fn push_all(&mut self) -> anyhow::Result<()> {
        while self.remaining() > 0 {
            self.push(50_000).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_keep_their_size_and_carry_the_push_stamp() {
        for bytes in [STAMPED, 100, 1024] {
            let p = payload(bytes, 1);
            assert_eq!(p.get().len(), bytes);
            assert_eq!(stamp_us(p.get()), None, "zeros: no stamp yet");
            let s = stamped(&p, 1_796_000_000_123_456);
            assert_eq!(s.get().len(), bytes);
            assert_eq!(stamp_us(s.get()), Some(1_796_000_000_123_456));
            let v: serde_json::Value = serde_json::from_str(s.get()).unwrap();
            assert_eq!(v["t"], "1796000000123456");
        }
        // Under STAMPED bytes the payload is still the stamp's.
        assert_eq!(payload(0, 1).get().len(), STAMPED);
        let other = RawValue::from_string(r#"{"a":1}"#.into()).unwrap();
        assert_eq!(stamped(&other, 5).get(), r#"{"a":1}"#);
        assert_eq!(stamp_us(r#"{"a":1}"#), None);
    }
}
