//! Reading the real queue (every key, by id) and the invariants checked after every step:
//! each job in exactly one place, no record without a job in a place that may have it
//! (run histories and completed jobs kept included), histories and the completed jobs
//! kept within their bounds, counters that conserve, and the real queue equal to the
//! model (place, priority, attempts, deferrals, start marks, unique keys).

use crate::common::{Ctx, State, item_id, snapshot};
use crate::reference::{Mark, Model, Place};
use std::collections::BTreeMap;

/// Where each job of the real queue is, read by id.
pub(crate) struct Real {
    pub(crate) state: State,
    /// id -> (place, priority index for ready and delayed).
    pub(crate) at: BTreeMap<String, (Place, Option<usize>)>,
    /// Parked lists: key -> ids.
    pub(crate) parked: BTreeMap<String, Vec<String>>,
}

/// The fields of an envelope the model follows.
pub(crate) struct Env {
    pub(crate) attempt: u32,
    pub(crate) priority: usize,
    pub(crate) key: Option<String>,
}

/// A compact envelope (`{"id":` first) says attempt 0 and normal priority by leaving
/// them out; a full one says both.
pub(crate) fn envelope(env: &str) -> Env {
    let v: serde_json::Value = serde_json::from_str(env).expect("an envelope is JSON");
    let compact = env.starts_with(r#"{"id":"#);
    let number = |name: &str, implied: u64| match compact {
        true => {
            assert!(v.get(name).is_none(), "a compact envelope has no {name}: {env}");
            implied
        }
        false => v[name].as_u64().unwrap_or_else(|| panic!("{name} in {env}")),
    };
    Env {
        attempt: number("attempt", 0) as u32,
        priority: number("priority", 1) as usize,
        key: v["key"].as_str().map(str::to_owned),
    }
}

/// Reads the queue; fails if a job is in two places at once.
pub(crate) async fn read(ctx: &Ctx) -> Result<Real, String> {
    let mut raw = snapshot(&mut ctx.c(), &ctx.keys).await;
    // the jobs of batch leases are leased at their batch's deadline, as after a split
    for (name, score) in batches(ctx).await {
        let items: Vec<String> = redis::cmd("LRANGE")
            .arg(ctx.keys.batch(&name))
            .arg(0)
            .arg(-1)
            .query_async(&mut ctx.c())
            .await
            .unwrap();
        if items.is_empty() {
            return Err(format!("batch {name} is leased with no jobs"));
        }
        raw.lease.extend(items.into_iter().map(|i| (i, score)));
    }
    let state = raw.by_id();
    let mut at = BTreeMap::new();
    let mut put = |id: &str, place: Place, p: Option<usize>| match at.insert(id.to_owned(), (place, p)) {
        Some(was) => Err(format!("job {id} is both {was:?} and {:?}", (place, p))),
        None => Ok(()),
    };
    for p in 0..3 {
        for id in &state.ready[p] {
            put(id, Place::Ready, Some(p))?;
        }
        for (id, _) in &state.delayed[p] {
            put(id, Place::Delayed, Some(p))?;
        }
    }
    for (id, _) in &state.lease {
        put(id, Place::Leased, None)?;
    }
    for id in &state.suspects {
        put(id, Place::Suspect, None)?;
    }
    for (id, _) in &state.dead {
        put(id, Place::Dead, None)?;
    }
    for (id, _) in &state.done {
        put(id, Place::Done, None)?;
    }
    let prefix = ctx.keys.key_limits_prefix();
    let mut parked = BTreeMap::new();
    for k in ["k0", "k1", "k2"] {
        let ids: Vec<String> = redis::cmd("LRANGE")
            .arg(format!("{prefix}parked:{k}"))
            .arg(0)
            .arg(-1)
            .query_async(&mut ctx.c())
            .await
            .unwrap();
        parked.insert(k.to_owned(), ids);
    }
    Ok(Real { state, at, parked })
}

/// The live batch leases: name, deadline.
pub(crate) async fn batches(ctx: &Ctx) -> Vec<(String, u64)> {
    redis::cmd("ZRANGE")
        .arg(ctx.keys.batches())
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut ctx.c())
        .await
        .unwrap()
}

