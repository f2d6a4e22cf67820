//! The answers of the job calls, built from the scripts' replies: a listing's summary of
//! an envelope, a job's detail and runs, page cursors, and what an action did to each id.
//! No Redis here: `jobs.rs` and `lane_jobs.rs` call the scripts and hand the replies over.

use crate::error::{Error, Result};
use crate::queue::envelope;
use crate::queue::json::{
    DeferralInfo, JSON_VERSION, JobDetail, JobMoved, JobSkipped, JobState, JobSummary, JobsActed, LeaseInfo,
    PAYLOAD_PREVIEW, RunRecord, Timestamp,
};
use crate::queue::scripts::{self, PageEntry, Shown};
use serde::Deserialize;

/// The fields of an envelope's header a listing shows (the rest is skipped unread); a
/// compact envelope's implied values where it has none (`envelope.rs`).
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    attempt: u32,
    #[serde(default = "envelope::default_max_attempts")]
    max_attempts: u32,
    #[serde(default = "envelope::normal")]
    priority: u8,
    #[serde(default)]
    enqueued_at: u64,
    #[serde(default)]
    id: String,
    kind: String,
    #[serde(default)]
    key: Option<String>,
}

impl Head {
    /// When the job was enqueued: the envelope's time, else its id's; `None` if neither says.
    fn enqueued_at(&self) -> Option<Timestamp> {
        let at = Some(self.enqueued_at).filter(|&t| t > 0);
        at.or_else(|| envelope::time_of_id(&self.id)).map(Timestamp)
    }
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
pub(in crate::queue::admin) struct Raw<'a> {
    id: &'a str,
    state: JobState,
    envelope: Option<&'a str>,
    score: Option<u64>,
    error: Option<&'a str>,
    mark: Option<&'a str>,
    suspect: bool,
    result: Option<&'a str>,
}

impl Raw<'_> {
    pub(in crate::queue::admin) fn summary(&self, now: Timestamp) -> JobSummary {
        let head = self.envelope.and_then(|e| serde_json::from_str::<Head>(e).ok());
        let at = |s: JobState| self.score.filter(|_| self.state == s).map(Timestamp);
        let enqueued_at = head.as_ref().and_then(Head::enqueued_at);
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
            result: self.result.map(str::to_owned),
        }
    }
}

/// A page cursor: where the next page starts (see `jobs_page.lua`). Written as the
/// offsets joined by dots; opaque to callers.
pub(in crate::queue::admin) fn parse_cursor(state: JobState, cursor: Option<&str>) -> Result<[u64; 3]> {
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

pub(in crate::queue::admin) fn format_cursor(state: JobState, o: [u64; 3]) -> String {
    match state {
        JobState::Delayed => format!("{}.{}.{}", o[0], o[1], o[2]),
        _ => o[0].to_string(),
    }
}

/// The state a script names, or `None` for `missing`.
pub(in crate::queue::admin) fn state_of(script: &'static str, s: &str) -> Result<Option<JobState>> {
    match s {
        "missing" => Ok(None),
        other => JobState::parse(other).map(Some).ok_or_else(|| Error::Reply {
            script,
            detail: format!("unknown state {other:?}"),
        }),
    }
}

/// What run-now did to `id`, found in `state` (`None`: no such job) in `lane`.
pub(in crate::queue::admin) fn ran_now(
    out: &mut JobsActed,
    id: String,
    state: Option<JobState>,
    lane: Option<String>,
) {
    match state {
        Some(from @ (JobState::Delayed | JobState::Dead)) => out.done.push(JobMoved { id, from, lane }),
        Some(s) => out.skipped.push(skipped(id, Some(s), &format!("already {s}"))),
        None => out.skipped.push(skipped(id, None, "no such job")),
    }
}

/// An id a delete found in no lane.
pub(in crate::queue::admin) fn not_found(id: String, only_dead: bool) -> JobSkipped {
    match only_dead {
        true => skipped(id, None, "not in the dead-letter queue"),
        false => skipped(id, None, "no such job"),
    }
}

pub(in crate::queue::admin) fn skipped(id: String, state: Option<JobState>, reason: &str) -> JobSkipped {
    JobSkipped {
        id,
        state,
        reason: reason.to_owned(),
    }
}

pub(in crate::queue::admin) fn entry(state: JobState, e: &PageEntry) -> Raw<'_> {
    Raw {
        id: &e.id,
        state,
        envelope: e.envelope.as_deref(),
        score: e.score,
        // (a page of done jobs, which have no error, has their results there)
        error: e.error.as_deref().filter(|_| state != JobState::Done),
        mark: e.mark.as_deref(),
        suspect: state == JobState::Ready && e.segment == 0,
        result: e.error.as_deref().filter(|_| state == JobState::Done),
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

pub(in crate::queue::admin) fn detail(queue: &str, id: &str, state: JobState, s: Shown) -> JobDetail {
    let now = Timestamp(s.now_ms);
    let raw = Raw {
        id,
        state,
        envelope: s.envelope.as_deref(),
        score: s.score,
        error: s.error.as_deref(),
        mark: s.mark.as_deref(),
        suspect: false,
        result: s.result.as_deref(),
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
