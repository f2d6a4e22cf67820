//! `/api/` answers what the commands' `--json` prints, field for field (the read times
//! and ages aside: two reads are two moments).

use crate::common::*;
use crate::{Ui, cli, seeded};
use serde_json::Value;

/// `v` without the fields that change between two reads (`now`, the ages).
fn timeless(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("now");
                m.remove("age_ms");
                m.remove("oldest_ready_age_ms");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
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

fn world() -> State {
    State::default()
        .job("r1", 0, 5, 1)
        .job("r2", 1, 5, 1)
        .ready(1, &["r1", "r2"])
        .job("d1", 2, 5, 0)
        .delayed(0, &[("d1", FUTURE)])
        .job("f1", 0, 5, 1)
        .lease(&[("f1", FUTURE)])
        .job("x1", 5, 5, 2)
        .dead(&[("x1", 1_700_000_100_000)])
        .error("x1", "boom: the downstream said 400")
        .counter("enqueued", 5)
}

#[tokio::test]
async fn the_api_answers_what_json_prints() {
    let ctx = Ctx::new("api").await;
    seeded(&ctx, &world()).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.as_str();
    for state in ["ready", "delayed", "in_flight", "dead"] {
        let api = ui.json(&format!("/api/jobs?queue={q}&state={state}")).await;
        let cmd = cli_json(&ctx, &["jobs", "--queue", q, "--state", state, "--json"]);
        assert_eq!(
            api["jobs"].as_array().unwrap().len(),
            if state == "ready" { 2 } else { 1 },
            "{state}"
        );
        assert_eq!(timeless(api), timeless(cmd), "{state}");
    }
    let page = ui.json(&format!("/api/jobs?queue={q}&state=ready&limit=1")).await;
    let next = page["next_cursor"].as_str().expect("a second page");
    let second = ui
        .json(&format!("/api/jobs?queue={q}&state=ready&limit=1&cursor={next}"))
        .await;
    assert_eq!(second["jobs"][0]["id"], "r2");
    for id in ["x1", "f1", "d1"] {
        let api = ui.json(&format!("/api/job?queue={q}&id={id}")).await;
        let cmd = cli_json(&ctx, &["job", "show", id, "--queue", q, "--json"]);
        assert_eq!(timeless(api), timeless(cmd), "{id}");
    }
    let api = ui.json(&format!("/api/workers?queue={q}")).await;
    assert_eq!(
        timeless(api),
        timeless(cli_json(&ctx, &["workers", "--queue", q, "--json"]))
    );
    let ours = |v: Value| {
        v["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == q)
            .cloned()
            .expect("the queue is listed")
    };
    let api = ours(ui.json("/api/queues?rate_window=0s").await);
    let cmd = ours(cli_json(&ctx, &["queues", "--rate-window", "0s", "--json"]));
    assert_eq!(timeless(api.clone()), timeless(cmd));
    assert_eq!(
        (api["ready"]["total"].as_u64(), api["dead"].as_u64()),
        (Some(2), Some(1))
    );
}

#[tokio::test]
async fn api_failures_are_json_with_a_status() {
    let ctx = Ctx::new("apierr").await;
    seeded(&ctx, &world()).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.as_str();
    for (path, status, says) in [
        (
            format!("/api/job?queue={q}&id=nope"),
            404,
            format!("no job nope in queue {q}"),
        ),
        (
            "/api/jobs?queue=bad%20name&state=ready".into(),
            400,
            "queue name".into(),
        ),
        (
            format!("/api/jobs?queue={q}&state=lost"),
            400,
            "unknown state".into(),
        ),
        (
            format!("/api/jobs?queue={q}&state=ready&cursor=x"),
            400,
            "is not one a page gave".into(),
        ),
        (
            format!("/api/jobs?queue={q}&state=ready&limit=0"),
            400,
            "a page holds".into(),
        ),
        (
            "/api/queues?rate_window=1h".into(),
            400,
            "rate_window is at most".into(),
        ),
        ("/api/workers".into(), 400, "no queue given".into()),
    ] {
        let (got, body) = ui.get(&path).await;
        assert_eq!(got, status, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{path}: not JSON: {body}"));
        let e = v["error"].as_str().unwrap();
        assert!(e.contains(&says), "{path}: {e}");
        assert_eq!(v["version"], 1);
    }
}
