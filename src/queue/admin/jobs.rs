//! Jobs one at a time or a page at a time: listing by state, showing, deleting, running
//! now, and the filtered bulk actions on the dead-letter queue. A partitioned queue's go
//! over its lanes (`lane_jobs.rs`).

use super::Queue;
use super::types::{
    BulkActed, DeferralInfo, JSON_VERSION, JobDetail, JobFilter, JobMoved, JobPage, JobSkipped, JobState,
    JobSummary, JobsActed, LeaseInfo, PAYLOAD_PREVIEW, RunRecord, Timestamp,
};
use crate::error::{Error, Result};
use crate::queue::keys::{QueueKeys, validate_token};
use crate::queue::scripts::{self, PageEntry, Shown};
use crate::redis::conn::Conn;
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
    #[serde(default)]
    key: Option<String>,
}

/// The start of an envelope's payload, cut at [`PAYLOAD_PREVIEW`] characters; `None`
/// without a payload field. The fields before it are plain tokens (no quotes inside), so
/// the first `,"payload":` is the field's.
fn payload_preview(env: &str) -> Option<String> {
    let at = env.find(r#","payload":"#)? + r#","payload":"#.len();
    let body = env[at..].strip_suffix('}').unwrap_or(&env[at..]);
    let mut chars = body.char_indices();
    Some(match chars.nth(PAYLOAD_PREVIEW) {
        None => body.to_owned(),
        Some((cut, _)) => format!("{}…", &body[..cut]),
    })
}

/// What the scripts say of one job, before it becomes a [`JobSummary`].
pub(super) struct Raw<'a> {
    id: &'a str,
    state: JobState,
    envelope: Option<&'a str>,
    score: Option<u64>,
    error: Option<&'a str>,
    mark: Option<&'a str>,
    suspect: bool,
}

impl Raw<'_> {
    pub(super) fn summary(&self, now: Timestamp) -> JobSummary {
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
            // a parked job has no due time: it waits for a slot of its key
            due_at: at(JobState::Delayed).filter(|t| t.0 < scripts::PARKED_AT_MS),
            lease_deadline: at(JobState::InFlight),
            dead_at: at(JobState::Dead),
            done_at: at(JobState::Done),
            last_error: self.error.map(str::to_owned),
            worker: self.mark.map(|m| m.strip_suffix(":s").unwrap_or(m).to_owned()),
            suspect: self.suspect || self.mark.is_some_and(|m| m.ends_with(":s")),
            parked: self.state == JobState::Delayed && self.score.is_some_and(|s| s >= scripts::PARKED_AT_MS),
            lane: None,
            key: head.as_ref().and_then(|h| h.key.clone()),
            payload_preview: head.as_ref().and(self.envelope).and_then(payload_preview),
        }
    }
}

