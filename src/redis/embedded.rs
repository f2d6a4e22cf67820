//! A private `redis-server` on a free loopback port in a temporary directory, stopped on
//! drop: the embedded default of the quick start, the load-test harness and the tests.

use crate::error::{Result, ServerError};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running private redis-server.
#[derive(Debug)]
pub struct EmbeddedRedis {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl EmbeddedRedis {
    /// Starts `redis-server` from `PATH` with no persistence.
    pub fn start() -> Result<Self> {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts `redis-server` with extra arguments (for example AOF settings).
    pub fn start_with(extra: &[&str]) -> Result<Self> {
        // A free port can be taken between probing and binding: try a few.
        let mut started = Self::try_start(extra);
        for _ in 1..5 {
            if started.is_ok() {
                break;
            }
            started = Self::try_start(extra);
        }
        started
    }

    fn try_start(extra: &[&str]) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = tempfile::Builder::new().prefix("weir-redis-").tempdir()?;
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let child = spawn(port, dir.path(), &extra)?;
        let mut server = Self {
            child,
            port,
            dir,
            extra,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Stops the server the way an operator would (`SIGTERM`: it writes its AOF or RDB and
    /// exits), waiting up to 10 s, then kills it if it is still there. Clients see their
    /// connections close. The port and the directory stay reserved for [`Self::restart`].
    pub fn stop(&mut self) -> Result<()> {
        // Already gone (and reaped): its PID may belong to someone else now.
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        // std::process has no SIGTERM; rustix sends it without unsafe code.
        let pid = rustix::process::Pid::from_child(&self.child);
        let sent = rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_ok();
        let started = Instant::now();
        while sent && started.elapsed() < Duration::from_secs(10) {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill()
    }

    /// Kills the server at once (`SIGKILL`): what it had not yet written to disk is lost,
    /// as in a crash.
    pub fn kill(&mut self) -> Result<()> {
        if self.child.try_wait()?.is_none() {
            self.child.kill()?;
            self.child.wait()?;
        }
        Ok(())
    }

    /// Starts the server again, after [`Self::stop`] or [`Self::kill`], on the same port, in
    /// the same directory and with the same arguments, so it reloads what it persisted.
    /// Stops it first if it is still running.
    pub fn restart(&mut self) -> Result<()> {
        self.stop()?;
        let started = Instant::now();
        // The port is ours, but the old socket may linger a moment: retry the spawn.
        loop {
            self.child = spawn(self.port, self.dir.path(), &self.extra)?;
            match self.wait_ready() {
                Ok(()) => return Ok(()),
                Err(e) if started.elapsed() > Duration::from_secs(10) => return Err(e),
                Err(_) => {
                    let _ = self.kill();
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(ServerError::Exited { status }.into());
            }
            // Any reply counts, even NOAUTH from a server started with a password.
            if let Ok(client) = redis::Client::open(self.url())
                && let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200))
                && answered(&redis::cmd("PING").query::<String>(&mut c))
            {
                return Ok(());
            }
            let within = Duration::from_secs(10);
            if started.elapsed() > within {
                return Err(ServerError::NotReady {
                    what: "redis-server did not answer",
                    within,
                }
                .into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its working directory (logs, persistence files).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

fn spawn(port: u16, dir: &std::path::Path, extra: &[String]) -> Result<Child> {
    Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "no",
        ])
        .arg("--dir")
        .arg(dir)
        .args(["--logfile", "redis.log", "--protected-mode", "yes"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| {
            ServerError::Missing {
                program: "redis-server",
                package: "redis-server",
                source,
            }
            .into()
        })
}

/// A reply from the server, even an error reply like NOAUTH, means it is up; LOADING (still
/// reading its AOF) does not.
fn answered(r: &redis::RedisResult<String>) -> bool {
    match r {
        Ok(_) => true,
        Err(e) => {
            !(e.is_io_error()
                || e.is_connection_dropped()
                || e.is_connection_refusal()
                || e.code() == Some("LOADING"))
        }
    }
}

impl Drop for EmbeddedRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
