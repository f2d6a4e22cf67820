//! `weir enqueue --compact`: plain lines are stored compact, lines the compact form cannot
//! say are stored in full, bad lines are still reported by number; the listing shows what
//! the full form would, and `weir work` runs every job.

use crate::common::*;
use crate::{cli, no_panic, text};

#[tokio::test]
async fn enqueue_compact_stores_plain_lines_compact_and_lists_and_runs_them() {
    let ctx = Ctx::new("cli-compact").await;
    let input = [
        r#"{"kind":"k","payload":{"a":1}}"#,
        r#"{"kind":"k","payload":2,"key":"acme"}"#,
        r#"{"kind":"k","payload":3,"priority":"high"}"#,
        r#"{"kind":"k","payload":4,"id":"fixed"}"#,
        r#"{"kind":"k","payload":5,"max_attempts":2}"#,
        r#"{"kind":"k","payload":6,"delay":"20ms"}"#,
        "not json",
    ]
    .join("\n");
    let t0 = ctx.now_ms().await;
    let o = cli(&ctx, &["enqueue", "--compact", "--queue", &ctx.queue], &input);
    let t1 = ctx.now_ms().await;
    no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("line 7:"), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("enqueued 6 jobs"), "{}", text(&o.stdout));

    let s = ctx.snapshot().await.by_id();
    let by_payload = |p: &str| {
        let tail = format!(r#""payload":{p}}}"#);
        let (id, env) = s.jobs.iter().find(|(_, e)| e.ends_with(&tail)).unwrap();
        (id.clone(), env.clone())
    };
    for (payload, compact) in [
        (r#"{"a":1}"#, true),
        ("2", true),
        ("3", false),
        ("4", false),
        ("5", false),
        ("6", true),
    ] {
        let (id, env) = by_payload(payload);
        assert_eq!(env.starts_with(r#"{"id":""#), compact, "{env}");
        if compact {
            let at = weir::queue::envelope::time_of_id(&id).unwrap();
            assert!((t0..=t1).contains(&at), "{env}: {at} within {t0}..={t1}");
        }
    }
    assert_eq!(by_payload("4").0, "fixed");

    let (id, _) = by_payload("2");
    let o = cli(&ctx, &["job", "show", &id, "--json", "-q", &ctx.queue], "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let job = &v["job"];
    assert_eq!(
        (
            &job["kind"],
            &job["attempt"],
            &job["max_attempts"],
            &job["priority"],
            &job["key"]
        ),
        (
            &"k".into(),
            &0.into(),
            &5.into(),
            &"normal".into(),
            &"acme".into()
        ),
        "{v}"
    );
    // the enqueue time its id holds
    let at = weir::queue::json::Timestamp(weir::queue::envelope::time_of_id(&id).unwrap());
    assert_eq!(job["enqueued_at"], at.to_string(), "{v}");

    let o = cli(
        &ctx,
        &[
            "work",
            "--handler",
            "noop",
            "--drain",
            "--no-metrics",
            "-q",
            &ctx.queue,
        ],
        "",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stats = ctx.stats().await;
    assert_eq!(stats.counters.get("acked"), Some(&6), "every job ran");
    assert_eq!((stats.pending(), stats.dead), (0, 0));
}

/// The end-to-end latency a consumer reports counts a compact job by the time its id
/// holds, and leaves out one whose id holds none (its enqueue time is unknown), rather
/// than counting it as enqueued in 1970.
#[tokio::test]
async fn a_compact_job_without_an_enqueue_time_is_left_out_of_the_latency() {
    let ctx = Ctx::new("cli-compact-lat").await;
    let o = cli(
        &ctx,
        &["enqueue", "--compact", "--kind", "k", "-q", &ctx.queue],
        "1\n",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ready = ctx.keys.ready(weir::Priority::Normal);
    let _: () = ctx
        .cmd(&["RPUSH", ready, r#"{"id":"plain-1","kind":"k","payload":2}"#])
        .await;
    let port = free_port();
    let mut work = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "work",
            "--handler",
            "noop",
            "-q",
            &ctx.queue,
            "--redis-url",
            &ctx.url,
        ])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let queue = format!(r#"queue="{}""#, ctx.queue);
    let count = || sample(&scrape(port), "weir_job_end_to_end_seconds_count", &[&queue]);
    wait_until("both jobs acked", std::time::Duration::from_secs(15), || async {
        ctx.stats().await.counters.get("acked") == Some(&2) && count().is_some()
    })
    .await;
    let metrics = scrape(port);
    let _ = work.kill();
    let _ = work.wait();
    let sum = sample(&metrics, "weir_job_end_to_end_seconds_sum", &[&queue]);
    assert_eq!(count(), None, "the consumer is gone");
    assert_eq!(
        sample(&metrics, "weir_job_end_to_end_seconds_count", &[&queue]),
        Some(1.0),
        "{metrics}"
    );
    assert!(sum.is_some_and(|s| s < 60.0), "{sum:?}");
}
