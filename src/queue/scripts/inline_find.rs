//! The search for inline jobs waiting in a list, behind the operator's calls by id
//! (`job_show`, `job_run_now`, `jobs_delete`): `inline_find.lua` reads the suspects and
//! the ready lists a page at a time, from their tails, so no call holds Redis for longer
//! than its budget, whatever the backlog. What it finds goes to the acting script as a
//! hint: that script looks in the lease and the batches again and takes the job as the
//! search saw it, and a delete removes it only if it is still where the hint says
//! (lib.lua's `find_inline`, jobs_delete.lua).

use super::{INLINE_FIND, as_u64, call, into_string, invocation, reply_err};
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use redis::Value;
use redis::aio::ConnectionLike;
use std::collections::HashMap;

/// Where [`find_waiting`] saw inline jobs wait: id -> (its list's number, as lib.lua's
/// `waiting` numbers them, its item, and its index in the list from the head).
pub(super) type Seen = HashMap<String, (u64, Vec<u8>, u64)>;

/// One page of the search ([`inline_find`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlinePage {
    /// Where the next page starts (`inline_find`'s `from`); `None`: the search is over,
    /// every list read or every id found.
    pub next: Option<(u64, u64)>,
    /// Each inline job found in this page: its id, its list's number, its item, and its
    /// index in the list counted from the head.
    pub found: Vec<(String, u64, Vec<u8>, u64)>,
}

/// One page of the search for the inline jobs among `ids` in the lists where jobs wait,
/// from `from`: a list's number (1 the suspects, 2..=4 the ready lists high, normal, low)
/// and a position in it counted from its tail; `(1, 0)` starts a search. A page reads at
/// most 5,000 items, or about a megabyte (`inline_find.lua`'s budgets).
pub async fn inline_find<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    from: (u64, u64),
    ids: &[&str],
) -> Result<InlinePage> {
    let mut inv = invocation(&INLINE_FIND, keys);
    inv.arg(from.0).arg(from.1);
    for id in ids {
        inv.arg(*id);
    }
    let reply: Vec<Value> = call("inline_find", keys, &mut inv, conn).await?;
    let mut it = reply.into_iter();
    let (Some(list), Some(at)) = (it.next(), it.next()) else {
        return Err(reply_err("inline_find", "no position"));
    };
    let (list, at) = (as_u64("inline_find", &list)?, as_u64("inline_find", &at)?);
    let mut found = Vec::new();
    while let (Some(id), Some(n), Some(item), Some(index)) = (it.next(), it.next(), it.next(), it.next()) {
        let Value::BulkString(item) = item else {
            return Err(reply_err(
                "inline_find",
                format!("expected an item, got {item:?}"),
            ));
        };
        let (n, index) = (as_u64("inline_find", &n)?, as_u64("inline_find", &index)?);
        found.push((into_string("inline_find", id)?, n, item, index));
    }
    Ok(InlinePage {
        next: (list != 0).then_some((list, at)),
        found,
    })
}

/// The inline jobs among `ids` that wait in the suspects or a ready list, with where each
/// was seen: [`inline_find`]'s pages, one after another, until every list is read or
/// every id found. A job that moves meanwhile may be missed; one fetched goes to the
/// lease, where the acting script looks.
pub(super) async fn find_waiting<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    ids: &[&str],
) -> Result<Seen> {
    let mut seen = Seen::new();
    let mut from = Some((1, 0));
    while let Some(at) = from {
        let left: Vec<&str> = ids.iter().copied().filter(|id| !seen.contains_key(*id)).collect();
        if left.is_empty() {
            break;
        }
        let page = inline_find(conn, keys, at, &left).await?;
        for (id, list, item, index) in page.found {
            seen.insert(id, (list, item, index));
        }
        from = page.next;
    }
    Ok(seen)
}

/// For a job a first call reported as `state`: where the search saw it, when that state is
/// `missing` and the search saw it waiting (the caller calls again with it); else `None`.
pub(super) async fn seen_if_missing<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    id: &str,
    state: &str,
) -> Result<Option<Seen>> {
    if state != "missing" {
        return Ok(None);
    }
    let seen = find_waiting(conn, keys, &[id]).await?;
    Ok((!seen.is_empty()).then_some(seen))
}

/// Adds `id`'s hint from `seen`, if there is one, to `inv`: its list's number, its item
/// and its index from the list's head.
pub(super) fn with_hint(inv: &mut redis::ScriptInvocation<'_>, seen: &Seen, id: &str) {
    if let Some((list, item, index)) = seen.get(id) {
        inv.arg(*list).arg(&item[..]).arg(*index);
    }
}
