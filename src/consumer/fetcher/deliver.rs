//! Delivery of a fetch's reply: the leases go into the table, envelopes that do not decode
//! are dead-lettered (or deferred, when only too large for this consumer), the rest go to
//! the pool, suspects flagged; a reply that comes after shutdown only registers its leases,
//! so they are released.

use super::Fetcher;
use crate::consumer::outcomes::{AckerMsg, Done, Outcome, cannot_take};
use crate::metrics::DeferReason;
use crate::queue::envelope::{DecodeError, Priority, ResultSlot};
use crate::queue::scripts::{self, Fetched};
use crate::redis::retry::{Backoff, GiveUp};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

impl Fetcher {
    /// Adds the leases (asked for at `sent`) to the table, dead-letters bad envelopes,
    /// hands the rest to the pool, suspects flagged.
    pub(super) async fn deliver(&self, mut fetched: Fetched, sent: Instant, shutdown: &CancellationToken) {
        if !fetched.bad_ids.is_empty() {
            self.bury_bad_ids(fetched.deadline_ms, std::mem::take(&mut fetched.bad_ids));
        }
        let limit = self.config.max_envelope_bytes;
        self.metrics.fetched.increment(fetched.jobs.len() as u64);
        self.metrics.fetch_batch.record(fetched.jobs.len() as f64);
        let mut jobs = Vec::with_capacity(fetched.jobs.len());
        let mut leased = Vec::with_capacity(fetched.jobs.len());
        let mut bad = Vec::new();
        // Results travel only while the queue keeps completed jobs.
        let keeps = fetched.global.keep_completed;
        for (i, fetched_job) in fetched.jobs.into_iter().enumerate() {
            match fetched_job.decode(limit) {
                Ok(mut job) => {
                    job.suspect = i < fetched.suspects;
                    // Its place in this fetch's leases, until `add` says where they start.
                    job.lease = leased.len() as u64;
                    // An inline job's lease is named by its envelope (see FetchedJob::name).
                    let item = fetched_job.is_inline().then_some(fetched_job.name);
                    job.result = keeps.then(ResultSlot::default);
                    leased.push((job.id.clone(), job.priority(), item, job.result.clone()));
                    jobs.push(job);
                }
                Err(e) => {
                    // Too large for this consumer, but a producer took it: some consumer
                    // may run it, so it is deferred for a while. Anything else is dead.
                    let big = matches!(e, DecodeError::TooLarge { .. });
                    let (priority, outcome) = match header_priority(fetched_job.envelope()).filter(|_| big) {
                        Some(p) => {
                            let grace = self.unknown_kind_grace;
                            (p, cannot_take(grace, DeferReason::Oversize, e.to_string()))
                        }
                        None => (
                            Priority::Normal,
                            Outcome::Dead {
                                reason: e.to_string(),
                            },
                        ),
                    };
                    // Not decoded: known by its lease's name (for an inline job, its
                    // envelope), which the outcome then names.
                    let name = fetched_job.name;
                    let lease = leased.len() as u64;
                    leased.push((name.clone(), priority, None, None));
                    bad.push(Done {
                        id: name,
                        lease,
                        outcome,
                    });
                }
            }
        }
        let first = self
            .leases
            .add(fetched.deadline_ms, sent, leased, fetched.batch.as_ref());
        for job in &mut jobs {
            job.lease += first;
        }
        for done in &mut bad {
            done.lease += first;
        }
        if !bad.is_empty() {
            tracing::warn!(
                count = bad.len(),
                "envelopes this consumer cannot run: over its size limit (deferred), or undecodable (dead-lettered)"
            );
        }
        for d in bad {
            // At shutdown the lease is released instead; the next fetch finds it again.
            tokio::select! {
                biased;
                _ = self.acker.send(AckerMsg::Done(d)) => {}
                _ = shutdown.cancelled() => break,
            }
        }
        if !jobs.is_empty() {
            self.buffer.add(jobs.len());
            self.metrics.channel_sent.increment(jobs.len() as u64);
            let _ = self.pool.send(jobs);
        }
    }

    /// Dead-letters ids that are not UTF-8 (they cannot travel through the acker), in the
    /// background, retrying until Redis takes it.
    fn bury_bad_ids(&self, token: u64, ids: Vec<Vec<u8>>) {
        tracing::warn!(count = ids.len(), "dead-lettering job ids that are not UTF-8");
        let (conn, keys) = (self.conn.clone(), self.keys.clone());
        tokio::spawn(async move {
            let reason = "job id is not UTF-8: ids use A-Z a-z 0-9 _ . : -";
            let _ = crate::redis::retry::retrying("settle", Backoff::CALL, GiveUp::NEVER, || {
                let (mut conn, keys, ids) = (conn.clone(), &keys, &ids);
                async move { scripts::dead_letter_raw(&mut conn, keys, token, ids, reason).await }
            })
            .await;
        });
    }

    /// Adds the leases of a fetch that came back after shutdown, so they are released.
    pub(super) fn register(&self, fetched: &Fetched, sent: Instant) {
        let leased = fetched.jobs.iter().map(|f| match f.decode(usize::MAX) {
            Ok(j) => {
                let item = f.is_inline().then(|| f.name.clone());
                let p = j.priority();
                (j.id, p, item, None)
            }
            Err(_) => (f.name.clone(), Priority::default(), None, None),
        });
        self.leases
            .add(fetched.deadline_ms, sent, leased, fetched.batch.as_ref());
    }
}

/// The priority in the fixed header every envelope weir writes opens with
/// (`{"attempt":N,"max_attempts":M,"priority":P,`), or normal for a compact envelope
/// (`{"id":`, which implies it), read without decoding the rest: none for bytes weir did
/// not write.
fn header_priority(env: &[u8]) -> Option<Priority> {
    if env.starts_with(br#"{"id":""#) {
        return Some(Priority::Normal);
    }
    let head = std::str::from_utf8(&env[..env.len().min(64)]).ok()?;
    let rest = head.strip_prefix(r#"{"attempt":"#)?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix(r#","max_attempts":"#)?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let p = rest.strip_prefix(r#","priority":"#)?.as_bytes();
    match p {
        [d @ b'0'..=b'9', b',', ..] => Some(Priority::from_u8(d - b'0')),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_priority_reads_weirs_header_only() {
        let env = br#"{"attempt":3,"max_attempts":10,"priority":0,"enqueued_at":1,"id":"a"}"#;
        assert_eq!(header_priority(env), Some(Priority::High));
        let env = br#"{"attempt":0,"max_attempts":1,"priority":2,"#;
        assert_eq!(header_priority(env), Some(Priority::Low));
        let env = br#"{"id":"mim3k2ab.0123456789abcdef-1f","kind":"k","payload":1}"#;
        assert_eq!(header_priority(env), Some(Priority::Normal), "compact");
        for other in [
            &br#"{"kind":"a"}"#[..],
            b"not json",
            b"",
            br#"{"attempt":1,"priority":1,"#,
        ] {
            assert_eq!(
                header_priority(other),
                None,
                "{:?}",
                String::from_utf8_lossy(other)
            );
        }
    }
}
