//! `drain` as the command line runs it: a plain drain, or the comparison its flags ask
//! for (`--compare-single`, `--compare-tracking`, `--compare-bare`, `--compare-backlog`,
//! `--compare-global-limits`). Only the command reads it, so the comparisons may use
//! `drain`'s measurement without `drain` naming them.

use super::{backlog, drain, versus_bare, versus_single};
use crate::cli::DrainArgs;
use crate::report::Report;
use crate::sampler::Row;
use crate::target::Target;

pub(crate) async fn run(a: DrainArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    if a.compare_single {
        // It starts a single server and a cluster of its own.
        return versus_single::run(&a).await;
    }
    let target = Target::open(&a.common).await?;
    if let Some(n) = a.keep_completed_count {
        target.set_queue_settings(Some(weir::queue::settings::Settings {
            keep_completed_count: Some(n),
            ..Default::default()
        }));
    }
    if a.compare_tracking {
        return drain::compare(&target, &a).await;
    }
    if a.compare_bare {
        return versus_bare::run(&target, &a).await;
    }
    if a.compare_backlog {
        return backlog::run(&target, &a).await;
    }
    if a.compare_global_limits {
        return drain::compare_global_limits(&target, &a).await;
    }
    let o = drain::once(&target, &a.common, !a.common.no_track, "drain", None).await?;
    let jobs = a.common.jobs.unwrap_or(drain::DEFAULT_JOBS);
    let mut r = drain::report(&a.common, jobs, &o);
    r.put("redis", target.describe());
    Ok((r, o.rows))
}
