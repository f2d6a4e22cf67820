//! How much the fetcher asks for: [`FetchSize`].

/// The size of the next fetch, from what the last ones brought: it doubles (up to the
/// configured batch) while fetches come back full, the queue holding more than they take,
/// and falls back to what came when one comes back short. So under a backlog a fetch
/// takes a whole batch (fewest calls per job), and near an empty queue the jobs that
/// trickle in are fetched a few at a time, several calls in flight, so the first of a
/// burst starts before the last is fetched.
#[derive(Debug)]
pub(super) struct FetchSize {
    now: usize,
    max: usize,
}

impl FetchSize {
    /// The smallest fetch.
    pub(super) const MIN: usize = 16;

    pub(super) fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            now: Self::MIN.min(max),
            max,
        }
    }

    pub(super) fn get(&self) -> usize {
        self.now
    }

    /// A fetch that asked for `asked` jobs brought `got`.
    pub(super) fn saw(&mut self, asked: usize, got: usize) {
        self.now = if got >= asked {
            (self.now.max(asked) * 2).min(self.max)
        } else {
            (got * 2).max(Self::MIN).min(self.max)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_size_grows_while_fetches_come_back_full_and_falls_to_what_came() {
        let mut s = FetchSize::new(500);
        let mut sizes = vec![s.get()];
        while s.get() < 500 {
            s.saw(s.get(), s.get());
            sizes.push(s.get());
        }
        assert_eq!(sizes, [16, 32, 64, 128, 256, 500]);
        s.saw(500, 40);
        assert_eq!(s.get(), 80);
        s.saw(80, 3);
        assert_eq!(s.get(), FetchSize::MIN);
        s.saw(16, 0);
        assert_eq!(s.get(), FetchSize::MIN);
        // A fetch cut short by the room left (asked 5) that came back full still says
        // "more waiting".
        s.saw(5, 5);
        assert_eq!(s.get(), 32);
        let mut small = FetchSize::new(4);
        assert_eq!(small.get(), 4);
        small.saw(4, 1);
        assert_eq!(small.get(), 4);
    }
}
