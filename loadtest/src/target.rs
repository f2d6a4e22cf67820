//! The Redis a run uses: a private redis-server (the default), a private Redis Cluster
//! (`--cluster N`: N primaries on loopback), or the one `--redis-url` names, where the
//! harness touches only its own fresh queues and deletes them after. With
//! `--partitions P`, every fresh queue is made a partitioned queue of P partitions before
//! it is used (on a cluster they spread over the primaries).

use crate::cli::Common;
use weir::Conn;
use weir::queue::partitions::Partitions;
use weir::queue::settings::Settings;
use weir::{EmbeddedCluster, EmbeddedRedis, Redis};

/// The private server or cluster a run started, stopped when the run ends.
enum Private {
    Server(EmbeddedRedis),
    Cluster(EmbeddedCluster),
}

pub(crate) struct Target {
    private: Option<Private>,
    pub url: String,
    pub conn: Conn,
    partitions: Option<usize>,
    /// Queue settings every fresh queue gets before it is used (a comparison sets them).
    settings: std::sync::Mutex<Option<Settings>>,
}

impl Target {
    pub(crate) async fn open(c: &Common) -> anyhow::Result<Self> {
        let private = match (&c.redis_url, c.cluster) {
            (Some(_), Some(_)) => anyhow::bail!("--cluster starts a private cluster: drop --redis-url"),
            (Some(_), None) => None,
            (None, Some(n)) => Some(Private::Cluster(EmbeddedCluster::start(n, 0)?)),
            (None, None) => Some(Private::Server(EmbeddedRedis::start()?)),
        };
        let url = match (&c.redis_url, &private) {
            (Some(u), _) => u.clone(),
            (None, Some(Private::Server(e))) => e.url(),
            (None, Some(Private::Cluster(e))) => e.url(),
            (None, None) => unreachable!("a server was started when no URL was given"),
        };
        Self::on(private, url, c.partitions.map(|p| p as usize)).await
    }

    /// A private single redis-server, whatever the options say (comparisons start one
    /// beside a cluster).
    pub(crate) async fn single(partitions: Option<usize>) -> anyhow::Result<Self> {
        let e = EmbeddedRedis::start()?;
        let url = e.url();
        Self::on(Some(Private::Server(e)), url, partitions).await
    }

    /// A private cluster of `primaries`.
    pub(crate) async fn cluster(primaries: usize, partitions: Option<usize>) -> anyhow::Result<Self> {
        let e = EmbeddedCluster::start(primaries, 0)?;
        let url = e.url();
        Self::on(Some(Private::Cluster(e)), url, partitions).await
    }

    async fn on(private: Option<Private>, url: String, partitions: Option<usize>) -> anyhow::Result<Self> {
        let conn = Redis::open(&url)?.connect().await?;
        Ok(Self {
            private,
            url,
            conn,
            partitions,
            settings: Default::default(),
        })
    }

    /// A queue name no earlier run used: `lt-<scenario>-<random>`.
    pub(crate) fn fresh_queue(scenario: &str) -> String {
        format!("lt-{scenario}-{:08x}", rand::random::<u32>())
    }

    /// A fresh queue (see [`Target::fresh_queue`]), partitioned if the run asks for it,
    /// with the settings [`Target::set_queue_settings`] gave.
    pub(crate) async fn queue(&self, scenario: &str) -> anyhow::Result<String> {
        let q = Self::fresh_queue(scenario);
        if let Some(p) = self.partitions {
            Partitions::create(&mut self.conn.clone(), &q, p).await?;
        }
        let settings = self.settings.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(s) = settings {
            Settings::update(&mut self.conn.clone(), &q, &s).await?;
        }
        Ok(q)
    }

    /// Settings for the fresh queues made from now on (`None`: none).
    pub(crate) fn set_queue_settings(&self, s: Option<Settings>) {
        *self.settings.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }

    /// Deletes a queue's keys on a shared server (a private one just goes away).
    pub(crate) async fn cleanup(&self, queue: &str) {
        if self.private.is_none() {
            self.remove(queue).await;
        }
    }

    /// Deletes a queue's keys, every lane's for a partitioned queue (one call per lane:
    /// on a cluster the lanes live in different slots). DEL, not UNLINK: a big queue's
    /// memory is freed before the call returns, not by a background thread whose CPU
    /// time would count in the next measurement's `INFO cpu`.
    pub(crate) async fn remove(&self, queue: &str) {
        let Ok(keys) = weir::queue::keys::QueueKeys::new(queue) else {
            return;
        };
        let mut conn = self.conn.clone();
        let mut lanes = vec![keys.clone()];
        if let Ok(Some(p)) = Partitions::read(&mut conn, queue).await {
            lanes.extend(p.lanes().filter(|k| k.is_partition()).cloned());
        }
        for lane in lanes {
            let mut del = redis::cmd("DEL");
            del.arg(&lane.all()[..])
                .arg(lane.settings())
                .arg(lane.partitions());
            if let Err(e) = del.query_async::<()>(&mut conn).await {
                eprintln!("could not delete the keys of queue {}: {e}", lane.name());
            }
        }
    }

    /// Where the server is, for the summary.
    pub(crate) fn describe(&self) -> String {
        let parts = self
            .partitions
            .map(|p| format!(", queues of {p} partitions"))
            .unwrap_or_default();
        match &self.private {
            Some(Private::Server(e)) => format!(
                "private redis-server on port {} (pid {}){parts}",
                e.port(),
                e.pid()
            ),
            Some(Private::Cluster(e)) => format!("private Redis Cluster at {}{parts}", e.urls()),
            None => format!("{}{parts}", weir::redis::conn::redact_url(&self.url)),
        }
    }
}
