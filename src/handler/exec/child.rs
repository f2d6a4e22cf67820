//! One process of the exec pool: starts it, says hello, writes batch frames, reads
//! outcomes, restarts it with backoff when it dies, and closes it gracefully.

use super::Request;
use super::frame::{self, Incoming};
use crate::handler::{JobError, JobResult};
use crate::queue::envelope::ResultSlot;
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long a new process may take to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// The first restart delay (doubling up to the configured longest).
const FIRST_RESTART_DELAY: Duration = Duration::from_millis(100);
/// A process that ran this long before dying restarts after the first delay again.
const HEALTHY_RUN: Duration = Duration::from_secs(10);

pub(super) struct Proc {
    pub(super) n: usize,
    pub(super) command: String,
    pub(super) max_restart_delay: Duration,
    pub(super) job_timeout: Option<Duration>,
    pub(super) closing: CancellationToken,
    pub(super) grace: Arc<Mutex<Duration>>,
}

/// A batch sent and not fully answered.
struct Pending {
    ids: Vec<String>,
    /// Where each job's result goes (only while its queue keeps completed jobs).
    kept: Vec<Option<ResultSlot>>,
    results: Vec<Option<JobResult>>,
    left: usize,
    reply: tokio::sync::oneshot::Sender<Vec<JobResult>>,
}

impl Pending {
    /// Sends the results, those missing as `missing`.
    fn finish(self, missing: &JobError) {
        let r = self
            .results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(missing.clone())))
            .collect();
        let _ = self.reply.send(r);
    }
}

enum End {
    /// Shut down: the task ends.
    Closed,
    /// The process died, or broke the protocol: restart it.
    Died(String),
}

impl Proc {
    pub(super) async fn run(self, mut rx: mpsc::UnboundedReceiver<Request>) {
        let mut delay = FIRST_RESTART_DELAY;
        let mut next_batch = 0u64;
        loop {
            let started = Instant::now();
            let why = match self.session(&mut rx, &mut next_batch).await {
                End::Closed => return,
                End::Died(why) => why,
            };
            if started.elapsed() >= HEALTHY_RUN {
                delay = FIRST_RESTART_DELAY;
            }
            tracing::warn!(
                proc = self.n,
                "exec worker `{}`: {why}; restarting in {}",
                self.command,
                humantime::format_duration(delay)
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.closing.cancelled() => {
                    refuse(&mut rx);
                    return;
                }
            }
            delay = (delay * 2).min(self.max_restart_delay.max(FIRST_RESTART_DELAY));
        }
    }

