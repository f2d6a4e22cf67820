//! Whether a queue has ever been seen in this Redis, and the nearest known name: so that a
//! typo (`weir pause --queue hoks`) is told apart from a queue that merely is empty.
//!
//! A queue is *seen* when the registry lists it (an enqueue, `weir cron add`, or an
//! operator's `--create` put it there) or when any of its keys exists: jobs in any state,
//! its counters, settings, pause flag, schedules, partition map or a live consumer's entry.
//! One EXISTS over the queue's own keys (one hash tag, so one slot), then the registry.

use super::Queues;
use crate::error::Result;
use crate::queue::keys::{QUEUES, QueueKeys, validate_queue_name};

impl Queues {
    /// True if queue `name` was ever enqueued to, served, scheduled or registered, or has
    /// any key left in this Redis.
    pub async fn seen(&self, name: &str) -> Result<bool> {
        let keys = QueueKeys::new(name)?;
        let all = keys.all();
        // Every real key of the layout (not the wake channel, not the unique-key prefix),
        // and the ones kept outside `all`.
        let mut probe: Vec<String> = all[..12].iter().chain(&all[13..18]).cloned().collect();
        probe.extend([keys.workers(), keys.cron(), keys.partitions()]);
        let found: u64 = redis::cmd("EXISTS")
            .arg(&probe)
            .query_async(&mut self.conn.clone())
            .await?;
        if found > 0 {
            return Ok(true);
        }
        // The registry (SMEMBERS, the command `weir queues` uses, so the documented ACL
        // covers it); a producer writing to one partition registers its tag (`Q~3`),
        // which names() reads as its queue.
        Ok(self.names().await?.iter().any(|n| n == name))
    }

    /// Adds `name` to the registry, so `weir queues` and the UI list it before its first
    /// job. True if it was not listed.
    pub async fn register(&self, name: &str) -> Result<bool> {
        validate_queue_name(name)?;
        let added: u64 = redis::cmd("SADD")
            .arg(QUEUES)
            .arg(name)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(added == 1)
    }

    /// The registered queue name nearest to `name` by edit distance, if one is near
    /// enough to be what was meant (within one edit per three characters, at most three); ties go to the first in order.
    pub async fn nearest(&self, name: &str) -> Result<Option<String>> {
        Ok(nearest_of(name, &self.names().await?))
    }
}

/// The name among `known` nearest to `name`, if within one edit per three characters (at most three).
pub fn nearest_of(name: &str, known: &[String]) -> Option<String> {
    known
        .iter()
        .filter(|k| k.as_str() != name)
        .map(|k| (edit_distance(name, k), k))
        .filter(|(d, k)| near_enough(*d, name, k))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.clone())
}

/// Whether two names `d` edits apart are close enough to suggest one for the other: one
/// edit per three characters of the shorter one, at least one and at most three.
fn near_enough(d: usize, a: &str, b: &str) -> bool {
    let shorter = a.chars().count().min(b.chars().count());
    d <= (shorter / 3).clamp(1, 3)
}

/// The Levenshtein distance between `a` and `b` (insertions, deletions, substitutions;
/// ASCII case counts as a difference).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_count_single_edits() {
        assert_eq!(edit_distance("hoks", "hooks"), 1);
        assert_eq!(edit_distance("hooks", "hokos"), 2);
        assert_eq!(edit_distance("emails", "emials"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn the_nearest_close_name_is_suggested_and_far_ones_are_not() {
        let known = ["emails", "hooks", "thumbs"].map(String::from);
        assert_eq!(nearest_of("hoks", &known).as_deref(), Some("hooks"));
        assert_eq!(nearest_of("emials", &known).as_deref(), Some("emails"));
        assert_eq!(nearest_of("reports", &known), None);
        assert_eq!(nearest_of("ab", &["xy".to_owned()]), None);
    }
}
