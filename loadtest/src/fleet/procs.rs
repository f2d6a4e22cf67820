//! A fleet of consumer processes. Each child runs `weir-loadtest consumer`; a reader
//! thread per child turns its stdout frames into the parent's accounting. Closing a
//! child's stdin asks it to stop; `kill` sends SIGKILL to a PID this fleet started.

use super::{GaugeReader, Spec, Totals};
use crate::observed::{Gauges, Observed};
use crate::wire::{FOREIGN, Frame};
use std::io::BufReader;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Shared {
    limit: AtomicU64,
    /// The mean, as f64 bits.
    in_flight: AtomicU64,
    in_flight_max: AtomicU64,
    report: Mutex<Option<[u64; 5]>>,
    /// The process's consumer is up.
    ready: std::sync::atomic::AtomicBool,
}

struct Member {
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

pub(crate) struct Procs {
    spec: Spec,
    observed: Arc<Observed>,
    live: Vec<Member>,
    /// Gauges of the live members, for the sampler.
    gauges: Arc<Mutex<Vec<Arc<Shared>>>>,
    totals: Totals,
}

impl Procs {
    pub(crate) fn start(spec: Spec, consumers: usize, observed: Arc<Observed>) -> anyhow::Result<Self> {
        let mut p = Procs {
            spec,
            observed,
            live: Vec::new(),
            gauges: Arc::default(),
            totals: Totals::default(),
        };
        for _ in 0..consumers {
            p.spawn()?;
        }
        Ok(p)
    }