/// Most runs a history keeps by default, and most bytes one run may take in it: its
/// message is cut to 512 bytes and its worker to 128 (lib.lua's run_history).
const HISTORY_RUNS: usize = 5;
const RUN_BYTES: usize = 800;

/// The invariants of the real queue alone; `keep`: how many completed jobs the queue
/// keeps (None: none).
pub(crate) fn internal(real: &Real, purged: u64, keep: Option<u64>) -> Result<(), String> {
    let s = &real.state;
    for id in s.jobs.keys() {
        if !real.at.contains_key(id) {
            return Err(format!("job {id} has a record but no place"));
        }
    }
    for id in real.at.keys() {
        if !s.jobs.contains_key(id) {
            return Err(format!("job {id} has a place but no envelope"));
        }
    }
    let leased = |id: &String| real.at.get(id).map(|a| a.0) == Some(Place::Leased);
    if let Some(id) = s.started.keys().find(|id| !leased(id)) {
        return Err(format!("start mark of {id}, which is not leased"));
    }
    if let Some(id) = s.lease_tokens.keys().find(|id| !leased(id)) {
        return Err(format!("lease token of {id}, which is not leased"));
    }
    let deferred = s.deferrals.keys();
    for (what, mut ids) in [
        ("deferral record", deferred.collect::<Vec<_>>()),
        ("last error", s.errors.keys().collect()),
    ] {
        if let Some(id) = ids.drain(..).find(|id| !s.jobs.contains_key(*id)) {
            return Err(format!("{what} of {id}, which has no envelope"));
        }
    }
    for (id, h) in &s.history {
        if !s.jobs.contains_key(id) {
            return Err(format!("run history of {id}, which has no envelope"));
        }
        let runs: Vec<serde_json::Value> =
            serde_json::from_str(h).map_err(|e| format!("history of {id} is not a JSON array: {e}: {h}"))?;
        if runs.is_empty() || runs.len() > HISTORY_RUNS || h.len() > HISTORY_RUNS * RUN_BYTES {
            return Err(format!(
                "history of {id} holds {} runs in {} bytes",
                runs.len(),
                h.len()
            ));
        }
    }
    for (id, r) in &s.results {
        if !s.done.iter().any(|(d, _)| d == id) {
            return Err(format!("a result of {id}, which is not a completed job kept"));
        }
        if *r != crate::run::result_of(id) {
            return Err(format!("{id} keeps the result {r}, not its own"));
        }
    }
    let kept = s.done.len() as u64;
    if kept > keep.unwrap_or(0) {
        return Err(format!("{kept} completed jobs kept, the setting allows {keep:?}"));
    }
    let c = |name: &str| s.counters.get(name).copied().unwrap_or(0);
    // (a completed job kept is counted as acked already)
    let out = c("acked") + c("deleted") + c("trimmed") + purged + real.at.len() as u64 - kept;
    if c("enqueued") != out {
        return Err(format!(
            "counters do not conserve: enqueued {} != acked {} + deleted {} + trimmed {} + purged {purged} + in places {}",
            c("enqueued"),
            c("acked"),
            c("deleted"),
            c("trimmed"),
            real.at.len()
        ));
    }
    for (k, ids) in &real.parked {
        for id in ids {
            let key = s.jobs.get(id).map(|e| envelope(e).key);
            if key.as_ref().is_some_and(|got| got.as_deref() != Some(k.as_str())) {
                return Err(format!("job {id} parked under key {k} holds key {key:?}"));
            }
        }
    }
    Ok(())
}

