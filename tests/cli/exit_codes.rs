//! One exit-code scheme for every subcommand: 0 done, 1 runtime failure, 2 usage error,
//! 3 done in part (`weir enqueue` left lines unloaded, `weir dlq requeue` missed ids).
//! `weir --help` states it.

use crate::common::*;
use crate::{cli, cli_within, closed_port, no_panic, text};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// The exit code of `weir` with `line` split at spaces.
fn code(ctx: &Ctx, line: &str) -> i32 {
    let args: Vec<&str> = line.split(' ').collect();
    let o = cli_within(ctx, &args, LIMIT);
    no_panic(&o);
    o.status.code().unwrap_or(-1)
}

#[tokio::test]
async fn zero_when_the_command_did_its_job() {
    let ctx = Ctx::new("cli-exit0").await;
    let q = &ctx.queue;
    let o = cli(&ctx, &["enqueue", "-q", q, "--kind", "k"], "1\n2\n");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for line in [
        format!("stats -q {q}"),
        format!("work --handler noop --drain --no-metrics -q {q}"),
        format!("dlq list -q {q}"),
        format!("limits get -q {q}"),
        format!("pause -q {q}"),
        format!("resume -q {q}"),
        format!("--threads 3 stats -q {q}"),
        format!("work --handler noop --drain --no-metrics --threads 1 -q {q}"),
    ] {
        assert_eq!(code(&ctx, &line), 0, "{line}");
    }
}

#[tokio::test]
async fn one_when_the_command_could_not_be_carried_out() {
    let ctx = Ctx::new("cli-exit1").await;
    let q = &ctx.queue;
    let dead = "redis://127.0.0.1:1";
    let port = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().display();
    for line in [
        format!("stats --redis-url {dead}"),
        format!("dlq purge --yes --redis-url {dead}"),
        format!("limits get --redis-url {dead}"),
        format!("pause --redis-url {dead}"),
        format!("work --handler noop --redis-url {dead}"),
        format!("work --handler http://127.0.0.1:{port}/ --drain -q {q}"),
        format!("enqueue -q {q} /nonexistent/jobs.ndjson"),
        format!("enqueue -q {q} {dir}"),
    ] {
        assert_eq!(code(&ctx, &line), 1, "{line}");
    }
}

/// Usage errors: what clap refuses (unknown options, bad values, missing arguments) and
/// the values weir refuses (out of range, bad names), all before Redis is reached (here
/// it cannot be).
#[tokio::test]
async fn two_when_the_command_line_is_wrong() {
    let ctx = Ctx::new("cli-exit2").await;
    for line in [
        "frobnicate",
        "enqueue --bogus",
        "enqueue --delay soon",
        "work",
        "work --handler teleport",
        "work --handler ftp://host/x",
        "work --handler noop --concurrency 0",
        "work --handler noop --threads 0",
        "--threads many stats",
        "work --handler noop --job-timeout 0s",
        "work --handler noop --batch-http",
        "stats --bogus",
        "stats -q bad{name}",
        "dlq",
        "dlq requeue",
        "dlq requeue --all some-id",
        "dlq purge",
        "dlq delete a b",
        "job delete a b",
        "jobs",
        "jobs --state sleeping",
        "limits set --rate fast",
        "pause extra",
        "demo --jobs many",
    ] {
        let line = format!("{line} --redis-url redis://127.0.0.1:1");
        assert_eq!(code(&ctx, &line), 2, "{line}");
    }
}

#[tokio::test]
async fn three_when_the_command_was_done_in_part() {
    let ctx = Ctx::new("cli-exit3").await;
    let q = &ctx.queue;
    let o = cli(&ctx, &["enqueue", "-q", q, "--kind", "k"], "1\n{bad\n3\n");
    no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("1 line not loaded"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(ctx.stats().await.ready_total(), 2);
    // (`weir dlq requeue` of an id not in the dead-letter queue: tests/cli/queue.rs)
}

#[tokio::test]
async fn help_states_the_exit_codes() {
    let ctx = Ctx::new("cli-exithelp").await;
    let o = cli(&ctx, &["--help"], "");
    assert_eq!(o.status.code(), Some(0));
    let help = text(&o.stdout);
    for want in [
        "Exit codes:",
        "  0  done",
        "  1  runtime failure",
        "  2  usage error",
        "  3  done in part",
    ] {
        assert!(help.contains(want), "{want:?} in {help}");
    }
}