/// A page cursor: where the next page starts (see `jobs_page.lua`). Written as the
/// offsets joined by dots; opaque to callers.
pub(super) fn parse_cursor(state: JobState, cursor: Option<&str>) -> Result<[u64; 3]> {
    let Some(c) = cursor else { return Ok([0; 3]) };
    let bad = || {
        Error::config(
            format!("page cursor {c:?}"),
            "is not one a page gave: pass back the next_cursor of a page",
        )
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

pub(super) fn format_cursor(state: JobState, o: [u64; 3]) -> String {
    match state {
        JobState::Delayed => format!("{}.{}.{}", o[0], o[1], o[2]),
        _ => o[0].to_string(),
    }
}

/// The state a script names, or `None` for `missing`.
pub(super) fn state_of(script: &'static str, s: &str) -> Result<Option<JobState>> {
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
        let filter = JobFilter { kind, key: None };
        self.jobs_where(state, filter, limit, cursor).await
    }

    /// [`Queue::jobs`] with a [`JobFilter`]: of a kind, of a job key, or both (a page
    /// filtered by either looks at most at [`KIND_WINDOW`] entries).
    pub async fn jobs_where(
        &self,
        state: JobState,
        filter: JobFilter<'_>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<JobPage> {
        let JobFilter { kind, key } = filter;
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(Error::config(
                "page size",
                format!("must be between 1 and {MAX_PAGE} (a page holds 1 to {MAX_PAGE} jobs), not {limit}"),
            ));
        }
        if let Some(k) = kind {
            validate_token("job kind", k, crate::queue::envelope::MAX_ID_LEN)?;
        }
        if let Some(k) = key {
            validate_token("job key", k, crate::queue::envelope::MAX_ID_LEN)?;
        }
        if let Some(p) = self.partitions().await? {
            return self.lane_jobs(&p, state, filter, limit, cursor).await;
        }
        let offsets = parse_cursor(state, cursor)?;
        let window = if filter.is_empty() { limit } else { KIND_WINDOW };
        let page = scripts::jobs_page(
            &mut self.conn.clone(),
            &self.keys,
            state.as_str(),
            offsets,
            limit,
            window,
            kind.unwrap_or(""),
            key.unwrap_or(""),
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
            key: key.map(str::to_owned),
            now,
            jobs,
            next_cursor: page.more.then(|| format_cursor(state, page.offsets)),
        })
    }

    /// One job, wherever it is (in a partitioned queue, in whichever lane; its likeliest
    /// first); `None` if there is no job `id` in the queue. A job stored by id is found in
    /// O(log n); an inline job (docs/protocol.md: a bulk load's job, its envelope its list
    /// item) by a scan of the lease and the lists, O(n), as is an id found nowhere.
    pub async fn job(&self, id: &str) -> Result<Option<JobDetail>> {
        if let Some(p) = self.partitions().await? {
            return self.lane_job(&p, id).await;
        }
        let s = scripts::job_show(&mut self.conn.clone(), &self.keys, id).await?;
        let Some(state) = state_of("job_show", &s.state)? else {
            return Ok(None);
        };
        Ok(Some(detail(self.keys.name(), id, state, s)))
    }

    /// Deletes jobs by id: ready, delayed, dead or in flight (or, with `only_dead`, only
    /// dead-lettered ones). A job in flight keeps running, but its outcome is dropped and
    /// it is neither retried nor dead-lettered: its lease is gone (its consumer logs it as
    /// a lost lease). Deleting a ready job costs O(length of its ready list) (LREM), and an
    /// inline job (docs/protocol.md) is first found by a scan of the lease and the lists.
    pub async fn delete_jobs(&self, ids: &[String], only_dead: bool) -> Result<JobsActed> {
        if let Some(p) = self.partitions().await? {
            return self.lane_delete(&p, ids, only_dead).await;
        }
        let got = scripts::jobs_delete(&mut self.conn.clone(), &self.keys, only_dead, ids).await?;
        let mut out = self.acted("delete");
        for (id, state) in got {
            match state_of("jobs_delete", &state)? {
                Some(from) => out.done.push(JobMoved { id, from, lane: None }),
                None => out.skipped.push(not_found(id, only_dead)),
            }
        }
        Ok(out)
    }

    /// Moves delayed or dead-lettered jobs to the front of their ready lists: a delayed
    /// job keeps its attempt count, a dead one starts afresh (as a requeue). Jobs ready or
    /// in flight are left as they are and reported as skipped.
    pub async fn run_now(&self, ids: &[String]) -> Result<JobsActed> {
        if let Some(p) = self.partitions().await? {
            return self.lane_run_now(&p, ids).await;
        }
        let mut out = self.acted("run_now");
        for id in ids {
            let state = scripts::job_run_now(&mut self.conn.clone(), &self.keys, id).await?;
            let id = id.clone();
            ran_now(&mut out, id, state_of("job_run_now", &state)?, None);
        }
        Ok(out)
    }

    /// Requeues (`requeue`: to the back of ready, with a fresh attempt count) or deletes
    /// every dead-lettered job of `kind` (if given) dead-lettered at least `older_than`
    /// ago (if given), oldest first, a bounded window per call (on every lane of a
    /// partitioned queue).
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
        let kind_arg = kind.unwrap_or("");
        let count = match self.partitions().await? {
            None => bulk(&self.conn, &self.keys, requeue, min_age, kind_arg).await?,
            Some(p) => {
                let each = self.each_lane(
                    &p,
                    |c, k| async move { bulk(&c, k, requeue, min_age, kind_arg).await },
                );
                each.await?.into_iter().sum()
            }
        };
        Ok(BulkActed {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            action: if requeue { "requeue" } else { "delete" },
            kind: kind.map(str::to_owned),
            older_than_ms: older_than.map(|_| min_age),
            count,
        })
    }

    pub(super) fn acted(&self, action: &'static str) -> JobsActed {
        JobsActed {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            action,
            done: Vec::new(),
            skipped: Vec::new(),
        }
    }
}

