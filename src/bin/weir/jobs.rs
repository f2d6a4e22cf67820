//! `weir jobs` (a page of a queue's jobs in one state) and `weir job show|delete|run-now`
//! (one job, or a few, by id).

use crate::Common;
use crate::output::{age, confirm, count, json, table, term, when};
use clap::{Args, Subcommand, ValueEnum};
use std::process::ExitCode;
use std::time::Duration;
use weir::queue::json::{JobDetail, JobFilter, JobPage, JobState, JobSummary, JobsActed};

/// A state on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum StateArg {
    /// Waiting to be fetched.
    Ready,
    /// Waiting for their due time (scheduled, or retries).
    Delayed,
    /// Leased by a consumer.
    #[value(name = "in-flight", alias = "in_flight")]
    InFlight,
    /// In the dead-letter queue.
    Dead,
    /// Completed and kept (`weir limits set --keep-completed`).
    Done,
}

impl From<StateArg> for JobState {
    fn from(s: StateArg) -> Self {
        match s {
            StateArg::Ready => JobState::Ready,
            StateArg::Delayed => JobState::Delayed,
            StateArg::InFlight => JobState::InFlight,
            StateArg::Dead => JobState::Dead,
            StateArg::Done => JobState::Done,
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct JobsArgs {
    #[command(flatten)]
    pub common: Common,
    /// Which jobs.
    #[arg(long, value_enum)]
    pub state: StateArg,
    /// Only jobs of this kind (a page then looks at 1000 entries at most, and may hold
    /// fewer jobs than --limit: go on with its cursor).
    #[arg(long)]
    pub kind: Option<String>,
    /// Only jobs with this job key (the envelope's `key`; like --kind, a page then looks
    /// at 1000 entries at most).
    #[arg(long)]
    pub key: Option<String>,
    /// Jobs per page, 1 to 1000.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Where to start: the cursor the previous page printed.
    #[arg(long)]
    pub cursor: Option<String>,
    /// Print JSON (docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
}

pub(crate) async fn run_list(a: JobsArgs) -> crate::error::Result<ExitCode> {
    let q = a.common.checked_queue(crate::known::Access::Read).await?;
    let page = q
        .jobs_where(
            a.state.into(),
            JobFilter {
                kind: a.kind.as_deref(),
                key: a.key.as_deref(),
            },
            a.limit,
            a.cursor.as_deref(),
        )
        .await?;
    if a.json {
        json(&page)?;
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", render_page(&page));
    if let Some(c) = &page.next_cursor {
        println!("more: --cursor {c}");
    }
    Ok(ExitCode::SUCCESS)
}

fn render_page(p: &JobPage) -> String {
    if p.jobs.is_empty() {
        return format!("no {} jobs on this page\n", p.state);
    }
    let time_col = match p.state {
        JobState::Ready => "AGE",
        JobState::Delayed => "DUE",
        JobState::InFlight => "LEASE ENDS",
        JobState::Dead => "DEAD SINCE",
        JobState::Done => "DONE",
    };
    // Completed jobs have no last error: their results instead.
    let done = p.state == JobState::Done;
    let last_col = if done { "RESULT" } else { "LAST ERROR" };
    let mut rows = vec![
        ["ID", "KIND", "FAILED ATTEMPTS", time_col, last_col]
            .map(String::from)
            .to_vec(),
    ];
    // A partitioned queue's jobs say their lane.
    let lanes = p.jobs.iter().any(|j| j.lane.is_some());
    if lanes {
        rows[0].insert(1, "LANE".into());
    }
    for j in &p.jobs {
        let mut row = vec![
            j.id.clone(),
            j.kind.clone().unwrap_or_else(|| "?".into()),
            attempts(j),
            time_of(j, p),
            if done { &j.result } else { &j.last_error }
                .as_deref()
                .map(one_line)
                .unwrap_or_else(|| "-".into()),
        ];
        if lanes {
            row.insert(1, j.lane.clone().unwrap_or_default());
        }
        rows.push(row);
    }
    table(&rows)
}

/// Failed attempts charged, of the runs allowed: a job that ran once and failed fatally
/// was charged none (the same words in the CLI, the UI and docs/cli-json.md).
fn attempts(j: &JobSummary) -> String {
    match (j.attempt, j.max_attempts) {
        (Some(a), Some(m)) => format!("{a} charged of {m} runs"),
        _ => "?".into(),
    }
}

/// The time that matters in `p`'s state, relative to the page's `now`.
fn time_of(j: &JobSummary, p: &JobPage) -> String {
    let rel = |t: Option<weir::queue::json::Timestamp>, ahead: bool| match t {
        Some(t) if ahead => format!("in {}", age(t.until(p.now))),
        Some(t) => format!("{} ago", age(t.age(p.now))),
        None => "-".into(),
    };
    match p.state {
        JobState::Ready => j.age_ms.map_or("-".into(), |ms| age(Duration::from_millis(ms))),
        JobState::Delayed if j.parked => "parked".into(),
        JobState::Delayed => rel(j.due_at, true),
        JobState::InFlight => rel(j.lease_deadline, true),
        JobState::Dead => rel(j.dead_at, false),
        JobState::Done => rel(j.done_at, false),
    }
}

/// An error message on one line, cut to 80 characters.
fn one_line(s: &str) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

#[derive(Args, Debug)]
pub(crate) struct JobArgs {
    #[command(subcommand)]
    pub command: JobCommand,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Subcommand, Debug)]
pub(crate) enum JobCommand {
    /// Show one job: its state, envelope, attempts, last error, lease.
    Show {
        /// Job id.
        id: String,
        /// Print JSON (docs/cli-json.md).
        #[arg(long)]
        json: bool,
    },
    /// Delete jobs (ready, delayed, dead, or running: a running job finishes, but its
    /// outcome is dropped and it is not retried). More than one asks for confirmation.
    Delete {
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<String>,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
        /// Print JSON (docs/cli-json.md).
        #[arg(long)]
        json: bool,
    },
    /// Move delayed or dead-lettered jobs to the front of the ready list (a dead job with
    /// a fresh attempt count).
    RunNow {
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<String>,
        /// Print JSON (docs/cli-json.md).
        #[arg(long)]
        json: bool,
    },
}

pub(crate) async fn run_job(a: JobArgs) -> crate::error::Result<ExitCode> {
    let queue = a.common.queue.clone();
    if let JobCommand::Delete { ids, yes, .. } = &a.command {
        confirm_many(ids, &queue, *yes)?;
    }
    // By id: an unseen queue holds none of them, so it is told, not refused.
    let q = a.common.checked_queue(crate::known::Access::Read).await?;
    let (acted, as_json) = match a.command {
        JobCommand::Show { id, json: as_json } => {
            let Some(d) = q.job(&id).await? else {
                return Err(crate::failure(format!("no job {id} in queue {queue}")));
            };
            if as_json {
                json(&d)?;
            } else {
                print!("{}", render_detail(&d));
            }
            return Ok(ExitCode::SUCCESS);
        }
        JobCommand::Delete { ids, json, .. } => (q.delete_jobs(&ids, false).await?, json),
        JobCommand::RunNow { ids, json } => (q.run_now(&ids).await?, json),
    };
    report(&acted, as_json)
}

/// Asks before deleting more than one job (before Redis is reached: a refusal is a usage
/// error).
pub(crate) fn confirm_many(ids: &[String], queue: &str, yes: bool) -> crate::error::Result<()> {
    if ids.len() < 2 {
        return Ok(());
    }
    confirm(
        &format!("delete {} from queue {queue}", count(ids.len() as u64, "job")),
        yes,
    )
}

/// Prints what an action by id did; exit 3 if some ids were skipped.
pub(crate) fn report(acted: &JobsActed, as_json: bool) -> crate::error::Result<ExitCode> {
    if as_json {
        json(acted)?;
    } else {
        let verb = match acted.action {
            "delete" => "deleted",
            "run_now" => "moved to the front of ready",
            other => other,
        };
        println!("{} {verb}", count(acted.done.len() as u64, "job"));
        for d in &acted.done {
            match &d.lane {
                Some(lane) => println!("  {} (was {} in lane {lane})", d.id, d.from),
                None => println!("  {} (was {})", d.id, d.from),
            }
        }
        for s in &acted.skipped {
            eprintln!("{}: {}", s.id, s.reason);
        }
    }
    if acted.skipped.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(crate::exit::PARTIAL))
    }
}

fn render_detail(d: &JobDetail) -> String {
    let j = &d.job;
    let mut o = String::new();
    // Values hold what jobs and handlers said: control characters come out escaped.
    let mut line = |k: &str, v: String| o += &format!("{k:<12}{}\n", term(&v));
    line("id", j.id.clone());
    line("queue", d.queue.clone());
    if let Some(lane) = &j.lane {
        line("lane", lane.clone());
    }
    let suspect = if j.suspect {
        " (suspect: runs alone)"
    } else if j.parked {
        " (parked: waits for a slot of its key)"
    } else {
        ""
    };
    line("state", format!("{}{suspect}", j.state));
    line(
        "kind",
        j.kind.clone().unwrap_or_else(|| "? (not a weir envelope)".into()),
    );
    if let Some(k) = envelope_key(d) {
        line("key", k);
    }
    line("priority", j.priority.unwrap_or("?").into());
    line("failed attempts", attempts(j));
    if let Some(t) = j.enqueued_at {
        line("enqueued", when(t, d.now));
    }
    for (k, t) in [
        ("due", j.due_at),
        ("dead since", j.dead_at),
        ("completed", j.done_at),
    ] {
        if let Some(t) = t {
            line(k, when(t, d.now));
        }
    }
    if let Some(l) = &d.lease {
        line("lease ends", when(l.deadline, d.now));
        let holder = match &l.worker {
            Some(w) => format!("consumer {w} (running; see weir workers)"),
            None => "a consumer that has not started it yet".into(),
        };
        line("held by", holder);
    }
    if let Some(f) = &d.deferrals {
        line(
            "deferred",
            format!("{} since {}", count(f.count, "time"), when(f.first_at, d.now)),
        );
    }
    line("last error", j.last_error.clone().unwrap_or_else(|| "-".into()));
    if j.state == JobState::Done {
        line("result", j.result.clone().unwrap_or_else(|| "-".into()));
    }
    if let Some(r) = retry_rule(d) {
        line("retry rule", format!("{r} (the job's own)"));
    }
    o += &history_lines(d);
    let env = match (&d.envelope, &d.envelope_text) {
        (Some(e), _) => serde_json::from_str::<serde_json::Value>(e.get())
            .and_then(|v| serde_json::to_string_pretty(&v))
            .unwrap_or_else(|_| e.get().to_owned()),
        (None, Some(t)) => format!("{t}\n(not valid JSON)"),
        (None, None) => "-".into(),
    };
    let env: Vec<_> = env.lines().map(term).collect();
    o += &format!("envelope\n{}\n", env.join("\n"));
    o
}

/// The job's history, a `runs` line then one run a line, oldest first ("-" for none
/// kept).
fn history_lines(d: &JobDetail) -> String {
    if d.history.is_empty() {
        return format!("{:<12}-\n", "runs");
    }
    let runs: Vec<String> = d
        .history
        .iter()
        .map(|r| {
            let took = age(Duration::from_millis(
                r.end.as_ms().saturating_sub(r.start.as_ms()),
            ));
            let msg = if r.message.is_empty() {
                String::new()
            } else {
                format!(": {}", one_line(&r.message))
            };
            format!(
                "{} ago, {} on {} after {took}{msg}",
                age(r.end.age(d.now)),
                r.outcome,
                r.worker
            )
        })
        .collect();
    let runs: String = runs.iter().map(|r| format!("  {}\n", term(r))).collect();
    format!("runs\n{runs}")
}

/// The job's own retry rule (`NewJob::retry`), if it has one.
fn retry_rule(d: &JobDetail) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Ruled {
        retry: Option<String>,
    }
    let e = d.envelope.as_ref()?;
    serde_json::from_str::<Ruled>(e.get()).ok()?.retry
}

/// The job key in a job's envelope (`NewJob::key`), if it has one.
fn envelope_key(d: &JobDetail) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Keyed {
        key: Option<String>,
    }
    let e = d.envelope.as_ref()?;
    serde_json::from_str::<Keyed>(e.get()).ok()?.key
}
