//! Security without TLS: password AUTH, a least-privilege ACL user (exactly the commands
//! of docs/security.md, on `weir:*` keys and channels only), and secrets kept out of
//! errors, logs and metrics. The metrics endpoint listens on loopback by default.

mod common;
mod faults;

use faults::run_weir;
use redis::AsyncCommands;
use std::net::SocketAddr;
use std::time::Duration;
use weir::{EmbeddedRedis, Redis};

const T: Duration = Duration::from_secs(60);
const PASSWORD: &str = "Pw-4f9c2e-secret";
const WRONG: &str = "Wrong-88ab01-secret";

/// The ACL of docs/security.md: keep the two in step.
pub const WEIR_ACL: &str = "on ~weir:* &weir:* -@all +ping +info +evalsha +script|load +subscribe +time \
    +exists +type +get +set +del +pexpire +llen +lindex +lrange +lpop +rpush +lpush +lrem +ltrim +sort +hget +hmget +hset +hsetnx \
    +hdel +hgetall +hincrby +hlen +sadd +srem +smembers +zadd +zrem +zcard +zscore +zmscore +zrange \
    +zrangebyscore +zremrangebyscore +zrevrange +zpopmin +zcount +zincrby +multi +exec +publish +pubsub|shardnumsub +fcall_ro +function|list";

