//! `weir retry`: rules stored, shown, refused with a clear error (nothing written), and
//! `weir stats` shows them with the next due time.

use crate::common::*;
use crate::{cli, text};
use std::time::Duration;
use weir::NewJob;

#[tokio::test]
async fn retry_set_get_clear_and_stats_show_the_next_due_time() {
    let ctx = Ctx::new("cli-retry").await;
    let q = ctx.queue.as_str();
    let o = cli(&ctx, &["retry", "set", "-q", q, "--create", "sidekiq"], "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout).trim(),
        format!("queue {q}: retry sidekiq:attempts=26")
    );
    let o = cli(
        &ctx,
        &["retry", "set", "-q", q, "--kind", "mail", "fixed:1m,10m"],
        "",
    );
    assert!(
        o.stdout
            .ends_with(b"  kind mail: retry fixed:1m,10m,attempts=3\n"),
        "{}",
        text(&o.stdout)
    );
    // A rule that does not parse: exit 2, the reason, nothing written.
    let o = cli(&ctx, &["retry", "set", "-q", q, "exp:factor=0.5"], "");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("factor 0.5 is outside 1..=100"),
        "{}",
        text(&o.stderr)
    );
    let o = cli(&ctx, &["retry", "get", "-q", q], "");
    assert!(text(&o.stdout).starts_with(&format!("queue {q}: retry sidekiq:attempts=26\n")));

    ctx.producer()
        .enqueue(NewJob::new("mail", &1).unwrap().delay(Duration::from_secs(7200)))
        .await
        .unwrap();
    let o = cli(&ctx, &["stats", "-q", q, "--json"], "");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let due = v["next_due_at"].as_u64().expect("a next due time");
    let wait = due.saturating_sub(ctx.now_ms().await);
    assert!((7_100_000..=7_200_000).contains(&wait), "{wait}");
    assert_eq!(v["retry"]["kinds"]["mail"], "fixed:1m,10m,attempts=3");
    let o = cli(&ctx, &["stats", "-q", q], "");
    assert!(text(&o.stdout).contains("next due   "), "{}", text(&o.stdout));

    let o = cli(&ctx, &["retry", "clear", "-q", q], "");
    assert!(
        text(&o.stdout).starts_with(&format!("queue {q}: no retry rule")),
        "{}",
        text(&o.stdout)
    );
    assert!(text(&o.stdout).contains("kind mail"), "the kind's rule stays");
}
