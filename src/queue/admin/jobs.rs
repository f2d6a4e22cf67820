//! Jobs one at a time or a page at a time: listing by state, showing, deleting, running
//! now, and the filtered bulk actions on the dead-letter queue.

use super::Queue;
use super::types::{
    BulkActed, DeferralInfo, JSON_VERSION, JobDetail, JobMoved, JobPage, JobSkipped, JobState, JobSummary,
    JobsActed, LeaseInfo, Timestamp,
};
use crate::error::{Error, Result};
use crate::queue::keys::validate_token;
use crate::queue::scripts::{self, PageEntry, Shown};
use serde::Deserialize;
use std::time::Duration;

/// Most jobs one page may hold.
pub const MAX_PAGE: usize = 1000;
/// Most entries one page looks at when it filters by kind: the bound on a page's cost.
pub const KIND_WINDOW: usize = 1000;
/// Dead-lettered entries one bulk call looks at (the caller loops).
const BULK_WINDOW: usize = 1000;

/// The fields of an envelope's header a listing shows (the rest is skipped unread).
#[derive(Deserialize)]
struct Head {
    attempt: u32,
    max_attempts: u32,
    priority: u8,
    enqueued_at: u64,
    kind: String,
}

/// What the scripts say of one job, before it becomes a [`JobSummary`].
struct Raw<'a> {
    id: &'a str,
    state: JobState,
    envelope: Option<&'a str>,
    score: Option<u64>,
    error: Option<&'a str>,
    mark: Option<&'a str>,
    suspect: bool,
}

impl Raw<'_> {
    fn summary(&self, now: Timestamp) -> JobSummary {
        let head = self.envelope.and_then(|e| serde_json::from_str::<Head>(e).ok());
        let at = |s: JobState| self.score.filter(|_| self.state == s).map(Timestamp);
        let enqueued_at = head.as_ref().map(|h| Timestamp(h.enqueued_at));
        JobSummary {
            id: self.id.to_owned(),
            state: self.state,
            kind: head.as_ref().map(|h| h.kind.clone()),
            priority: head
                .as_ref()
                .map(|h| ["high", "normal", "low"][usize::from(h.priority.min(2))]),
            attempt: head.as_ref().map(|h| h.attempt),
            max_attempts: head.as_ref().map(|h| h.max_attempts),
            enqueued_at,
            age_ms: enqueued_at.map(|t| t.age(now).as_millis() as u64),
            due_at: at(JobState::Delayed),
            lease_deadline: at(JobState::InFlight),
            dead_at: at(JobState::Dead),
            last_error: self.error.map(str::to_owned),
            worker: self.mark.map(|m| m.strip_suffix(":s").unwrap_or(m).to_owned()),
            suspect: self.suspect || self.mark.is_some_and(|m| m.ends_with(":s")),
        }
    }
}

/// A page cursor: where the next page starts (see `jobs_page.lua`). Written as the
/// offsets joined by dots; opaque to callers.
fn parse_cursor(state: JobState, cursor: Option<&str>) -> Result<[u64; 3]> {
    let Some(c) = cursor else { return Ok([0; 3]) };
    let bad = || {
        Error::Config(format!(
            "invalid cursor {c:?}: pass back the next_cursor of a page"
        ))
    };
    let parts: Vec<u64> = c
        .split('.')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_>>()?;
    match (state, parts.as_slice()) {
        (JobState::Delayed, &[a, b, c]) => Ok([a, b, c]),
        (JobState::Delayed, _) => Err(bad()),
        (_, &[a]) => Ok([a, 0, 0]),
        _ => Err(bad()),
    }
}

fn format_cursor(state: JobState, o: [u64; 3]) -> String {
    match state {
        JobState::Delayed => format!("{}.{}.{}", o[0], o[1], o[2]),
        _ => o[0].to_string(),
    }
}

/// The state a script names, or `None` for `missing`.
fn state_of(script: &'static str, s: &str) -> Result<Option<JobState>> {
    match s {
        "missing" => Ok(None),
        other => JobState::parse(other).map(Some).ok_or_else(|| Error::Reply {
            script,
            detail: format!("unknown state {other:?}"),
        }),
    }
}

