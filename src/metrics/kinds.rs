//! Per-kind series, bounded: which kind of job is slow or failing. The first
//! [`TOP_KINDS`](super::TOP_KINDS) kinds a consumer runs get series of their own; any
//! later kind counts under `kind="other"`, so a producer that invents kinds (an id in the
//! kind, say) cannot grow the label set without bound, as the per-key series are bounded
//! by their top-N.
//!
//! A lookup is a read lock and a hash of the kind, once per job (or per batch-handler
//! job), before the handler runs; the handles it returns are then recorded lock-free.

use super::{KIND_JOB_DURATION, KIND_JOBS, TOP_KINDS};
use metrics::{Counter, Histogram, Label, counter, histogram};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The series of one kind (or of `other`).
pub(crate) struct KindSeries {
    pub duration: Histogram,
    pub ok: Counter,
    pub failed: Counter,
}

impl KindSeries {
    fn new(labels: &[Label], kind: &str) -> Self {
        let mut l = labels.to_vec();
        l.push(Label::new("kind", kind.to_owned()));
        let with = |outcome: &'static str| {
            let mut l = l.clone();
            l.push(Label::new("outcome", outcome));
            l
        };
        Self {
            duration: histogram!(KIND_JOB_DURATION, l.clone()),
            ok: counter!(KIND_JOBS, with("ok")),
            failed: counter!(KIND_JOBS, with("failed")),
        }
    }

    /// Records one job's run: its duration, and whether the handler succeeded.
    pub(crate) fn record(&self, secs: f64, ok: bool) {
        self.duration.record(secs);
        if ok { &self.ok } else { &self.failed }.increment(1);
    }
}

/// A queue's per-kind series.
pub(crate) struct KindMetrics {
    labels: Vec<Label>,
    kinds: RwLock<HashMap<Box<str>, Arc<KindSeries>>>,
    other: Arc<KindSeries>,
    /// False for a consumer run with metrics off: every kind is `other`, a no-op.
    enabled: bool,
}

impl KindMetrics {
    pub(crate) fn new(labels: Vec<Label>, enabled: bool) -> Self {
        let other = Arc::new(KindSeries::new(&labels, "other"));
        Self {
            labels,
            kinds: RwLock::new(HashMap::new()),
            other,
            enabled,
        }
    }

    /// The series of `kind`: its own if it is among the first [`TOP_KINDS`] seen, else
    /// `other`.
    pub(crate) fn of(&self, kind: &str) -> Arc<KindSeries> {
        if !self.enabled {
            return self.other.clone();
        }
        if let Some(s) = self.kinds.read().unwrap_or_else(|e| e.into_inner()).get(kind) {
            return s.clone();
        }
        let mut kinds = self.kinds.write().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = kinds.get(kind) {
            return s.clone();
        }
        if kinds.len() >= TOP_KINDS {
            return self.other.clone();
        }
        let s = Arc::new(KindSeries::new(&self.labels, kind));
        kinds.insert(kind.into(), s.clone());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_kinds_get_series_of_their_own_and_later_ones_share_other() {
        let m = KindMetrics::new(vec![Label::new("queue", "q")], true);
        let first = m.of("k0");
        for i in 1..TOP_KINDS {
            assert!(!Arc::ptr_eq(&m.of(&format!("k{i}")), &m.other));
        }
        assert!(Arc::ptr_eq(&m.of("k0"), &first), "the same series each time");
        assert!(Arc::ptr_eq(&m.of("late"), &m.other), "past the bound: other");
        assert_eq!(m.kinds.read().unwrap().len(), TOP_KINDS);
        let off = KindMetrics::new(Vec::new(), false);
        assert!(Arc::ptr_eq(&off.of("k0"), &off.other));
    }
}
