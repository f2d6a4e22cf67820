//! `weir queues`, `weir jobs`, `weir job show|delete|run-now`, `weir workers`, the
//! filtered dead-letter commands, and their --json shapes (docs/cli-json.md).

use crate::common::*;
use crate::queue::bury;
use crate::{cli, no_panic, text};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;
use weir::queue::scripts;

/// Runs `weir args...`, expects exit code `code`, and parses standard output as JSON.
fn cli_json(ctx: &Ctx, args: &[&str], code: i32) -> Value {
    let o = cli(ctx, args, "");
    no_panic(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&o.stdout)))
}

/// A field that must be an RFC 3339 time in UTC with milliseconds.
fn is_time(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.ends_with('Z') && humantime::parse_rfc3339(s).is_ok() && s.contains('.'))
}

async fn enqueue(ctx: &Ctx, kind: &str, id: &str) {
    ctx.producer()
        .enqueue(
            weir::NewJob::new(kind, &serde_json::json!({"n": 1.50}))
                .unwrap()
                .id(id),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn queues_lists_registered_and_older_queues_with_rates() {
    let ctx = Ctx::new("cli-queues").await;
    let q = ctx.queue.as_str();
    enqueue(&ctx, "k", "a").await;
    enqueue(&ctx, "k", "b").await;
    // A queue from before the registry: only its keys.
    let (old, old_keys) = ctx.other_queue("cli-queues-old");
    let _: () = ctx.cmd(&["HSET", old_keys.jobs(), "x", "{}"]).await;
    let v = cli_json(
        &ctx,
        &["queues", "--json", "--rescan", "--rate-window", "50ms"],
        0,
    );
    assert_eq!(v["version"], 1);
    assert!(is_time(&v["now"]), "{v}");
    let find = |name: &str| {
        v["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
    };
    let mine = find(q).expect("the queue is listed");
    assert_eq!(
        mine["ready"],
        serde_json::json!({"high": 0, "normal": 2, "low": 0, "total": 2})
    );
    assert_eq!(
        (mine["delayed"].as_u64(), mine["dead"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(
        (mine["in_flight"].as_u64(), mine["paused"].as_bool()),
        (Some(0), Some(false))
    );
    assert!(mine["oldest_ready_age_ms"].is_u64());
    assert_eq!(mine["counters"]["enqueued"], 2);
    let rates = &mine["rates"];
    assert_eq!(rates["acked_per_s"], 0.0);
    assert!(rates["window_ms"].as_u64().unwrap() >= 50, "{rates}");
    assert!(find(&old).is_some(), "the rescan found {old}");

    let v = cli_json(&ctx, &["queues", "--json", "--rate-window", "0s"], 0);
    let mine = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == q)
        .unwrap()
        .clone();
    assert!(mine["rates"].is_null());

    let o = cli(&ctx, &["queues", "--rate-window", "0s"], "");
    let out = text(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.starts_with(q))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains(" 2 ") && row.contains("0/2/0"), "{row}");

    let o = cli(&ctx, &["queues", "--forget", &old, "--rate-window", "0s"], "");
    assert!(!text(&o.stdout).contains(&old), "{}", text(&o.stdout));
}

#[tokio::test]
async fn jobs_pages_through_every_state() {
    let ctx = Ctx::new("cli-jobs").await;
    let q = ctx.queue.as_str();
    for i in 0..5 {
        enqueue(&ctx, if i % 2 == 0 { "even" } else { "odd" }, &format!("r{i}")).await;
    }
    // ready, page by page, following the cursor
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["jobs", "--state", "ready", "--limit", "2", "--json", "-q", q];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let v = cli_json(&ctx, &args, 0);
        assert_eq!(
            (v["version"].as_u64(), v["state"].as_str()),
            (Some(1), Some("ready"))
        );
        let jobs = v["jobs"].as_array().unwrap();
        assert!(jobs.len() <= 2);
        seen.extend(jobs.iter().map(|j| j["id"].as_str().unwrap().to_owned()));
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ["r0", "r1", "r2", "r3", "r4"]);
    let v = cli_json(
        &ctx,
        &["jobs", "--state", "ready", "--kind", "odd", "--json", "-q", q],
        0,
    );
    let j = &v["jobs"][0];
    assert_eq!((j["id"].as_str(), j["kind"].as_str()), (Some("r1"), Some("odd")));
    assert_eq!(
        (j["attempt"].as_u64(), j["max_attempts"].as_u64()),
        (Some(0), Some(5))
    );
    assert_eq!(
        (j["priority"].as_str(), j["state"].as_str()),
        (Some("normal"), Some("ready"))
    );
    assert!(is_time(&j["enqueued_at"]) && j["age_ms"].is_u64(), "{j}");
    assert!(
        j["due_at"].is_null() && j["worker"].is_null() && j["suspect"] == false,
        "{j}"
    );
    assert_eq!(v["jobs"].as_array().unwrap().len(), 2);

    // in flight, delayed, dead
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 1, 60_000).await.unwrap();
    let v = cli_json(&ctx, &["jobs", "--state", "in-flight", "--json", "-q", q], 0);
    assert_eq!(v["jobs"][0]["id"], f.jobs[0].name.as_str());
    assert!(is_time(&v["jobs"][0]["lease_deadline"]), "{v}");
    ctx.producer()
        .enqueue(
            weir::NewJob::new("k", &1)
                .unwrap()
                .id("later")
                .delay(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    let v = cli_json(&ctx, &["jobs", "--state", "delayed", "--json", "-q", q], 0);
    assert_eq!(v["jobs"][0]["id"], "later");
    assert!(is_time(&v["jobs"][0]["due_at"]), "{v}");
    bury(&ctx, &["r3"]).await;
    let v = cli_json(&ctx, &["jobs", "--state", "dead", "--json", "-q", q], 0);
    assert_eq!(
        (v["jobs"][0]["id"].as_str(), v["jobs"][0]["last_error"].as_str()),
        (Some("r3"), Some("broke r3"))
    );
    let o = cli(&ctx, &["jobs", "--state", "dead", "-q", q], "");
    let out = text(&o.stdout);
    assert!(
        out.contains("DEAD SINCE") && out.contains("broke r3") && out.contains(" ago"),
        "{out}"
    );
    let o = cli(&ctx, &["jobs", "--state", "ready", "--limit", "1", "-q", q], "");
    assert!(
        text(&o.stdout).contains("more: --cursor 1"),
        "{}",
        text(&o.stdout)
    );
    let o = cli(
        &ctx,
        &["jobs", "--state", "ready", "--cursor", "x.y", "-q", q],
        "",
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("page cursor") && text(&o.stderr).contains("is not one a page gave"));
}

#[tokio::test]
async fn job_show_prints_the_envelope_and_the_lease() {
    let ctx = Ctx::new("cli-show").await;
    let q = ctx.queue.as_str();
    enqueue(&ctx, "mail", "a").await;
    let v = cli_json(&ctx, &["job", "show", "a", "--json", "-q", q], 0);
    assert_eq!(
        (v["version"].as_u64(), v["job"]["state"].as_str()),
        (Some(1), Some("ready"))
    );
    // the envelope is JSON, its payload's numbers as written
    assert_eq!(v["envelope"]["kind"], "mail");
    assert_eq!(v["envelope"]["payload"]["n"], 1.5);
    assert!(v["envelope_text"].is_null() && v["lease"].is_null() && v["deferrals"].is_null());

    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 1, 60_000).await.unwrap();
    let started = [("a".to_string(), f.deadline_ms)];
    let marks = scripts::StartMarks {
        tag: "cafe",
        started: &started,
        ended: &[],
    };
    scripts::settle_marked(&mut ctx.c(), &ctx.keys, &[], marks)
        .await
        .unwrap();
    let v = cli_json(&ctx, &["job", "show", "a", "--json", "-q", q], 0);
    let lease = &v["lease"];
    assert_eq!(
        (lease["worker"].as_str(), lease["running"].as_bool()),
        (Some("cafe"), Some(true))
    );
    assert_eq!(lease["token"], f.deadline_ms.to_string());
    assert!(is_time(&lease["deadline"]));
    let out = text(&cli(&ctx, &["job", "show", "a", "-q", q], "").stdout);
    assert!(
        out.contains("in_flight") && out.contains("consumer cafe") && out.contains("\"kind\": \"mail\""),
        "{out}"
    );

    let o = cli(&ctx, &["job", "show", "nope", "-q", q], "");
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stderr).trim(), format!("error: no job nope in queue {q}"));
}

#[tokio::test]
async fn job_delete_and_run_now() {
    let ctx = Ctx::new("cli-delete").await;
    let q = ctx.queue.as_str();
    for id in ["a", "b", "c"] {
        enqueue(&ctx, "k", id).await;
    }
    ctx.producer()
        .enqueue(
            weir::NewJob::new("k", &1)
                .unwrap()
                .id("later")
                .delay(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    let v = cli_json(&ctx, &["job", "delete", "a", "--json", "-q", q], 0);
    assert_eq!(v["done"], serde_json::json!([{"id": "a", "from": "ready"}]));
    assert_eq!(
        (v["action"].as_str(), v["skipped"].as_array().map(Vec::len)),
        (Some("delete"), Some(0))
    );

    // many: asked for, refused without a terminal
    let o = cli(&ctx, &["job", "delete", "b", "c", "-q", q], "");
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("delete 2 jobs from queue") && text(&o.stderr).contains("--yes"));
    let v = cli_json(&ctx, &["job", "delete", "b", "zz", "--yes", "--json", "-q", q], 3);
    assert_eq!(
        v["skipped"],
        serde_json::json!([{"id": "zz", "state": null, "reason": "no such job"}])
    );

    let o = cli(&ctx, &["job", "run-now", "later", "c", "-q", q], "");
    assert_eq!(o.status.code(), Some(3), "c is ready already");
    assert!(
        text(&o.stdout).contains("1 job moved to the front of ready"),
        "{}",
        text(&o.stdout)
    );
    assert!(
        text(&o.stderr).contains("c: already ready"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(ctx.snapshot().await.ready[1], ["later", "c"]);

    // a running job: deleted; its consumer's outcome is then dropped
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 1, 60_000).await.unwrap();
    let v = cli_json(&ctx, &["job", "delete", "later", "--json", "-q", q], 0);
    assert_eq!(v["done"][0]["from"], "in_flight");
    let ack = scripts::Settle::Dead {
        id: f.jobs[0].name.clone(),
        token: f.deadline_ms,
        reason: "x".into(),
    };
    let s = scripts::settle(&mut ctx.c(), &ctx.keys, &[ack]).await.unwrap();
    assert_eq!(s.missed, ["later"]);
    let st = ctx.stats().await;
    assert_eq!((st.ready_total(), st.in_flight, st.dead), (1, 0, 0));
}

#[tokio::test]
async fn dlq_by_kind_age_and_id() {
    let ctx = Ctx::new("cli-dlqf").await;
    let q = ctx.queue.as_str();
    for (id, kind) in [("m1", "mail"), ("m2", "mail"), ("s1", "sms"), ("s2", "sms")] {
        enqueue(&ctx, kind, id).await;
    }
    bury(&ctx, &["m1", "m2", "s1", "s2"]).await;
    let v = cli_json(&ctx, &["dlq", "requeue", "--kind", "mail", "--json", "-q", q], 0);
    assert_eq!(
        v,
        serde_json::json!({"version": 1, "queue": q, "action": "requeue", "kind": "mail", "older_than_ms": null, "count": 2})
    );
    let o = cli(&ctx, &["dlq", "requeue", "--older-than", "1h", "-q", q], "");
    assert!(
        text(&o.stdout).contains("requeued 0 jobs dead-lettered over 1h ago"),
        "{}",
        text(&o.stdout)
    );
    let o = cli(
        &ctx,
        &[
            "dlq",
            "purge",
            "--kind",
            "sms",
            "--older-than",
            "1h",
            "--yes",
            "-q",
            q,
        ],
        "",
    );
    assert!(
        text(&o.stdout).contains("purged 0 jobs of kind sms"),
        "{}",
        text(&o.stdout)
    );
    let v = cli_json(
        &ctx,
        &["dlq", "delete", "s1", "m1", "--yes", "--json", "-q", q],
        3,
    );
    assert_eq!(v["done"], serde_json::json!([{"id": "s1", "from": "dead"}]));
    assert_eq!(v["skipped"][0]["reason"], "not in the dead-letter queue");
    let o = cli(&ctx, &["dlq", "purge", "--kind", "sms", "--yes", "-q", q], "");
    assert!(
        text(&o.stdout).contains("purged 1 job of kind sms"),
        "{}",
        text(&o.stdout)
    );
    let s = ctx.stats().await;
    // m1 and m2 were requeued (m1 is ready, so `dlq delete m1` skipped it); s2 purged
    assert_eq!((s.dead, s.ready[1]), (0, 2));
}

#[tokio::test]
async fn workers_lists_a_running_consumer_until_it_stops() {
    let ctx = Ctx::new("cli-workers").await;
    let q = ctx.queue.as_str();
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "work",
            "--handler",
            "sleep:20s",
            "--no-metrics",
            "--concurrency",
            "7",
        ])
        .args([
            "--visibility-timeout",
            "1s",
            "--shutdown-timeout",
            "100ms",
            "-q",
            q,
        ])
        .env("REDIS_URL", &ctx.url)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let listed = || async {
        let v = cli_json(&ctx, &["workers", "--json", "-q", q], 0);
        v["workers"].as_array().unwrap().clone()
    };
    for i in 0..3 {
        enqueue(&ctx, "k", &format!("j{i}")).await;
    }
    // the heartbeat (every 333 ms with a 1 s lease) reports the jobs running
    wait_until(
        "the consumer reports 3 jobs running",
        Duration::from_secs(20),
        || async { listed().await.first().is_some_and(|w| w["running"] == 3) },
    )
    .await;
    let w = listed().await[0].clone();
    assert_eq!(
        (w["pid"].as_u64(), w["concurrency_limit"].as_u64()),
        (Some(pid as u64), Some(7))
    );
    assert_eq!(w["weir_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(w["id"].as_str().map(str::len), Some(16));
    assert!(
        is_time(&w["started_at"]) && is_time(&w["last_beat"]) && is_time(&w["expires_at"]),
        "{w}"
    );
    assert!(!w["host"].as_str().unwrap().is_empty());
    let out = text(&cli(&ctx, &["workers", "-q", q], "").stdout);
    assert!(
        out.starts_with("1 consumer on queue") && out.contains(&pid.to_string()),
        "{out}"
    );
    crate::common::signal(pid, rustix::process::Signal::TERM).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        listed().await.is_empty(),
        "a consumer that stops removes its entry"
    );
    let out = text(&cli(&ctx, &["workers", "-q", q], "").stdout);
    assert!(out.contains("no live consumers"), "{out}");
}

#[tokio::test]
async fn enqueue_takes_absolute_times() {
    let ctx = Ctx::new("cli-at").await;
    let q = ctx.queue.as_str();
    let lines = concat!(
        r#"{"kind":"k","payload":1,"id":"x","run_at":"2096-01-01T00:00:00Z"}"#,
        "\n",
        r#"{"kind":"k","payload":2,"id":"y","run_at":"2096-01-01T01:00:00+01:00","priority":"high"}"#,
        "\n",
        r#"{"kind":"k","payload":3,"id":"z","run_at":"2096-01-01T00:00:00Z","delay":"1s"}"#,
        "\n",
        r#"{"kind":"k","payload":4,"id":"w","run_at":"soon"}"#,
        "\n",
    );
    let o = cli(&ctx, &["enqueue", "-q", q], lines);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("line 3: give delay or run_at, not both"), "{err}");
    assert!(err.contains("line 4: invalid time \"soon\""), "{err}");
    let due = 3_976_214_400_000; // 2096-01-01T00:00:00Z
    let s = ctx.snapshot().await;
    assert_eq!(s.delayed[1], [("x".to_string(), due)]);
    assert_eq!(s.delayed[0], [("y".to_string(), due)]);
    let o = cli(
        &ctx,
        &[
            "enqueue",
            "-q",
            q,
            "--kind",
            "k",
            "--at",
            "2096-01-01T00:00:00.5Z",
        ],
        "7\n",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("enqueued 1 job into"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(
        ctx.snapshot().await.delayed[1]
            .iter()
            .filter(|(_, d)| *d == due + 500)
            .count(),
        1
    );
    let o = cli(
        &ctx,
        &[
            "enqueue",
            "-q",
            q,
            "--kind",
            "k",
            "--at",
            "2096-01-01T00:00:00Z",
            "--delay",
            "1s",
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(2));
}

#[tokio::test]
async fn every_flag_has_a_variable_shown_only_when_set() {
    let ctx = Ctx::new("cli-env").await;
    let q = ctx.queue.as_str();
    enqueue(&ctx, "k", "a").await;
    enqueue(&ctx, "k", "b").await;
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["jobs", "--state", "ready", "--json"])
        .env("REDIS_URL", &ctx.url)
        .env("WEIR_QUEUE", q)
        .env("WEIR_LIMIT", "1")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1, "{v}");
    let help = |set: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
        c.args(["jobs", "--help"]).env_remove("WEIR_LIMIT");
        if set {
            c.env("WEIR_LIMIT", "5");
        }
        text(&c.output().unwrap().stdout)
    };
    assert!(!help(false).contains("WEIR_LIMIT"));
    assert!(help(true).contains("[env: WEIR_LIMIT=5]"), "{}", help(true));
}

#[tokio::test]
async fn completions_version_and_log_formats() {
    let ctx = Ctx::new("cli-polish").await;
    for shell in ["bash", "zsh", "fish"] {
        let o = cli(&ctx, &["completions", shell], "");
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let out = text(&o.stdout);
        assert!(
            out.contains("weir") && out.contains("run-now"),
            "{shell}: {}",
            &out[..200.min(out.len())]
        );
    }
    let v = text(&cli(&ctx, &["--version"], "").stdout);
    assert!(
        v.starts_with(&format!("weir {} (commit ", env!("CARGO_PKG_VERSION"))) && v.contains(", built 20"),
        "{v}"
    );

    enqueue(&ctx, "k", "a").await;
    let q = ctx.queue.as_str();
    let run = |format: &str| {
        cli(
            &ctx,
            &[
                "work",
                "--handler",
                "noop",
                "--drain",
                "--no-metrics",
                "--log-format",
                format,
                "-q",
                q,
            ],
            "",
        )
    };
    let o = run("text");
    let err = text(&o.stderr);
    assert!(!err.contains('\u{1b}'), "no colour off a terminal: {err}");
    assert!(err.contains("working"), "{err}");
    assert!(
        text(&o.stdout).contains("processed 1 job in"),
        "{}",
        text(&o.stdout)
    );
    enqueue(&ctx, "k", "b").await;
    let o = run("json");
    let lines: Vec<Value> = text(&o.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["fields"]["message"] == "working"),
        "{lines:?}"
    );
}

/// A consumer killed with -9 cannot remove its entry: it expires (three beats, at least
/// 2 s; a 1 s lease beats every 333 ms).
#[tokio::test]
async fn a_killed_consumers_entry_expires() {
    let ctx = Ctx::new("cli-workers-kill").await;
    let q = ctx.queue.as_str();
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "work",
            "--handler",
            "noop",
            "--no-metrics",
            "--visibility-timeout",
            "1s",
            "-q",
            q,
        ])
        .env("REDIS_URL", &ctx.url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let admin = ctx.admin();
    wait_until("the consumer registers", Duration::from_secs(20), || async {
        !admin.workers().await.unwrap().workers.is_empty()
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        admin.workers().await.unwrap().workers.len(),
        1,
        "listed until it expires"
    );
    wait_until("the entry expires", Duration::from_secs(10), || async {
        admin.workers().await.unwrap().workers.is_empty()
    })
    .await;
}
