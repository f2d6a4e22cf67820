//! `chaos`: a drain by a fleet of consumer processes, some of which are killed (SIGKILL)
//! and restarted at random moments. Checks that every job ran at least once, and that
//! duplicates stay within what the killed processes held: every extra run needs a lease
//! that expired and was reclaimed, so `extra_runs ≤ reclaimed`.

use super::drain;
use crate::cli::{ChaosArgs, Common};
use crate::report::Report;
use crate::sampler::Row;
use crate::target::Target;
use std::time::Duration;

const DEFAULT_JOBS: u64 = 100_000;
const DEFAULT_CONSUMERS: usize = 2;
const DEFAULT_VISIBILITY: Duration = Duration::from_secs(2);

pub(crate) async fn run(a: ChaosArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    let mut c: Common = a.common.clone();
    c.consumers.get_or_insert(DEFAULT_CONSUMERS);
    c.visibility_timeout.get_or_insert(DEFAULT_VISIBILITY);
    c.jobs.get_or_insert(DEFAULT_JOBS);
    let target = Target::open(&c).await?;
    let o = drain::once(&target, &c, !c.no_track, "chaos", Some(a.kills)).await?;
    let mut r = drain::report(&c, c.jobs.unwrap_or(DEFAULT_JOBS), &o);
    r.scenario = "chaos".into();
    let stats = o.chaos.clone().unwrap_or_default();
    if let (Some(extra), Some(dups)) = (r.extra_runs, r.duplicates)
        && extra > stats.reclaimed
    {
        r.put(
            "check_failed",
            format!(
                "{extra} extra runs ({dups} jobs) but only {} leases were reclaimed",
                stats.reclaimed
            ),
        );
    }
    r.put("chaos", &stats);
    r.put("redis", target.describe());
    Ok((r, o.rows))
}
