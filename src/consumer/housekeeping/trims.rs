//! Logging of dead-letter trims: the queue's cap (`weir limits set --dead-cap`) drops the
//! oldest dead-lettered jobs, and that must never happen silently. The reclaimer feeds
//! [`TrimLog`] the queue's `trimmed` counter after each of its calls (which trim too); a
//! rise starts a streak (one warning), a call without one ends it (one info line). Trims
//! by any consumer of the queue show, since the counter is the queue's.

/// The trim streak seen so far.
#[derive(Debug, Default)]
pub(crate) struct TrimLog {
    /// The counter at the last call; none before the first.
    last: Option<u64>,
    /// Entries trimmed in the current streak; none when not trimming.
    streak: Option<u64>,
}

impl TrimLog {
    /// Takes what a call trimmed itself and the queue's `trimmed` counter after it; logs
    /// a streak's start and end. Returns true while trimming.
    pub(super) fn saw(&mut self, own: u64, total: u64) -> bool {
        // Before the first call the counter's history is unknown: only the call's own
        // trims are news.
        let delta = self.last.map_or(own, |last| total.saturating_sub(last));
        self.last = Some(total);
        match (self.streak, delta) {
            (None, 0) => {}
            (None, n) => {
                tracing::warn!(
                    trimmed = n,
                    "dead-letter queue over its cap: trimming the oldest entries (see `weir limits get` and `weir stats`)"
                );
                self.streak = Some(n);
            }
            (Some(so_far), 0) => {
                tracing::info!(
                    trimmed = so_far,
                    "dead-letter queue back within its cap: trimming stopped"
                );
                self.streak = None;
            }
            (Some(so_far), n) => self.streak = Some(so_far + n),
        }
        self.streak.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_starts_on_a_rise_and_ends_on_a_call_without_one() {
        let mut t = TrimLog::default();
        // The counter as first seen is history, not a streak.
        assert!(!t.saw(0, 500));
        assert!(!t.saw(0, 500));
        // Trims by another consumer (the counter rose) or by this call.
        assert!(t.saw(0, 1500));
        assert!(t.saw(1000, 2500));
        assert_eq!(t.streak, Some(2000));
        assert!(!t.saw(0, 2500));
        assert!(!t.saw(0, 2500));
        assert!(t.saw(1, 2501));
        // A first call that trims starts a streak.
        assert!(TrimLog::default().saw(3, 3));
    }
}
