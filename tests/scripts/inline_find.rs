//! The paged search for inline jobs waiting in a list (inline_find.lua) and the hints it
//! hands the operator's calls (lib.lua's find_inline, jobs_delete.lua's LREM).

use crate::common::*;
use weir::queue::scripts;

/// An inline job: its envelope, as it stands in a list or the lease.
fn inline(id: &str, priority: u8) -> String {
    env(id, 0, 5, priority)
}

/// The search for an inline job waiting in a list reads at most its budget (5,000 items)
/// a call, from the lists' tails, so it misses no job that waits on while consumers pop
/// the heads and producers push the tails between its calls; and the operator's calls
/// find, delete and leave in place such a job deep in a backlog.
#[tokio::test]
async fn the_search_for_a_waiting_inline_job_goes_a_page_a_call_and_misses_none_that_wait() {
    let ctx = Ctx::new("inline-find").await;
    let (mut c, k) = (ctx.conn.clone(), ctx.keys.clone());
    let normal = k.ready(weir::Priority::Normal).to_string();
    let (deep, far) = (inline("deep", 1), inline("far", 1));
    let fill = |from: usize, n: usize| (from..from + n).map(|i| format!("id{i}")).collect::<Vec<_>>();
    // 25,000 items in normal, the inline job 12,000 from the head: 12,999 from the tail.
    let mut items = fill(0, 25_000);
    items[12_000] = deep.clone();
    items[20_000] = far.clone();
    // A payload that holds the text of the id's field is not the job.
    let other = inline("other", 1);
    items[24_000] = other.replace(r#""payload":{"#, r#""payload":{"id":"deep","#);
    assert_ne!(items[24_000], other);
    redis::cmd("RPUSH")
        .arg(&normal)
        .arg(&items)
        .exec_async(&mut c)
        .await
        .unwrap();
    redis::cmd("RPUSH")
        .arg(k.suspects())
        .arg("s0")
        .exec_async(&mut c)
        .await
        .unwrap();

    // One call reads its budget and stops: the suspects (1 item), then 4,999 of normal.
    let first = scripts::inline_find(&mut c, &k, (1, 0), &["deep"]).await.unwrap();
    assert_eq!(first.next, Some((3, 4_999)), "{first:?}");
    assert!(first.found.is_empty());

    // Between calls, consumers fetch 3,000 from the head and producers push 3,000: the
    // job, 15,999 from the tail now, is found by the fourth call, 5,000 items a call.
    redis::cmd("LPOP")
        .arg(&normal)
        .arg(3_000)
        .exec_async(&mut c)
        .await
        .unwrap();
    redis::cmd("RPUSH")
        .arg(&normal)
        .arg(fill(25_000, 3_000))
        .exec_async(&mut c)
        .await
        .unwrap();
    let mut at = first.next;
    let mut pages = vec![first.next];
    let found = loop {
        let page = scripts::inline_find(&mut c, &k, at.expect("the job is found"), &["deep"])
            .await
            .unwrap();
        at = page.next;
        pages.push(at);
        if !page.found.is_empty() {
            break page.found;
        }
    };
    assert_eq!(found, [("deep".to_string(), 3, deep.clone().into_bytes(), 9_000)]);
    assert_eq!(
        pages,
        [Some((3, 4_999)), Some((3, 9_999)), Some((3, 14_999)), None],
        "every id found: over"
    );

    // The operator's calls, through the search: shown, left by run-now, deleted.
    let shown = scripts::job_show(&mut c, &k, "deep").await.unwrap();
    assert_eq!(
        (shown.state.as_str(), shown.envelope.as_deref()),
        ("ready", Some(deep.as_str()))
    );
    assert_eq!(scripts::job_run_now(&mut c, &k, "deep").await.unwrap(), "ready");
    let asked = ["deep", "far", "nope"].map(String::from);
    let got = scripts::jobs_delete(&mut c, &k, false, &asked).await.unwrap();
    let states: Vec<&str> = got.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(states, ["ready", "ready", "missing"]);
    let left: Vec<String> = redis::cmd("LRANGE")
        .arg(k.ready(weir::Priority::Normal))
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(left.len(), 25_000 - 2);
    assert!(!left.contains(&deep) && !left.contains(&far));
    let shown = scripts::job_show(&mut c, &k, "deep").await.unwrap();
    assert_eq!(shown.state, "missing");
}

/// A page of the search stops once it has read a megabyte, whatever its item budget:
/// inline envelopes run to 16 KiB, and 5,000 of those in one call would hold Redis long.
#[tokio::test]
async fn the_search_reads_at_most_a_megabyte_a_call() {
    let ctx = Ctx::new("inline-find-bytes").await;
    let (mut c, k) = (ctx.conn.clone(), ctx.keys.clone());
    let big = |id: &str| inline(id, 1).replace(r#"{"n":1}"#, &format!(r#"{{"n":"{}"}}"#, "x".repeat(10_000)));
    // 300 envelopes of about 10 KB, the one looked for at the head.
    let items: Vec<String> = (0..300).map(|i| big(&format!("b{i}"))).collect();
    assert!(items[0].len() > 10_000);
    redis::cmd("RPUSH")
        .arg(k.ready(weir::Priority::Normal))
        .arg(&items)
        .exec_async(&mut c)
        .await
        .unwrap();
    // Each call ends within one envelope past a megabyte (1 MiB), far short of its item
    // budget: three calls to reach the head.
    let (mut from, mut calls) = ((1, 0), 0);
    let found = loop {
        let page = scripts::inline_find(&mut c, &k, from, &["b0"]).await.unwrap();
        calls += 1;
        let Some(next) = page.next else { break page.found };
        let read = (next.1 - from.1) as usize * items[0].len();
        assert!(
            ((1 << 20)..(1 << 20) + items[0].len()).contains(&read),
            "call {calls}: {read} bytes"
        );
        assert!(page.found.is_empty());
        from = next;
    };
    assert_eq!(calls, 3);
    assert_eq!(found, [("b0".to_string(), 3, items[0].clone().into_bytes(), 0)]);
}

/// jobs_delete.lua (the source the library runs) with `argv`, on `k`'s queue.
async fn delete_raw(c: &mut weir::Conn, k: &weir::queue::keys::QueueKeys, argv: &[&[u8]]) -> Vec<String> {
    let body = scripts::SOURCES
        .iter()
        .find(|s| s.name == "jobs_delete")
        .unwrap()
        .body;
    let script = redis::Script::new(&[scripts::LIB, body].concat());
    let mut inv = script.prepare_invoke();
    for key in k.all() {
        inv.key(key);
    }
    inv.key(k.history()).key(k.done()).key(k.results());
    for a in argv {
        inv.arg(*a);
    }
    inv.invoke_async(c).await.unwrap()
}

/// A hint (where the search saw a job wait) is looked at again, not trusted: the acting
/// call takes the item only if it still waits in that list and holds that id.
#[tokio::test]
async fn a_hint_moves_nothing_that_is_not_where_it_says() {
    let ctx = Ctx::new("inline-hint").await;
    let (mut c, k) = (ctx.conn.clone(), ctx.keys.clone());
    let (a, b) = (inline("a", 1), inline("b", 1));
    let normal = k.ready(weir::Priority::Normal).to_string();
    redis::cmd("RPUSH")
        .arg(&normal)
        .arg(&a)
        .arg(&b)
        .exec_async(&mut c)
        .await
        .unwrap();
    let gone = inline("gone", 1);
    let cases: [(&str, &[&[u8]], &str); 5] = [
        // fetched since the search saw it: no longer in the list
        ("moved", &[b"gone", b"3", gone.as_bytes(), b"0"], "missing"),
        // another job's item under this id
        ("another's item", &[b"a", b"3", b.as_bytes(), b"1"], "missing"),
        // the right item, the wrong list (high)
        ("another list", &[b"a", b"2", a.as_bytes(), b"0"], "missing"),
        // not numbers: ignored, not an error after the call's first write
        ("no list", &[b"a", b"x", a.as_bytes(), b"y"], "missing"),
        // the index only picks the end LREM starts from: a stale one finds it too
        ("where it says", &[b"a", b"3", a.as_bytes(), b"7"], "ready"),
    ];
    for (case, hint, want) in cases {
        let id = hint[0];
        let mut argv: Vec<&[u8]> = vec![b"any", b"1", id];
        argv.extend_from_slice(hint);
        let got = delete_raw(&mut c, &k, &argv).await;
        assert_eq!(got, [std::str::from_utf8(id).unwrap(), want], "{case}");
    }
    let left: Vec<String> = redis::cmd("LRANGE")
        .arg(&normal)
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(left, [b], "only the job a true hint named is gone");
}
