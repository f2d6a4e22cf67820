//! Runs one op on the real queue through the library's own calls, and makes the model
//! follow: what the model must do it does itself and the check compares; where the real
//! queue chooses (a fetch), the choice is checked against what is allowed, then taken.

use crate::check;
use crate::common::Ctx;
use crate::ops::{Op, Shape};
use crate::reference::{Job, Model, Place};
use std::time::Duration;
use weir::metrics::DeferReason;
use weir::queue::functions;
use weir::queue::retry_policy::DeferralBudget;
use weir::queue::scripts::{self, RunHistory, Settle, StartMarks};
use weir::{NewJob, Priority};

/// The consumer's tag in start marks.
pub(crate) const TAG: &str = "c1";
pub(crate) const HOUR_MS: u64 = 3_600_000;
/// The lease length the runs' starts are counted back from (settle's and reclaim's).
pub(crate) const LEASE_MS: u64 = 1000;
/// Every settle records its runs in their jobs' history, as a consumer's does.
pub(crate) const HISTORY: Option<RunHistory<'static>> = Some(RunHistory {
    worker: TAG,
    lease_ms: LEASE_MS,
});

/// One case's world: the queue, its model, and a visibility that grows with every fetch
/// so that no two leases ever share a token.
pub(crate) struct World {
    pub(crate) ctx: Ctx,
    pub(crate) model: Model,
    pub(crate) fetches: u64,
    /// The batch leases fetched and not yet acked or split: name -> the ids among its
    /// items (for its batch ack).
    pub(crate) batches: std::collections::BTreeMap<String, Vec<String>>,
    /// A FIXED BUG, off in every run: a per-key concurrency set while jobs of the key
    /// were leased did not count those leases (a key's leased set held only leases taken
    /// while a limit applied), so a fetch could lease past the limit until they ended.
    /// fetch.lua now adds them when per-key limits first apply (`seed`). With this on,
    /// the per-key check counts only the leases taken under a limit (the old rule);
    /// `regressions::key_limit_counts_the_leases_taken_before_it` guards the fix.
    pub(crate) uncounted_leases: bool,
    /// A FIXED BUG, off in every run: an entry left on a key's parked list by a job that
    /// left delayed some other way (it came due, was run now, was parked again) brought
    /// the job back from delayed when a slot of the key freed, even once it was delayed
    /// for another reason (a retry's backoff). Parked jobs now wait at a score no due job
    /// has, and fetch.lua brings back only those. With this on, a fetch may take a
    /// delayed job found on a parked list (the old rule);
    /// `regressions::a_stale_parked_entry_cuts_a_retry_backoff_short` guards the fix.
    pub(crate) stale_parked: bool,
    /// The last settle call, for `Op::Replay`.
    pub(crate) last_call: Option<crate::replay::LastCall>,
}

/// The result the model's acks give job `id`.
pub(crate) fn result_of(id: &str) -> String {
    format!("{{\"of\":\"{id}\"}}")
}

pub(crate) fn budget() -> DeferralBudget {
    DeferralBudget {
        max_deferrals: crate::reference::MAX_DEFERRALS,
        max_age: Duration::from_secs(86_400),
    }
}

pub(crate) fn priority(p: usize) -> Priority {
    [Priority::High, Priority::Normal, Priority::Low][p]
}

impl World {
    /// A world on `ctx`'s fresh queue, with an empty model.
    pub(crate) fn new(ctx: Ctx) -> Self {
        Self {
            ctx,
            model: Model::default(),
            fetches: 0,
            batches: Default::default(),
            uncounted_leases: false,
            stale_parked: false,
            last_call: None,
        }
    }

