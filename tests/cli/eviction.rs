//! `weir work` refuses a Redis whose `maxmemory-policy` can evict queue keys (anything but
//! `noeviction`) with a one-line error naming the setting and the fix, unless
//! `--allow-eviction` says the operator knows; a user not allowed `INFO` gets a warning.

use crate::common::*;
use crate::{no_panic, text};
use std::process::Command;
use weir::EmbeddedRedis;

fn work(url: &str, queue: &str, extra: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "work",
            "-q",
            queue,
            "--handler",
            "noop",
            "--drain",
            "--no-metrics",
        ])
        .args(extra)
        .env("REDIS_URL", url)
        .env_remove("WEIR_LOG")
        .output()
        .unwrap();
    no_panic(&out);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_refuses_a_redis_that_can_evict_unless_allowed() {
    let server = EmbeddedRedis::start_with(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--maxmemory-policy",
        "allkeys-lru",
    ])
    .unwrap();
    let url = server.url();
    let p = weir::Producer::new(weir::Redis::open(&url).unwrap().connect().await.unwrap(), "ev").unwrap();
    p.enqueue_bulk((0..3).map(|i| weir::NewJob::new("k", &i).unwrap()))
        .await
        .unwrap();

    let o = work(&url, "ev", &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        "error: redis maxmemory-policy is allkeys-lru: it can evict queue keys and lose jobs; \
         set `maxmemory-policy noeviction` (CONFIG SET or redis.conf), or pass --allow-eviction"
    );
    let q = weir::Queue::new(weir::Redis::open(&url).unwrap().connect().await.unwrap(), "ev").unwrap();
    assert_eq!(q.stats().await.unwrap().ready_total(), 3, "nothing was fetched");

    let o = work(&url, "ev", &["--allow-eviction"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("3 acked"), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains("redis may evict queue keys"),
        "{}",
        text(&o.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_info_is_warned_and_works() {
    let ctx = Ctx::new("cli-noinfo").await;
    let password = "Pw-noinfo-1";
    let _: () = ctx
        .cmd(&[
            "ACL",
            "SETUSER",
            "noinfo",
            "reset",
            "on",
            &format!(">{password}"),
            "~weir:*",
            "&weir:*",
            "+@all",
            "-info",
        ])
        .await;
    ctx.producer()
        .enqueue_bulk((0..2).map(|i| weir::NewJob::new("k", &i).unwrap()))
        .await
        .unwrap();
    let url = ctx
        .url
        .replace("redis://", &format!("redis://noinfo:{password}@"));
    let o = work(&url, &ctx.queue, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("2 acked"), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains("cannot read redis maxmemory-policy"),
        "{}",
        text(&o.stderr)
    );
}
