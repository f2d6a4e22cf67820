//! Connections to Redis: the endpoint ([`Redis`]: one URL, or a Redis Cluster by any of
//! its nodes or several seeds), the multiplexed, reconnecting connection every script call
//! uses ([`Conn`]), and the pub/sub subscription that wakes idle consumers.

use super::cluster::{ClusterSpec, is_cluster_info};
use super::link::Endpoint;
pub use super::link::{Conn, HealingConnection};
use super::sentinel::{self, SentinelSpec};
pub use super::tls::TlsFiles;
pub use super::url::{redact_in, redact_url};
use crate::error::{Error, Result};
use futures_util::{Stream, StreamExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;

/// The start of the message of a connection to an address where something other than
/// Redis answered.
pub const NOT_REDIS: &str = "what answers there does not speak the Redis protocol";

/// How long a script call may take before it fails (redis-rs defaults to 500 ms, too
/// short for a fetch of thousands of jobs on a busy server).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A Redis endpoint: parsed once, connected on demand.
///
/// One URL names a single Redis or any node of a Redis Cluster (the first connection asks
/// the node, `INFO cluster`, and remembers); several URLs, comma-separated, are the seed
/// nodes of a cluster.
#[derive(Clone)]
pub struct Redis {
    /// The first URL's client: the single Redis, or the node asked whether it is a cluster
    /// (none behind Sentinel: the primary is asked for at each connect).
    client: Option<redis::Client>,
    /// A primary watched by Sentinel (`redis+sentinel://`).
    sentinel: Option<Arc<SentinelSpec>>,
    /// Every URL given (with passwords: the cluster client connects with them).
    seeds: Arc<[String]>,
    #[cfg(feature = "tls")]
    certs: Option<redis::TlsCertificates>,
    url: String,
    response_timeout: Duration,
    /// Whether it is a cluster, once known (shared by clones).
    cluster: Arc<OnceCell<bool>>,
}

/// The messages of a wake subscription (see [`Redis::subscribe`]).
pub type Subscription = Pin<Box<dyn Stream<Item = redis::Msg> + Send>>;

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis").field("url", &self.url).finish()
    }
}

impl Redis {
    /// Parses a `redis://` or `rediss://` URL (TLS trusting the system's CA roots; TLS
    /// needs the `tls` feature), or several, comma-separated: the seed nodes of a cluster.
    pub fn open(url: &str) -> Result<Self> {
        Self::open_tls(url, &TlsFiles::default())
    }

    /// Parses the URL(s) and, for `rediss://`, uses the given CA and client certificate.
    pub fn open_tls(url: &str, tls: &TlsFiles) -> Result<Self> {
        if url.starts_with(sentinel::SCHEME) {
            return Self::open_sentinel(url, tls);
        }
        let seeds: Vec<String> = url
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let redacted = seeds.iter().map(|s| redact_url(s)).collect::<Vec<_>>().join(",");
        let Some(first) = seeds.first() else {
            return Err(Error::Connect {
                url: redacted,
                message: "invalid URL: none given".into(),
            });
        };
        let invalid = |seed: &str, e: redis::RedisError| Error::Connect {
            url: redacted.clone(),
            message: format!("invalid URL: {}", redact_in(&e.to_string(), seed)),
        };
        if !tls.is_empty()
            && let Some(plain) = seeds.iter().find(|s| !s.starts_with("rediss://"))
        {
            return Err(Error::config(
                format!("Redis URL {}", redact_url(plain)),
                "is not a rediss:// URL, but TLS files were given",
            ));
        }
        for seed in &seeds {
            redis::Client::open(seed.as_str()).map_err(|e| invalid(seed, e))?;
        }
        #[cfg(feature = "tls")]
        let certs = if tls.is_empty() { None } else { Some(tls.load()?) };
        let client = if tls.is_empty() {
            redis::Client::open(first.as_str()).map_err(|e| invalid(first, e))?
        } else {
            super::tls::client_with_tls(first, tls)?.map_err(|e| invalid(first, e))?
        };
        let cluster = Arc::new(OnceCell::new());
        if seeds.len() > 1 {
            let _ = cluster.set(true);
        }
        Ok(Self {
            client: Some(client),
            sentinel: None,
            seeds: seeds.into(),
            #[cfg(feature = "tls")]
            certs,
            url: redacted,
            response_timeout: RESPONSE_TIMEOUT,
            cluster,
        })
    }