impl Queue {
    /// One page of the jobs in `state`: at most `limit` (1 to [`MAX_PAGE`]) jobs, of
    /// `kind` only if given, from `cursor` (a page's `next_cursor`; `None`: the first
    /// page). A page costs a bounded window of the lists or sets, never a scan: with a
    /// kind filter it looks at most at [`KIND_WINDOW`] entries and may hold fewer jobs
    /// than asked, with a cursor to go on. The queue moves while it is paged: a job may
    /// show twice or not at all across pages.
    pub async fn jobs(
        &self,
        state: JobState,
        kind: Option<&str>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<JobPage> {
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(Error::Config(format!(
                "a page holds 1 to {MAX_PAGE} jobs, not {limit}"
            )));
        }
        if let Some(k) = kind {
            validate_token("job kind", k, crate::queue::envelope::MAX_ID_LEN)?;
        }
        let offsets = parse_cursor(state, cursor)?;
        let window = if kind.is_some() { KIND_WINDOW } else { limit };
        let page = scripts::jobs_page(
            &mut self.conn.clone(),
            &self.keys,
            state.as_str(),
            offsets,
            limit,
            window,
            kind.unwrap_or(""),
        )
        .await?;
        let now = Timestamp(page.now_ms);
        let jobs = page
            .entries
            .iter()
            .map(|e| entry(state, e).summary(now))
            .collect();
        Ok(JobPage {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            state,
            kind: kind.map(str::to_owned),
            now,
            jobs,
            next_cursor: page.more.then(|| format_cursor(state, page.offsets)),
        })
    }

    /// One job, wherever it is; `None` if there is no job `id` in the queue.
    pub async fn job(&self, id: &str) -> Result<Option<JobDetail>> {
        let s = scripts::job_show(&mut self.conn.clone(), &self.keys, id).await?;
        let Some(state) = state_of("job_show", &s.state)? else {
            return Ok(None);
        };
        Ok(Some(detail(self.keys.name(), id, state, s)))
    }

    /// Deletes jobs by id: ready, delayed, dead or in flight (or, with `only_dead`, only
    /// dead-lettered ones). A job in flight keeps running, but its outcome is dropped and
    /// it is neither retried nor dead-lettered: its lease is gone (its consumer logs it as
    /// a lost lease). Deleting a ready job costs O(length of its ready list) (LREM).
    pub async fn delete_jobs(&self, ids: &[String], only_dead: bool) -> Result<JobsActed> {
        let got = scripts::jobs_delete(&mut self.conn.clone(), &self.keys, only_dead, ids).await?;
        let mut out = self.acted("delete");
        for (id, state) in got {
            match state_of("jobs_delete", &state)? {
                Some(from) => out.done.push(JobMoved { id, from }),
                None if only_dead => out
                    .skipped
                    .push(skipped(id, None, "not in the dead-letter queue")),
                None => out.skipped.push(skipped(id, None, "no such job")),
            }
        }
        Ok(out)
    }

    /// Moves delayed or dead-lettered jobs to the front of their ready lists: a delayed
    /// job keeps its attempt count, a dead one starts afresh (as a requeue). Jobs ready or
    /// in flight are left as they are and reported as skipped.
    pub async fn run_now(&self, ids: &[String]) -> Result<JobsActed> {
        let mut out = self.acted("run_now");
        for id in ids {
            let state = scripts::job_run_now(&mut self.conn.clone(), &self.keys, id).await?;
            let id = id.clone();
            match state_of("job_run_now", &state)? {
                Some(from @ (JobState::Delayed | JobState::Dead)) => out.done.push(JobMoved { id, from }),
                Some(s) => out.skipped.push(skipped(id, Some(s), &format!("already {s}"))),
                None => out.skipped.push(skipped(id, None, "no such job")),
            }
        }
        Ok(out)
    }

    /// Requeues (`requeue`: to the back of ready, with a fresh attempt count) or deletes
    /// every dead-lettered job of `kind` (if given) dead-lettered at least `older_than`
    /// ago (if given), oldest first, a bounded window per call.
    pub async fn dead_where(
        &self,
        requeue: bool,
        kind: Option<&str>,
        older_than: Option<Duration>,
    ) -> Result<BulkActed> {
        if let Some(k) = kind {
            validate_token("job kind", k, crate::queue::envelope::MAX_ID_LEN)?;
        }
        let min_age = older_than.map_or(0, |d| (d.as_millis() as u64).max(1));
        let (mut rank, mut count) = (0, 0);
        loop {
            let mut conn = self.conn.clone();
            let step = scripts::dlq_bulk(
                &mut conn,
                &self.keys,
                requeue,
                rank,
                BULK_WINDOW,
                min_age,
                kind.unwrap_or(""),
            )
            .await?;
            count += step.acted;
            rank = step.next;
            if step.done {
                break;
            }
        }
        Ok(BulkActed {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            action: if requeue { "requeue" } else { "delete" },
            kind: kind.map(str::to_owned),
            older_than_ms: older_than.map(|_| min_age),
            count,
        })
    }

