//! The ops of `run.rs` that need more than a call: enqueue (refusals), fetch (the choices
//! the real queue makes, checked against the limits and what may be fetched), settling a
//! held lease (current or stale), start marks, expiry and reclaim, limit changes.

use crate::check::{self, Real, id_of};
use crate::ops::Shape;
use crate::reference::{Held, Job, Mark, Place};
use crate::run::{HOUR_MS, LEASE_MS, TAG, World, budget, priority};
use std::time::Duration;
use weir::queue::scripts::{self, StartMarks};
use weir::queue::settings::{Cleared, Settings};
use weir::{Error, NewJob};

fn err(e: weir::Error) -> String {
    e.to_string()
}

impl World {
    /// `Producer::enqueue` of one job; a refusal must be the model's.
    pub(crate) async fn enqueue(
        &mut self,
        p: usize,
        Shape { delayed, large }: Shape,
        id: Option<u8>,
        key: Option<u8>,
        unique: Option<u8>,
        max: u32,
    ) -> Result<(), String> {
        let id = id.map(|i| format!("x{i}"));
        let unique = unique.map(|u| format!("u{u}"));
        let payload = match large {
            true => serde_json::json!({"n": 1, "pad": "x".repeat(scripts::INLINE_MAX_BYTES)}),
            false => serde_json::json!({"n": 1}),
        };
        let mut job = NewJob::new("k", &payload)
            .unwrap()
            .priority(priority(p))
            .max_attempts(max);
        if let Some(id) = &id {
            job = job.id(id.clone());
        }
        if let Some(k) = key {
            job = job.key(format!("k{k}"));
        }
        if let Some(u) = &unique {
            job = job.unique_for(Duration::from_secs(3600)).unique_key(u.clone());
        }
        if delayed {
            job = job.delay(Duration::from_secs(3600));
        }
        let refused = self.model.refuses(id.as_deref(), unique.as_deref());
        match self.ctx.producer().enqueue(job).await {
            Ok(_) if refused => Err(format!(
                "enqueue of {id:?} / {unique:?} taken, the model refuses it"
            )),
            Ok(new) => {
                let mut j = Job::new(p, key, max);
                j.unique = unique;
                if delayed {
                    j.place = Some(Place::Delayed);
                }
                self.model.add(new, j);
                Ok(())
            }
            Err(Error::Duplicate(_)) if refused => Ok(()),
            Err(e) => Err(format!("enqueue of {id:?} / {unique:?}: {e}")),
        }
    }

