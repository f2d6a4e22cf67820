//! Connections to Redis: the multiplexed, reconnecting connection every script call uses,
//! and the pub/sub subscription that wakes idle consumers.

use crate::error::{Error, Result};
use redis::RedisFuture;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How long a script call may take before it fails (redis-rs defaults to 500 ms, too
/// short for a fetch of thousands of jobs on a busy server).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A Redis endpoint: parsed once, connected on demand.
#[derive(Clone)]
pub struct Redis {
    client: redis::Client,
    url: String,
    response_timeout: Duration,
}

/// TLS material for a `rediss://` URL, as PEM files: a CA to trust instead of the system
/// roots, and a client certificate with its key for servers that require one
/// (`tls-auth-clients yes`). Reading them needs the `tls` feature (on by default).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TlsFiles {
    /// CA certificate(s) that signed the server's certificate.
    pub ca: Option<PathBuf>,
    /// Client certificate (needs `key`).
    pub cert: Option<PathBuf>,
    /// Client private key (needs `cert`).
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    /// True when no file is given.
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }

    #[cfg(feature = "tls")]
    fn load(&self) -> Result<redis::TlsCertificates> {
        let read = |what: &'static str, p: &PathBuf| {
            std::fs::read(p).map_err(|source| Error::TlsFile {
                what,
                path: p.clone(),
                source,
            })
        };
        let client_tls = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some(redis::ClientTlsConfig {
                client_cert: read("client certificate", c)?,
                client_key: read("client key", k)?,
            }),
            (None, None) => None,
            _ => {
                return Err(Error::Config(
                    "a TLS client certificate needs its key, and a key its certificate".into(),
                ));
            }
        };
        let root_cert = self.ca.as_ref().map(|p| read("CA file", p)).transpose()?;
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis").field("url", &self.url).finish()
    }
}

/// The URL with any password replaced by `***`, safe for logs and errors.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let auth_end = rest.find('/').unwrap_or(rest.len());
    match rest[..auth_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or("");
            let user = if rest[..at].contains(':') {
                format!("{user}:***")
            } else {
                "***".to_owned()
            };
            format!("{}://{user}@{}", &url[..scheme_end], &rest[at + 1..])
        }
        None => url.to_owned(),
    }
}

impl Redis {
    /// Parses a `redis://` or `rediss://` URL (TLS trusting the system's CA roots; TLS
    /// needs the `tls` feature).
    pub fn open(url: &str) -> Result<Self> {
        Self::open_tls(url, &TlsFiles::default())
    }

    /// Parses a URL and, for `rediss://`, uses the given CA and client certificate.
    pub fn open_tls(url: &str, tls: &TlsFiles) -> Result<Self> {
        let redacted = redact_url(url);
        let invalid = |e: redis::RedisError| Error::Connect {
            url: redacted.clone(),
            message: format!("invalid URL: {}", e.to_string().replace(url, &redacted)),
        };
        let client = if tls.is_empty() {
            redis::Client::open(url).map_err(invalid)?
        } else {
            if !url.starts_with("rediss://") {
                return Err(Error::Config(format!(
                    "TLS files were given but {redacted} is not a rediss:// URL"
                )));
            }
            Self::client_with_tls(url, tls)?.map_err(invalid)?
        };
        Ok(Self {
            client,
            url: redacted,
            response_timeout: RESPONSE_TIMEOUT,
        })
    }

    /// A client for `url` with the given files: the outer error is about the files, the
    /// inner one about the URL.
    #[cfg(feature = "tls")]
    fn client_with_tls(url: &str, tls: &TlsFiles) -> Result<redis::RedisResult<redis::Client>> {
        Ok(redis::Client::build_with_tls(url, tls.load()?))
    }

    #[cfg(not(feature = "tls"))]
    fn client_with_tls(_url: &str, _tls: &TlsFiles) -> Result<redis::RedisResult<redis::Client>> {
        Err(Error::Config(
            "TLS files were given but weir was built without its `tls` feature".into(),
        ))
    }

    /// Sets how long a call may wait for its reply before it fails and is retried
    /// (default [`RESPONSE_TIMEOUT`]).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// The URL, password redacted.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A multiplexed connection that reconnects by itself (the call in flight when the
    /// link drops fails; callers retry).
    pub async fn connect(&self) -> Result<ConnectionManager> {
        self.manager().await.map_err(|e| self.connect_error(e))
    }

