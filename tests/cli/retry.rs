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

/// `weir limits set --keep-completed`, then a job that failed once and then completed
/// with a result: `weir jobs --state done` lists it with its result, `weir job show`
/// prints its own rule, its result and its two runs (and `--json` has them as `result`
/// and `history`), `weir limits clear --keep-completed` stops it.
#[tokio::test]
async fn kept_jobs_and_their_runs_through_the_cli() {
    use weir::queue::scripts::{self, RunHistory, Settle, StartMarks};
    let ctx = Ctx::new("cli-keep").await;
    let q = ctx.queue.as_str();
    let args = ["limits", "set", "-q", q, "--create", "--keep-completed", "1h"];
    let o = cli(&ctx, &[&args[..], &["--keep-completed-count", "5"]].concat(), "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("keep_completed_ms=3600000 keep_completed_count=5"),
        "{}",
        text(&o.stdout)
    );
    ctx.producer()
        .enqueue(
            NewJob::new("hook", &1)
                .unwrap()
                .id("a")
                .retry("fixed:1m,attempts=3".parse().unwrap()),
        )
        .await
        .unwrap();
    let history = Some(RunHistory {
        worker: "c1",
        lease_ms: 30_000,
    });
    for ack in [false, true] {
        let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 1, 30_000).await.unwrap();
        let (id, token) = ("a".to_owned(), f.deadline_ms);
        let item = match ack {
            true => Settle::AckResult {
                id,
                token,
                result: r#"{"sent": true}"#.into(),
            },
            false => Settle::Retry {
                id,
                token,
                priority: weir::Priority::Normal,
                delay_ms: 0,
                error: "HTTP 500: upstream down".into(),
            },
        };
        scripts::settle_recorded(&mut ctx.c(), &ctx.keys, &[item], StartMarks::default(), history)
            .await
            .unwrap();
    }
    let o = cli(&ctx, &["jobs", "--state", "done", "--json", "-q", q], "");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"][0]["id"], "a", "{v}");
    assert_eq!(v["jobs"][0]["state"], "done");
    assert!(v["jobs"][0]["done_at"].is_string());
    assert_eq!(v["jobs"][0]["result"], r#"{"sent": true}"#);
    let out = text(&cli(&ctx, &["jobs", "--state", "done", "-q", q], "").stdout);
    let head = out.lines().next().unwrap();
    assert!(head.ends_with("RESULT"), "{out}");
    assert!(
        out.lines().nth(1).unwrap().ends_with(r#"{"sent": true}"#),
        "{out}"
    );
    let o = cli(&ctx, &["job", "show", "a", "--json", "-q", q], "");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["job"]["result"], r#"{"sent": true}"#, "{v}");
    let runs: Vec<(&str, &str, &str)> = v["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |f: &str| r[f].as_str().unwrap();
            (s("outcome"), s("worker"), s("message"))
        })
        .collect();
    assert_eq!(
        runs,
        [("retry", "c1", "HTTP 500: upstream down"), ("done", "c1", "")]
    );
    let out = text(&cli(&ctx, &["job", "show", "a", "-q", q], "").stdout);
    assert!(out.contains("state       done\n"), "{out}");
    assert!(out.contains("result      {\"sent\": true}\n"), "{out}");
    assert!(
        out.contains("retry rule  fixed:1m,attempts=3 (the job's own)"),
        "{out}"
    );
    let runs: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "runs")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(runs.len(), 2, "{out}");
    assert!(runs[0].contains("retry on c1 after"), "{out}");
    assert!(runs[0].ends_with(": HTTP 500: upstream down"), "{out}");
    assert!(runs[1].contains("done on c1 after"), "{out}");
    let o = cli(&ctx, &["limits", "clear", "-q", q, "--keep-completed"], "");
    assert!(!text(&o.stdout).contains("keep_completed"), "{}", text(&o.stdout));
}
