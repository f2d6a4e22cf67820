//! Redis Sentinel: `redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]`
//! names a primary that Sentinel watches (redis-rs's `sentinel` feature asks the sentinels
//! for it). Every connection is made to the primary the sentinels name at that moment, and
//! a connection whose calls keep failing (the old primary is down, or came back as a
//! replica and answers READONLY) is replaced by one to the new primary
//! (`link.rs`), so consumers follow a failover by themselves.

use crate::error::{Error, Result};
use redis::IntoConnectionInfo;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};

/// The URL scheme of a Sentinel-watched primary.
pub(crate) const SCHEME: &str = "redis+sentinel://";

/// A parsed `redis+sentinel://` URL.
#[derive(Debug, Clone)]
pub(crate) struct SentinelSpec {
    /// The sentinels, as `redis://host:port`.
    sentinels: Vec<String>,
    /// The name the sentinels monitor the primary under.
    service: String,
    /// How to talk to the primary: its user, password and database.
    node: SentinelNodeConnectionInfo,
}

impl SentinelSpec {
    /// Parses `url`; `redacted` names it in errors.
    pub(crate) fn parse(url: &str, redacted: &str) -> Result<Self> {
        let bad = |why: &str| Error::Connect {
            url: redacted.to_owned(),
            message: format!(
                "invalid URL: {why} (write redis+sentinel://[user:password@]host:port[,host:port]/service[/db])"
            ),
        };
        let rest = url
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("not a redis+sentinel:// URL"))?;
        let (auth, rest) = match rest.rsplit_once('@') {
            Some((auth, rest)) => (Some(auth), rest),
            None => (None, rest),
        };
        let (hosts, path) = rest.split_once('/').ok_or_else(|| bad("no service name"))?;
        let mut path = path.split('/');
        let service = path
            .next()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("no service name"))?;
        let db = path.next().filter(|s| !s.is_empty()).unwrap_or("0");
        let sentinels: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| format!("redis://{h}"))
            .collect();
        if sentinels.is_empty() {
            return Err(bad("no sentinel address"));
        }
        let primary = match auth {
            Some(a) => format!("redis://{a}@primary/{db}"),
            None => format!("redis://primary/{db}"),
        };
        let info = primary
            .into_connection_info()
            .map_err(|e| bad(&super::url::redact_in(&e.to_string(), url)))?;
        let node =
            SentinelNodeConnectionInfo::default().set_redis_connection_info(info.redis_settings().clone());
        Ok(Self {
            sentinels,
            service: service.to_owned(),
            node,
        })
    }

    /// A client for the primary the sentinels name now.
    pub(crate) async fn primary(&self) -> redis::RedisResult<redis::Client> {
        let mut client = SentinelClient::build(
            self.sentinels.clone(),
            self.service.clone(),
            Some(self.node.clone()),
            SentinelServerType::Master,
        )?;
        client.async_get_client().await
    }
}

#[cfg(test)]
mod tests {
    use super::SentinelSpec;

    #[test]
    fn parses_sentinels_service_and_database() {
        let s = SentinelSpec::parse("redis+sentinel://:pw@h1:26379,h2:26380/mymaster/2", "x").unwrap();
        assert_eq!(s.sentinels, ["redis://h1:26379", "redis://h2:26380"]);
        assert_eq!(s.service, "mymaster");
        for bad in [
            "redis+sentinel://h1:26379",
            "redis+sentinel://h1:26379/",
            "redis+sentinel:///mymaster",
        ] {
            let e = SentinelSpec::parse(bad, "x").unwrap_err().to_string();
            assert!(e.contains("invalid URL"), "{bad}: {e}");
        }
    }
}