    fn command(&self) -> anyhow::Result<Command> {
        let s = &self.spec;
        let exe = std::env::current_exe()?;
        let mut cmd = Command::new(exe);
        cmd.arg("consumer")
            .args(["--redis-url", &s.redis_url, "--queue", &s.queue])
            .args(["--concurrency", &s.concurrency.to_string()])
            .args([
                "--batch",
                &s.batch.to_string(),
                "--pipeline",
                &s.pipeline.to_string(),
            ])
            .args(["--visibility-timeout", &format!("{}ms", s.visibility.as_millis())])
            .args(crate::limits::args(
                s.limiter.as_ref(),
                s.key_limiter.is_some(),
                s.rate,
            ));
        if let Some(n) = s.worker_threads {
            cmd.args(["--worker-threads", &n.to_string()]);
        }
        if s.drain {
            cmd.arg("--drain");
        }
        if let Some((o, seed, epoch)) = &s.downstream {
            cmd.arg("--downstream")
                .args(["--capacity", &o.capacity])
                .args(["--base-latency", &format!("{}us", o.base_latency.as_micros())])
                .args([
                    "--jitter",
                    &o.jitter.to_string(),
                    "--error-rate",
                    &o.error_rate.to_string(),
                ])
                .args(["--hard-factor", &o.hard_factor.to_string()])
                .args(["--error-status", &o.error_status.to_string()])
                .args(["--retry-after", &format!("{}ms", o.retry_after.as_millis())])
                .args(["--seed", &seed.to_string(), "--epoch-ms", &epoch.to_string()]);
            if let Some(from) = o.error_from {
                cmd.args(["--error-from", &format!("{}ms", from.as_millis())]);
            }
            if let Some(until) = o.error_until {
                cmd.args(["--error-until", &format!("{}ms", until.as_millis())]);
            }
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        Ok(cmd)
    }

    /// Starts one more consumer process.
    pub(crate) fn spawn(&mut self) -> anyhow::Result<u32> {
        let mut child = self
            .command()?
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start a consumer process: {e}"))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        // Until its first status frame, a process counts with its configured limit, so the
        // fleet's sum does not dip while processes start.
        let shared = Arc::new(Shared {
            limit: AtomicU64::new(self.spec.initial_limit() as u64),
            ..Shared::default()
        });
        let (obs, sh) = (self.observed.clone(), shared.clone());
        let reader = std::thread::spawn(move || read_frames(stdout, &obs, &sh));
        self.gauges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(shared.clone());
        let pid = child.id();
        self.live.push(Member {
            stdin: child.stdin.take(),
            child,
            reader: Some(reader),
            shared,
        });
        Ok(pid)
    }

    /// Waits until every live process's consumer is up, up to `timeout`.
    pub(crate) async fn ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.live.iter().all(|m| m.shared.ready.load(Ordering::Relaxed)) {
                return Ok(());
            }
            for m in &mut self.live {
                if let Ok(Some(status)) = m.child.try_wait() {
                    anyhow::bail!(
                        "consumer process {} exited before it was up ({status})",
                        m.child.id()
                    );
                }
            }
            if Instant::now() >= deadline {
                anyhow::bail!("consumer processes not up after {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Live consumer processes.
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// SIGKILLs live member `i` (a process this fleet started) and reaps it; returns its PID.
    pub(crate) fn kill(&mut self, i: usize) -> anyhow::Result<u32> {
        let mut m = self.live.swap_remove(i);
        let pid = m.child.id();
        // Child::kill sends SIGKILL to this child's PID only.
        let _ = m.child.kill();
        let _ = m.child.wait();
        self.retire(&mut m);
        Ok(pid)
    }

    /// Joins a stopped member's reader (everything it wrote is accounted) and drops
    /// its gauges.
    fn retire(&mut self, m: &mut Member) {
        if let Some(r) = m.reader.take() {
            let _ = r.join();
        }
        if let Some(r) = *m.shared.report.lock().unwrap_or_else(|e| e.into_inner()) {
            self.totals.add(r);
        }
        self.gauges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|g| !Arc::ptr_eq(g, &m.shared));
    }

    pub(crate) fn gauges(&self) -> GaugeReader {
        let members = self.gauges.clone();
        Arc::new(move || {
            let ms = members.lock().unwrap_or_else(|e| e.into_inner());
            ms.iter().fold(Gauges::default(), |g, m| Gauges {
                limit: g.limit + m.limit.load(Ordering::Relaxed),
                in_flight: g.in_flight + f64::from_bits(m.in_flight.load(Ordering::Relaxed)),
                in_flight_max: g.in_flight_max + m.in_flight_max.load(Ordering::Relaxed),
            })
        })
    }

    /// Reaps members that exited by themselves; true when none is left.
    pub(crate) fn reap(&mut self) -> anyhow::Result<bool> {
        let mut i = 0;
        while i < self.live.len() {
            if let Some(status) = self.live[i].child.try_wait()? {
                let mut m = self.live.swap_remove(i);
                self.retire(&mut m);
                if !status.success() {
                    anyhow::bail!("a consumer process (pid {}) failed: {status}", m.child.id());
                }
            } else {
                i += 1;
            }
        }
        Ok(self.live.is_empty())
    }

    pub(crate) async fn wait(mut self, timeout: Duration) -> anyhow::Result<(Totals, bool)> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.reap()? {
                return Ok((self.totals, true));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok((self.stop().await?, false))
    }

    /// Closes every stdin (a graceful stop), waits up to 60 s, then kills what is left.
    pub(crate) async fn stop(mut self) -> anyhow::Result<Totals> {
        for m in &mut self.live {
            m.stdin = None;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.reap()? && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        while !self.live.is_empty() {
            let pid = self.kill(0)?;
            eprintln!("consumer process {pid} did not stop within 60s; killed");
        }
        Ok(self.totals)
    }
}

impl Drop for Procs {
    /// On an early error, leave no process behind: kill the ones this fleet started.
    fn drop(&mut self) {
        for m in &mut self.live {
            let _ = m.child.kill();
            let _ = m.child.wait();
        }
    }
}

fn read_frames(stdout: std::process::ChildStdout, obs: &Observed, shared: &Shared) {
    let mut r = BufReader::with_capacity(1 << 16, stdout);
    // A read error or a cut frame means the process died mid-write; the jobs of that
    // frame were not acked yet (their handlers were still waiting), so they run again.
    while let Ok(Some(frame)) = Frame::read(&mut r) {
        match frame {
            Frame::Jobs(jobs) => {
                for (i, lat) in jobs {
                    obs.record((i != FOREIGN).then_some(i), lat);
                }
            }
            Frame::Errors(n) => {
                obs.errors.fetch_add(n, Ordering::Relaxed);
            }
            Frame::Status {
                limit,
                in_flight,
                in_flight_max,
            } => {
                shared.limit.store(limit, Ordering::Relaxed);
                shared.in_flight.store(in_flight.to_bits(), Ordering::Relaxed);
                shared.in_flight_max.store(in_flight_max, Ordering::Relaxed);
            }
            Frame::Report(r) => *shared.report.lock().unwrap_or_else(|e| e.into_inner()) = Some(r),
            Frame::Ready => shared.ready.store(true, Ordering::Relaxed),
        }
    }
}
