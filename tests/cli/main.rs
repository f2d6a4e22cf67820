//! The `weir` binary against the test redis-server: enqueue, work, stats, dlq, pause and
//! resume, and the one-line errors (bad arguments, bad input lines, unreachable Redis).

#[path = "../common/mod.rs"]
mod common;

mod admin;
mod compact;
mod dead_cap;
mod enqueue;
mod errors;
mod eviction;
mod exit_codes;
mod functions;
mod limits_clear;
mod plain_errors;
mod queue;
mod retry;
mod typos;
mod watch;
mod work;

use common::*;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `weir args...` with `stdin`, Redis from `REDIS_URL` (or `--redis-url` in `args`).
pub(crate) fn cli(ctx: &Ctx, args: &[&str], stdin: impl AsRef<[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("REDIS_URL", &ctx.url)
        .env("RUST_BACKTRACE", "1")
        .env_remove("WEIR_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir runs");
    child.stdin.take().unwrap().write_all(stdin.as_ref()).unwrap();
    child.wait_with_output().unwrap()
}

/// Like [`cli`] with no input, but a run longer than `limit` is killed and fails the test:
/// for commands that must stop by themselves.
pub(crate) fn cli_within(ctx: &Ctx, args: &[&str], limit: Duration) -> Output {
    cli_within_from(ctx, args, Stdio::null(), limit)
}

/// [`cli_within`] with `stdin` as standard input.
pub(crate) fn cli_within_from(ctx: &Ctx, args: &[&str], stdin: Stdio, limit: Duration) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("REDIS_URL", &ctx.url)
        .env_remove("WEIR_LOG")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir runs");
    let pid = child.id();
    let out = std::thread::spawn(move || child.wait_with_output().unwrap());
    let started = Instant::now();
    while !out.is_finished() {
        if started.elapsed() > limit {
            let _ = common::signal(pid, rustix::process::Signal::KILL);
            panic!("weir {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    out.join().unwrap()
}

/// A loopback port with nothing listening (bound, then let go).
pub(crate) fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The non-blank lines of standard error.
pub(crate) fn error_lines(o: &Output) -> Vec<String> {
    text(&o.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) fn no_panic(o: &Output) {
    let err = text(&o.stderr);
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
}
