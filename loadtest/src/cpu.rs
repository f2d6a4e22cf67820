//! What a run costs besides wall-clock time: CPU time of this process (all threads), from
//! `/proc/self/stat`; Redis's own CPU time, from `INFO cpu`; this process's peak resident
//! memory, from `/proc/self/status`. Wall-clock rates on a shared machine swing with the
//! neighbours' load, CPU time per job much less, so comparisons report both.

use std::time::Duration;
use weir::Conn;

/// Linux reports `utime`/`stime` in USER_HZ ticks, 100 per second on every mainstream
/// architecture (10 ms resolution: about 1% of a one-second drain).
const TICKS_PER_S: u64 = 100;

/// User + system CPU time used so far; `None` where `/proc` is not there.
pub(crate) fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; fields after its ')' are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ')'.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / TICKS_PER_S))
}

/// CPU time of this process's threads at one moment, each from its
/// `/proc/self/task/<tid>/schedstat` (the first field: nanoseconds it ran). Fine enough
/// for a phase of tens of milliseconds (a bulk enqueue of 200,000 jobs), which
/// [`process_cpu`]'s 10 ms ticks are not. [`ThreadTimes::since`] counts each thread's
/// time since this reading (a thread started since, all of it); a thread that ended in
/// between takes its share with it, so measure a stretch whose busy threads outlive it
/// (the runtime's workers).
#[derive(Debug, Clone)]
pub(crate) struct ThreadTimes(std::collections::HashMap<u64, u64>);

impl ThreadTimes {
    /// Now; `None` where `/proc` is not there.
    pub(crate) fn now() -> Option<Self> {
        let mut times = std::collections::HashMap::new();
        for task in std::fs::read_dir("/proc/self/task").ok()? {
            let task = task.ok()?;
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                continue;
            };
            // A thread may end while the list is read: skip what is gone.
            let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
                continue;
            };
            times.insert(tid, stat.split_whitespace().next()?.parse().ok()?);
        }
        Some(Self(times))
    }

    /// CPU time this process's threads ran between `self` and now.
    pub(crate) fn since(&self) -> Option<Duration> {
        let now = Self::now()?;
        let ns = now
            .0
            .iter()
            .map(|(tid, &ns)| ns.saturating_sub(self.0.get(tid).copied().unwrap_or(0)))
            .sum();
        Some(Duration::from_nanos(ns))
    }
}

/// Redis's CPU time so far (`used_cpu_sys + used_cpu_user` of `INFO cpu`, all its
/// threads; on a cluster, summed over the primaries), in seconds; `None` if the server
/// does not say (an ACL without INFO, say). On a shared server it counts every client's
/// work.
pub(crate) async fn redis_cpu(conn: &Conn) -> Option<f64> {
    Some(redis_cpu_by_node(conn).await?.iter().map(|(_, s)| s).sum())
}

/// [`redis_cpu`] of each node: one entry (address "") for a single server, one per
/// primary on a cluster.
pub(crate) async fn redis_cpu_by_node(conn: &Conn) -> Option<Vec<(String, f64)>> {
    let info: redis::Value = redis::cmd("INFO")
        .arg("cpu")
        .query_async(&mut conn.clone())
        .await
        .ok()?;
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    };
    let mut nodes = match &info {
        redis::Value::Map(kv) => kv
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, parse_redis_cpu(&text(v)?)?)))
            .collect::<Vec<_>>(),
        one => vec![(String::new(), parse_redis_cpu(&text(one)?)?)],
    };
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    Some(nodes)
}

fn parse_redis_cpu(info: &str) -> Option<f64> {
    let field = |name: &str| -> Option<f64> {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(field("used_cpu_sys")? + field("used_cpu_user")?)
}

/// CPU time so far of this process and of Redis: [`CpuMark::per_job`] gives what a stretch
/// of a run cost per job.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuMark {
    process: Option<Duration>,
    redis: Option<f64>,
}

/// CPU µs per job over a stretch of a run: this process (producer, in-process consumer,
/// accounting) and Redis; `None` where it could not be read.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct PerJob {
    pub harness_us: Option<f64>,
    pub redis_us: Option<f64>,
}

impl CpuMark {
    pub(crate) async fn now(conn: &Conn) -> Self {
        Self {
            process: process_cpu(),
            redis: redis_cpu(conn).await,
        }
    }

    /// CPU µs per job of `jobs` since this mark.
    pub(crate) async fn per_job(&self, conn: &Conn, jobs: u64) -> PerJob {
        let now = Self::now(conn).await;
        let us = |s: f64| (s * 1e9 / jobs.max(1) as f64).round() / 1000.0;
        PerJob {
            harness_us: now
                .process
                .zip(self.process)
                .map(|(b, a)| us(b.saturating_sub(a).as_secs_f64())),
            redis_us: now.redis.zip(self.redis).map(|(b, a)| us(b - a)),
        }
    }
}

/// Starts a new peak of this process's resident memory (Linux: `5` into
/// `/proc/self/clear_refs` resets `VmHWM` to the current size); false if it cannot.
pub(crate) fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// This process's peak resident memory since the last [`reset_peak_rss`] (or its start),
/// in bytes.
pub(crate) fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn redis_cpu_is_system_plus_user() {
        let info =
            "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.0\r\n";
        assert_eq!(super::parse_redis_cpu(info), Some(3.75));
        assert_eq!(super::parse_redis_cpu("# CPU\r\n"), None);
    }

    #[test]
    fn peak_rss_follows_a_reset() {
        let before = super::peak_rss().expect("VmHWM");
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        let during = super::peak_rss().expect("VmHWM");
        assert!(during >= before + (60 << 20), "{before} -> {during}");
        drop(big);
        if super::reset_peak_rss() {
            assert!(super::peak_rss().expect("VmHWM") < during);
        }
    }

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

    #[test]
    fn thread_times_count_a_busy_stretch_and_not_the_threads_that_end() {
        use std::time::Duration;
        // A thread that has run 30 ms of CPU ends during the stretch: the stretch is what
        // the others ran in it (a sum over live threads would come out 20 ms short, or 0).
        let (spun, spun_rx) = std::sync::mpsc::channel();
        let (end, end_rx) = std::sync::mpsc::channel::<()>();
        let ending = std::thread::spawn(move || {
            spin(Duration::from_millis(30));
            spun.send(()).unwrap();
            end_rx.recv().ok();
        });
        spun_rx.recv().unwrap();
        let before = super::ThreadTimes::now().expect("/proc/self/task");
        end.send(()).unwrap();
        ending.join().unwrap();
        spin(Duration::from_millis(10));
        let spent = before.since().expect("again");
        assert!(spent >= Duration::from_millis(10), "{spent:?}");
        assert!(spent < Duration::from_secs(60), "{spent:?}");
    }

    /// Keeps this thread busy until it has run `cpu` on a core (however long that takes
    /// on a busy machine).
    fn spin(cpu: std::time::Duration) {
        let ran = || {
            let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
            std::time::Duration::from_nanos(stat.split_whitespace().next().unwrap().parse().unwrap())
        };
        let (start, mut x) = (ran(), 0u64);
        while ran() - start < cpu {
            for _ in 0..1000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
        }
        assert!(x > 0);
    }
}
