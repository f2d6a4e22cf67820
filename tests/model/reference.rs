//! The reference model: a queue in plain Rust, no Redis. Per job: where it is, its attempts
//! and deferrals, its keys, and the lease it holds; for the queue: unique keys held,
//! limits, pause, and the jobs purged (the one way out of the queue no counter records).
//!
//! The model says what each op must do. Where the real queue may choose (which ready jobs
//! a fetch takes, which a key's limit holds back), `check.rs` checks the choice is allowed
//! and the model takes it.

use std::collections::BTreeMap;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Ready,
    /// Delayed (waiting for its due time, or parked for a slot of its key).
    Delayed,
    Leased,
    Suspect,
    Dead,
    /// Completed and kept (the queue keeps completed jobs); the queue may drop it as its
    /// setting allows (check.rs's kept).
    Done,
}

/// A lease's start mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    None,
    /// Started at a consumer (`settle`'s 'S').
    Started,
    /// Started alone, as a suspect (`start_suspect`).
    Suspect,
}

/// One job of the model.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// None once done, deleted or purged.
    pub(crate) place: Option<Place>,
    /// A delayed job a fetch may take out now (it fell due, or its key parked it).
    pub(crate) free: bool,
    pub(crate) attempts: u32,
    pub(crate) max: u32,
    /// Index into the ready lists: 0 high, 1 normal, 2 low.
    pub(crate) priority: usize,
    pub(crate) key: Option<String>,
    pub(crate) unique: Option<String>,
    pub(crate) deferrals: u32,
    /// Of them, by cause (each cause spends its own budget, as `lib.lua`'s `defer` keeps
    /// them): [`BACKPRESSURE`] (settle's defer), [`UNSTARTED`] (reclaim's "never started").
    pub(crate) by_cause: [u32; 2],
    /// The token of its lease, while leased.
    pub(crate) token: u64,
    pub(crate) mark: Mark,
    /// Leased while a per-key concurrency was set: fetch.lua counts a key's leases in its
    /// running set only then (see `World::uncounted_leases`).
    pub(crate) counted: bool,
}

impl Job {
    /// A job just enqueued, ready, of priority index `priority`, key `k<key>`.
    pub(crate) fn new(priority: usize, key: Option<u8>, max: u32) -> Self {
        Self {
            place: Some(Place::Ready),
            free: false,
            attempts: 0,
            max,
            priority,
            key: key.map(|k| format!("k{k}")),
            unique: None,
            deferrals: 0,
            by_cause: [0; 2],
            token: 0,
            mark: Mark::None,
            counted: false,
        }
    }
}

/// A lease as the consumer holds it: it may be stale (reclaimed, deleted) without knowing.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// The lease's name in Redis: the id, or an inline job's envelope.
    pub(crate) name: String,
    pub(crate) id: String,
    pub(crate) token: u64,
    /// Fetched as a suspect.
    pub(crate) suspect: bool,
    pub(crate) started: bool,
    /// The batch lease it was fetched in, while the consumer takes it to be whole.
    pub(crate) batch: Option<String>,
}

/// Deferral causes, as [`Job::by_cause`] counts them.
pub(crate) const BACKPRESSURE: usize = 0;
pub(crate) const UNSTARTED: usize = 1;

/// Most deferrals of one job for one cause (settle's defer, reclaim's "never started").
pub(crate) const MAX_DEFERRALS: u32 = 3;

/// The whole model.
#[derive(Debug, Default)]
pub(crate) struct Model {
    pub(crate) jobs: BTreeMap<String, Job>,
    /// Unique key -> the id holding it.
    pub(crate) unique: BTreeMap<String, String>,
    pub(crate) held: Vec<Held>,
    pub(crate) global: Option<u64>,
    pub(crate) per_key: Option<u64>,
    pub(crate) paused: bool,
    pub(crate) enqueued: u64,
    pub(crate) purged: u64,
    /// How many completed jobs the queue keeps (None: none).
    pub(crate) keep: Option<u64>,
}

impl Model {
    /// The job `id`, which the model must know.
    pub(crate) fn job(&mut self, id: &str) -> &mut Job {
        self.jobs
            .get_mut(id)
            .unwrap_or_else(|| panic!("the model has no job {id}"))
    }

    /// Whether an enqueue of `id` (when chosen) with unique key `unique` must be refused.
    pub(crate) fn refuses(&self, id: Option<&str>, unique: Option<&str>) -> bool {
        let taken = id.is_some_and(|id| self.jobs.get(id).is_some_and(|j| j.place.is_some()));
        taken || unique.is_some_and(|u| self.unique.contains_key(u))
    }

    /// A job enqueued.
    pub(crate) fn add(&mut self, id: String, job: Job) {
        if let Some(u) = &job.unique {
            self.unique.insert(u.clone(), id.clone());
        }
        self.enqueued += 1;
        self.jobs.insert(id, job);
    }

    /// Whether `h` is the current lease of its job.
    pub(crate) fn current(&self, h: &Held) -> bool {
        self.jobs
            .get(&h.id)
            .is_some_and(|j| j.place == Some(Place::Leased) && j.token == h.token)
    }