fn http_get(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_auth_works_and_the_password_never_shows() {
    let redis =
        EmbeddedRedis::start_with(&["--save", "", "--appendonly", "no", "--requirepass", PASSWORD]).unwrap();
    let good = format!("redis://:{PASSWORD}@127.0.0.1:{}", redis.port());
    let wrong = format!("redis://:{WRONG}@127.0.0.1:{}", redis.port());
    let none = format!("redis://127.0.0.1:{}", redis.port());
    let lines: String = (0..50)
        .map(|i| format!("{{\"kind\":\"a\",\"payload\":{i}}}\n"))
        .collect();
    let (code, _, err) = run_weir(
        &["enqueue", "--redis-url", &good, "-q", "auth"],
        Some(lines.as_bytes()),
        T,
    );
    assert_eq!(code, 0, "{err}");

    // A consumer with metrics on: its logs (at debug) and its /metrics hold no password.
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let mut work = faults::Proc::weir(
        &[
            "work",
            "--redis-url",
            &good,
            "-q",
            "auth",
            "--metrics-addr",
            &addr,
            "--handler",
            "print",
        ],
        &dir.path().join("out"),
        &dir.path().join("err"),
    );
    let q = weir::Queue::new(Redis::open(&good).unwrap().connect().await.unwrap(), "auth").unwrap();
    common::wait_until("the queue drained", T, || async {
        q.stats().await.unwrap().pending() == 0
    })
    .await;
    let metrics = http_get(port);
    assert!(metrics.contains("weir_"), "{metrics}");
    work.sigterm();
    assert!(work.wait_timeout(T).unwrap().success());
    let log = std::fs::read_to_string(dir.path().join("err")).unwrap();
    for text in [&metrics, &log] {
        assert!(!text.contains(PASSWORD), "password leaked: {text}");
    }

    // Wrong or missing password: a clear error, exit 1, no secret in it.
    for (url, want) in [(&wrong, "authentication failed"), (&none, "requires a password")] {
        for args in [
            vec!["stats", "--redis-url", url.as_str()],
            vec![
                "work",
                "--handler",
                "noop",
                "--redis-url",
                url.as_str(),
                "--no-metrics",
                "--drain",
            ],
        ] {
            let (code, out, err) = run_weir(&args, None, T);
            assert_eq!(code, 1, "{args:?}: {err}");
            assert!(err.to_lowercase().contains(want), "{args:?}: {err}");
            assert!(!format!("{out}{err}").contains(WRONG), "{args:?}: {err}");
        }
    }
    // The library's own errors and Debug output are redacted too.
    let e = Redis::open(&wrong)
        .unwrap()
        .connect()
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(!e.contains(WRONG) && e.contains(":***@"), "{e}");
    let d = format!("{:?}", Redis::open(&good).unwrap());
    assert!(!d.contains(PASSWORD), "{d}");
}

#[test]
fn metrics_listen_on_loopback_by_default() {
    let addr: SocketAddr = weir::metrics::DEFAULT_ADDR.parse().unwrap();
    assert!(addr.ip().is_loopback(), "{addr}");
    let (_, help, _) = run_weir(&["work", "--help"], None, T);
    assert!(help.contains("[default: 127.0.0.1:"), "{help}");
}

/// Every command weir sends, directly or from its scripts, as the ACL user: the whole
/// CLI surface. Afterwards the ACL log must be empty (nothing was refused) and every
/// command the ACL grants must have been used (nothing granted needlessly).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weir_works_with_exactly_the_documented_acl() {
    let redis = EmbeddedRedis::start().unwrap();
    let mut admin = faults::raw(&redis.url()).await;
    let mut setuser = redis::cmd("ACL");
    setuser
        .arg("SETUSER")
        .arg("weir")
        .arg("reset")
        .arg(format!(">{PASSWORD}"));
    setuser.arg(WEIR_ACL.split_whitespace().collect::<Vec<_>>());
    let _: () = setuser.query_async(&mut admin).await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://weir:{PASSWORD}@127.0.0.1:{}", redis.port());
    let q = "acl";
    // The worker role may not load the library: an admin does (docs/security.md).
    let (code, out, err) = run_weir(&["functions", "load", "--redis-url", &redis.url()], None, T);
    assert_eq!(code, 0, "{out}\n{err}");
    // So may the one-off SCAN for queues older than the registry (the worker role has no
    // SCAN, which lists every key name in the database).
    let (code, out, err) = run_weir(&["queues", "--rescan", "--redis-url", &redis.url()], None, T);
    assert_eq!(code, 0, "{out}\n{err}");
    let ok = |args: &[&str], input: Option<&[u8]>| {
        let mut all = args.to_vec();
        all.extend(["--redis-url", &url, "-q", q]);
        let (code, out, err) = run_weir(&all, input, T);
        assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
        out
    };
    // Done in part (exit 3): an id the command could not act on.
    let part = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--redis-url", &url, "-q", q]);
        let (code, out, err) = run_weir(&all, None, T);
        assert_eq!(code, 3, "{args:?}\n{out}\n{err}");
    };
    let lines = "{\"kind\":\"a\",\"payload\":1}\n{\"kind\":\"a\",\"payload\":2,\"delay\":\"50ms\"}\n\
                 {\"kind\":\"a\",\"payload\":3,\"id\":\"given-1\"}\n";
    ok(&["enqueue"], Some(lines.as_bytes()));
    // Generated ids, ready now: the bulk path of plain commands in one MULTI/EXEC.
    ok(
        &["enqueue"],
        Some(b"{\"kind\":\"a\",\"payload\":4}\n{\"kind\":\"a\",\"payload\":5}\n"),
    );
    // Two envelopes that do not decode, so the consumer dead-letters (and, with a cap
    // of one, trims) them.
    let keys = weir::queue::keys::QueueKeys::new(q).unwrap();
    for id in ["bad-1", "bad-2"] {
        let _: () = admin.hset(keys.jobs(), id, "not json").await.unwrap();
        let _: () = admin.rpush(keys.ready(weir::Priority::Normal), id).await.unwrap();
    }
    // A job whose lease expired long ago (its consumer crashed): reclaimed, then run.
    let stale = r#"{"attempt":0,"max_attempts":3,"priority":1,"enqueued_at":0,"id":"stale-1","kind":"a","payload":1}"#;
    let _: () = admin.hset(keys.jobs(), "stale-1", stale).await.unwrap();
    let _: () = admin.zadd(keys.lease(), "stale-1", 1).await.unwrap();
    ok(&["pause"], None);
    ok(&["stats"], None);
    ok(&["resume"], None);
    std::thread::sleep(Duration::from_millis(100));
    ok(&["limits", "set", "--dead-cap", "1"], None);
    // Global limits far above what the drains below take: their state is read and kept.
    ok(
        &[
            "limits",
            "set",
            "--global-rate",
            "100000/s",
            "--global-concurrency",
            "100000",
        ],
        None,
    );
    ok(&["jobs", "--state", "ready"], None);
    ok(&["job", "show", "given-1"], None);
    part(&["job", "run-now", "given-1"]);
    ok(&["job", "delete", "given-1"], None);
    // An inline job (a generated id, loaded in bulk): found by the paged search of the
    // lists where jobs wait (inline_find.lua), then shown.
    let ready: Vec<String> = admin
        .lrange(keys.ready(weir::Priority::Normal), 0, -1)
        .await
        .unwrap();
    let inline = ready
        .iter()
        .find(|item| item.starts_with('{'))
        .expect("an inline job waits");
    let envelope: serde_json::Value = serde_json::from_str(inline).unwrap();
    ok(&["job", "show", envelope["id"].as_str().unwrap()], None);
    // Per-key limits and adaptive per-key shares: a key at its concurrency holds its
    // second job back (parked), counted among the throttled keys.
    ok(&["limits", "set", "--per-key-concurrency", "1"], None);
    ok(
        &["enqueue", "--key", "tenant-1"],
        Some(b"{\"kind\":\"a\",\"payload\":7}\n{\"kind\":\"a\",\"payload\":8}\n"),
    );
    ok(
        &[
            "work",
            "--handler",
            "sleep:300ms",
            "--adaptive",
            "--adaptive-per-key",
            "--drain",
            "--no-metrics",
        ],
        None,
    );
    ok(&["limits", "get"], None);
    ok(&["limits", "clear", "--per-key"], None);
    ok(&["work", "--handler", "noop", "--drain", "--no-metrics"], None);
    ok(&["dlq", "list"], None);
    ok(&["dlq", "requeue", "--all"], None);
    ok(&["queues", "--rate-window", "10ms"], None);
    ok(&["queues", "--forget", "gone", "--rate-window", "0s"], None);
    ok(&["workers"], None);
    ok(&["work", "--handler", "noop", "--drain", "--no-metrics"], None);
    // A job that outlives a third of its lease: the lease is extended, so settle reads
    // its score by id (ZMSCORE) instead of by the fetch token.
    ok(&["enqueue"], Some(b"{\"kind\":\"long\",\"payload\":6}\n"));
    ok(
        &[
            "work",
            "--handler",
            "sleep:1500ms",
            "--visibility-timeout",
            "1s",
            "--drain",
            "--no-metrics",
        ],
        None,
    );
    // On a queue with no global concurrency and no per-key limits (this one's mark that
    // keyed leases are counted lasts an hour), a fetch leases its jobs as one batch
    // (SORT ... STORE, docs/batch-leases.md), acked whole.
    for args in [
        &["enqueue"][..],
        &["work", "--handler", "noop", "--drain", "--no-metrics"],
    ] {
        let mut all = args.to_vec();
        all.extend(["--redis-url", &url, "-q", "acl-batch"]);
        let input = (args[0] == "enqueue")
            .then_some(&b"{\"kind\":\"a\",\"payload\":9}\n{\"kind\":\"a\",\"payload\":10}\n"[..]);
        let (code, out, err) = run_weir(&all, input, T);
        assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
    }
    ok(&["dlq", "requeue", "--kind", "a"], None);
    part(&["dlq", "delete", "none"]);
    ok(&["dlq", "purge", "--yes"], None);
    ok(&["limits", "clear", "--dead-cap"], None);

    let denied: Vec<redis::Value> = redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(
        denied.is_empty(),
        "weir needed more than the ACL grants: {denied:?}"
    );
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut admin)
        .await
        .unwrap();
    let unused: Vec<&str> = WEIR_ACL
        .split_whitespace()
        .filter_map(|r| r.strip_prefix('+'))
        .filter(|c| !stats.contains(&format!("cmdstat_{}:", c)))
        .collect();
    assert!(unused.is_empty(), "granted but never used: {unused:?}\n{stats}");

    // And the user can do nothing else.
    let mut user = faults::raw(&url).await;
    let other: redis::RedisResult<()> = user.set("other:key", 1).await;
    let other = other.unwrap_err();
    assert!(
        other.code() == Some("NOPERM") || other.to_string().contains("NOPERM"),
        "{other:?}"
    );
    let flush: redis::RedisResult<()> = redis::cmd("FLUSHALL").query_async(&mut user).await;
    let flush = flush.unwrap_err();
    assert!(
        flush.code() == Some("NOPERM") || flush.to_string().contains("NOPERM"),
        "{flush:?}"
    );
}
