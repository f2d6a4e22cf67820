//! A partitioned queue in the UI: the pages and `/api/` go through the admin layer, so
//! they show the queue once, its figures summed over its lanes, jobs from every lane
//! (each saying its lane), and its actions reach the lane a job is in.

use crate::common::*;
use crate::{Ui, seeded};
use weir::queue::partitions::Partitions;

#[tokio::test]
async fn a_partitioned_queue_renders_and_acts_across_its_lanes() {
    let ctx = Ctx::new("ui-parts").await;
    let parts = Partitions::create(&mut ctx.c(), &ctx.queue, 2)
        .await
        .unwrap()
        .partitions;
    let (p0, p1) = (parts.partition(0).clone(), parts.partition(1).clone());
    seed(
        &mut ctx.c(),
        &p0,
        &State::default().job("a.p0", 0, 5, 1).ready(1, &["a.p0"]),
    )
    .await;
    let dead = State::default()
        .job("x.p1", 5, 5, 1)
        .dead(&[("x.p1", 1_700_000_000_000)])
        .error("x.p1", "the downstream said 400");
    seed(&mut ctx.c(), &p1, &dead).await;
    seeded(&ctx, &State::default().job("b", 0, 5, 1).ready(1, &["b"])).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.as_str();

    let (code, body) = ui.get("/").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("2 partitions"), "{body}");
    assert!(
        !body.contains(&format!("{q}~")),
        "no lane is listed as a queue: {body}"
    );

    let (code, body) = ui.get(&format!("/queue?queue={q}&state=ready&limit=1")).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("a.p0"), "{body}");
    // The cursor names its lane (`1:0`, percent-encoded in the link).
    assert!(body.contains("cursor=1%3A0"), "{body}");
    let (code, body) = ui
        .get(&format!("/queue?queue={q}&state=ready&limit=1&cursor=1%3A0"))
        .await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(">b<"), "the base's job: {body}");
    let (code, body) = ui.get(&format!("/queue?queue={q}&state=dead")).await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("x.p1") && body.contains("the downstream said 400"),
        "{body}"
    );

    let (code, body) = ui.get(&format!("/job?queue={q}&id=x.p1")).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("Lane") && body.contains(p1.name()), "{body}");
    for page in ["workers", "limits"] {
        let (code, body) = ui.get(&format!("/{page}?queue={q}")).await;
        assert_eq!(code, 200, "{page}: {body}");
    }
    let api = ui.json(&format!("/api/jobs?queue={q}&state=ready")).await;
    let lanes: Vec<&str> = api["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["lane"].as_str().unwrap())
        .collect();
    assert_eq!(lanes, [p0.name(), q]);

    let token = ui.token(q).await;
    let (code, location, _) = ui
        .post(
            "/dead/requeue",
            &[("csrf", &token), ("queue", q), ("id", "x.p1")],
            &[],
        )
        .await;
    assert_eq!(code, 303);
    assert!(location.contains("did=requeued&n=1"), "{location}");
    let lane = snapshot(&mut ctx.c(), &p1).await;
    assert_eq!(
        (lane.ready[1].as_slice(), lane.dead.len()),
        (&["x.p1".to_string()][..], 0)
    );
}
