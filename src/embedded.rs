//! A private `redis-server` on a free loopback port in a temporary directory, stopped on
//! drop: the embedded default of the quick start, the load-test harness and the tests.

use crate::error::{Error, Result};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running private redis-server.
pub struct EmbeddedRedis {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl EmbeddedRedis {
    /// Starts `redis-server` from `PATH` with no persistence.
    pub fn start() -> Result<Self> {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts `redis-server` with extra arguments (for example AOF settings).
    pub fn start_with(extra: &[&str]) -> Result<Self> {
        let mut last = None;
        // A free port can be taken between probing and binding: try a few.
        for _ in 0..5 {
            match Self::try_start(extra) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Config("redis-server did not start".into())))
    }

    fn try_start(extra: &[&str]) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = tempfile::Builder::new().prefix("weir-redis-").tempdir()?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(["--logfile", "redis.log", "--protected-mode", "yes"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                Error::Config(format!(
                    "cannot start redis-server ({e}); install it (Debian: apt-get install redis-server) or pass --redis-url"
                ))
            })?;
        let mut server = Self { child, port, dir };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(Error::Config(format!("redis-server exited at start ({status})")));
            }
            if let Ok(client) = redis::Client::open(self.url())
                && let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200))
                && redis::cmd("PING").query::<String>(&mut c).is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(10) {
                return Err(Error::Config("redis-server did not answer within 10s".into()));
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

impl Drop for EmbeddedRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
