//! The Redis a run uses: a private redis-server (the default), or the one `--redis-url`
//! names, where the harness touches only its own fresh queues and deletes them after.

use weir::Conn;
use weir::{EmbeddedRedis, Redis};

pub struct Target {
    /// Kept to stop the private server when the run ends.
    embedded: Option<EmbeddedRedis>,
    pub url: String,
    pub conn: Conn,
}

impl Target {
    pub async fn open(url: Option<&str>) -> anyhow::Result<Self> {
        let embedded = match url {
            Some(_) => None,
            None => Some(EmbeddedRedis::start()?),
        };
        let url = match (url, &embedded) {
            (Some(u), _) => u.to_owned(),
            (None, Some(e)) => e.url(),
            (None, None) => unreachable!("a server was started when no URL was given"),
        };
        let redis = Redis::open(&url)?;
        let conn = redis.connect().await?;
        Ok(Self { embedded, url, conn })
    }

    /// A queue name no earlier run used: `lt-<scenario>-<random>`.
    pub fn fresh_queue(scenario: &str) -> String {
        format!("lt-{scenario}-{:08x}", rand::random::<u32>())
    }

    /// Deletes a queue's keys on a shared server (a private one just goes away).
    pub async fn cleanup(&self, queue: &str) {
        if self.embedded.is_none() {
            self.remove(queue).await;
        }
    }

    /// Deletes a queue's keys. DEL, not UNLINK: a big queue's memory is freed before the
    /// call returns, not by a background thread whose CPU time would count in the next
    /// measurement's `INFO cpu`.
    pub async fn remove(&self, queue: &str) {
        let Ok(keys) = weir::keys::QueueKeys::new(queue) else {
            return;
        };
        let mut conn = self.conn.clone();
        let mut del = redis::cmd("DEL");
        del.arg(&keys.all()[..]).arg(keys.settings());
        if let Err(e) = del.query_async::<()>(&mut conn).await {
            eprintln!("could not delete the keys of queue {queue}: {e}");
        }
    }

    /// Where the server is, for the summary.
    pub fn describe(&self) -> String {
        match &self.embedded {
            Some(e) => format!("private redis-server on port {} (pid {})", e.port(), e.pid()),
            None => weir::conn::redact_url(&self.url),
        }
    }
}
