//! One NDJSON line as a job: borrowed parts for a plain line ([`plain_parts`]), a whole
//! [`NewJob`] for any other ([`to_job`]), or why the line is not one.

use super::EnqueueArgs;
use crate::{parse_duration, parse_time};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::time::Duration;
use weir::NewJob;
use weir::queue::producer::JobParts;

/// One NDJSON line without `--kind` that is a plain job: a kind and a payload, borrowed
/// from the line ([`plain_parts`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainLine<'a> {
    #[serde(borrow)]
    kind: &'a str,
    #[serde(borrow)]
    payload: &'a RawValue,
}

/// One NDJSON line without `--kind`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    kind: String,
    payload: Box<RawValue>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    priority: Option<String>,
    /// A duration string ("30s") or milliseconds.
    #[serde(default)]
    delay: Option<serde_json::Value>,
    /// When the job becomes ready, RFC 3339 (instead of `delay`).
    #[serde(default)]
    run_at: Option<String>,
    #[serde(default)]
    max_attempts: Option<u32>,
    /// Uniqueness window: a duration string ("1h") or milliseconds.
    #[serde(default)]
    unique_for: Option<serde_json::Value>,
    /// The key the window dedupes on (default: the id).
    #[serde(default)]
    unique_key: Option<String>,
    /// The job's key, for per-key limits (default: `--key`).
    #[serde(default)]
    key: Option<String>,
}

/// The job of `line` as borrowed parts, when it is a plain job: the run adds no delay and
/// no uniqueness window, and the line is a payload (`--kind`) or a [`PlainLine`]. Any
/// other line (or one this does not take, like a kind written with escapes) goes to
/// [`to_job`], which builds the same job, or says why the line is not one.
pub(super) fn plain_parts<'l>(a: &'l EnqueueArgs, line: &'l str) -> Option<JobParts<'l>> {
    if a.delay.is_some() || a.at.is_some() || a.unique_for.is_some() {
        return None;
    }
    let (kind, payload) = match &a.kind {
        Some(kind) => (kind.as_str(), serde_json::from_str::<&RawValue>(line).ok()?),
        None => match canonical(line) {
            Some(parts) => parts,
            None => {
                let l: PlainLine<'_> = serde_json::from_str(line).ok()?;
                (l.kind, l.payload)
            }
        },
    };
    Some(JobParts {
        kind,
        payload,
        priority: a.priority,
        max_attempts: None,
        key: a.key.as_deref(),
    })
}

