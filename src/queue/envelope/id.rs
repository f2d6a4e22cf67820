//! Job ids weir generates: a random per-process prefix and a counter in hex, unique
//! without a round trip; a *time id* opens with the enqueue time as well, so that a compact
//! envelope (`envelope.rs`), which has no `enqueued_at`, still says when it was enqueued.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counter values a thread takes for its ids at a time ([`new_id`]).
const ID_BLOCK: u64 = 1024;

/// A fresh job id: a random per-process prefix and a counter, unique without a round trip.
pub fn new_id() -> String {
    let mut id = String::new();
    push_new_id(&mut id);
    id
}

/// Digits of a time id's time: base 36, lower case, zero-padded (until the year 2059).
const TIME_DIGITS: usize = 8;

/// Appends a fresh *time id* to `out`: `<enqueue time>.` then a [`new_id`], the time in ms
/// since the Unix epoch as [`TIME_DIGITS`] base-36 digits, e.g.
/// `mim3k2ab.0123456789abcdef-1f`. [`time_of_id`] reads the time back (`scripts/lib.lua`
/// has the same reader). Returns whether the id holds the time: one past the digits'
/// range writes a plain id.
pub(crate) fn push_time_id(out: &mut String, now_ms: u64) -> bool {
    thread_local! {
        /// The time last written, and its digits: a bulk load's jobs share their time.
        static LAST: std::cell::Cell<(u64, [u8; TIME_DIGITS])> = const { std::cell::Cell::new((u64::MAX, [0; TIME_DIGITS])) };
    }
    // Past the digits' range first, so that no time matches the cache's empty state.
    if now_ms >= 36u64.pow(TIME_DIGITS as u32) {
        push_new_id(out);
        return false;
    }
    let (at, mut digits) = LAST.get();
    if at != now_ms {
        let mut rest = now_ms;
        for d in digits.iter_mut().rev() {
            *d = b"0123456789abcdefghijklmnopqrstuvwxyz"[(rest % 36) as usize];
            rest /= 36;
        }
        LAST.set((now_ms, digits));
    }
    out.extend(digits.iter().map(|&d| char::from(d)));
    out.push('.');
    push_new_id(out);
    true
}

/// The enqueue time a time id (`push_time_id`) holds, ms since the Unix epoch; `None`
/// for any other id. The whole shape is checked (`<8 base-36>.<16 hex>-<hex>`, then
/// nothing or a partition's `.p<i>`), so that an id of a user's seldom passes for one; a
/// compact envelope's id is always weir's.
pub fn time_of_id(id: &str) -> Option<u64> {
    let (time, rest) = id.split_at_checked(TIME_DIGITS)?;
    let rest = rest.strip_prefix('.')?;
    let (prefix, rest) = rest.split_at_checked(16)?;
    let counter = rest.strip_prefix('-')?;
    let (counter, partition) = counter.split_once(".p").unwrap_or((counter, "0"));
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let digits = !partition.is_empty() && partition.bytes().all(|b| b.is_ascii_digit());
    if !(hex(prefix) && hex(counter) && digits) {
        return None;
    }
    time.bytes().try_fold(0u64, |n, b| {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'z' => b - b'a' + 10,
            _ => return None,
        };
        Some(n * 36 + u64::from(d))
    })
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

    #[test]
    fn a_time_id_holds_its_time() {
        for now in [0, 1, 1_796_000_000_000, 36u64.pow(8) - 1] {
            let mut id = String::new();
            assert!(push_time_id(&mut id, now));
            crate::queue::keys::validate_token("job id", &id, MAX_ID_LEN).unwrap();
            assert_eq!(id.find('.'), Some(8), "{id}");
            assert_eq!(time_of_id(&id), Some(now), "{id}");
            assert_eq!(time_of_id(&format!("{id}.p12")), Some(now), "{id}");
        }
        // u64::MAX first, on a thread of its own: the cache's empty state, which must not
        // pass for that time.
        std::thread::spawn(|| {
            for past in [u64::MAX, 36u64.pow(8)] {
                let mut id = String::new();
                assert!(!push_time_id(&mut id, past));
                assert_eq!(time_of_id(&id), None, "past the digits: a plain id, {id}");
                assert!(!id.contains('.'), "{id}");
                crate::queue::keys::validate_token("job id", &id, MAX_ID_LEN).unwrap();
            }
        })
        .join()
        .unwrap();
        for other in [
            new_id().as_str(),
            "order-12345",
            "mim3k2ab.0123456789abcdef-",
            "mim3k2ab.0123456789abcdeF-1",
            "mim3k2aB.0123456789abcdef-1",
            "mim3k2ab.0123456789abcdef-1x",
            "mim3k2ab.0123456789abcdef-1.p",
            "mim3k2ab.0123456789abcdef-1.px",
            "mim3k2a.0123456789abcdef-1",
            "mim3k2ab_0123456789abcdef-1",
            "mim3k2ab.0123456789abcde-1",
            "",
        ] {
            assert_eq!(time_of_id(other), None, "{other}");
        }
        assert_eq!(time_of_id("00000010.0123456789abcdef-1f.p3"), Some(36));
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