    fn acted(&self, action: &'static str) -> JobsActed {
        JobsActed {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            action,
            done: Vec::new(),
            skipped: Vec::new(),
        }
    }
}

fn skipped(id: String, state: Option<JobState>, reason: &str) -> JobSkipped {
    JobSkipped {
        id,
        state,
        reason: reason.to_owned(),
    }
}

fn entry(state: JobState, e: &PageEntry) -> Raw<'_> {
    Raw {
        id: &e.id,
        state,
        envelope: e.envelope.as_deref(),
        score: e.score,
        error: e.error.as_deref(),
        mark: e.mark.as_deref(),
        suspect: state == JobState::Ready && e.segment == 0,
    }
}

fn detail(queue: &str, id: &str, state: JobState, s: Shown) -> JobDetail {
    let now = Timestamp(s.now_ms);
    let raw = Raw {
        id,
        state,
        envelope: s.envelope.as_deref(),
        score: s.score,
        error: s.error.as_deref(),
        mark: s.mark.as_deref(),
        suspect: false,
    };
    let job = raw.summary(now);
    let lease = match (state, s.score) {
        (JobState::InFlight, Some(deadline)) => Some(LeaseInfo {
            deadline: Timestamp(deadline),
            token: s.token.clone().unwrap_or_else(|| deadline.to_string()),
            worker: job.worker.clone(),
            running: s.mark.is_some(),
        }),
        _ => None,
    };
    let deferrals = s.deferral.as_deref().and_then(|d| {
        let (n, first) = d.split_once(' ')?;
        Some(DeferralInfo {
            count: n.parse().ok()?,
            first_at: Timestamp(first.parse().ok()?),
        })
    });
    let parsed = s
        .envelope
        .as_deref()
        .and_then(|e| serde_json::value::RawValue::from_string(e.to_owned()).ok());
    let envelope_text = match parsed {
        Some(_) => None,
        None => s.envelope,
    };
    JobDetail {
        version: JSON_VERSION,
        queue: queue.to_owned(),
        now,
        job,
        envelope: parsed,
        envelope_text,
        lease,
        deferrals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_refused() {
        assert_eq!(parse_cursor(JobState::Ready, None).unwrap(), [0, 0, 0]);
        let o = [3, 0, 7];
        let c = format_cursor(JobState::Delayed, o);
        assert_eq!(c, "3.0.7");
        assert_eq!(parse_cursor(JobState::Delayed, Some(&c)).unwrap(), o);
        assert_eq!(parse_cursor(JobState::Dead, Some("12")).unwrap(), [12, 0, 0]);
        for (state, bad) in [
            (JobState::Dead, "1.2.3"),
            (JobState::Delayed, "4"),
            (JobState::Ready, "x"),
            (JobState::Ready, ""),
            (JobState::InFlight, "-1"),
        ] {
            let e = parse_cursor(state, Some(bad)).unwrap_err().to_string();
            assert!(e.contains("invalid cursor"), "{state} {bad}: {e}");
        }
    }

    #[test]
    fn a_summary_reads_the_header_and_strips_the_suspect_mark() {
        let env = r#"{"attempt":2,"max_attempts":5,"priority":0,"enqueued_at":1000,"id":"a","kind":"mail","payload":{}}"#;
        let raw = Raw {
            id: "a",
            state: JobState::InFlight,
            envelope: Some(env),
            score: Some(9000),
            error: Some("boom"),
            mark: Some("00ff:s"),
            suspect: false,
        };
        let s = raw.summary(Timestamp(4000));
        assert_eq!(s.kind.as_deref(), Some("mail"));
        assert_eq!(
            (s.attempt, s.max_attempts, s.priority),
            (Some(2), Some(5), Some("high"))
        );
        assert_eq!(
            (s.age_ms, s.lease_deadline, s.due_at),
            (Some(3000), Some(Timestamp(9000)), None)
        );
        assert_eq!(s.worker.as_deref(), Some("00ff"));
        assert!(s.suspect);
        let bad = Raw {
            envelope: Some("{not json"),
            mark: None,
            ..raw
        };
        let s = bad.summary(Timestamp(4000));
        assert_eq!((s.kind, s.attempt, s.worker), (None, None, None));
    }
}