    /// A `redis+sentinel://` URL: the primary the sentinels name, asked for at each
    /// connect.
    fn open_sentinel(url: &str, tls: &TlsFiles) -> Result<Self> {
        let redacted = redact_url(url);
        if !tls.is_empty() {
            return Err(Error::config(
                format!("Redis URL {redacted}"),
                "is not a rediss:// URL, but TLS files were given (TLS to Sentinel is not supported)",
            ));
        }
        let spec = SentinelSpec::parse(url, &redacted)?;
        Ok(Self {
            client: None,
            sentinel: Some(Arc::new(spec)),
            seeds: Arc::from(Vec::new()),
            #[cfg(feature = "tls")]
            certs: None,
            url: redacted,
            response_timeout: RESPONSE_TIMEOUT,
            // Sentinel watches a single primary with replicas, never a cluster.
            cluster: Arc::new(OnceCell::new_with(Some(false))),
        })
    }

    /// True for a primary watched by Sentinel: a connection that keeps failing is
    /// replaced by one to the primary the sentinels name then.
    pub(crate) fn follows_failover(&self) -> bool {
        self.sentinel.is_some()
    }

    /// The client of the single Redis: the URL's, or the primary the sentinels name now.
    async fn direct(&self) -> redis::RedisResult<redis::Client> {
        match (&self.sentinel, &self.client) {
            (Some(s), _) => s.primary().await,
            (None, Some(c)) => Ok(c.clone()),
            (None, None) => unreachable!("a Redis has a client or a sentinel"),
        }
    }

    /// Sets how long a call may wait for its reply before it fails and is retried
    /// (default [`RESPONSE_TIMEOUT`]).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Whether this Redis runs on this machine: every URL names a loopback address
    /// (`localhost`, `127.0.0.0/8`, `::1`) or a Unix socket. Behind Sentinel, false: the
    /// primary is only known once asked for. [`crate::runtime::worker_threads`] leaves a
    /// core to such a Redis.
    pub fn on_this_machine(&self) -> bool {
        if self.sentinel.is_some() {
            return false;
        }
        self.seeds.iter().all(|seed| super::url::on_this_machine(seed))
    }

    /// The URL(s), passwords redacted.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether the endpoint is a Redis Cluster: several seeds were given, or the node
    /// says so (`INFO cluster`; a user that may not run INFO is taken for a single Redis).
    pub async fn is_cluster(&self) -> Result<bool> {
        let known = self.cluster.get_or_try_init(|| self.ask_cluster()).await;
        known.copied().map_err(|e| self.connect_error(e))
    }

