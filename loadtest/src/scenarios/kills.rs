//! The kills of a chaos drain: when to kill a consumer process (a [`Plan`]), the kills
//! themselves while the fleet drains, and what they did ([`Stats`]). A leaf of the drain
//! scenarios: `drain` runs the kills, `chaos` runs the drain.

use super::counter;
use crate::fleet::{Procs, Totals};
use crate::observed::Observed;
use crate::target::Target;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When and how often to kill.
pub(crate) struct Plan {
    pub kills: usize,
    pub seed: u64,
    pub jobs: u64,
    /// Bound on the whole drain.
    pub cap: Duration,
}

/// What the kills did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct Stats {
    pub kills: usize,
    pub killed_pids: Vec<u32>,
    /// Leased jobs in the whole queue just before each kill, summed: an upper bound of
    /// what the killed processes held.
    pub leased_at_kills: u64,
    /// Expired leases the reclaimer brought back: exactly the jobs the killed processes
    /// held and never settled.
    pub reclaimed: u64,
}

/// Kills a random live process each time the processed count crosses one of `kills`
/// random marks (between 5% and 90% of the jobs), restarts it at once, then waits for
/// the fleet to drain the queue.
pub(crate) async fn kill_and_wait(
    mut p: Procs,
    observed: Arc<Observed>,
    target: &Target,
    queue: &str,
    plan: Plan,
) -> anyhow::Result<(Totals, bool, Option<Stats>)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(plan.seed);
    let (lo, hi) = (plan.jobs / 20, (plan.jobs * 9 / 10).max(plan.jobs / 20));
    let mut marks: Vec<u64> = (0..plan.kills).map(|_| rng.random_range(lo..=hi)).collect();
    marks.sort_unstable();
    let deadline = Instant::now() + plan.cap;
    let q = weir::Queue::new(target.conn.clone(), queue)?;
    let reclaimed_before = counter(target, queue, "reclaimed").await?;
    let mut stats = Stats::default();
    'marks: for mark in marks {
        while observed.processed() < mark {
            if p.reap()? || Instant::now() >= deadline {
                break 'marks;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        stats.leased_at_kills += q.stats().await?.in_flight;
        let pid = p.kill(rng.random_range(0..p.len()))?;
        stats.killed_pids.push(pid);
        stats.kills += 1;
        p.spawn()?;
    }
    let (totals, finished) = p.wait(deadline.saturating_duration_since(Instant::now())).await?;
    stats.reclaimed = counter(target, queue, "reclaimed").await? - reclaimed_before;
    Ok((totals, finished, Some(stats)))
}
