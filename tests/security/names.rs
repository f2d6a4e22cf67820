//! Hostile queue names: `weir_enqueue` refuses to register a name that is not a queue
//! name, the readers skip (and report) a bad registry entry instead of failing the whole
//! list, and `weir queues --forget` removes any entry.

use super::T;
use super::common::{Ctx, env};
use super::faults::run_weir;

const HOSTILE: &str = "<svg onload=alert(1)>";

/// The keys of `queue` as `weir_enqueue` takes them, built by hand (weir would refuse
/// the name), and the registry last.
fn keys_of(ctx: &Ctx, queue: &str) -> Vec<String> {
    let mut keys: Vec<String> = ctx
        .keys
        .all()
        .iter()
        .map(|k| k.replace(&format!("{{{}}}", ctx.queue), &format!("{{{queue}}}")))
        .collect();
    keys.push(weir::queue::keys::QUEUES.to_owned());
    keys
}

#[tokio::test]
async fn enqueue_refuses_to_register_a_name_that_is_not_a_queue_name() {
    let ctx = Ctx::private("hostile").await;
    let (code, out, err) = run_weir(&["functions", "load", "--redis-url", &ctx.url], None, T);
    assert_eq!(code, 0, "{out}\n{err}");
    let good = keys_of(&ctx, &ctx.queue);
    for name in [HOSTILE, "", "a b", &"x".repeat(129), "q\u{1b}[2J"] {
        let keys = keys_of(&ctx, name);
        let n = keys.len() - 1;
        let mut c = redis::cmd("FCALL");
        c.arg("weir_enqueue").arg(keys.len()).arg(&keys);
        c.arg(&["1", "0", "0", "0", "0", "1", "j-1"][..])
            .arg(env("j-1", 0, 3, 1));
        let e = c.query_async::<redis::Value>(&mut ctx.c()).await.unwrap_err();
        assert!(e.to_string().contains("queue name of KEYS[1]"), "{name:?}: {e}");
        // Nothing was written: no key of the hostile queue, no registry entry.
        let members: Vec<String> = ctx.cmd(&["SMEMBERS", weir::queue::keys::QUEUES]).await;
        assert!(members.is_empty(), "{members:?}");
        let found: Vec<String> = ctx.cmd(&["KEYS", &format!("{}*", &keys[0][..6])]).await;
        assert!(found.is_empty(), "{name:?}: {found:?} ({n} keys)");
    }
    // The same call with a real name registers it.
    let mut c = redis::cmd("FCALL");
    c.arg("weir_enqueue").arg(good.len()).arg(&good);
    c.arg(&["1", "0", "0", "0", "0", "1", "j-1"][..])
        .arg(env("j-1", 0, 3, 1));
    let _: redis::Value = c.query_async(&mut ctx.c()).await.unwrap();
    let members: Vec<String> = ctx.cmd(&["SMEMBERS", weir::queue::keys::QUEUES]).await;
    assert_eq!(members, std::slice::from_ref(&ctx.queue));
}

#[tokio::test]
async fn weir_queues_skips_and_reports_a_bad_entry_and_forget_removes_it() {
    let ctx = Ctx::private("hostile-list").await;
    let (code, out, err) = run_weir(
        &["enqueue", "-q", &ctx.queue, "--redis-url", &ctx.url],
        Some(b"{\"kind\":\"a\",\"payload\":1}\n"),
        T,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    // A bad entry, as an older weir_enqueue or a hand-written SADD left it.
    let bad = format!("{HOSTILE}\u{1b}[2J");
    let _: u64 = ctx.cmd(&["SADD", weir::queue::keys::QUEUES, &bad]).await;
    let queues = |extra: &[&str]| {
        let mut a = vec!["queues", "--rate-window", "0s", "--redis-url", &ctx.url];
        a.extend(extra);
        run_weir(&a, None, T)
    };
    let (code, out, err) = queues(&[]);
    assert_eq!(code, 0, "the list is shown\n{out}\n{err}");
    assert!(out.contains(&ctx.queue), "{out}");
    assert!(err.contains("1 entry that is not"), "reported: {err}");
    assert!(err.contains("<svg onload=alert(1)>\\u{1b}[2J"), "escaped: {err}");
    assert!(!format!("{out}{err}").contains('\u{1b}'), "no raw escape");
    let (code, out, err) = queues(&["--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["invalid"], serde_json::json!([bad]));
    assert_eq!(v["queues"][0]["name"], ctx.queue.as_str());
    let (code, out, err) = queues(&["--forget", &bad]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("no longer listed"), "{err}");
    let members: Vec<String> = ctx.cmd(&["SMEMBERS", weir::queue::keys::QUEUES]).await;
    assert_eq!(members, std::slice::from_ref(&ctx.queue));
    let (code, out, err) = queues(&[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!err.contains("not queue names"), "{err}");
}
