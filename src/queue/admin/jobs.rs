//! Jobs one at a time or a page at a time: listing by state, showing, deleting, running
//! now, and the filtered bulk actions on the dead-letter queue. A partitioned queue's go
//! over its lanes (`lane_jobs.rs`).

use super::Queue;
use crate::error::{Error, Result};
use crate::queue::json::{
    BulkActed, JSON_VERSION, JobDetail, JobFilter, JobMoved, JobPage, JobState, JobsActed, Timestamp,
};
use crate::queue::keys::{QueueKeys, validate_token};
use crate::queue::scripts;
use crate::redis::conn::Conn;
use std::time::Duration;

mod answers;
pub(super) use answers::{detail, entry, format_cursor, not_found, parse_cursor, ran_now, state_of};

/// Most jobs one page may hold.
pub const MAX_PAGE: usize = 1000;
/// Most entries one page looks at when it filters by kind: the bound on a page's cost.
pub const KIND_WINDOW: usize = 1000;
/// Dead-lettered entries one bulk call looks at (the caller loops).
const BULK_WINDOW: usize = 1000;

impl Queue {
    /// One page of the jobs in `state`: at most `limit` (1 to [`MAX_PAGE`]) jobs, of
    /// `kind` only if given, from `cursor` (a page's `next_cursor`; `None`: the first
    /// page). A page costs a bounded window of the lists or sets, never a scan: with a
    /// kind filter it looks at most at [`KIND_WINDOW`] entries and may hold fewer jobs
    /// than asked, with a cursor to go on. The queue moves while it is paged: a job may
    /// show twice or not at all across pages.
    pub async fn jobs(
        &self,
        state: JobState,
        kind: Option<&str>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<JobPage> {
        let filter = JobFilter { kind, key: None };
        self.jobs_where(state, filter, limit, cursor).await
    }

    /// [`Queue::jobs`] with a [`JobFilter`]: of a kind, of a job key, or both (a page
    /// filtered by either looks at most at [`KIND_WINDOW`] entries).
    pub async fn jobs_where(
        &self,
        state: JobState,
        filter: JobFilter<'_>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<JobPage> {
        let JobFilter { kind, key } = filter;
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(Error::config(
                "page size",
                format!("must be between 1 and {MAX_PAGE} (a page holds 1 to {MAX_PAGE} jobs), not {limit}"),
            ));
        }
        if let Some(k) = kind {
            validate_token("job kind", k, crate::queue::envelope::MAX_ID_LEN)?;
        }
        if let Some(k) = key {
            validate_token("job key", k, crate::queue::envelope::MAX_ID_LEN)?;
        }
        if let Some(p) = self.partitions().await? {
            return self.lane_jobs(&p, state, filter, limit, cursor).await;
        }
        let offsets = parse_cursor(state, cursor)?;
        let window = if filter.is_empty() { limit } else { KIND_WINDOW };
        let page = scripts::jobs_page(
            &mut self.conn.clone(),
            &self.keys,
            state.as_str(),
            offsets,
            limit,
            window,
            kind.unwrap_or(""),
            key.unwrap_or(""),
        )
        .await?;
        let now = Timestamp(page.now_ms);
        let jobs = page
            .entries
            .iter()
            .map(|e| entry(state, e).summary(now))
            .collect();
        Ok(JobPage {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            state,
            kind: kind.map(str::to_owned),
            key: key.map(str::to_owned),
            now,
            jobs,
            next_cursor: page.more.then(|| format_cursor(state, page.offsets)),
        })
    }

    /// One job, wherever it is (in a partitioned queue, in whichever lane; its likeliest
    /// first); `None` if there is no job `id` in the queue. A job stored by id is found in
    /// O(log n); an inline job (docs/protocol.md: a bulk load's job, its envelope its list
    /// item) by a scan of the lease and the lists, O(n), as is an id found nowhere.
    pub async fn job(&self, id: &str) -> Result<Option<JobDetail>> {
        if let Some(p) = self.partitions().await? {
            return self.lane_job(&p, id).await;
        }
        let s = scripts::job_show(&mut self.conn.clone(), &self.keys, id).await?;
        let Some(state) = state_of("job_show", &s.state)? else {
            return Ok(None);
        };
        Ok(Some(detail(self.keys.name(), id, state, s)))
    }