    /// Runs `op`, then checks the queue; an error says what broke.
    pub(crate) async fn step(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Fetch { n } => {
                let before = match self.stale_parked {
                    true => Some(check::read(&self.ctx).await?),
                    false => None,
                };
                self.fetch(*n as usize, before.as_ref(), false).await?
            }
            Op::FetchBatch { n } => self.fetch(*n as usize, None, true).await?,
            _ => self.apply(op).await?,
        }
        let real = check::read(&self.ctx).await?;
        check::internal(&real, self.model.purged, self.model.keep)?;
        check::kept(&real, &mut self.model)?;
        check::against(&real, &self.model)
    }

    async fn apply(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Enqueue {
                priority: p,
                delayed,
                id,
                key,
                unique,
                max_attempts,
                large,
            } => {
                let shape = Shape { delayed, large };
                self.enqueue(p as usize, shape, id, key, unique, max_attempts as u32)
                    .await?
            }
            Op::Bulk { n, key, compact } => {
                let max = if compact { 5 } else { 2 };
                let jobs = (0..n).map(|_| {
                    let j = NewJob::new("k", &serde_json::json!({"n": 1}))
                        .unwrap()
                        .max_attempts(max);
                    match key {
                        Some(k) => j.key(format!("k{k}")),
                        None => j,
                    }
                });
                let before = self.ids_in_queue().await?;
                self.ctx
                    .producer()
                    .compact_envelopes(compact)
                    .enqueue_bulk(jobs.collect::<Vec<_>>())
                    .await
                    .map_err(|e| e.to_string())?;
                // generated ids: the new ones are those the queue holds now and did not
                for id in self.ids_in_queue().await? {
                    if !before.contains(&id) && !self.model.jobs.contains_key(&id) {
                        self.model.add(id, Job::new(1, key, max));
                    }
                }
            }
            Op::Fetch { .. } | Op::FetchBatch { .. } => unreachable!("fetch runs with the state before it"),
            Op::AckBatch(pick) => self.ack_batch(pick).await?,
            Op::Replay => self.replay().await?,
            Op::Ack(_) | Op::Retry { .. } | Op::Fail(_) | Op::Defer { .. } => self.settle_op(op).await?,
            Op::Start(pick) => self.start(pick).await?,
            Op::Extend(_) | Op::Expire(_) | Op::Die | Op::Advance => self.lease_op(op).await?,
            _ => self.admin_op(op).await?,
        }
        Ok(())
    }

    /// Settles a held lease, current or stale: ack, retry, dead-letter, defer.
    async fn settle_op(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Ack(pick) => {
                let Some(h) = self.take_one(pick).await? else {
                    return Ok(());
                };
                let ended = [h.name.clone()];
                let marks = StartMarks {
                    tag: TAG,
                    started: &[],
                    ended: if h.started { &ended } else { &[] },
                };
                // every other ack carries a result: kept with the job if the queue keeps
                // completed jobs (check.rs's internal: results only of kept jobs, each its own)
                let (id, token) = (h.name.clone(), h.token);
                let item = match pick % 2 {
                    0 => Settle::AckResult {
                        id,
                        token,
                        result: result_of(&h.id),
                    },
                    _ => Settle::Ack { id, token },
                };
                let got = self.settle(&[], &[item], marks, HISTORY).await?;
                let missed = !got.missed.is_empty() || got.missed_inline > 0;
                self.settled(&h, missed, |m, id| m.ack(id))?;
            }
            Op::Retry { pick, now } => {
                let Some(h) = self.take_one(pick).await? else {
                    return Ok(());
                };
                let p = self.model.jobs[&h.id].priority;
                let delay_ms = if now { 0 } else { HOUR_MS };
                let item = Settle::Retry {
                    id: h.name.clone(),
                    token: h.token,
                    priority: priority(p),
                    delay_ms,
                    error: "boom".into(),
                };
                let got = self.settle(&[], &[item], StartMarks::default(), HISTORY).await?;
                self.settled(&h, !got.missed.is_empty(), |m, id| m.retry(id, now))?;
            }
            Op::Fail(pick) => {
                let Some(h) = self.take_one(pick).await? else {
                    return Ok(());
                };
                let item = Settle::Dead {
                    id: h.name.clone(),
                    token: h.token,
                    reason: "bad".into(),
                };
                let got = self.settle(&[], &[item], StartMarks::default(), HISTORY).await?;
                self.settled(&h, !got.missed.is_empty(), |m, id| m.bury(id))?;
            }
            Op::Defer { pick, now } => {
                let Some(h) = self.take_one(pick).await? else {
                    return Ok(());
                };
                let p = self.model.jobs[&h.id].priority;
                let delay_ms = if now { 0 } else { HOUR_MS };
                let item = Settle::Defer {
                    id: h.name.clone(),
                    token: h.token,
                    priority: priority(p),
                    delay_ms,
                    reason: "busy".into(),
                    cause: DeferReason::Backpressure,
                    budget: budget(),
                };
                let got = self.settle(&[], &[item], StartMarks::default(), HISTORY).await?;
                self.settled(&h, !got.missed.is_empty(), |m, id| {
                    m.defer(id, Place::Delayed, now, crate::reference::BACKPRESSURE)
                })?;
            }
            _ => unreachable!("not a settle"),
        }
        Ok(())
    }

    /// Leases and time: extend, expire and reclaim, a consumer's death, delayed jobs due.
    async fn lease_op(&mut self, op: &Op) -> Result<(), String> {
        let (mut c, keys) = (self.ctx.c(), self.ctx.keys.clone());
        match *op {
            Op::Extend(pick) => {
                let Some(h) = self.pick_one(pick).await? else {
                    return Ok(());
                };
                let (_, lost) = scripts::extend(&mut c, &keys, HOUR_MS, &[(h.name.as_str(), h.token)])
                    .await
                    .map_err(|e| e.to_string())?;
                if lost.is_empty() != self.model.current(&h) {
                    return Err(format!(
                        "extend of {}: lost {lost:?}, current {}",
                        h.id,
                        self.model.current(&h)
                    ));
                }
            }
            Op::Expire(pick) => {
                if let Some(h) = self.pick(pick).cloned()
                    && self.model.current(&h)
                {
                    match self.live_batch(&h).await {
                        // a batch expires whole: every job of it the consumer holds
                        Some(name) => {
                            let names = self.batch_items(&name).await;
                            self.expire(&names, &[name]).await?
                        }
                        None => self.expire(&[h.name], &[]).await?,
                    }
                }
            }
            Op::Die => {
                let mut names: Vec<String> =
                    self.ctx.snapshot().await.lease.into_iter().map(|l| l.0).collect();
                let mut batches = Vec::new();
                for (name, _) in crate::check::batches(&self.ctx).await {
                    names.extend(self.batch_items(&name).await);
                    batches.push(name);
                }
                self.expire(&names, &batches).await?;
                self.model.held.clear();
                self.batches.clear();
            }
            Op::Advance => {
                for p in 0..3 {
                    let key = &keys.all()[3 + p];
                    let ids: Vec<String> = redis::cmd("ZRANGE")
                        .arg(key)
                        .arg(0)
                        .arg(-1)
                        .query_async(&mut c)
                        .await
                        .unwrap();
                    for id in ids {
                        let _: () = redis::cmd("ZADD")
                            .arg(key)
                            .arg("XX")
                            .arg(1)
                            .arg(&id)
                            .query_async(&mut c)
                            .await
                            .unwrap();
                    }
                }
                self.model.advance();
            }
            _ => unreachable!("not a lease op"),
        }
        Ok(())
    }

    /// The operator's calls: delete, run-now, dead-letter requeue and purge, limits,
    /// pause, and a flush of the scripts and the Functions library.
    async fn admin_op(&mut self, op: &Op) -> Result<(), String> {
        let (mut c, keys) = (self.ctx.c(), self.ctx.keys.clone());
        match *op {
            Op::Delete(pick) => {
                let Some(id) = self.any_id(pick) else {
                    return Ok(());
                };
                let got = scripts::jobs_delete(&mut c, &keys, false, std::slice::from_ref(&id))
                    .await
                    .map_err(|e| e.to_string())?;
                let want = self.model.delete(&id);
                if got != [(id.clone(), want.to_owned())] {
                    return Err(format!("delete {id}: {got:?}, the model says {want}"));
                }
            }
            Op::RunNow(pick) => {
                let Some(id) = self.any_id(pick) else {
                    return Ok(());
                };
                let got = scripts::job_run_now(&mut c, &keys, &id)
                    .await
                    .map_err(|e| e.to_string())?;
                let want = self.model.run_now(&id);
                if got != want {
                    return Err(format!("run-now {id}: {got}, the model says {want}"));
                }
            }
            Op::Requeue => {
                let (n, _) = scripts::dlq_requeue(&mut c, &keys, 1000, &[])
                    .await
                    .map_err(|e| e.to_string())?;
                let want = self.model.requeue();
                if n != want {
                    return Err(format!("requeue: {n}, the model says {want}"));
                }
            }
            Op::Purge => {
                let n = scripts::dlq_purge(&mut c, &keys, 1000)
                    .await
                    .map_err(|e| e.to_string())?;
                let want = self.model.purge();
                if n != want {
                    return Err(format!("purge: {n}, the model says {want}"));
                }
            }
            Op::Limits { global, per_key } => self.limits(global, per_key).await?,
            Op::Keep(count) => self.keep(count).await?,
            Op::Pause(on) => {
                scripts::pause(&mut c, &keys, on)
                    .await
                    .map_err(|e| e.to_string())?;
                self.model.paused = on;
            }
            Op::Flush => {
                let _: () = redis::cmd("FUNCTION")
                    .arg("FLUSH")
                    .query_async(&mut c)
                    .await
                    .unwrap();
                let _: () = redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query_async(&mut c)
                    .await
                    .unwrap();
                let info = functions::ensure(&mut c).await.map_err(|e| e.to_string())?;
                if info != Some(functions::LibraryInfo::ours()) {
                    return Err(format!("after a flush the library in force is {info:?}"));
                }
            }
            _ => unreachable!("not an admin op"),
        }
        Ok(())
    }
}
