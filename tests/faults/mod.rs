//! Support for the reliability tests (crashes, Redis faults, bad input, handler faults,
//! shutdown, security): child `weir` processes, job traces, and the TCP fault proxy.
//! Named apart from `tests/common` (which has the one `wait_until` and `free_port`) so
//! the suites never collide.
#![allow(dead_code)]

pub(crate) mod proxy;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use weir::{NewJob, Producer, Queue, Redis};

/// Sends `sig` to the process `pid`.
pub(crate) fn signal(pid: u32, sig: rustix::process::Signal) -> std::io::Result<()> {
    let pid = rustix::process::Pid::from_raw(pid as i32).ok_or(std::io::ErrorKind::InvalidInput)?;
    Ok(rustix::process::kill_process(pid, sig)?)
}

/// The `weir` binary under test.
pub(crate) const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// An admin handle on `queue`.
pub(crate) async fn queue(url: &str, name: &str) -> Queue {
    Queue::new(Redis::open(url).unwrap().connect().await.unwrap(), name).unwrap()
}

/// A plain multiplexed connection, for seeding and inspecting keys.
pub(crate) async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Enqueues jobs `{prefix}-{from}` .. `{prefix}-{to - 1}` of kind `kind`, in bulk.
pub(crate) async fn enqueue_range(url: &str, queue: &str, kind: &str, prefix: &str, from: usize, to: usize) {
    let p = Producer::new(Redis::open(url).unwrap().connect().await.unwrap(), queue).unwrap();
    let jobs = (from..to).map(|i| {
        NewJob::new(kind, &serde_json::json!({ "n": i }))
            .unwrap()
            .id(format!("{prefix}-{i}"))
    });
    let r = p.enqueue_bulk(jobs).await.unwrap();
    assert_eq!(r.enqueued as usize, to - from, "{r:?}");
}

/// Weir's script `name` as `src/queue/scripts/mod.rs` builds it (the `allow-oom` shebang
/// both listed scripts open with, `lib.lua`, then the script's own file).
pub(crate) fn script(name: &str) -> redis::Script {
    const LIB: &str = include_str!("../../src/queue/scripts/lib.lua");
    let own = match name {
        "extend" => include_str!("../../src/queue/scripts/extend.lua"),
        "settle" => include_str!("../../src/queue/scripts/settle.lua"),
        other => panic!("script {other:?} is not listed here"),
    };
    redis::Script::new(&format!("{}{LIB}{own}", weir::queue::scripts::ALLOW_OOM))
}

/// The SHA1 that `EVALSHA` calls of weir's script `name` carry: what the fault proxy looks
/// for to act on one script's calls. (Load the script first, as [`load_script`] does, or
/// the first call's `NOSCRIPT` reply is the one acted on.)
pub(crate) fn script_sha(name: &str) -> Vec<u8> {
    script(name).get_hash().as_bytes().to_vec()
}

/// Loads weir's script `name` into the server at `url` (`SCRIPT LOAD`).
pub(crate) async fn load_script(url: &str, name: &str) {
    let mut conn = raw(url).await;
    script(name).load_async(&mut conn).await.unwrap();
}

/// A child process we started, killed (by its PID) if still running when dropped.
pub(crate) struct Proc {
    pub child: Child,
}

impl Proc {
    /// `weir` with `args`, standard output appended to `stdout`, standard error to `stderr`.
    pub(crate) fn weir(args: &[&str], stdout: &Path, stderr: &Path) -> Self {
        let open = |p: &Path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .unwrap()
        };
        let child = Command::new(WEIR)
            .args(args)
            .env("WEIR_LOG", "weir=info,warn")
            .env_remove("REDIS_URL")
            .stdin(Stdio::null())
            .stdout(open(stdout))
            .stderr(open(stderr))
            .spawn()
            .unwrap();
        Self { child }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reap.
    pub(crate) fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (std has no other signal; rustix sends it without unsafe code).
    pub(crate) fn sigterm(&self) {
        signal(self.pid(), rustix::process::Signal::TERM).expect("SIGTERM");
    }

    /// Waits up to `timeout` for the exit; None if it is still running.
    pub(crate) fn wait_timeout(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let started = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if started.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill9();
        }
    }
}

/// Runs `weir` to the end (bounded by `timeout`); returns (exit code, stdout, stderr).
pub(crate) fn run_weir(args: &[&str], stdin: Option<&[u8]>, timeout: Duration) -> (i32, String, String) {
    run_weir_env(args, &[], stdin, timeout)
}