    /// Deletes jobs by id: ready, delayed, dead or in flight (or, with `only_dead`, only
    /// dead-lettered ones). A job in flight keeps running, but its outcome is dropped and
    /// it is neither retried nor dead-lettered: its lease is gone (its consumer logs it as
    /// a lost lease). Deleting a ready job costs O(length of its ready list) (LREM), and an
    /// inline job (docs/protocol.md) is first found by a scan of the lease and the lists.
    pub async fn delete_jobs(&self, ids: &[String], only_dead: bool) -> Result<JobsActed> {
        if let Some(p) = self.partitions().await? {
            return self.lane_delete(&p, ids, only_dead).await;
        }
        let got = scripts::jobs_delete(&mut self.conn.clone(), &self.keys, only_dead, ids).await?;
        let mut out = self.acted("delete");
        for (id, state) in got {
            match state_of("jobs_delete", &state)? {
                Some(from) => out.done.push(JobMoved { id, from, lane: None }),
                None => out.skipped.push(not_found(id, only_dead)),
            }
        }
        Ok(out)
    }

    /// Moves delayed or dead-lettered jobs to the front of their ready lists: a delayed
    /// job keeps its attempt count, a dead one starts afresh (as a requeue). Jobs ready or
    /// in flight are left as they are and reported as skipped.
    pub async fn run_now(&self, ids: &[String]) -> Result<JobsActed> {
        if let Some(p) = self.partitions().await? {
            return self.lane_run_now(&p, ids).await;
        }
        let mut out = self.acted("run_now");
        for id in ids {
            let state = scripts::job_run_now(&mut self.conn.clone(), &self.keys, id).await?;
            let id = id.clone();
            ran_now(&mut out, id, state_of("job_run_now", &state)?, None);
        }
        Ok(out)
    }

    /// Requeues (`requeue`: to the back of ready, with a fresh attempt count) or deletes
    /// every dead-lettered job of `kind` (if given) dead-lettered at least `older_than`
    /// ago (if given), oldest first, a bounded window per call (on every lane of a
    /// partitioned queue).
    pub async fn dead_where(
        &self,
        requeue: bool,
        kind: Option<&str>,
        older_than: Option<Duration>,
    ) -> Result<BulkActed> {
        if let Some(k) = kind {
            validate_token("job kind", k, crate::queue::envelope::MAX_ID_LEN)?;
        }
        let min_age = older_than.map_or(0, |d| (d.as_millis() as u64).max(1));
        let kind_arg = kind.unwrap_or("");
        let count = match self.partitions().await? {
            None => bulk(&self.conn, &self.keys, requeue, min_age, kind_arg).await?,
            Some(p) => {
                let each = self.each_lane(
                    &p,
                    |c, k| async move { bulk(&c, k, requeue, min_age, kind_arg).await },
                );
                each.await?.into_iter().sum()
            }
        };
        Ok(BulkActed {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            action: if requeue { "requeue" } else { "delete" },
            kind: kind.map(str::to_owned),
            older_than_ms: older_than.map(|_| min_age),
            count,
        })
    }

    pub(super) fn acted(&self, action: &'static str) -> JobsActed {
        JobsActed {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            action,
            done: Vec::new(),
            skipped: Vec::new(),
        }
    }
}

/// The requeue or delete of the dead-lettered jobs one filter takes, on one lane, window
/// after window; returns how many.
async fn bulk(conn: &Conn, keys: &QueueKeys, requeue: bool, min_age: u64, kind: &str) -> Result<u64> {
    let (mut rank, mut count) = (0, 0);
    loop {
        let mut c = conn.clone();
        let step = scripts::dlq_bulk(&mut c, keys, requeue, rank, BULK_WINDOW, min_age, kind).await?;
        count += step.acted;
        rank = step.next;
        if step.done {
            return Ok(count);
        }
    }
}