/// The completed jobs the queue kept against the model's: each one kept is done in the
/// model; a done one the queue no longer holds was trimmed (the queue picks which, within
/// its setting, which `internal` checks), and leaves the model too.
pub(crate) fn kept(real: &Real, model: &mut Model) -> Result<(), String> {
    for (id, _) in &real.state.done {
        if model.jobs.get(id).and_then(|j| j.place) != Some(Place::Done) {
            return Err(format!(
                "job {id} is kept as completed, the model has it {:?}",
                model.jobs.get(id).map(|j| j.place)
            ));
        }
    }
    for (id, j) in model.jobs.iter_mut() {
        if j.place == Some(Place::Done) && !real.at.contains_key(id) {
            j.place = None;
        }
    }
    Ok(())
}

/// The real queue against the model, job by job.
pub(crate) fn against(real: &Real, model: &Model) -> Result<(), String> {
    let s = &real.state;
    if let Some(id) = real.at.keys().find(|id| !model.jobs.contains_key(*id)) {
        return Err(format!("job {id} is in the queue but not in the model"));
    }
    for (id, j) in &model.jobs {
        let got = real.at.get(id);
        if got.map(|a| a.0) != j.place {
            return Err(format!(
                "job {id}: the model has it {:?}, the queue {got:?}",
                j.place
            ));
        }
        if j.place.is_none() {
            continue;
        }
        if let Some((_, Some(p))) = got
            && *p != j.priority
        {
            return Err(format!("job {id} of priority {} is in list {p}", j.priority));
        }
        let env = envelope(&s.jobs[id]);
        if env.priority != j.priority {
            return Err(format!(
                "job {id}: priority {} in its envelope, {} in the model",
                env.priority, j.priority
            ));
        }
        if env.attempt != j.attempts {
            return Err(format!(
                "job {id}: attempt {} in the queue, {} charged",
                env.attempt, j.attempts
            ));
        }
        let deferrals = s.deferrals.get(id).map_or(0, |d| d.0) as u32;
        if deferrals != j.deferrals {
            return Err(format!(
                "job {id}: {deferrals} deferrals in the queue, {} in the model",
                j.deferrals
            ));
        }
        if j.place == Some(Place::Leased) {
            token(real, id, j.token)?;
        }
        let mark = match s.started.get(id) {
            None => Mark::None,
            Some(t) if t.ends_with(":s") => Mark::Suspect,
            Some(_) => Mark::Started,
        };
        if mark != j.mark {
            return Err(format!(
                "job {id}: start mark {mark:?} in the queue, {:?} in the model",
                j.mark
            ));
        }
    }
    if s.unique != model.unique {
        return Err(format!(
            "unique keys: queue {:?}, model {:?}",
            s.unique, model.unique
        ));
    }
    if s.paused != model.paused {
        return Err(format!("paused: queue {}, model {}", s.paused, model.paused));
    }
    let enqueued = s.counters.get("enqueued").copied().unwrap_or(0);
    if enqueued != model.enqueued {
        return Err(format!("enqueued counter {enqueued}, model {}", model.enqueued));
    }
    Ok(())
}

/// A lease keeps its fetch's token for its whole life: as its score until it is extended,
/// then in the lease tokens.
fn token(real: &Real, id: &str, token: u64) -> Result<(), String> {
    let score = real.state.lease.iter().find(|l| l.0 == id).map(|l| l.1);
    let kept = real.state.lease_tokens.get(id).map(|t| t.parse::<u64>().ok());
    match (score, kept) {
        (Some(s), None) if s == token => Ok(()),
        (Some(_), Some(Some(t))) if t == token => Ok(()),
        _ => Err(format!(
            "lease of {id}: score {score:?}, kept token {kept:?}, fetched with {token}"
        )),
    }
}

/// The id a lease item names.
pub(crate) fn id_of(name: &str) -> String {
    item_id(name).unwrap_or_else(|| name.to_owned())
}
