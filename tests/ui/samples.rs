//! The queue's history in the UI: rates come from the samples consumers write (every
//! reader agrees, and a queue nobody samples shows none), the queue page draws them, and
//! the finders: a job by id, jobs by key with their payload, the cron page, the limits
//! form's current values, the pager, times with their epoch.

use crate::common::*;
use crate::{Ui, cli, seeded};
use serde_json::Value;
use weir::NewJob;

const PERIOD: u64 = 10_000;

/// Writes samples by hand, as `scripts/samples.lua` writes them: one per period ending
/// now, `acked` counts oldest first (their rates: the differences over 10 s).
async fn samples(ctx: &Ctx, acked: &[u64]) {
    let now = ctx.now_ms().await;
    let n = acked.len() as u64;
    for (i, a) in acked.iter().enumerate() {
        let back = (n - 1 - i as u64) * PERIOD;
        let at = now - back;
        let slot = at - at % PERIOD;
        let s = format!("{slot} {at} {} {a} {a} 0 0 0 {} 0 {} 0", a + 5, 3 + i, i % 2);
        let _: u64 = ctx.cmd(&["LPUSH", &ctx.keys.samples(), &s]).await;
    }
}

fn ours(list: &Value, q: &str) -> Value {
    list["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == q)
        .cloned()
        .expect("the queue is listed")
}

fn cli_json(ctx: &Ctx, args: &[&str]) -> Value {
    let out = cli(ctx, args);
    assert!(
        out.status.success(),
        "weir {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn rates_come_from_the_history_and_every_reader_agrees() {
    let ctx = Ctx::new("hist-rates").await;
    seeded(&ctx, &State::default().counter("acked", 600)).await;
    let (a, b) = (Ui::start(&ctx, &[], &[]).await, Ui::start(&ctx, &[], &[]).await);
    let q = ctx.queue.clone();
    // No samples (no consumer ran): no rates anywhere, whatever the counters did.
    let _: u64 = ctx.cmd(&["HINCRBY", ctx.keys.counters(), "acked", "125"]).await;
    assert!(ours(&a.json("/api/queues").await, &q)["rates"].is_null());
    let (_, page) = a.get("/").await;
    assert!(!page.contains("12.5"), "no rate made up from page views");
    samples(&ctx, &[100, 300, 600]).await;
    let history = a.json(&format!("/api/samples?queue={q}")).await;
    assert_eq!(history["samples"].as_array().unwrap().len(), 3);
    let rates = history["rates"].clone();
    assert_eq!(rates["acked_per_s"].as_f64(), Some(30.0), "{rates}");
    assert_eq!(ours(&a.json("/api/queues").await, &q)["rates"], rates);
    assert_eq!(
        ours(&b.json("/api/queues").await, &q)["rates"],
        rates,
        "another server"
    );
    assert_eq!(
        cli_json(&ctx, &["stats", "--queue", &q, "--json"])["rates"],
        rates,
        "weir stats"
    );
    assert_eq!(
        ours(&cli_json(&ctx, &["queues", "--json"]), &q)["rates"],
        rates,
        "weir queues"
    );
    let out = String::from_utf8(cli(&ctx, &["stats", "--queue", &q]).stdout).unwrap();
    assert!(out.contains("30.0 acked/s"), "{out}");
}

#[tokio::test]
async fn the_queue_page_draws_the_history() {
    let ctx = Ctx::new("hist-charts").await;
    seeded(&ctx, &State::default()).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.clone();
    let (_, empty) = ui.get(&format!("/queue?queue={q}")).await;
    assert!(
        empty.contains("charts-empty") && !empty.contains("<svg"),
        "no samples: a note"
    );
    samples(&ctx, &[100, 300, 600, 1000]).await;
    let (status, page) = ui.get(&format!("/queue?queue={q}")).await;
    assert_eq!(status, 200);
    for chart in ["throughput", "failures", "deferrals", "depth"] {
        assert!(
            page.contains(&format!(r#"data-chart="{chart}""#)),
            "{chart} chart"
        );
    }
    // Three rates from four samples: one line of three points for acked.
    let line = page
        .split("<polyline")
        .find(|p| p.contains(r#"data-series="acked""#))
        .expect("an acked line");
    let points = line.split("points=\"").nth(1).unwrap().split('"').next().unwrap();
    assert_eq!(points.split(' ').count(), 3, "{points}");
    // The scale's top: 40/s rounds up to 50.
    assert!(page.contains(">50</text>"), "scale top");
    // Depth: ready 6 in the newest sample.
    let depth = page.split(r#"data-chart="depth""#).nth(1).unwrap();
    assert!(
        depth.contains("ready <b>6</b>"),
        "the newest depth in the legend: {depth}"
    );
}

#[tokio::test]
async fn jobs_by_id_and_by_key_with_their_payload() {
    let ctx = Ctx::new("hist-find").await;
    seeded(&ctx, &State::default()).await;
    let p = ctx.producer();
    for (id, key) in [("j-a1", "acme"), ("j-b1", "bolt"), ("j-a2", "acme")] {
        let job = NewJob::new("mail", &serde_json::json!({ "to": format!("{id}@x"), "n": 7 }))
            .unwrap()
            .id(id)
            .key(key);
        p.enqueue(job).await.unwrap();
    }
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.clone();
    let (_, all) = ui.get(&format!("/queue?queue={q}")).await;
    assert!(all.contains(r#"id="job-search""#), "a search by id");
    assert!(all.contains(r#"<td class="key">acme</td>"#), "the key column");
    assert!(
        all.contains("&quot;to&quot;:&quot;j-a1@x&quot;"),
        "the payload preview"
    );
    let (_, acme) = ui.get(&format!("/queue?queue={q}&key=acme")).await;
    assert!(
        acme.contains("j-a1") && acme.contains("j-a2") && !acme.contains("j-b1"),
        "key filter"
    );
    let api = ui
        .json(&format!("/api/jobs?queue={q}&state=ready&key=bolt"))
        .await;
    let ids: Vec<&str> = api["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["j-b1"]);
    assert_eq!(api["jobs"][0]["key"], "bolt");
    let (status, found) = ui.get(&format!("/job?queue={q}&id=j-b1")).await;
    assert_eq!(status, 200);
    assert!(found.contains("<h1>Job j-b1</h1>") && found.contains("bolt"));
    let (status, _) = ui.get(&format!("/job?queue={q}&id=nope")).await;
    assert_eq!(status, 404);
    // A bad key is refused, escaped.
    let (status, body) = ui.get(&format!("/queue?queue={q}&key=%3Cb%3E")).await;
    assert_eq!(status, 400);
    assert!(!body.contains("<b>"));
}

#[tokio::test]
async fn the_cron_page_shows_the_next_tick_and_the_last_job() {
    let ctx = Ctx::new("hist-cron").await;
    seeded(&ctx, &State::default()).await;
    let schedules = weir::Schedules::new(ctx.c(), &ctx.queue).unwrap();
    let every = weir::queue::cron::When::Every(std::time::Duration::from_secs(3600));
    schedules
        .add(&weir::Schedule::new("report", every, "report", "{}").unwrap())
        .await
        .unwrap();
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.clone();
    let (status, page) = ui.get(&format!("/cron?queue={q}")).await;
    assert_eq!(status, 200);
    assert!(page.contains(r#"data-schedule="report""#) && page.contains("every 1h"));
    let next = page.split(r#"class="next""#).nth(1).unwrap();
    let ms: u64 = next
        .split("data-ms=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(ms % 3_600_000, 0, "the next tick is on the hour");
    assert!(ms > ctx.now_ms().await);
    // Just added: the time it was stored is no tick, and no job is named.
    assert!(
        page.contains("none since it was stored") && page.contains("none yet"),
        "{page}"
    );
    // The last tick's job, while it is in the queue.
    let tick = ms - 3_600_000;
    let _: u64 = ctx
        .cmd(&["HSET", &ctx.keys.cron_fired(), "report", &tick.to_string()])
        .await;
    let id = format!("cron:report:{tick}");
    ctx.producer()
        .enqueue(NewJob::new("report", &serde_json::json!({})).unwrap().id(&id))
        .await
        .unwrap();
    let (_, page) = ui.get(&format!("/cron?queue={q}")).await;
    assert!(
        page.contains(&format!("id={}", id.replace(':', "%3A"))),
        "a link to the last job"
    );
    assert!(page.contains(">Ready</span>"));
    let _: u64 = ctx.cmd(&["DEL", ctx.keys.jobs()]).await;
    let _: u64 = ctx.cmd(&["DEL", &ctx.keys.all()[1]]).await;
    let (_, page) = ui.get(&format!("/cron?queue={q}")).await;
    assert!(page.contains("no longer in the queue"));
}

#[tokio::test]
async fn forms_pager_and_times_say_what_is() {
    let ctx = Ctx::new("hist-forms").await;
    let mut state = State::default().setting("global_concurrency", "7");
    let ids: Vec<String> = (0..3).map(|i| format!("p{i}")).collect();
    for id in &ids {
        state = state.job(id, 0, 3, 1);
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    seeded(&ctx, &state.ready(1, &refs)).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.clone();
    let (_, limits) = ui.get(&format!("/limits?queue={q}")).await;
    assert!(
        limits.contains(r#"name="global_concurrency" value="7""#),
        "the field holds the value in force"
    );
    assert!(
        limits.contains(r#"name="global_rate" value="" placeholder="e.g. "#),
        "a blank field says e.g."
    );
    let (_, first) = ui.get(&format!("/queue?queue={q}&limit=2")).await;
    assert!(!first.contains("First page"), "not on the first page");
    assert!(first.contains("Next page"));
    let cursor = first
        .split("cursor=")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    let (_, second) = ui.get(&format!("/queue?queue={q}&limit=2&cursor={cursor}")).await;
    assert!(second.contains("First page") && !second.contains("Next page"));
    // Times carry their epoch (ui.js writes the local time before the age).
    assert!(
        first.contains("data-ms=\"") && first.contains("title=\"epoch "),
        "epoch on hover"
    );
}