/// [`run_weir`] with extra environment variables (`WEIR_LOG` among them overrides the
/// default `weir=info,warn`).
pub(crate) fn run_weir_env(
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(WEIR)
        .args(args)
        .env_remove("REDIS_URL")
        .env("WEIR_LOG", "weir=info,warn")
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    let pid = child.id();
    let out = std::thread::spawn(move || child.wait_with_output().unwrap());
    let started = Instant::now();
    while !out.is_finished() {
        if started.elapsed() > timeout {
            let _ = signal(pid, rustix::process::Signal::KILL);
            panic!("weir {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = out.join().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Job ids in the lines a `--handler print` consumer wrote to `path`, with run counts.
pub(crate) fn printed_ids(path: &Path) -> HashMap<String, usize> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut seen = HashMap::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        // A line cut by SIGKILL mid-write would not parse; it is not counted.
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line)
            && let Some(id) = v["id"].as_str()
        {
            *seen.entry(id.to_owned()).or_insert(0) += 1;
        }
    }
    seen
}

/// `weir <args> --redis-url URL -q QUEUE`; asserts it exits 0 (within a minute); returns
/// its standard output.
pub(crate) fn weir_on(url: &str, queue: &str, args: &[&str]) -> String {
    let all = [args, &["--redis-url", url, "-q", queue][..]].concat();
    let (code, out, err) = run_weir(&all, None, Duration::from_secs(60));
    assert_eq!(code, 0, "weir {all:?}: {out}{err}");
    out
}

/// `weir work` processes, each writing its standard output and error to files of its own
/// in a directory kept for the pool's life; killed when dropped.
pub(crate) struct Workers {
    dir: tempfile::TempDir,
    pub procs: Vec<Proc>,
    pub outs: Vec<std::path::PathBuf>,
    pub errs: Vec<std::path::PathBuf>,
}

impl Workers {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            procs: Vec::new(),
            outs: Vec::new(),
            errs: Vec::new(),
        }
    }

    /// `n` workers of `queue` at `url` running `handler`, with 2 s leases (so jobs a
    /// failure strands come back soon) and no metrics.
    pub(crate) fn running(url: &str, queue: &str, handler: &str, n: usize) -> Self {
        let mut w = Self::new();
        let args = [
            "--redis-url",
            url,
            "-q",
            queue,
            "--handler",
            handler,
            "--no-metrics",
            "--visibility-timeout",
            "2s",
        ];
        for _ in 0..n {
            w.start(&args);
        }
        w
    }

    /// Starts `weir work <args>`; returns its index.
    pub(crate) fn start(&mut self, args: &[&str]) -> usize {
        let i = self.procs.len();
        let (out, err) = (
            self.dir.path().join(format!("out{i}")),
            self.dir.path().join(format!("err{i}")),
        );
        let all = [&["work"][..], args].concat();
        self.procs.push(Proc::weir(&all, &out, &err));
        self.outs.push(out);
        self.errs.push(err);
        i
    }

    /// What worker `i` wrote to its standard error so far.
    pub(crate) fn log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.errs[i]).unwrap_or_default()
    }

    /// Ids every `--handler print` worker printed, with how often.
    pub(crate) fn printed(&self) -> HashMap<String, usize> {
        let mut seen = HashMap::new();
        for out in &self.outs {
            for (id, n) in printed_ids(out) {
                *seen.entry(id).or_insert(0) += n;
            }
        }
        seen
    }

    /// Waits until every id in `ids` was printed, up to `limit`.
    pub(crate) async fn wait_printed(&self, ids: &[String], limit: Duration) {
        let started = Instant::now();
        loop {
            let seen = self.printed();
            let missing: Vec<&String> = ids.iter().filter(|id| !seen.contains_key(*id)).collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "{} jobs never ran, e.g. {:?}\n{}",
                missing.len(),
                &missing[..missing.len().min(5)],
                self.log(0)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops every worker still running (SIGTERM) and asserts each exits 0.
    pub(crate) fn stop(&mut self, limit: Duration) {
        for (i, p) in self.procs.iter_mut().enumerate() {
            if p.child.try_wait().unwrap().is_some() {
                continue;
            }
            p.sigterm();
            let status = p.wait_timeout(limit);
            assert!(
                status.is_some_and(|s| s.success()),
                "worker {i}: {status:?}\n{}",
                std::fs::read_to_string(&self.errs[i]).unwrap_or_default()
            );
        }
    }
}