    /// A fetch of up to `n`: what it returns must be fetchable and within the limits; the
    /// jobs it moved without returning (held back by their key) are allowed moves.
    /// `before` (the state before the fetch) is given only with `World::stale_parked` on:
    /// a delayed job on a parked list then may be fetched, even if the model did not park
    /// it.
    /// `batch`: as a batch lease where the queue allows it.
    pub(crate) async fn fetch(&mut self, n: usize, before: Option<&Real>, batch: bool) -> Result<(), String> {
        self.fetches += 1;
        let vis = HOUR_MS + self.fetches * 1000;
        let name = format!("b{}", self.fetches);
        let got = scripts::fetch_batch(
            &mut self.ctx.c(),
            &self.ctx.keys,
            n,
            vis,
            false,
            batch.then_some(name.as_str()),
        )
        .await
        .map_err(err)?;
        if let Some(b) = &got.batch {
            if !batch || b.name != name || b.len != got.jobs.len() {
                return Err(format!(
                    "fetch of {n} (batch asked: {batch}) leased batch {b:?} of {} jobs",
                    got.jobs.len()
                ));
            }
            self.batches.insert(name.clone(), b.ids.clone());
        }
        if self.model.paused {
            return match got.jobs.is_empty() && got.paused {
                true => Ok(()),
                false => Err("a paused queue handed out jobs".into()),
            };
        }
        let s = got.suspects;
        let names: Vec<String> = got.jobs.iter().map(|j| j.name.clone()).collect();
        let ids: Vec<String> = names.iter().map(|nm| id_of(nm)).collect();
        if s > 1 || names.len() > n {
            return Err(format!("fetch of {n} gave {} jobs, {s} suspects", names.len()));
        }
        self.fetch_limits(&ids, s)?;
        let parked: Vec<&String> = before.iter().flat_map(|b| b.parked.values().flatten()).collect();
        for (i, (name, id)) in names.iter().zip(&ids).enumerate() {
            let j = self.model.jobs.get(id).ok_or(format!("fetched {id}, unknown"))?;
            let ok = match j.place {
                Some(Place::Suspect) => i < s,
                Some(Place::Ready) => i >= s,
                Some(Place::Delayed) => i >= s && (j.free || parked.contains(&id)),
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "fetched {id} (suspect: {}), which is {:?}",
                    i < s,
                    j.place
                ));
            }
            let keyed = self.model.per_key.is_some();
            let j = self.model.job(id);
            j.place = Some(Place::Leased);
            j.token = got.deadline_ms;
            j.mark = Mark::None;
            j.counted = keyed;
            self.model.held.push(Held {
                name: name.clone(),
                id: id.clone(),
                token: got.deadline_ms,
                suspect: i < s,
                started: false,
                batch: got.batch.as_ref().map(|b| b.name.clone()),
            });
        }
        let parked: Vec<String> = parked.into_iter().cloned().collect();
        let after = check::read(&self.ctx).await?;
        self.fetch_moves(&ids, &after, &parked)
    }

    /// The global and per-key concurrency: a fetch adds no lease past them (suspects are
    /// never held back by their key).
    fn fetch_limits(&self, ids: &[String], s: usize) -> Result<(), String> {
        if let Some(g) = self.model.global {
            let free = g.saturating_sub(self.model.leased(None, false));
            if ids.len() as u64 > free {
                return Err(format!(
                    "fetched {} with {free} of global concurrency {g} free",
                    ids.len()
                ));
            }
        }
        let Some(kc) = self.model.per_key else {
            return Ok(());
        };
        for k in ["k0", "k1", "k2"] {
            let new = ids[s..]
                .iter()
                .filter(|id| self.model.jobs[*id].key.as_deref() == Some(k))
                .count() as u64;
            let leased = self.model.leased(Some(k), self.uncounted_leases);
            if new > kc.saturating_sub(leased) {
                return Err(format!(
                    "fetched {new} of key {k} with {leased} leased, its limit {kc}"
                ));
            }
        }
        Ok(())
    }

    /// Jobs a fetch moved without leasing them: due ones promoted, ones held back by
    /// their key's limit parked (delayed); nothing else may move (but for the ids on
    /// `parked`: see `World::stale_parked`).
    fn fetch_moves(&mut self, fetched: &[String], after: &Real, parked: &[String]) -> Result<(), String> {
        let keyed = self.model.per_key.is_some();
        for (id, j) in self.model.jobs.iter_mut() {
            if fetched.contains(id) {
                continue;
            }
            let Some(place) = j.place else { continue };
            let now = after.at.get(id).map(|a| a.0);
            let ok = match (place, now) {
                (a, Some(b)) if a == b => true,
                (Place::Ready, Some(Place::Delayed)) => keyed && j.key.is_some(),
                (Place::Delayed, Some(Place::Ready)) => j.free || parked.contains(id),
                _ => false,
            };
            if !ok {
                return Err(format!("fetch moved {id} from {place:?} to {now:?}"));
            }
            if place == Place::Ready && now == Some(Place::Delayed) {
                // parked: a later fetch may take it back as soon as its key has a slot
                j.free = true;
            }
            j.place = now;
        }
        Ok(())
    }

    /// The consumer's lease number `pick` (None when it holds none).
    pub(crate) fn pick(&self, pick: u8) -> Option<&Held> {
        let n = self.model.held.len();
        (n > 0).then(|| &self.model.held[pick as usize % n])
    }

    /// The batch `h` was fetched in, if the consumer still takes it to be whole and it is
    /// still leased as one (a delete, a keep or per-key limits may have split it: the
    /// consumer learns it from a missed batch ack or split, and the jobs stay held).
    pub(crate) async fn live_batch(&mut self, h: &Held) -> Option<String> {
        let name = h.batch.clone()?;
        let live = crate::check::batches(&self.ctx)
            .await
            .iter()
            .any(|(b, _)| *b == name);
        if live { Some(name) } else { None }
    }

    /// The items (lease names) of batch `name`.
    pub(crate) async fn batch_items(&self, name: &str) -> Vec<String> {
        redis::cmd("LRANGE")
            .arg(self.ctx.keys.batch(name))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.ctx.c())
            .await
            .unwrap()
    }

    /// The consumer stops taking `h`'s batch to be whole: it splits it (`scripts::split`),
    /// as before any op on one of its jobs, and holds its jobs one by one.
    pub(crate) async fn unbatch(&mut self, h: &Held) -> Result<(), String> {
        let Some(name) = h.batch.clone() else {
            return Ok(());
        };
        let live = self.live_batch(h).await.is_some();
        let missed = scripts::split(&mut self.ctx.c(), &self.ctx.keys, &[(name.as_str(), h.token)])
            .await
            .map_err(err)?;
        if missed.is_empty() != live {
            return Err(format!("split of batch {name} (live: {live}): missed {missed:?}"));
        }
        self.forget_batch(&name);
        Ok(())
    }

    /// The consumer holds the jobs of batch `name` one by one from now on.
    fn forget_batch(&mut self, name: &str) {
        for held in &mut self.model.held {
            if held.batch.as_deref() == Some(name) {
                held.batch = None;
            }
        }
        self.batches.remove(name);
    }

    /// [`World::pick`], its batch split first.
    pub(crate) async fn pick_one(&mut self, pick: u8) -> Result<Option<Held>, String> {
        let Some(mut h) = self.pick(pick).cloned() else {
            return Ok(None);
        };
        self.unbatch(&h).await?;
        h.batch = None;
        Ok(Some(h))
    }

    /// [`World::take`], its batch split first.
    pub(crate) async fn take_one(&mut self, pick: u8) -> Result<Option<Held>, String> {
        if self.pick_one(pick).await?.is_none() {
            return Ok(None);
        }
        Ok(self.take(pick))
    }

    /// A batch ack of held batch number `pick` (of the batches the consumer takes to be
    /// whole): applied, every job of it must be a current lease and is acked; missed
    /// (split meanwhile: by a delete, kept completed jobs, per-key limits; or expired),
    /// its jobs are acked one by one.
    pub(crate) async fn ack_batch(&mut self, pick: u8) -> Result<(), String> {
        let names: Vec<String> = self.batches.keys().cloned().collect();
        if names.is_empty() {
            return Ok(());
        }
        let name = names[pick as usize % names.len()].clone();
        let ids = self.batches.remove(&name).unwrap_or_default();
        let mine: Vec<Held> = self
            .model
            .held
            .iter()
            .filter(|h| h.batch.as_deref() == Some(name.as_str()))
            .cloned()
            .collect();
        self.model
            .held
            .retain(|h| h.batch.as_deref() != Some(name.as_str()));
        let token = mine
            .first()
            .map(|h| h.token)
            .ok_or(format!("batch {name} with no job held"))?;
        let ack = scripts::BatchAck {
            name: name.clone(),
            token,
            ids,
        };
        let got = self
            .settle(&[ack], &[], StartMarks::default(), crate::run::HISTORY)
            .await?;
        if got.missed_batches.is_empty() {
            for h in &mine {
                self.settled(h, false, |m, id| m.ack(id))?;
            }
            return Ok(());
        }
        for h in &mine {
            let item = scripts::Settle::Ack {
                id: h.name.clone(),
                token: h.token,
            };
            let one = self
                .settle(&[], &[item], StartMarks::default(), crate::run::HISTORY)
                .await?;
            self.settled(h, !one.missed.is_empty() || one.missed_inline > 0, |m, id| {
                m.ack(id)
            })?;
        }
        Ok(())
    }

    /// Takes lease number `pick` out of the consumer's hands (it settles it).
    pub(crate) fn take(&mut self, pick: u8) -> Option<Held> {
        let n = self.model.held.len();
        (n > 0).then(|| self.model.held.remove(pick as usize % n))
    }

    /// After a settle of `h`: a current lease is acted on (`f` moves the model), a stale
    /// one is reported missed and changes nothing.
    pub(crate) fn settled(
        &mut self,
        h: &Held,
        missed: bool,
        f: impl FnOnce(&mut crate::reference::Model, &str),
    ) -> Result<(), String> {
        match (self.model.current(h), missed) {
            (true, false) => {
                f(&mut self.model, &h.id);
                Ok(())
            }
            (false, true) => Ok(()),
            (current, _) => Err(format!(
                "settle of {} (current lease: {current}): missed {missed}",
                h.id
            )),
        }
    }

    /// Start mark of lease number `pick`: `start_suspect` for a suspect, settle's 'S'
    /// otherwise; only a current lease is marked.
    pub(crate) async fn start(&mut self, pick: u8) -> Result<(), String> {
        let Some(h) = self.pick_one(pick).await? else {
            return Ok(());
        };
        let (mut c, keys) = (self.ctx.c(), self.ctx.keys.clone());
        let current = self.model.current(&h);
        if h.suspect {
            let ok = scripts::start_suspect(&mut c, &keys, &h.name, h.token, TAG)
                .await
                .map_err(err)?;
            if ok != current {
                return Err(format!(
                    "start_suspect of {}: {ok}, current lease {current}",
                    h.id
                ));
            }
        } else {
            let started = [(h.name.clone(), h.token)];
            let marks = StartMarks {
                tag: TAG,
                started: &started,
                ended: &[],
            };
            self.settle(&[], &[], marks, None).await?;
        }
        if current {
            self.model.job(&h.id).mark = if h.suspect { Mark::Suspect } else { Mark::Started };
        }
        let n = self.model.held.len();
        self.model.held[pick as usize % n].started = true;
        Ok(())
    }

    /// The leases `names` pass their deadline (their score set in the past) and the
    /// reclaimer runs.
    /// `batches`: batch leases (holding some of `names`) that pass their deadline too.
    pub(crate) async fn expire(&mut self, names: &[String], batches: &[String]) -> Result<(), String> {
        let (mut c, keys) = (self.ctx.c(), self.ctx.keys.clone());
        let lease = keys.lease().to_owned();
        let expired = batches
            .iter()
            .map(|b| (keys.batches(), b))
            .chain(names.iter().map(|n| (lease.clone(), n)));
        for (key, member) in expired {
            let _: () = redis::cmd("ZADD")
                .arg(key)
                .arg("XX")
                .arg(1)
                .arg(member)
                .query_async(&mut c)
                .await
                .unwrap();
        }
        for name in batches {
            self.forget_batch(name);
        }
        // (an extended lease's token is kept aside; the others' was their score)
        let tokens = self.ctx.snapshot().await.lease_tokens;
        // as a consumer's reclaimer does: the runs its consumer never ended are recorded
        let got = scripts::reclaim_recorded(&mut c, &keys, 1000, budget(), Some(LEASE_MS))
            .await
            .map_err(err)?;
        let mut n = 0;
        let mut ran = Vec::new();
        for name in names {
            let id = id_of(name);
            let Some(j) = self
                .model
                .jobs
                .get(&id)
                .filter(|j| j.place == Some(Place::Leased))
            else {
                continue;
            };
            if j.mark != Mark::None {
                // (the score set above, 1, is the token of a lease never extended)
                let token = tokens
                    .get(name)
                    .map_or(Ok(1), |t| t.parse::<u64>())
                    .map_err(|e| e.to_string())?;
                ran.push((id.clone(), token));
            }
            self.model.reclaim(&id);
            n += 1;
        }
        if got.total() != n {
            return Err(format!("reclaim took {} leases, the model {n}", got.total()));
        }
        for (id, token) in ran {
            self.lost_run_recorded(&id, token).await?;
        }
        Ok(())
    }

    /// Job `id`'s lease of `token` expired while it ran: its history's newest run is that
    /// one (`expired`, or `dead` when the reclaim dead-lettered it), by the consumer that
    /// ran it, from its lease's start (the token less the lease length) to its deadline
    /// (1: `expire` set it so), unless the job has gone since (a dead-letter trim).
    async fn lost_run_recorded(&self, id: &str, token: u64) -> Result<(), String> {
        let s = self.ctx.snapshot().await;
        if !s.jobs.contains_key(id) {
            return Ok(());
        }
        let h = s
            .history
            .get(id)
            .ok_or(format!("{id} ran and was reclaimed, no history"))?;
        let runs: Vec<serde_json::Value> = serde_json::from_str(h).map_err(|e| e.to_string())?;
        let last = runs.last().ok_or(format!("{id}: an empty history"))?;
        let dead = self.model.jobs.get(id).and_then(|j| j.place) == Some(Place::Dead);
        let want = if dead { "dead" } else { "expired" };
        let ok = last["outcome"] == want
            && last["worker"] == crate::run::TAG
            && last["start"] == token.saturating_sub(LEASE_MS)
            && last["end"] == 1;
        if !ok {
            return Err(format!(
                "{id}'s lease {token} expired while it ran ({want}): history {h}"
            ));
        }
        Ok(())
    }

    /// `weir limits set` / `weir limits clear` of the global and per-key concurrency.
    pub(crate) async fn limits(&mut self, global: Option<u8>, per_key: Option<u8>) -> Result<(), String> {
        let (mut c, q) = (self.ctx.c(), self.ctx.queue.clone());
        let set = Settings {
            global_concurrency: global.map(u64::from),
            key_concurrency: per_key.map(u64::from),
            ..Settings::default()
        };
        Settings::update(&mut c, &q, &set).await.map_err(err)?;
        let mut cleared = Vec::new();
        if global.is_none() {
            cleared.push(Cleared::GlobalConcurrency);
        }
        if per_key.is_none() {
            cleared.push(Cleared::PerKey);
        }
        Settings::clear_some(&mut c, &q, &cleared).await.map_err(err)?;
        self.model.global = global.map(u64::from);
        self.model.per_key = per_key.map(u64::from);
        Ok(())
    }

    /// Sets how many completed jobs the queue keeps (None: none), then runs a reclaim,
    /// as housekeeping does each second, which trims them to it (and, with no expired
    /// lease, moves nothing else).
    pub(crate) async fn keep(&mut self, count: Option<u8>) -> Result<(), String> {
        let (mut c, q, keys) = (self.ctx.c(), self.ctx.queue.clone(), self.ctx.keys.clone());
        match count {
            Some(n) => {
                let set = Settings {
                    keep_completed_count: Some(u64::from(n)),
                    ..Settings::default()
                };
                Settings::update(&mut c, &q, &set).await.map_err(err)?;
            }
            None => Settings::clear_some(&mut c, &q, &[Cleared::KeepCompleted])
                .await
                .map_err(err)?,
        }
        self.model.keep = count.map(u64::from);
        let got = scripts::reclaim(&mut c, &keys, 1000, budget())
            .await
            .map_err(err)?;
        if got.returned + got.suspects + got.dead > 0 {
            return Err(format!("a reclaim with no lease expired moved jobs: {got:?}"));
        }
        Ok(())
    }

    /// Id number `pick` of the ids the model has seen (done ones too).
    pub(crate) fn any_id(&self, pick: u8) -> Option<String> {
        let n = self.model.jobs.len();
        (n > 0).then(|| self.model.jobs.keys().nth(pick as usize % n).unwrap().clone())
    }

    /// The ids in the queue now.
    pub(crate) async fn ids_in_queue(&self) -> Result<Vec<String>, String> {
        Ok(check::read(&self.ctx).await?.at.into_keys().collect())
    }
}
