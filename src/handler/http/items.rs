//! Per-item outcomes of a batch POST: a 2xx answer whose JSON body holds `outcomes`, one
//! per job (by index `i` or by `id`), settles each job on its own, so one bad row no longer
//! retries its whole batch. Any other 2xx answer acks the whole batch, as before.
//!
//! ```json
//! {"outcomes":[{"i":0,"status":"ok"},{"id":"j2","status":"retry","after_ms":5000,"error":"db busy"},
//!              {"i":2,"status":"fail","error":"bad address"},{"i":3,"status":"defer","after_ms":1000}]}
//! ```

use crate::handler::{JobError, JobResult};
use crate::queue::envelope::Job;
use serde::Deserialize;
use std::time::Duration;

/// Most bytes of a batch answer read for its outcomes.
pub(super) const ANSWER_MAX: usize = 4 << 20;
/// Longest delay an outcome may ask for.
const MAX_AFTER: Duration = Duration::from_secs(3600);

#[derive(Deserialize)]
struct Answer {
    outcomes: Option<Vec<Item>>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    i: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    after_ms: Option<u64>,
    /// An `ok` job's result (any JSON), kept while its queue keeps completed jobs.
    #[serde(default)]
    result: Option<Box<serde_json::value::RawValue>>,
}

/// The jobs' results from a 2xx answer's body (`json`: its content type is JSON).
pub(super) fn results(body: &[u8], json: bool, jobs: &[Job]) -> Vec<JobResult> {
    let n = jobs.len();
    if !json {
        return vec![Ok(()); n];
    }
    let answer: Answer = match serde_json::from_slice(body) {
        Ok(a) => a,
        // Not an object with `outcomes` (an empty body, `{"ok":true}`, an array...): the
        // whole-batch answer it always was.
        Err(_) if !mentions_outcomes(body) => return vec![Ok(()); n],
        Err(e) => return vec![Err(bad(format!("cannot read it: {e}"))); n],
    };
    let Some(items) = answer.outcomes else {
        return vec![Ok(()); n];
    };
    let mut out: Vec<Option<JobResult>> = vec![None; n];
    for item in items {
        let i = match (item.i, &item.id) {
            (Some(i), _) if i < n => i,
            (Some(i), _) => return vec![Err(bad(format!("index {i} is past the batch's {n} jobs"))); n],
            (None, Some(id)) => match jobs.iter().position(|j| &j.id == id) {
                Some(i) => i,
                None => return vec![Err(bad(format!("the batch has no job {id:?}"))); n],
            },
            (None, None) => return vec![Err(bad("an outcome without `i` or `id`".into())); n],
        };
        let after = item.after_ms.map(|ms| Duration::from_millis(ms).min(MAX_AFTER));
        let msg = |d: &str| item.error.clone().unwrap_or_else(|| d.to_owned());
        out[i] = Some(match item.status.as_str() {
            "ok" => {
                if let Some(r) = item.result.as_ref().filter(|r| r.get() != "null") {
                    jobs[i].set_result_text(r.get());
                }
                Ok(())
            }
            "retry" => {
                Err(JobError::retry(msg("the batch endpoint asked for a retry")).with_retry_after(after))
            }
            "fail" => Err(JobError::fatal(msg("the batch endpoint failed the job"))),
            "defer" => Err(JobError::backpressure(
                msg("the batch endpoint deferred the job"),
                after,
            )),
            s => return vec![Err(bad(format!("unknown status {s:?} (ok, retry, fail or defer)"))); n],
        });
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(JobError::retry("the batch answer has no outcome for this job"))))
        .collect()
}

fn mentions_outcomes(body: &[u8]) -> bool {
    body.windows(10).any(|w| w == b"\"outcomes\"")
}

fn bad(why: String) -> JobError {
    JobError::retry(format!("bad per-item answer from the batch endpoint: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::JobErrorKind;

    fn job(id: &str) -> Job {
        let env = format!(
            r#"{{"attempt":0,"max_attempts":5,"priority":1,"enqueued_at":0,"id":"{id}","kind":"k","payload":1}}"#
        );
        serde_json::from_str(&env).unwrap()
    }

    #[test]
    fn each_job_gets_its_own_outcome() {
        let jobs: Vec<Job> = ["a", "b", "c", "d", "e"].iter().map(|i| job(i)).collect();
        let body = br#"{"outcomes":[{"i":0,"status":"ok"},{"id":"b","status":"retry","after_ms":250,"error":"busy"},{"i":2,"status":"fail","error":"bad row"},{"i":3,"status":"defer","after_ms":1000}]}"#;
        let r = results(body, true, &jobs);
        assert_eq!(r[0], Ok(()));
        let e = r[1].clone().unwrap_err();
        assert!(e.kind == JobErrorKind::Retry && e.retry_after == Some(Duration::from_millis(250)));
        let e = r[2].clone().unwrap_err();
        assert!(e.kind == JobErrorKind::Fatal && e.message == "bad row");
        assert!(r[3].clone().unwrap_err().kind == JobErrorKind::Backpressure);
        assert!(
            r[4].clone()
                .unwrap_err()
                .message
                .contains("no outcome for this job")
        );
        // Old answers ack the whole batch.
        for (b, json) in [
            (&b""[..], false),
            (b"{\"ok\":true}", true),
            (b"[]", true),
            (b"ok", true),
        ] {
            assert!(results(b, json, &jobs).iter().all(|r| r.is_ok()));
        }
        // A broken per-item answer settles nothing as done.
        for b in [
            &br#"{"outcomes":[{"i":9,"status":"ok"}]}"#[..],
            br#"{"outcomes":[{"i":0,"status":"yes"}]}"#,
            br#"{"outcomes":"#,
        ] {
            assert!(
                results(b, true, &jobs)
                    .iter()
                    .all(|r| r.as_ref().unwrap_err().is_retryable())
            );
        }
    }
}