/// The requeue or delete of the dead-lettered jobs one filter takes, on one lane, window
/// after window; returns how many.
async fn bulk(conn: &Conn, keys: &QueueKeys, requeue: bool, min_age: u64, kind: &str) -> Result<u64> {
    let (mut rank, mut count) = (0, 0);
    loop {
        let mut c = conn.clone();
        let step = scripts::dlq_bulk(&mut c, keys, requeue, rank, BULK_WINDOW, min_age, kind).await?;
        count += step.acted;
        rank = step.next;
        if step.done {
            return Ok(count);
        }
    }
}

/// What run-now did to `id`, found in `state` (`None`: no such job) in `lane`.
pub(super) fn ran_now(out: &mut JobsActed, id: String, state: Option<JobState>, lane: Option<String>) {
    match state {
        Some(from @ (JobState::Delayed | JobState::Dead)) => out.done.push(JobMoved { id, from, lane }),
        Some(s) => out.skipped.push(skipped(id, Some(s), &format!("already {s}"))),
        None => out.skipped.push(skipped(id, None, "no such job")),
    }
}

/// An id a delete found in no lane.
pub(super) fn not_found(id: String, only_dead: bool) -> JobSkipped {
    match only_dead {
        true => skipped(id, None, "not in the dead-letter queue"),
        false => skipped(id, None, "no such job"),
    }
}

pub(super) fn skipped(id: String, state: Option<JobState>, reason: &str) -> JobSkipped {
    JobSkipped {
        id,
        state,
        reason: reason.to_owned(),
    }
}

pub(super) fn entry(state: JobState, e: &PageEntry) -> Raw<'_> {
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

/// A run as `lib.lua`'s run_history writes it.
#[derive(Deserialize)]
struct RawRun {
    #[serde(default)]
    start: u64,
    #[serde(default, rename = "end")]
    finish: u64,
    #[serde(default)]
    worker: String,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    message: String,
}

/// A job's run history from its record (a record that does not parse reads as none).
fn history(record: Option<&str>) -> Vec<RunRecord> {
    // (Lua's cjson writes an empty array as `{}`)
    let runs: Vec<RawRun> = record
        .and_then(|r| serde_json::from_str(r).ok())
        .unwrap_or_default();
    runs.into_iter()
        .map(|r| RunRecord {
            start: Timestamp(r.start),
            end: Timestamp(r.finish),
            worker: r.worker,
            outcome: r.outcome,
            message: r.message,
        })
        .collect()
}

pub(super) fn detail(queue: &str, id: &str, state: JobState, s: Shown) -> JobDetail {
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
    // 'count first_ms', then per-cause parts (lib.lua's deferral_record).
    let deferrals = s.deferral.as_deref().and_then(|d| {
        let mut parts = d.split(' ');
        let (n, first) = (parts.next()?, parts.next()?);
        Some(DeferralInfo {
            count: n.parse().ok()?,
            first_at: Timestamp(first.parse().ok()?),
        })
    });
    let parsed = s
        .envelope
        .as_deref()
        .and_then(|e| serde_json::value::RawValue::from_string(e.to_owned()).ok());
    let runs = history(s.history.as_deref());
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
        history: runs,
    }
}

#[cfg(test)]
mod tests;
