//! Connections to Redis: the multiplexed, reconnecting connection every script call uses,
//! and the pub/sub subscription that wakes idle consumers.

use crate::error::{Error, Result};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
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
    /// Parses a `redis://` or `rediss://` URL.
    pub fn open(url: &str) -> Result<Self> {
        let redacted = redact_url(url);
        let client = redis::Client::open(url).map_err(|e| Error::Connect {
            url: redacted.clone(),
            message: format!("invalid URL: {}", e.to_string().replace(url, &redacted)),
        })?;
        Ok(Self {
            client,
            url: redacted,
        })
    }

    /// The URL, password redacted.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A multiplexed connection that reconnects by itself (the call in flight when the
    /// link drops fails; callers retry).
    pub async fn connect(&self) -> Result<ConnectionManager> {
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_secs(2));
        ConnectionManager::new_with_config(self.client.clone(), config)
            .await
            .map_err(|e| self.connect_error(e))
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
    use super::redact_url;

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact_url("redis://:secret@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact_url("rediss://user:pw@h/1"), "rediss://user:***@h/1");
        assert_eq!(redact_url("redis://token@h"), "redis://***@h");
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }
}