    /// Job `id` to the dead-letter queue: its deferrals go, its unique key is freed.
    pub(crate) fn bury(&mut self, id: &str) {
        let j = self.job(id);
        j.place = Some(Place::Dead);
        j.deferrals = 0;
        j.by_cause = [0; 2];
        j.mark = Mark::None;
        if let Some(u) = j.unique.clone()
            && self.unique.get(&u).map(String::as_str) == Some(id)
        {
            self.unique.remove(&u);
        }
    }

    /// Settle's ack of a current lease: the job is done, kept while the queue keeps
    /// completed jobs.
    pub(crate) fn ack(&mut self, id: &str) {
        let keep = self.keep.is_some();
        let j = self.job(id);
        j.place = keep.then_some(Place::Done);
        j.mark = Mark::None;
        // (its deferral record goes: the job is done)
        j.deferrals = 0;
        j.by_cause = [0; 2];
    }

    /// Settle's retry: attempt + 1, delayed (`now`: due at once), or dead once spent.
    pub(crate) fn retry(&mut self, id: &str, now: bool) {
        let j = self.job(id);
        j.attempts += 1;
        j.mark = Mark::None;
        if j.attempts >= j.max {
            self.bury(id);
        } else {
            j.place = Some(Place::Delayed);
            j.free = now;
        }
    }

    /// An uncharged return (settle's defer, reclaim's "never started"): to `place`, or
    /// dead once the deferral budget is spent.
    pub(crate) fn defer(&mut self, id: &str, place: Place, free: bool, cause: usize) {
        let j = self.job(id);
        j.mark = Mark::None;
        if j.by_cause[cause] + 1 > MAX_DEFERRALS {
            self.bury(id);
        } else {
            j.deferrals += 1;
            j.by_cause[cause] += 1;
            j.place = Some(place);
            j.free = free;
        }
    }

    /// Reclaim of the expired lease of `id`, by its start mark.
    pub(crate) fn reclaim(&mut self, id: &str) {
        let j = self.job(id);
        match j.mark {
            Mark::None => self.defer(id, Place::Ready, false, UNSTARTED),
            Mark::Started => {
                j.place = Some(Place::Suspect);
                j.mark = Mark::None;
            }
            Mark::Suspect => {
                j.attempts += 1;
                j.mark = Mark::None;
                if j.attempts >= j.max {
                    self.bury(id);
                } else {
                    j.place = Some(Place::Suspect);
                }
            }
        }
    }

    /// `job_run_now` of `id`: the state it answers, and the move.
    pub(crate) fn run_now(&mut self, id: &str) -> &'static str {
        let Some(j) = self.jobs.get_mut(id) else {
            return "missing";
        };
        match j.place {
            None => "missing",
            Some(Place::Leased) => "in_flight",
            Some(Place::Done) => "done",
            Some(Place::Ready | Place::Suspect) => "ready",
            Some(Place::Delayed) => {
                j.place = Some(Place::Ready);
                "delayed"
            }
            Some(Place::Dead) => {
                j.place = Some(Place::Ready);
                j.attempts = 0;
                j.deferrals = 0;
                j.by_cause = [0; 2];
                "dead"
            }
        }
    }

    /// `jobs_delete` of `id`: the state it answers; the job is gone.
    pub(crate) fn delete(&mut self, id: &str) -> &'static str {
        let Some(j) = self.jobs.get_mut(id) else {
            return "missing";
        };
        let state = match j.place {
            None => return "missing",
            Some(Place::Leased) => "in_flight",
            Some(Place::Ready | Place::Suspect) => "ready",
            Some(Place::Delayed) => "delayed",
            Some(Place::Dead) => "dead",
            Some(Place::Done) => "done",
        };
        j.place = None;
        j.mark = Mark::None;
        state
    }

    /// Dead jobs back to ready with fresh attempts (`dlq_requeue`); how many.
    pub(crate) fn requeue(&mut self) -> u64 {
        let mut n = 0;
        for j in self.jobs.values_mut().filter(|j| j.place == Some(Place::Dead)) {
            j.place = Some(Place::Ready);
            j.attempts = 0;
            j.deferrals = 0;
            j.by_cause = [0; 2];
            n += 1;
        }
        n
    }

    /// Dead jobs deleted (`dlq_purge`); how many.
    pub(crate) fn purge(&mut self) -> u64 {
        let mut n = 0;
        for j in self.jobs.values_mut().filter(|j| j.place == Some(Place::Dead)) {
            j.place = None;
            n += 1;
        }
        self.purged += n;
        n
    }

    /// Every delayed job falls due.
    pub(crate) fn advance(&mut self) {
        for j in self.jobs.values_mut().filter(|j| j.place == Some(Place::Delayed)) {
            j.free = true;
        }
    }

    /// Jobs leased of key `k` (None: every lease); `counted_only`: only those leased
    /// while a per-key concurrency was set.
    pub(crate) fn leased(&self, k: Option<&str>, counted_only: bool) -> u64 {
        self.jobs
            .values()
            .filter(|j| j.place == Some(Place::Leased) && (k.is_none() || j.key.as_deref() == k))
            .filter(|j| j.counted || !counted_only)
            .count() as u64
    }
}
