//! CPU time of this process (all threads), from `/proc/self/stat`: wall-clock rates on a
//! shared machine swing with the neighbours' load, CPU time per job much less, so the
//! tracking comparison reports both.

use std::time::Duration;

/// Linux reports `utime`/`stime` in USER_HZ ticks, 100 per second on every mainstream
/// architecture (10 ms resolution: about 1% of a one-second drain).
const TICKS_PER_S: u64 = 100;

/// User + system CPU time used so far; `None` where `/proc` is not there.
pub fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; fields after its ')' are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ')'.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / TICKS_PER_S))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_grows() {
        let a = super::process_cpu().expect("/proc/self/stat");
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(super::process_cpu().expect("again") >= a);
    }
}
