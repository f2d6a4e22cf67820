//! `weir stats --watch` into a pipe: frames one after another, no terminal control codes.

use crate::common::*;
use crate::{cli, no_panic, text};

#[tokio::test]
async fn stats_watch_writes_no_control_codes_into_a_pipe() {
    let ctx = Ctx::new("watch-pipe").await;
    let q = ctx.queue.as_str();
    let o = cli(&ctx, &["enqueue", "-q", q], "{\"kind\":\"k\",\"payload\":1}\n");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let args = ["stats", "-q", q, "--watch", "--count", "2", "--interval", "50ms"];
    let o = cli(&ctx, &args, "");
    no_panic(&o);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(!out.contains('\x1b'), "control codes in a pipe: {out:?}");
    let frames = out
        .lines()
        .filter(|l| l.starts_with("queue ") && l.ends_with(q))
        .count();
    assert_eq!(frames, 2, "two frames: {out}");
}
