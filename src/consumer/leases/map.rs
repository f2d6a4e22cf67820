//! [`LeaseMap`]: the lease table's leases by fetch sequence number, in a ring.
//!
//! Leases come in fetch order (each the next sequence number) and mostly leave in about
//! that order, so they live in a ring indexed by `seq - base`: a lookup is an index, and
//! a drain walks the ring's memory front to back instead of probing a hash table (which,
//! cold in the cache behind the stream of envelopes, was most of the lease table's cost).
//! A lease that stays while far later ones come and go (a long run) would stretch the
//! ring, so once the ring spans more than twice the leases held (plus [`SLACK`]), its
//! oldest leases move to a hash map on the side: the ring's length stays in proportion
//! to the leases held, whatever the runs' lengths.

use super::lease::Lease;
use std::collections::VecDeque;

/// Ring entries allowed beyond twice the leases held before the oldest move aside.
const SLACK: usize = 1024;

/// The leases by sequence number (see the module's doc).
#[derive(Debug, Default)]
pub(crate) struct LeaseMap {
    /// Leases from `base` on, at `seq - base`; `None` where one has left.
    ring: VecDeque<Option<Lease>>,
    /// The sequence number of `ring[0]`.
    base: u64,
    /// Leases older than `base`, still held.
    aside: foldhash::HashMap<u64, Lease>,
    len: usize,
}

impl LeaseMap {
    /// Leases held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Adds lease `seq`, which is past every sequence number added before.
    pub(crate) fn insert(&mut self, seq: u64, lease: Lease) {
        if self.ring.is_empty() {
            self.base = seq;
        }
        let end = self.base + self.ring.len() as u64;
        debug_assert!(seq >= end, "lease {seq} added after {end}");
        // Numbers skipped (none, as the table hands them out) stay empty.
        self.ring.extend((end..seq).map(|_| None));
        self.ring.push_back(Some(lease));
        self.len += 1;
        while self.ring.len() > 2 * self.len + SLACK {
            let oldest = self.ring.pop_front().flatten();
            if let Some(l) = oldest {
                self.aside.insert(self.base, l);
            }
            self.base += 1;
        }
        self.trim();
    }

    pub(crate) fn get(&self, seq: u64) -> Option<&Lease> {
        match self.index(seq) {
            Some(i) => self.ring[i].as_ref(),
            None => self.aside.get(&seq),
        }
    }

    pub(crate) fn get_mut(&mut self, seq: u64) -> Option<&mut Lease> {
        match self.index(seq) {
            Some(i) => self.ring[i].as_mut(),
            None => self.aside.get_mut(&seq),
        }
    }

    pub(crate) fn remove(&mut self, seq: u64) -> Option<Lease> {
        let gone = match self.index(seq) {
            Some(i) => {
                let gone = self.ring[i].take();
                if i == 0 {
                    self.trim();
                }
                gone
            }
            None => self.aside.remove(&seq),
        };
        self.len -= usize::from(gone.is_some());
        gone
    }

    /// Every lease held, with its sequence number (the ones moved aside first, in no
    /// order; then the ring's, in order).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Lease)> {
        let base = self.base;
        let ring = self.ring.iter().enumerate();
        let ring = ring.filter_map(move |(i, l)| l.as_ref().map(|l| (base + i as u64, l)));
        self.aside.iter().map(|(&s, l)| (s, l)).chain(ring)
    }

    /// [`iter`](Self::iter), each lease writable.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut Lease)> {
        let base = self.base;
        let ring = self.ring.iter_mut().enumerate();
        let ring = ring.filter_map(move |(i, l)| l.as_mut().map(|l| (base + i as u64, l)));
        self.aside.iter_mut().map(|(&s, l)| (s, l)).chain(ring)
    }

    /// Where lease `seq` is in the ring, if within it.
    fn index(&self, seq: u64) -> Option<usize> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        (i < self.ring.len()).then_some(i)
    }

    /// Drops the empty entries at the ring's front.
    fn trim(&mut self) {
        while let Some(None) = self.ring.front() {
            self.ring.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::envelope::Priority;
    use tokio::time::Instant;

    fn lease(token: u64) -> Lease {
        Lease {
            id: format!("j{token}"),
            token,
            priority: Priority::Normal,
            renewed: Instant::now(),
            marked: false,
            outcome: false,
            item: None,
            extend_sent: false,
            result: None,
            batch: None,
        }
    }

    /// The map against a plain `BTreeMap` over a long run with a few leases held for
    /// long (they move aside) and the rest leaving in a shuffled order.
    #[test]
    fn holds_what_a_map_holds_and_stays_in_proportion() {
        let mut map = LeaseMap::default();
        let mut model = std::collections::BTreeMap::new();
        let mut held: Vec<u64> = Vec::new();
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 33
        };
        for seq in 0..50_000u64 {
            map.insert(seq, lease(seq));
            model.insert(seq, seq);
            assert!(
                map.ring.len() <= 2 * map.len() + SLACK,
                "ring {} for {}",
                map.ring.len(),
                map.len()
            );
            // Every 5,000th lease stays to the end; the others leave within about 300.
            if seq % 5_000 != 0 {
                held.push(seq);
            }
            while held.len() > 300 {
                let gone = held.swap_remove(next() as usize % held.len());
                assert_eq!(map.remove(gone).map(|l| l.token), Some(gone));
                assert_eq!(map.remove(gone).map(|l| l.token), None, "gone already");
                model.remove(&gone);
            }
            assert_eq!(map.len(), model.len());
        }
        assert!(!map.aside.is_empty(), "the long-held leases moved aside");
        for &seq in model.keys() {
            assert_eq!(map.get(seq).map(|l| l.token), Some(seq));
        }
        let mut seen: Vec<u64> = map
            .iter()
            .map(|(s, l)| {
                assert_eq!(s, l.token);
                s
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, model.keys().copied().collect::<Vec<_>>());
        for (s, l) in map.iter_mut() {
            l.marked = s % 2 == 0;
        }
        assert!(
            map.get(0).is_some_and(|l| l.marked),
            "aside, written through iter_mut"
        );
        assert_eq!(map.get(50_001).map(|l| l.token), None);
        for seq in model.keys() {
            map.get_mut(*seq).unwrap().outcome = true;
            assert!(map.remove(*seq).is_some_and(|l| l.outcome));
        }
        assert_eq!(map.len(), 0);
        assert!(map.ring.is_empty() && map.aside.is_empty());
    }
}
