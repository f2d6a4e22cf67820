//! The start-up check of Redis's `maxmemory-policy`: any policy but `noeviction` lets Redis
//! delete keys under memory pressure, and a queue whose keys are evicted loses or strands
//! jobs (an envelope gone while its id waits in ready, a lease set gone while jobs run).

use crate::error::{Error, Result};
use redis::aio::ConnectionLike;

/// Fails with [`Error::Eviction`] unless Redis's `maxmemory-policy` is `noeviction` or
/// `allow` says the operator knows. A server that refuses `INFO` (an ACL without it) is
/// reported once, and the check passes: it cannot be made. A call that fails on its way
/// (a dropped connection, a timeout) is an error, for the caller to retry.
///
/// On a Redis Cluster every primary answers, and each must be `noeviction`.
pub(crate) async fn check<C: ConnectionLike>(conn: &mut C, allow: bool) -> Result<()> {
    let info: redis::Value = match redis::cmd("INFO").arg("memory").query_async(conn).await {
        Ok(info) => info,
        Err(e) if Error::from(e.clone()).is_transient() => return Err(e.into()),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read redis maxmemory-policy (INFO refused?); make sure it is noeviction");
            return Ok(());
        }
    };
    let mut texts = Vec::new();
    collect_texts(&info, &mut texts);
    let Some(policy) = texts
        .iter()
        .filter_map(|t| policy(t))
        .find(|p| *p != "noeviction")
    else {
        return Ok(());
    };
    if allow {
        tracing::warn!(
            policy,
            "redis may evict queue keys (maxmemory-policy is not noeviction); running anyway, as --allow-eviction asks"
        );
        return Ok(());
    }
    Err(Error::Eviction {
        policy: policy.to_owned(),
    })
}

/// The text replies in `v`: one for a single Redis, one per node (a map of address ->
/// reply) for a cluster.
fn collect_texts(v: &redis::Value, out: &mut Vec<String>) {
    match v {
        redis::Value::BulkString(b) => out.push(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => out.push(s.clone()),
        redis::Value::VerbatimString { text, .. } => out.push(text.clone()),
        redis::Value::Map(kv) => kv.iter().for_each(|(_, v)| collect_texts(v, out)),
        redis::Value::Array(vs) => vs.iter().for_each(|v| collect_texts(v, out)),
        _ => {}
    }
}

/// The `maxmemory_policy` field of an `INFO memory` reply.
fn policy(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|l| l.strip_prefix("maxmemory_policy:"))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_policy_from_info() {
        let info = "# Memory\r\nused_memory:1\r\nmaxmemory_policy:allkeys-lru\r\nother:2\r\n";
        assert_eq!(super::policy(info), Some("allkeys-lru"));
        assert_eq!(super::policy("# Memory\r\n"), None);
    }
}
