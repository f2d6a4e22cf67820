//! A partitioned queue's jobs, for `jobs.rs`: pages that go lane after lane, and one job
//! (or a few) by id, looked for in the lane each id names first.
//!
//! A page's cursor names its lane: `<lane>:<cursor in that lane>` (the lane's index in
//! [`Partitions::lanes`] order). A page reads its lanes one after the other until it is
//! full, so it costs what a page of one queue costs (a bounded window of entries), plus at
//! most [`LANES_PER_PAGE`] script calls: empty lanes are skipped a bounded number at a time.

use super::Queue;
use super::jobs::{KIND_WINDOW, detail, entry, format_cursor, not_found, parse_cursor, ran_now, state_of};
use crate::error::{Error, Result};
use crate::queue::json::{
    JSON_VERSION, JobDetail, JobFilter, JobMoved, JobPage, JobState, JobsActed, Timestamp,
};
use crate::queue::partitions::Partitions;
use crate::queue::scripts;

/// Most lanes one page reads: a queue of many partitions, most of them empty, is paged a
/// bounded number of script calls at a time.
pub const LANES_PER_PAGE: usize = 32;

/// A page cursor of a queue of `lanes` lanes: the lane and the offsets in it.
fn parse_lane_cursor(lanes: usize, state: JobState, cursor: Option<&str>) -> Result<(usize, [u64; 3])> {
    let Some(c) = cursor else { return Ok((0, [0; 3])) };
    let bad = || {
        Error::config(
            format!("page cursor {c:?}"),
            "is not one a page gave: pass back the next_cursor of a page",
        )
    };
    let (lane, inner) = c.split_once(':').ok_or_else(bad)?;
    let lane: usize = lane.parse().map_err(|_| bad())?;
    if lane >= lanes {
        return Err(bad());
    }
    Ok((lane, parse_cursor(state, Some(inner)).map_err(|_| bad())?))
}

/// Entries a lane's page went past: the offsets it moved by.
fn went_past(before: [u64; 3], after: [u64; 3]) -> usize {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| a.saturating_sub(*b) as usize)
        .sum()
}

impl Queue {
    /// [`Queue::jobs`] over a partitioned queue's lanes: each job says its lane.
    pub(super) async fn lane_jobs(
        &self,
        parts: &Partitions,
        state: JobState,
        filter: JobFilter<'_>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<JobPage> {
        let JobFilter { kind, key } = filter;
        let (mut lane, mut offsets) = parse_lane_cursor(parts.lane_count(), state, cursor)?;
        // Entries the page may still look at: as for one queue, the whole page's bound.
        let mut window = if filter.is_empty() { limit } else { KIND_WINDOW };
        let (mut jobs, mut now, mut next) = (Vec::new(), Timestamp(0), None);
        for _ in 0..LANES_PER_PAGE {
            let keys = parts.lane(lane);
            let want = (limit - jobs.len()).min(window);
            let mut conn = self.conn.clone();
            let page = scripts::jobs_page(
                &mut conn,
                keys,
                state.as_str(),
                offsets,
                want,
                window,
                kind.unwrap_or(""),
                key.unwrap_or(""),
            )
            .await?;
            now = Timestamp(page.now_ms);
            jobs.extend(page.entries.iter().map(|e| {
                let mut j = entry(state, e).summary(now);
                j.lane = Some(keys.name().to_owned());
                j
            }));
            if page.more {
                next = Some((lane, page.offsets));
                break;
            }
            // The lane is done: every entry it went past was looked at.
            window = window.saturating_sub(went_past(offsets, page.offsets));
            (lane, offsets) = (lane + 1, [0; 3]);
            next = (lane < parts.lane_count()).then_some((lane, offsets));
            if next.is_none() || jobs.len() == limit || window == 0 {
                break;
            }
        }
        Ok(JobPage {
            version: JSON_VERSION,
            queue: self.keys.name().to_owned(),
            state,
            kind: kind.map(str::to_owned),
            key: key.map(str::to_owned),
            now,
            jobs,
            next_cursor: next.map(|(l, o)| format!("{l}:{}", format_cursor(state, o))),
        })
    }

    /// [`Queue::job`] over a partitioned queue's lanes, the likeliest first.
    pub(super) async fn lane_job(&self, parts: &Partitions, id: &str) -> Result<Option<JobDetail>> {
        for lane in parts.search_order(id) {
            let keys = parts.lane(lane);
            let s = scripts::job_show(&mut self.conn.clone(), keys, id).await?;
            if let Some(state) = state_of("job_show", &s.state)? {
                let mut d = detail(self.keys.name(), id, state, s);
                d.job.lane = Some(keys.name().to_owned());
                return Ok(Some(d));
            }
        }
        Ok(None)
    }

    /// [`Queue::delete_jobs`] over a partitioned queue's lanes: each id where it is found.
    pub(super) async fn lane_delete(
        &self,
        parts: &Partitions,
        ids: &[String],
        only_dead: bool,
    ) -> Result<JobsActed> {
        let found = self
            .route(parts, ids, |mut c, k, ids| async move {
                let got = scripts::jobs_delete(&mut c, k, only_dead, &ids).await?;
                got.iter()
                    .map(|(_, state)| state_of("jobs_delete", state))
                    .collect::<Result<Vec<_>>>()
            })
            .await?;
        let mut out = self.acted("delete");
        for (id, f) in ids.iter().zip(found) {
            match f {
                Some((lane, from)) => out.done.push(JobMoved {
                    id: id.clone(),
                    from,
                    lane: Some(parts.lane(lane).name().to_owned()),
                }),
                None => out.skipped.push(not_found(id.clone(), only_dead)),
            }
        }
        Ok(out)
    }

    /// [`Queue::run_now`] over a partitioned queue's lanes: each id where it is found.
    pub(super) async fn lane_run_now(&self, parts: &Partitions, ids: &[String]) -> Result<JobsActed> {
        let found = self
            .route(parts, ids, |mut c, k, ids| async move {
                let mut states = Vec::with_capacity(ids.len());
                for id in &ids {
                    let state = scripts::job_run_now(&mut c, k, id).await?;
                    states.push(state_of("job_run_now", &state)?);
                }
                Ok(states)
            })
            .await?;
        let mut out = self.acted("run_now");
        for (id, f) in ids.iter().zip(found) {
            let (state, lane) = match f {
                Some((lane, s)) => (Some(s), Some(parts.lane(lane).name().to_owned())),
                None => (None, None),
            };
            ran_now(&mut out, id.clone(), state, lane);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_cursors_name_their_lane_and_bad_ones_are_refused() {
        let parts = 4; // three partitions and the base
        assert_eq!(
            parse_lane_cursor(parts, JobState::Ready, None).unwrap(),
            (0, [0; 3])
        );
        let c = format!("2:{}", format_cursor(JobState::Delayed, [1, 0, 4]));
        assert_eq!(
            parse_lane_cursor(parts, JobState::Delayed, Some(&c)).unwrap(),
            (2, [1, 0, 4])
        );
        assert_eq!(
            parse_lane_cursor(parts, JobState::Dead, Some("3:7")).unwrap(),
            (3, [7, 0, 0]),
            "the base is the last lane"
        );
        for bad in ["4:0", "7", "x:1", "1:", "1:1.2.3", ":1"] {
            let e = parse_lane_cursor(parts, JobState::Ready, Some(bad)).unwrap_err();
            assert!(
                matches!(&e, Error::Config { setting, .. } if *setting == format!("page cursor {bad:?}")),
                "{bad}: {e}"
            );
        }
        assert_eq!(went_past([1, 2, 3], [4, 2, 5]), 5);
    }
}