    /// Like [`Self::connect`], but the connection is replaced when calls keep timing out
    /// (see [`HealingConnection`]). The consumer runs on one.
    pub async fn connect_healing(&self) -> Result<HealingConnection> {
        let conn = self.connect().await?;
        Ok(HealingConnection {
            shared: Arc::new(Shared {
                redis: self.clone(),
                current: RwLock::new(conn),
                timeouts: AtomicU32::new(0),
                replacing: AtomicBool::new(false),
            }),
        })
    }

    async fn manager(&self) -> redis::RedisResult<ConnectionManager> {
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(self.response_timeout))
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_secs(2));
        let mut conn = ConnectionManager::new_with_config(self.client.clone(), config).await?;
        // One PING, so a missing password or a refused user fails here with a clear
        // message instead of at the first script call.
        redis::cmd("PING").query_async::<()>(&mut conn).await?;
        Ok(conn)
    }

    /// A pub/sub connection subscribed to `channel`.
    pub async fn subscribe(&self, channel: &str) -> Result<redis::aio::PubSub> {
        let mut ps = tokio::time::timeout(CONNECT_TIMEOUT, self.client.get_async_pubsub())
            .await
            .map_err(|_| Error::Connect {
                url: self.url.clone(),
                message: "timed out".into(),
            })?
            .map_err(|e| self.connect_error(e))?;
        ps.subscribe(channel).await?;
        Ok(ps)
    }

    fn connect_error(&self, e: redis::RedisError) -> Error {
        let message = if e.is_connection_refusal() {
            "connection refused".to_owned()
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

/// Timeouts in a row after which a [`HealingConnection`] is replaced.
const REPLACE_AFTER_TIMEOUTS: u32 = 3;

/// A [`ConnectionManager`] that is replaced when its calls keep timing out.
///
/// `ConnectionManager` reconnects when its connection breaks (reset, end of stream), but a
/// connection that goes silent, such as a network path that died without a reset or a hung
/// proxy in front of Redis, only makes every call time out, for as long as TCP keeps it
/// open: hours. After `REPLACE_AFTER_TIMEOUTS` (3) timeouts in a row, one background task
/// opens a new connection and every clone moves onto it; until then calls fail and their
/// callers retry, as for any Redis error.
#[derive(Clone)]
pub struct HealingConnection {
    shared: Arc<Shared>,
}

struct Shared {
    redis: Redis,
    current: RwLock<ConnectionManager>,
    timeouts: AtomicU32,
    replacing: AtomicBool,
}

impl HealingConnection {
    fn current(&self) -> ConnectionManager {
        self.shared
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn observe<T>(&self, result: &redis::RedisResult<T>) {
        let shared = &self.shared;
        match result {
            Ok(_) => shared.timeouts.store(0, Ordering::Relaxed),
            Err(e) if e.is_timeout() => {
                let n = shared.timeouts.fetch_add(1, Ordering::Relaxed) + 1;
                if n >= REPLACE_AFTER_TIMEOUTS && !shared.replacing.swap(true, Ordering::AcqRel) {
                    tokio::spawn(replace(shared.clone()));
                }
            }
            Err(_) => {}
        }
    }
}

impl std::fmt::Debug for HealingConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealingConnection")
            .field("url", &self.shared.redis.url)
            .field("timeouts", &self.shared.timeouts.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

async fn replace(shared: Arc<Shared>) {
    match shared.redis.manager().await {
        Ok(conn) => {
            *shared.current.write().unwrap_or_else(|p| p.into_inner()) = conn;
            shared.timeouts.store(0, Ordering::Relaxed);
            tracing::warn!("calls to Redis kept timing out: replaced the connection");
        }
        // Still unreachable: the next timeouts try again.
        Err(e) => tracing::debug!(error = %e, "replacing a timed-out connection failed"),
    }
    shared.replacing.store(false, Ordering::Release);
}

impl ConnectionLike for HealingConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, redis::Value> {
        let mut conn = self.current();
        Box::pin(async move {
            let r = conn.req_packed_command(cmd).await;
            self.observe(&r);
            r
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        let mut conn = self.current();
        Box::pin(async move {
            let r = conn.req_packed_commands(pipeline, offset, count).await;
            self.observe(&r);
            r
        })
    }

    fn get_db(&self) -> i64 {
        self.current().get_db()
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact_url("redis://:secret@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact_url("rediss://user:pw@h/1"), "rediss://user:***@h/1");
        assert_eq!(redact_url("redis://token@h"), "redis://***@h");
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }
}
