//! Whether the pool polls a job's call in place before it spawns a task for the rest:
//! [`Inline`].

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Whether the pool polls a job's call in place before it spawns a task for the rest. A
/// call that computes for long before it first waits would hold up the dispatch of every
/// other job meanwhile (a spawned task runs beside the dispatch, on another thread), so
/// when [`Inline::LONG_OF_64`] of the last 64 first polls took long, the next
/// [`Inline::PAUSE`] jobs are spawned without one. (Not one long poll: a thread preempted
/// mid-poll on a busy machine looks long too.)
#[derive(Debug, Default)]
pub(crate) struct Inline {
    /// The last 64 first polls, newest in the lowest bit: 1 for a long one.
    recent: AtomicU64,
    /// Jobs still to be spawned without a poll in place.
    paused: AtomicU32,
}

impl Inline {
    /// A first poll longer than this is long.
    const LONG: Duration = Duration::from_micros(200);
    /// How many long polls among the last 64 pause the polls in place.
    const LONG_OF_64: u32 = 8;
    /// How many jobs skip the poll in place then.
    const PAUSE: u32 = 1000;

    pub(super) fn allowed(&self) -> bool {
        self.paused
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_err()
    }

    pub(super) fn took(&self, d: Duration) {
        let long = u64::from(d >= Self::LONG);
        let recent = (self.recent.load(Ordering::Relaxed) << 1) | long;
        if recent.count_ones() >= Self::LONG_OF_64 {
            self.recent.store(0, Ordering::Relaxed);
            self.paused.store(Self::PAUSE, Ordering::Relaxed);
        } else {
            self.recent.store(recent, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_first_polls_pause_the_polls_in_place_stray_ones_do_not() {
        let inline = Inline::default();
        let (short, long) = (Duration::from_micros(5), Inline::LONG);
        // A preempted poll now and then: 7 long ones among 64.
        for i in 0..640 {
            assert!(inline.allowed());
            inline.took(if i % 10 == 0 { long } else { short });
        }
        for _ in 0..64 {
            inline.took(short);
        }
        // A handler that computes before it waits: paused after the 8th.
        for _ in 0..Inline::LONG_OF_64 {
            assert!(inline.allowed());
            inline.took(long);
        }
        let skipped = (0..).take_while(|_| !inline.allowed()).count();
        assert_eq!(skipped, Inline::PAUSE as usize);
    }
}