    /// One process's life: until it dies (restart) or the pool closes.
    async fn session(&self, rx: &mut mpsc::UnboundedReceiver<Request>, next_batch: &mut u64) -> End {
        if self.closing.is_cancelled() {
            refuse(rx);
            return End::Closed;
        }
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Its own process group: a Ctrl-C at weir's terminal goes to weir, which shuts the
        // worker down gracefully, not straight to the worker.
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return End::Died(format!("cannot start it: {e}")),
        };
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return End::Died("its pipes are missing".into());
        };
        let n = self.n;
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                tracing::info!(target: "weir::exec", proc = n, pid, "{l}");
            }
        });
        // A writer of its own: a worker that writes outcomes while weir writes batches
        // never waits on weir, nor weir on it.
        let (wtx, mut wrx) = mpsc::unbounded_channel::<String>();
        let writer = tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(line) = wrx.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err() {
                    return;
                }
                if wrx.is_empty() && stdin.flush().await.is_err() {
                    return;
                }
            }
            let _ = stdin.shutdown().await;
        });
        let mut wtx = Some(wtx);
        let mut lines = BufReader::new(stdout).lines();
        let _ = wtx.as_ref().map(|w| w.send(frame::hello()));
        match tokio::time::timeout(HELLO_TIMEOUT, lines.next_line()).await {
            Ok(Ok(Some(l))) => match frame::parse(&l) {
                Ok(Incoming::Hello { protocol, worker }) if protocol == super::PROTOCOL_VERSION => {
                    let worker = worker.unwrap_or_default();
                    tracing::info!(proc = n, pid, worker = %worker, "exec worker started");
                }
                Ok(Incoming::Hello { protocol, .. }) => {
                    return died(
                        child,
                        format!("it speaks protocol {protocol}; weir speaks 1"),
                        Vec::new(),
                    )
                    .await;
                }
                Ok(_) => return died(child, "its first line is not a hello frame".into(), Vec::new()).await,
                Err(e) => return died(child, e, Vec::new()).await,
            },
            Ok(Ok(None)) => {
                return died(child, "it closed its stdout before its hello".into(), Vec::new()).await;
            }
            Ok(Err(e)) => return died(child, format!("cannot read its stdout: {e}"), Vec::new()).await,
            Err(_) => return died(child, "no hello within 30s".into(), Vec::new()).await,
        }
        let mut pending: HashMap<u64, Pending> = HashMap::new();
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                biased;
                _ = self.closing.cancelled(), if deadline.is_none() => {
                    wtx = None; // closes stdin once the frames queued are written
                    refuse(rx);
                    let grace = *self.grace.lock().unwrap_or_else(|e| e.into_inner());
                    deadline = Some(tokio::time::Instant::now() + grace);
                }
                _ = sleep_until(deadline), if deadline.is_some() => {
                    let _ = child.start_kill();
                    let why = JobError::retry("the exec worker did not answer within the shutdown grace");
                    pending.into_values().for_each(|p| p.finish(&why));
                    writer.abort();
                    return End::Closed;
                }
                req = rx.recv(), if wtx.is_some() => {
                    let Some(req) = req else { continue };
                    let id = *next_batch;
                    *next_batch += 1;
                    let line = frame::batch(id, &req.jobs, self.job_timeout);
                    let n = req.jobs.len();
                    let (ids, kept) = req.jobs.into_iter().map(|j| (j.id, j.result)).unzip();
                    pending.insert(id, Pending { ids, kept, results: vec![None; n], left: n, reply: req.reply });
                    if wtx.as_ref().is_some_and(|w| w.send(line).is_err()) {
                        return died(child, "its stdin is closed".into(), pending.into_values().collect()).await;
                    }
                }
                line = lines.next_line() => match line {
                    Ok(Some(l)) if l.trim().is_empty() => {}
                    Ok(Some(l)) => {
                        if let Err(e) = apply(&l, &mut pending) {
                            return died(child, e, pending.into_values().collect()).await;
                        }
                    }
                    Ok(None) if deadline.is_some() && pending.is_empty() => {}
                    Ok(None) => return died(child, "it closed its stdout".into(), pending.into_values().collect()).await,
                    Err(e) => return died(child, format!("cannot read its stdout: {e}"), pending.into_values().collect()).await,
                },
            }
            if let Some(d) = deadline
                && pending.is_empty()
            {
                // Everything answered: let it exit on its own within the grace, else kill.
                if tokio::time::timeout_at(d, child.wait()).await.is_err() {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
                return End::Closed;
            }
        }
    }
}

/// Applies one outcomes frame; an error means the process broke the protocol.
fn apply(line: &str, pending: &mut HashMap<u64, Pending>) -> Result<(), String> {
    let (batch, outcomes) = match frame::parse(line)? {
        Incoming::Outcomes { batch, outcomes } => (batch, outcomes),
        Incoming::Hello { .. } => return Err("a second hello frame".into()),
    };
    let Some(p) = pending.get_mut(&batch) else {
        return Err(format!("outcomes for batch {batch}, which is not in flight"));
    };
    for o in &outcomes {
        let i = match (&o.i, &o.id) {
            (Some(i), _) => *i,
            (None, Some(id)) => p
                .ids
                .iter()
                .position(|x| x == id)
                .ok_or_else(|| format!("batch {batch} has no job {id:?}"))?,
            (None, None) => return Err("an outcome without `i` or `id`".into()),
        };
        let r = o.result()?;
        if let (Ok(()), Some(text), Some(Some(kept))) = (&r, o.result_text(), p.kept.get(i)) {
            kept.set(text);
        }
        let slot = p
            .results
            .get_mut(i)
            .ok_or_else(|| format!("batch {batch} has no job number {i}"))?;
        if slot.is_none() {
            p.left -= 1;
        }
        *slot = Some(r);
    }
    if p.left == 0
        && let Some(p) = pending.remove(&batch)
    {
        p.finish(&JobError::retry("unreachable: every job answered"));
    }
    Ok(())
}

/// Kills the process and fails the jobs it held (retryable, charged: see the module docs).
async fn died(mut child: Child, why: String, held: Vec<Pending>) -> End {
    let _ = child.start_kill();
    let status = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
        Ok(Ok(s)) => format!(" ({s})"),
        _ => String::new(),
    };
    let e = JobError::retry(format!("the exec worker died before answering: {why}{status}"));
    held.into_iter().for_each(|p| p.finish(&e));
    End::Died(format!("{why}{status}"))
}

/// Answers every queued request: the pool is closing.
fn refuse(rx: &mut mpsc::UnboundedReceiver<Request>) {
    rx.close();
    while let Ok(r) = rx.try_recv() {
        let n = r.jobs.len();
        let _ = r.reply.send(super::closed(n));
    }
}

async fn sleep_until(d: Option<tokio::time::Instant>) {
    match d {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
