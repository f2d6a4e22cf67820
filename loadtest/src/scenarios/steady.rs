//! `steady`: a producer enqueues at `--enqueue-rate` for `--duration` while consumers
//! process.
//! Reports the achieved rate and end-to-end latency (enqueued → processed; both clocks
//! are this machine's).

use super::timed::{self, Pace, Timed};
use super::{account, base_report};
use crate::cli::SteadyArgs;
use crate::report::{Report, round};
use crate::sampler::Row;
use crate::target::Target;
use std::time::Duration;

const DEFAULT_LENGTH: Duration = Duration::from_secs(10);
const DEFAULT_RATE: u64 = 5000;

pub async fn run(a: SteadyArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    // `steady --rate N` once meant the enqueue rate: refused rather than silently read as
    // the consumers' cap.
    if a.common.limits.rate_limit.is_some() && a.enqueue_rate.is_none() {
        anyhow::bail!(
            "steady: --rate caps each consumer's jobs/s, as in weir work; the enqueue rate is --enqueue-rate: give it too"
        );
    }
    let rate = a.enqueue_rate.unwrap_or(DEFAULT_RATE);
    if rate == 0 {
        anyhow::bail!("--enqueue-rate must be above 0");
    }
    let c = &a.common;
    let length = c.duration.unwrap_or(DEFAULT_LENGTH);
    let jobs = c
        .jobs
        .unwrap_or_else(|| (rate as f64 * length.as_secs_f64()).ceil() as u64);
    let target = Target::open(c).await?;
    let o = timed::run(
        &target,
        c,
        Timed {
            scenario: "steady",
            length,
            jobs_cap: jobs,
            pace: Pace::Rate(rate),
            downstream: None,
            ideal: None,
            max_attempts: 5,
        },
    )
    .await?;
    let mut r = base_report("steady", c, o.enqueued);
    r.enqueue_jobs_per_s = Some(o.enqueue_rate);
    r.achieved_jobs_per_s = Some(o.achieved_rate);
    r.elapsed_s = round(o.elapsed.as_secs_f64(), 3);
    r.set_latency("end_to_end", &o.observed.total.summary());
    r.set_limits(timed::window_rows(&o.rows, o.window));
    account(&mut r, o.tally, &o.totals);
    r.put("target_rate", rate);
    r.put("window_s", round(o.window.as_secs_f64(), 3));
    if !o.settled {
        r.put(
            "check_failed",
            "the queue did not empty within 60s after the producer stopped",
        );
    }
    r.put("redis", target.describe());
    Ok((r, o.rows))
}
