//! The `weir` binary against the test redis-server: enqueue, work, stats, dlq, pause and
//! resume, and the one-line errors (bad arguments, bad input lines, unreachable Redis).

#[path = "../common/mod.rs"]
mod common;

mod dead_cap;
mod enqueue;
mod errors;
mod eviction;
mod queue;
mod work;

use common::*;
use std::io::Write;
use std::process::{Command, Output, Stdio};

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

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) fn no_panic(o: &Output) {
    let err = text(&o.stderr);
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
}
