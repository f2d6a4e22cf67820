//! The dead-letter cap is a queue setting (`weir limits set --dead-cap`), the same for the
//! whole fleet; `weir work --dead-cap` names the command that sets it now. A cap lowered
//! under a big dead-letter queue is applied in bounded steps, logged once per streak and
//! shown by `weir stats`.

use crate::common::*;
use crate::{cli, no_panic, text};
use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test]
async fn limits_set_get_and_clear_the_dead_cap() {
    let ctx = Ctx::new("cli-cap").await;
    let q = ctx.queue.as_str();
    let o = cli(&ctx, &["limits", "get", "-q", q], "");
    assert!(
        o.status.success() && text(&o.stdout).contains("(dead_cap=10000: the default)"),
        "{}",
        text(&o.stdout)
    );
    let o = cli(
        &ctx,
        &["limits", "set", "-q", q, "--dead-cap", "25", "--create"],
        "",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = cli(&ctx, &["limits", "get", "-q", q], "");
    let out = text(&o.stdout);
    assert_eq!(
        out.lines().next(),
        Some(format!("queue {q}: dead_cap=25").as_str()),
        "{out}"
    );
    // then each live consumer's limit and last decision: none runs here
    assert!(out.contains("no live consumers"), "{out}");
    assert_eq!(
        ctx.stats().await.dead_cap,
        25,
        "the scripts read the same setting"
    );
    let o = cli(&ctx, &["limits", "set", "-q", q, "--dead-cap", "0"], "");
    assert!(
        !o.status.success() && text(&o.stderr).contains("dead-letter cap must be at least 1"),
        "{}",
        text(&o.stderr)
    );
    let o = cli(&ctx, &["limits", "set", "-q", q, "--rate", "50/s"], "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = cli(&ctx, &["limits", "clear", "-q", q, "--dead-cap"], "");
    let out = text(&o.stdout);
    assert!(
        o.status.success() && out.contains("rate=50/s") && out.contains("(dead_cap=10000: the default)"),
        "only the cap is cleared: {out}"
    );
    assert_eq!(ctx.stats().await.dead_cap, 10_000);
}

#[tokio::test]
async fn work_dead_cap_names_the_command_that_sets_it_now() {
    let ctx = Ctx::new("cli-cap-flag").await;
    let o = cli(
        &ctx,
        &["work", "-q", &ctx.queue, "--handler", "noop", "--dead-cap", "10"],
        "",
    );
    no_panic(&o);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("weir limits set --dead-cap N"), "{err}");
}

/// 2,500 dead-lettered jobs, then a cap of 100: a running consumer's reclaimer trims at
/// most 1,000 per call, every second, until 100 are left; one warning when trimming
/// starts, one line when it stops; `weir stats` shows the cap and the count. Before the
/// cap was a queue setting, one consumer's `--dead-cap` trimmed everything in one call,
/// and nothing was logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_cap_drains_in_steps_and_is_logged_once() {
    let ctx = Ctx::new("cli-cap-drain").await;
    let q = ctx.queue.as_str();
    let mut dead = State::default();
    let ids: Vec<String> = (0..2_500).map(|i| format!("d{i:05}")).collect();
    let mut entries = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        dead = dead.job(id, 3, 3, 1).error(id, "boom");
        entries.push((id.as_str(), i as u64 + 1));
    }
    seed(&mut ctx.c(), &ctx.keys, &dead.dead(&entries)).await;
    let o = cli(&ctx, &["limits", "set", "-q", q, "--dead-cap", "100"], "");
    assert!(o.status.success(), "{}", text(&o.stderr));

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("err");
    let mut work = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["work", "-q", q, "--handler", "noop", "--no-metrics"])
        .env("REDIS_URL", &ctx.url)
        .env_remove("WEIR_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let logged = |what: &'static str| {
        let log = log.clone();
        move || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            std::future::ready(text.contains(what))
        }
    };
    wait_until(
        "trimming to stop",
        Duration::from_secs(30),
        logged("trimming stopped"),
    )
    .await;
    let _ = crate::common::signal(work.id(), rustix::process::Signal::TERM);
    assert!(work.wait().unwrap().success());
    let text = plain(&std::fs::read_to_string(&log).unwrap());
    let starts = text.matches("dead-letter queue over its cap").count();
    let stops = text.matches("trimming stopped").count();
    assert_eq!((starts, stops), (1, 1), "{text}");
    assert!(text.contains("trimmed=2400"), "the streak's total: {text}");

    let s = ctx.stats().await;
    assert_eq!((s.dead, s.counters["trimmed"]), (100, 2_400));
    let o = cli(&ctx, &["stats", "-q", q], "");
    assert!(
        crate::text(&o.stdout).contains("dead       100 (cap 100; 2400 trimmed so far)"),
        "{}",
        crate::text(&o.stdout)
    );
}

/// `text` without its ANSI colour sequences.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            chars.by_ref().find(|c| c.is_ascii_alphabetic());
        } else {
            out.push(c);
        }
    }
    out
}
