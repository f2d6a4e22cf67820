//! Job ids weir generates: a random per-process prefix and a counter in hex, unique
//! without a round trip.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counter values a thread takes for its ids at a time ([`new_id`]).
const ID_BLOCK: u64 = 1024;

/// A fresh job id: a random per-process prefix and a counter, unique without a round trip.
pub fn new_id() -> String {
    let mut id = String::new();
    push_new_id(&mut id);
    id
}

/// Appends a fresh job id ([`new_id`]) to `out`: a bulk load writes its ids into one
/// buffer, with no allocation per id.
pub(crate) fn push_new_id(out: &mut String) {
    // `<16 hex digits>-`, written once per process; ids are made in bulk loads, so the
    // counter is written by hand rather than through the formatting machinery.
    static PREFIX: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{:016x}-", rand::random::<u64>()));
    // The process's counter hands out blocks of values; each thread counts through its
    // own block, so an id costs no atomic add (atomics are dear on this kind of machine).
    static NEXT_BLOCK: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        /// The next value of this thread's block, and the end of the block.
        static BLOCK: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
    }
    let n = BLOCK.with(|b| {
        let (mut next, mut end) = b.get();
        if next == end {
            next = NEXT_BLOCK.fetch_add(ID_BLOCK, Ordering::Relaxed);
            end = next + ID_BLOCK;
        }
        b.set((next + 1, end));
        next
    });
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b"0123456789abcdef"[(rest & 0xf) as usize];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    out.reserve(PREFIX.len() + digits.len() - at);
    out.push_str(&PREFIX);
    // Hex digits are ASCII: pushed as they are, with no UTF-8 check of the slice.
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::envelope::MAX_ID_LEN;

    #[test]
    fn ids_are_unique() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        crate::queue::keys::validate_token("job id", &a, MAX_ID_LEN).unwrap();
        // `<16 hex digits>-<counter in hex>`: one prefix per process, the counter counts.
        let (prefix, n) = a.split_once('-').unwrap();
        let (prefix_b, m) = b.split_once('-').unwrap();
        assert_eq!((prefix.len(), prefix), (16, prefix_b));
        assert!(u64::from_str_radix(prefix, 16).is_ok());
        let (n, m) = (
            u64::from_str_radix(n, 16).unwrap(),
            u64::from_str_radix(m, 16).unwrap(),
        );
        assert!(m > n, "{a} then {b}");
        assert_eq!(format!("{n:x}"), a.split_once('-').unwrap().1, "no leading zeros");
    }

    /// Threads count through blocks of their own: ids made side by side on several
    /// threads, each past a few blocks, are all distinct, and each thread's count up.
    #[test]
    fn ids_made_on_many_threads_are_unique() {
        let per_thread = 3 * ID_BLOCK as usize + 7;
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(move || (0..per_thread).map(|_| new_id()).collect::<Vec<_>>()))
            .collect();
        let mut all = std::collections::HashSet::new();
        for t in threads {
            let ids = t.join().unwrap();
            let counters: Vec<u64> = ids
                .iter()
                .map(|id| u64::from_str_radix(id.split_once('-').unwrap().1, 16).unwrap())
                .collect();
            for (id, n) in ids.iter().zip(&counters) {
                assert_eq!(id.split_once('-').unwrap().1, format!("{n:x}"), "{id}");
            }
            // One step at a time within a block; a new block starts at a block boundary.
            assert!(
                counters
                    .windows(2)
                    .all(|w| w[1] == w[0] + 1 || (w[1] > w[0] && w[1] % ID_BLOCK == 0)),
                "one thread's ids count up"
            );
            all.extend(ids);
        }
        assert_eq!(all.len(), 4 * per_thread);
    }
}
