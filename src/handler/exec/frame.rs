//! The frames of the exec protocol (docs/protocol.md): what weir writes, what it reads.

use crate::handler::{JobError, JobResult};
use crate::queue::envelope::Job;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::{Duration, SystemTime};

/// Longest delay a worker may ask for (longer ones are cut to it).
const MAX_AFTER: Duration = Duration::from_secs(3600);

#[derive(Serialize)]
struct Hello<'a> {
    #[serde(rename = "type")]
    t: &'a str,
    protocol: u32,
    weir: &'a str,
}

/// weir's hello line.
pub(super) fn hello() -> String {
    let h = Hello {
        t: "hello",
        protocol: super::PROTOCOL_VERSION,
        weir: env!("CARGO_PKG_VERSION"),
    };
    let mut s = serde_json::to_string(&h).unwrap_or_default();
    s.push('\n');
    s
}

#[derive(Serialize)]
struct JobOut<'a> {
    id: &'a str,
    kind: &'a str,
    attempt: u32,
    max_attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline_ms: Option<u64>,
    /// Present (true) while the job's queue keeps completed jobs: an `ok` outcome's
    /// `result` is kept then (a worker need not send one otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    keep_result: bool,
    payload: &'a RawValue,
}

#[derive(Serialize)]
struct Batch<'a> {
    #[serde(rename = "type")]
    t: &'a str,
    batch: u64,
    jobs: Vec<JobOut<'a>>,
}

/// The batch frame for `jobs`, one line.
pub(super) fn batch(id: u64, jobs: &[Job], timeout: Option<Duration>) -> String {
    let deadline_ms = timeout.map(|t| {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        (now + t).as_millis() as u64
    });
    let b = Batch {
        t: "batch",
        batch: id,
        jobs: jobs
            .iter()
            .map(|j| JobOut {
                id: &j.id,
                kind: &j.kind,
                attempt: j.attempt,
                max_attempts: j.max_attempts,
                key: j.key.as_deref(),
                deadline_ms,
                keep_result: j.keeps_result(),
                payload: &j.payload,
            })
            .collect(),
    };
    // Every field is a string, a number or JSON already checked: this cannot fail.
    let mut s = serde_json::to_string(&b).unwrap_or_default();
    s.push('\n');
    s
}

/// A frame from a worker process.
#[derive(Deserialize, Debug)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(super) enum Incoming {
    /// The worker's hello: its protocol version and what it is.
    Hello {
        protocol: u32,
        #[serde(default)]
        worker: Option<String>,
    },
    /// Outcomes of (some of) a batch's jobs.
    Outcomes { batch: u64, outcomes: Vec<Outcome> },
}

/// One job's outcome: by index in its batch (`i`) or by id.
#[derive(Deserialize, Debug)]
pub(super) struct Outcome {
    #[serde(default)]
    pub(super) i: Option<usize>,
    #[serde(default)]
    pub(super) id: Option<String>,
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    after_ms: Option<u64>,
    /// An `ok` job's result: any JSON value, kept as the job's result while its queue
    /// keeps completed jobs. (A `Value`: the frame is an internally tagged enum, which
    /// serde buffers, and a `RawValue` cannot be read from that buffer.)
    #[serde(default)]
    result: Option<serde_json::Value>,
}

impl Outcome {
    /// The result's JSON text, if the outcome has one (`null` counts as none).
    pub(super) fn result_text(&self) -> Option<String> {
        self.result
            .as_ref()
            .filter(|r| !r.is_null())
            .map(|r| r.to_string())
    }

    /// What the outcome means for the job; an unknown status is an error for the frame.
    pub(super) fn result(&self) -> Result<JobResult, String> {
        let after = self.after_ms.map(|ms| Duration::from_millis(ms).min(MAX_AFTER));
        let msg = |default: &str| self.error.clone().unwrap_or_else(|| default.to_owned());
        Ok(match self.status.as_str() {
            "ok" => Ok(()),
            "retry" => Err(JobError::retry(msg("the worker asked for a retry")).with_retry_after(after)),
            "fail" => Err(JobError::fatal(msg("the worker failed the job"))),
            "defer" => Err(JobError::backpressure(msg("the worker deferred the job"), after)),
            s => return Err(format!("unknown status {s:?} (ok, retry, fail or defer)")),
        })
    }
}

/// Reads one line from a worker.
pub(super) fn parse(line: &str) -> Result<Incoming, String> {
    serde_json::from_str(line).map_err(|e| {
        let shown: String = line.chars().take(200).collect();
        format!("not a protocol frame ({e}): {shown:?}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::JobErrorKind;

    #[test]
    fn outcomes_read_by_status() {
        let f = r#"{"type":"outcomes","batch":3,"outcomes":[{"i":0,"status":"ok","result":{"n":[1,2]}},{"id":"b","status":"retry","after_ms":250,"error":"later"},{"i":2,"status":"fail","error":"bad row"},{"i":3,"status":"defer","after_ms":1000}]}"#;
        let Incoming::Outcomes { batch, outcomes } = parse(f).unwrap() else {
            panic!("not outcomes")
        };
        assert_eq!(batch, 3);
        let r: Vec<JobResult> = outcomes.iter().map(|o| o.result().unwrap()).collect();
        assert_eq!(r[0], Ok(()));
        assert_eq!(outcomes[0].result_text().as_deref(), Some(r#"{"n":[1,2]}"#));
        assert_eq!(outcomes[1].result_text(), None);
        let e = r[1].clone().unwrap_err();
        assert!(e.kind == JobErrorKind::Retry && e.retry_after == Some(Duration::from_millis(250)));
        let e = r[2].clone().unwrap_err();
        assert!(e.kind == JobErrorKind::Fatal && e.message == "bad row");
        let e = r[3].clone().unwrap_err();
        assert!(e.kind == JobErrorKind::Backpressure && e.retry_after == Some(Duration::from_secs(1)));
        let bad = r#"{"type":"outcomes","batch":3,"outcomes":[{"i":0,"status":"done"}]}"#;
        let Incoming::Outcomes { outcomes, .. } = parse(bad).unwrap() else {
            panic!()
        };
        assert!(outcomes[0].result().unwrap_err().contains("unknown status"));
        assert!(parse("hello").unwrap_err().contains("not a protocol frame"));
    }
}
