//! The two ACL roles of docs/security.md: a worker/producer role that may not load,
//! delete or flush anything, and an admin role that loads the library. Consumers and
//! `weir functions status` judge the loaded library by the hash of its code, not by what
//! its `weir_version` claims.

use super::T;
use super::faults::{self, Proc, run_weir};
use std::time::{Duration, Instant};
use weir::EmbeddedRedis;
use weir::queue::functions;

/// The worker/producer role of docs/security.md: keep the two in step.
pub(crate) const WORKER_ACL: &str = "on ~weir:* &weir:* -@all +ping +info +evalsha +script|load +subscribe +time \
    +exists +type +get +set +del +pexpire +llen +lindex +lrange +lpop +rpush +lpush +lrem +ltrim +sort +hget +hmget +hset +hsetnx \
    +hdel +hgetall +hincrby +hlen +sadd +srem +smembers +zadd +zrem +zcard +zscore +zmscore +zrange \
    +zrangebyscore +zremrangebyscore +zrevrange +zpopmin +zcount +zincrby +multi +exec +publish +pubsub|shardnumsub \
    +fcall +fcall_ro +function|list";

/// The admin role of docs/security.md, which loads the library.
pub(crate) const ADMIN_ACL: &str = "on -@all +ping +fcall_ro +function|list +function|load";

async fn user(admin: &mut redis::aio::MultiplexedConnection, name: &str, pw: &str, acl: &str) {
    let mut c = redis::cmd("ACL");
    c.arg("SETUSER").arg(name).arg("reset").arg(format!(">{pw}"));
    c.arg(acl.split_whitespace().collect::<Vec<_>>());
    let _: () = c.query_async(admin).await.unwrap();
}

fn noperm(r: redis::RedisResult<redis::Value>) {
    let e = r.unwrap_err();
    assert!(
        e.code() == Some("NOPERM") || e.to_string().contains("NOPERM"),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cannot_plant_code_and_consumers_refuse_a_library_that_is_not_theirs() {
    let redis = EmbeddedRedis::start().unwrap();
    let mut root = faults::raw(&redis.url()).await;
    user(&mut root, "weir", "Worker-pw-5b1e", WORKER_ACL).await;
    user(&mut root, "weir-admin", "Admin-pw-77c2", ADMIN_ACL).await;
    let port = redis.port();
    let worker = format!("redis://weir:Worker-pw-5b1e@127.0.0.1:{port}");
    let admin = format!("redis://weir-admin:Admin-pw-77c2@127.0.0.1:{port}");
    let q = "roles";
    let run = |url: &str, args: &[&str], input: Option<&[u8]>| {
        let mut all = args.to_vec();
        all.extend(["--redis-url", url]);
        run_weir(&all, input, T)
    };

    // The worker role may not load, delete or flush.
    let mut w = faults::raw(&worker).await;
    let planted = format!(
        "{}\nredis.register_function('weir_planted', function() return 1 end)\n",
        functions::code()
    );
    noperm(
        redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(&planted)
            .query_async(&mut w)
            .await,
    );
    noperm(
        redis::cmd("FUNCTION")
            .arg("DELETE")
            .arg("weir")
            .query_async(&mut w)
            .await,
    );
    noperm(redis::cmd("FUNCTION").arg("FLUSH").query_async(&mut w).await);
    noperm(redis::cmd("FLUSHALL").query_async(&mut w).await);

    // The admin loads the library; the worker enqueues and works.
    let (code, out, err) = run(&admin, &["functions", "load"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, out, err) = run(&worker, &["functions", "status"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(out.matches(functions::code_hash()).count(), 2, "{out}");
    let (code, out, err) = run(
        &worker,
        &["enqueue", "-q", q],
        Some(b"{\"kind\":\"a\",\"payload\":1}\n"),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    // Without SCAN, `weir queues` lists the registry and says what it could not do.
    let (code, out, err) = run(&worker, &["queues", "--rate-window", "0s"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains(q) && err.contains("SCAN refused"), "{out}\n{err}");
    let work = ["work", "-q", q, "--handler", "noop", "--drain", "--no-metrics"];
    let (code, out, err) = run(&worker, &work, None);
    assert_eq!(code, 0, "{out}\n{err}");

    // Code planted under a library that claims this very build (as a user with
    // function|load could): consumers refuse it, status says so, both name the hashes.
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(&planted)
        .query_async(&mut root)
        .await
        .unwrap();
    let claimed: (u32, String, String) = redis::cmd("FCALL_RO")
        .arg("weir_version")
        .arg(0)
        .query_async(&mut root)
        .await
        .unwrap();
    assert_eq!(
        claimed.2,
        functions::LibraryInfo::ours().build,
        "the plant claims our build"
    );
    let bad = functions::code_hash_of(&planted);
    let (code, out, err) = run(&worker, &work, None);
    assert_eq!(code, 1, "a consumer refuses planted code\n{out}\n{err}");
    let line = err.lines().find(|l| l.starts_with("error:")).unwrap_or_default();
    assert!(
        line.contains(&bad)
            && line.contains(functions::code_hash())
            && line.contains("weir functions load --replace"),
        "{err}\nplanted {bad}, ours {}",
        functions::code_hash()
    );
    let (code, out, err) = run(&worker, &["functions", "status"], None);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains(&bad) && err.contains("not this weir's code"),
        "{out}\n{err}"
    );

    // The admin reloads; a running worker whose library is then deleted says, once and
    // clearly, that it may not load it.
    let (code, out, err) = run(&admin, &["functions", "load", "--replace"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    let dir = tempfile::tempdir().unwrap();
    let (o, e) = (dir.path().join("out"), dir.path().join("err"));
    let mut all = work.to_vec();
    all.retain(|a| *a != "--drain");
    all.extend(["--redis-url", &worker]);
    let mut p = Proc::weir(&all, &o, &e);
    let log = || std::fs::read_to_string(&e).unwrap_or_default();
    let started = Instant::now();
    while !log().contains("working") && started.elapsed() < T {
        assert!(p.child.try_wait().unwrap().is_none(), "{}", log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: String = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg("weir")
        .query_async(&mut root)
        .await
        .unwrap();
    let started = Instant::now();
    while !log().contains("this user may not load it") {
        assert!(
            started.elapsed() < T,
            "no clear word of the lost library:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    p.sigterm();
    assert!(p.wait_timeout(T).is_some_and(|s| s.success()), "{}", log());
    assert_eq!(
        log().matches("this user may not load it").count(),
        1,
        "said once:\n{}",
        log()
    );
}