    async fn ask_cluster(&self) -> redis::RedisResult<bool> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(self.response_timeout));
        let mut conn = self
            .direct()
            .await?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        match redis::cmd("INFO")
            .arg("cluster")
            .query_async::<String>(&mut conn)
            .await
        {
            Ok(info) => Ok(is_cluster_info(&info)),
            Err(e)
                if e.code() == Some("NOPERM")
                    || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
            {
                tracing::debug!(error = %e, "INFO cluster refused: taking the endpoint for a single Redis");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    fn cluster_spec(&self) -> ClusterSpec {
        ClusterSpec {
            seeds: self.seeds.to_vec(),
            #[cfg(feature = "tls")]
            certs: self.certs.clone(),
            response_timeout: self.response_timeout,
            connect_timeout: CONNECT_TIMEOUT,
        }
    }

    /// A multiplexed connection that reconnects by itself (the call in flight when the
    /// link drops fails; callers retry): to the single Redis, or to the whole cluster.
    ///
    /// Behind Sentinel the connection follows a failover by itself: once calls keep
    /// failing because the primary is gone, it moves to the primary the sentinels name.
    pub async fn connect(&self) -> Result<Conn> {
        let conn = self.connect_conn().await.map_err(|e| self.connect_error(e))?;
        Ok(match self.follows_failover() {
            true => Conn::failover(HealingConnection::new(self.endpoint(), conn)),
            false => conn,
        })
    }

    pub(crate) async fn connect_conn(&self) -> redis::RedisResult<Conn> {
        let cluster = match self.cluster.get() {
            Some(c) => *c,
            None => *self.cluster.get_or_try_init(|| self.ask_cluster()).await?,
        };
        if !cluster {
            return Ok(Conn::single(self.manager().await?));
        }
        let mut conn = self.cluster_spec().client()?.get_async_connection().await?;
        // Every primary answers: a password or a user refused anywhere shows here.
        redis::cmd("PING").query_async::<()>(&mut conn).await?;
        Ok(Conn::cluster(conn))
    }

    /// Like [`Self::connect`], but the connection is replaced when calls keep timing out
    /// (see [`HealingConnection`]). The consumer runs on one.
    pub async fn connect_healing(&self) -> Result<HealingConnection> {
        let conn = self.connect_conn().await.map_err(|e| self.connect_error(e))?;
        Ok(HealingConnection::new(self.endpoint(), conn))
    }

    /// What a [`HealingConnection`] needs to open its replacement: a new connection made
    /// as [`Redis::connect_conn`] makes one.
    fn endpoint(&self) -> Endpoint {
        let redis = self.clone();
        Endpoint {
            reconnect: Box::new(move || {
                let redis = redis.clone();
                Box::pin(async move { redis.connect_conn().await })
            }),
            follows_failover: self.follows_failover(),
            url: self.url.clone(),
        }
    }

    async fn manager(&self) -> redis::RedisResult<ConnectionManager> {
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(self.response_timeout))
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_secs(2));
        let mut conn = ConnectionManager::new_with_config(self.direct().await?, config).await?;
        // One PING, so a missing password or a refused user fails here with a clear
        // message instead of at the first script call.
        redis::cmd("PING").query_async::<()>(&mut conn).await?;
        Ok(conn)
    }

    /// A subscription to the wake channel `channel`: plain pub/sub on a single Redis,
    /// sharded pub/sub (SSUBSCRIBE) on a cluster, where the channel's hash tag names the
    /// shard.
    pub async fn subscribe(&self, channel: &str) -> Result<Subscription> {
        let timed_out = || Error::Connect {
            url: self.url.clone(),
            message: "timed out".into(),
        };
        if self.is_cluster().await? {
            let sub = tokio::time::timeout(CONNECT_TIMEOUT, self.cluster_spec().subscribe(channel))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| self.connect_error(e))?;
            return Ok(Box::pin(sub));
        }
        let client = self.direct().await.map_err(|e| self.connect_error(e))?;
        let mut ps = tokio::time::timeout(CONNECT_TIMEOUT, client.get_async_pubsub())
            .await
            .map_err(|_| timed_out())?
            .map_err(|e| self.connect_error(e))?;
        ps.subscribe(channel).await?;
        Ok(ps.into_on_message().boxed())
    }

    fn connect_error(&self, e: redis::RedisError) -> Error {
        let message = if e.is_connection_refusal() {
            "connection refused".to_owned()
        } else if e.kind() == redis::ErrorKind::Parse {
            // The reply of a web server or a database of another kind: redis-rs's message
            // spans lines of byte codes.
            format!("{NOT_REDIS} (check the host and port in the URL)")
        } else if e.code() == Some("NOAUTH") {
            "the server requires a password: give it in the URL (redis://:PASSWORD@host or redis://USER:PASSWORD@host)".to_owned()
        } else if e.code() == Some("NOPERM") {
            format!("the Redis user lacks a permission weir needs (see docs/security.md): {e}")
        } else {
            e.to_string()
        };
        Error::Connect {
            url: self.url.clone(),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Redis;

    #[test]
    fn a_redis_is_on_this_machine_when_every_url_is() {
        let on = |url: &str| Redis::open(url).unwrap().on_this_machine();
        assert!(on("redis://127.0.0.1:7000,redis://localhost:7001"));
        assert!(!on("redis://127.0.0.1:7000,redis://10.0.0.6:7001"));
        // Behind Sentinel the primary is only known once asked for.
        assert!(!on("redis+sentinel://127.0.0.1:26379/primary"));
    }
}
