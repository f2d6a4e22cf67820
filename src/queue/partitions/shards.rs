//! The primaries of a Redis Cluster and the slots each serves, from `CLUSTER SHARDS`
//! (RESP2 flat key/value arrays or RESP3 maps): where `Partitions::create` places the
//! partitions.

use crate::error::{Error, Result};
use crate::redis::conn::Conn;

/// A cluster primary: its address and the slot ranges it serves.
#[derive(Debug, Clone)]
pub(super) struct Primary {
    pub(super) addr: String,
    pub(super) slots: Vec<(u16, u16)>,
}

/// The primaries (`CLUSTER SHARDS`), ordered by their first slot.
pub(super) async fn primaries(conn: &mut Conn) -> Result<Vec<Primary>> {
    let shards: redis::Value = redis::cmd("CLUSTER").arg("SHARDS").query_async(conn).await?;
    let mut out = Vec::new();
    for shard in as_list(&shards) {
        let fields = pairs(shard);
        let slots: Vec<u16> = fields
            .iter()
            .find(|(k, _)| k == "slots")
            .map(|(_, v)| as_list(v).iter().filter_map(as_int).map(|n| n as u16).collect())
            .unwrap_or_default();
        let primary = fields
            .iter()
            .find(|(k, _)| k == "nodes")
            .into_iter()
            .flat_map(|(_, v)| as_list(v))
            .map(pairs)
            .find(|n| {
                n.iter()
                    .any(|(k, v)| k == "role" && as_text(v).as_deref() == Some("master"))
            });
        let (Some(node), false) = (primary, slots.is_empty()) else {
            continue;
        };
        let get = |name: &str| node.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let ip = get("ip").and_then(|v| as_text(&v)).unwrap_or_default();
        let port = get("port").and_then(|v| as_int(&v)).unwrap_or(0);
        out.push(Primary {
            addr: format!("{ip}:{port}"),
            slots: slots
                .chunks(2)
                .filter(|c| c.len() == 2)
                .map(|c| (c[0], c[1]))
                .collect(),
        });
    }
    if out.is_empty() {
        return Err(Error::config("Redis Cluster", "reports no primary serving slots"));
    }
    out.sort_by_key(|p| p.slots.iter().map(|s| s.0).min());
    Ok(out)
}

fn as_list(v: &redis::Value) -> &[redis::Value] {
    match v {
        redis::Value::Array(a) | redis::Value::Set(a) => a,
        _ => &[],
    }
}

/// A RESP2 flat key/value array or a RESP3 map, as (key, value) pairs.
fn pairs(v: &redis::Value) -> Vec<(String, redis::Value)> {
    match v {
        redis::Value::Map(kv) => kv
            .iter()
            .filter_map(|(k, v)| Some((as_text(k)?, v.clone())))
            .collect(),
        other => as_list(other)
            .chunks(2)
            .filter_map(|c| Some((as_text(c.first()?)?, c.get(1)?.clone())))
            .collect(),
    }
}

fn as_text(v: &redis::Value) -> Option<String> {
    match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        redis::Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

fn as_int(v: &redis::Value) -> Option<i64> {
    match v {
        redis::Value::Int(i) => Some(*i),
        other => as_text(other)?.parse().ok(),
    }
}