/// The kind and payload of a line written as `{"kind":"K","payload":P}` with no whitespace
/// outside the payload and a kind without escapes: what [`PlainLine`] reads from it,
/// found without serde's field matching (a fifth of the CLI's work per line, by perf).
/// Only the payload is parsed, so it is checked as JSON as before; any other line gives
/// `None` and goes to serde, which decides.
fn canonical(line: &str) -> Option<(&str, &RawValue)> {
    let rest = line.strip_prefix(r#"{"kind":""#)?;
    let end = rest.bytes().position(|b| b == b'"' || b == b'\\' || b < 0x20)?;
    let (kind, rest) = rest.split_at(end);
    let payload = rest.strip_prefix(r#"","payload":"#)?.strip_suffix('}')?;
    Some((kind, serde_json::from_str(payload).ok()?))
}

pub(super) fn to_job(a: &EnqueueArgs, line: String) -> Result<NewJob, String> {
    if let Some(kind) = &a.kind {
        let payload = RawValue::from_string(line).map_err(|e| format!("payload is not JSON: {e}"))?;
        let job = NewJob::from_raw(kind.clone(), payload).priority(a.priority);
        return Ok(with_key(
            with_unique(default_time(a, job), a.unique_for),
            a.key.clone(),
        ));
    }
    let l: Line = serde_json::from_str(&line).map_err(|e| format!("not a job line: {e}"))?;
    let mut job = NewJob::from_raw(l.kind, l.payload).priority(a.priority);
    if let Some(p) = l.priority {
        job = job.priority(p.parse()?);
    }
    job = match (l.delay, l.run_at) {
        (Some(_), Some(_)) => return Err("give delay or run_at, not both".into()),
        (Some(d), None) => job.delay(duration_field("delay", d)?),
        (None, Some(t)) => job.run_at(parse_time(&t)?),
        (None, None) => default_time(a, job),
    };
    let unique_for = l
        .unique_for
        .map(|w| duration_field("unique_for", w))
        .transpose()?;
    job = with_unique(job, unique_for.or(a.unique_for));
    if let Some(id) = l.id {
        job = job.id(id);
    }
    if let Some(n) = l.max_attempts {
        job = job.max_attempts(n);
    }
    if let Some(k) = l.unique_key {
        job = job.unique_key(k);
    }
    Ok(with_key(job, l.key.or_else(|| a.key.clone())))
}

/// A duration field of a job line: a duration string ("30s") or whole milliseconds.
fn duration_field(name: &str, v: serde_json::Value) -> Result<Duration, String> {
    match v {
        serde_json::Value::String(s) => parse_duration(&s),
        serde_json::Value::Number(n) => n
            .as_u64()
            .map(Duration::from_millis)
            .ok_or_else(|| format!("{name} {n} must be whole milliseconds")),
        other => Err(format!(
            "{name} {other} must be a duration string or milliseconds"
        )),
    }
}

/// `job` with a uniqueness window, if one is given.
fn with_unique(job: NewJob, unique_for: Option<Duration>) -> NewJob {
    match unique_for {
        Some(w) => job.unique_for(w),
        None => job,
    }
}

/// `job` with a job key, if one is given (checked when the job is prepared: a bad key
/// is a bad line).
fn with_key(job: NewJob, key: Option<String>) -> NewJob {
    match key {
        Some(k) => job.key(k),
        None => job,
    }
}

/// `job` with the command line's `--delay` or `--at`, if given.
fn default_time(a: &EnqueueArgs, job: NewJob) -> NewJob {
    match (a.delay, a.at) {
        (Some(d), _) => job.delay(d),
        (None, Some(t)) => job.run_at(t),
        (None, None) => job,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What serde reads from a line, as the fallback path does.
    fn by_serde(line: &str) -> Option<(&str, &str)> {
        let l: PlainLine<'_> = serde_json::from_str(line).ok()?;
        Some((l.kind, l.payload.get()))
    }

    #[test]
    fn a_canonical_line_reads_as_serde_reads_it() {
        for line in [
            r#"{"kind":"mail","payload":{"to":"a@b.c","n":[1,2.5e3,null,true]}}"#,
            r#"{"kind":"k","payload":"a \"quoted\" \\ string"}"#,
            r#"{"kind":"k","payload":7}"#,
            r#"{"kind":"k","payload": {"spaced" : 1} }"#,
            r#"{"kind":"bad kind!","payload":[]}"#,
        ] {
            let fast = canonical(line).map(|(k, p)| (k, p.get()));
            assert_eq!(fast, by_serde(line), "{line}");
            assert!(fast.is_some(), "{line}");
        }
    }

    #[test]
    fn any_other_line_is_left_to_serde() {
        for line in [
            // Not JSON, or not a payload: serde refuses these too.
            r#"{"kind":"k","payload":{"a":}}"#,
            r#"{"kind":"k","payload":}"#,
            r#"{"kind":"k","payload":1,"kind":"j"}"#,
            r#"{"kind":"k","payload":1,"id":"x"}"#,
            r#"{"kind":"k","payload":"ctl	tab"}"#,
            // Valid lines written otherwise: serde reads them.
            r#"{"payload":1,"kind":"k"}"#,
            r#"{ "kind":"k","payload":1}"#,
            r#"{"kind":"k","payload":1} "#,
            r#"{"kind":"k\u0041","payload":1}"#,
            r#"{"kind" : "k","payload":1}"#,
        ] {
            assert!(canonical(line).is_none(), "{line}");
        }
    }
}
