//! A partitioned queue's settings (`queue/partitions.rs`). Each lane's consumers and
//! scripts read that lane's own settings hash, so the fleet-wide limits an operator sets
//! for the queue are written twice over: as they are to the base lane (the queue's own
//! hash, what `weir limits get` shows), and to every partition its share, so that
//! together the partitions bind the whole queue. The global rate (and its burst), the
//! global concurrency and the dead-letter cap are split evenly over the partitions; the
//! per-key limits (a key's jobs live in one partition) and the per-process runtime knobs
//! are copied as they are.
//!
//! Every change to the queue's settings ([`Settings::update`], the clears) ends by
//! writing each partition its share of what the base holds then ([`spread`]), so a
//! partition never keeps a limit the queue no longer has.

use super::Settings;
use crate::error::Result;
use crate::limiter::Rate;
use crate::queue::keys::QueueKeys;
use crate::queue::partitions::Partitions;
use redis::aio::ConnectionLike;
use std::collections::BTreeSet;

/// The lowest rate a share is cut to, jobs/s: the lowest [`Rate::validate`] takes.
const MIN_SHARE_PER_S: f64 = 1e-3;

impl Settings {
    /// Partition `i`'s share of these queue-level settings, for a queue of `count`
    /// partitions: the global rate's count, its burst, the global concurrency and the
    /// dead-letter cap divided by `count` (whole numbers: the remainder goes to the first
    /// partitions, and each gets at least 1; a rate at least 0.001 jobs/s), everything else
    /// as it is.
    pub fn share(&self, count: usize, i: usize) -> Settings {
        let count = count.max(1);
        Settings {
            global_rate: self.global_rate.map(|r| split_rate(r, count, i)),
            global_concurrency: self.global_concurrency.map(|n| split(n, count, i)),
            dead_cap: self.dead_cap.map(|n| split(n, count, i)),
            keep_completed_count: self.keep_completed_count.map(|n| split(n, count, i)),
            ..self.clone()
        }
    }
}

/// `n` split over `count` parts, part `i`'s: the parts add up to `n` when `n >= count`.
fn split(n: u64, count: usize, i: usize) -> u64 {
    let (count, i) = (count as u64, i as u64);
    (n / count + u64::from(i < n % count)).max(1)
}

fn split_rate(r: Rate, count: usize, i: usize) -> Rate {
    let least = MIN_SHARE_PER_S * r.per.as_secs_f64();
    Rate {
        count: (r.count / count as f64).max(least),
        per: r.per,
        burst: split(u64::from(r.burst), count, i) as u32,
    }
}

/// If `queue` is partitioned, writes each partition its share of the settings the queue
/// holds now and removes from it the settings the queue no longer has. One HMGET for a
/// queue that is not partitioned (or for a lane); three round trips per partition.
pub(super) async fn spread<C: ConnectionLike + Send + Sync>(conn: &mut C, queue: &str) -> Result<()> {
    if QueueKeys::new(queue)?.is_partition() {
        return Ok(());
    }
    let Some(parts) = Partitions::read(conn, queue).await? else {
        return Ok(());
    };
    let stored = Settings::load(conn, queue).await?;
    for i in 0..parts.count() {
        let lane = parts.partition(i).name();
        let want = stored.share(parts.count(), i);
        let had = Settings::load(conn, lane).await?;
        want.store(conn, lane).await?;
        let kept: BTreeSet<String> = want.to_fields().into_iter().map(|(k, _)| k).collect();
        let stale: Vec<String> = had
            .to_fields()
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| !kept.contains(k))
            .collect();
        if !stale.is_empty() {
            let _: () = redis::cmd("HDEL")
                .arg(parts.partition(i).settings())
                .arg(&stale)
                .query_async(conn)
                .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::settings::KeyLimits;

    fn rate(spec: &str, burst: u32) -> Rate {
        spec.parse::<Rate>().unwrap().with_burst(burst)
    }

    #[test]
    fn fleet_limits_split_evenly_and_the_rest_is_copied() {
        let q = Settings {
            max: Some(40),
            global_rate: Some(rate("300/s", 30)),
            global_concurrency: Some(10),
            dead_cap: Some(1000),
            key_concurrency: Some(2),
            key_overrides: [(
                "acme".to_string(),
                KeyLimits {
                    rate: None,
                    concurrency: Some(5),
                },
            )]
            .into(),
            ..Settings::default()
        };
        let shares: Vec<Settings> = (0..3).map(|i| q.share(3, i)).collect();
        let conc: Vec<u64> = shares.iter().map(|s| s.global_concurrency.unwrap()).collect();
        assert_eq!(conc, [4, 3, 3], "the remainder to the first");
        assert!(shares.iter().all(|s| s.global_rate == Some(rate("100/s", 10))));
        assert_eq!(shares.iter().map(|s| s.dead_cap.unwrap()).sum::<u64>(), 1000);
        for s in &shares {
            assert_eq!((s.max, s.key_concurrency), (Some(40), Some(2)));
            assert_eq!(s.key_overrides, q.key_overrides);
        }
        assert_eq!(Settings::default().share(3, 1), Settings::default());
    }

    #[test]
    fn a_share_is_never_below_one_nor_below_the_lowest_rate() {
        let q = Settings {
            global_rate: Some(rate("4/h", 1)),
            global_concurrency: Some(2),
            dead_cap: Some(1),
            ..Settings::default()
        };
        let s = q.share(8, 7);
        assert_eq!((s.global_concurrency, s.dead_cap), (Some(1), Some(1)));
        let r = s.global_rate.unwrap();
        assert_eq!(r.burst, 1);
        assert!((r.per_second() - MIN_SHARE_PER_S).abs() < 1e-12, "{r:?}");
        assert!(s.validate().is_ok());
    }
}
