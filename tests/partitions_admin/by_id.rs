//! One job (or a few) by id in a partitioned queue: looked for in the lane the id names
//! first, then in the others; acted on in the lane it is found in.

use crate::*;
use weir::queue::json::JobState;

#[tokio::test]
async fn jobs_are_found_acted_on_and_reported_in_their_lane() {
    let (ctx, parts) = partitioned("pbyid", 3).await;
    let mut c = ctx.c();
    seed_ready(&mut c, parts.partition(0), &[("a.p0", "k")]).await;
    // x.p0 names partition 0 but lives in partition 2.
    seed_ready(&mut c, parts.partition(2), &[("c.p2", "k"), ("x.p0", "k")]).await;
    seed_ready(&mut c, parts.base(), &[("old", "k")]).await;
    let q = ctx.admin();
    let (p0, p2) = (parts.partition(0).name(), parts.partition(2).name());

    for (id, lane) in [("a.p0", p0), ("x.p0", p2), ("old", ctx.queue.as_str())] {
        let d = q.job(id).await.unwrap().unwrap_or_else(|| panic!("{id} found"));
        assert_eq!((d.job.id.as_str(), d.job.lane.as_deref()), (id, Some(lane)));
        assert_eq!(
            (d.queue.as_str(), d.job.state),
            (ctx.queue.as_str(), JobState::Ready)
        );
    }
    assert!(q.job("nope").await.unwrap().is_none());

    let r = q
        .delete_jobs(&["a.p0", "x.p0", "nope"].map(String::from), false)
        .await
        .unwrap();
    let done: Vec<(&str, Option<&str>)> = r
        .done
        .iter()
        .map(|d| (d.id.as_str(), d.lane.as_deref()))
        .collect();
    assert_eq!(done, [("a.p0", Some(p0)), ("x.p0", Some(p2))]);
    assert_eq!(r.skipped.len(), 1);
    assert_eq!(
        (r.skipped[0].id.as_str(), r.skipped[0].reason.as_str()),
        ("nope", "no such job")
    );
    assert_eq!(lane_stats(&c, parts.partition(2)).await.ready[1], 1, "c.p2 stays");
    let r = q.delete_jobs(&["c.p2".to_string()], true).await.unwrap();
    assert_eq!(r.skipped[0].reason, "not in the dead-letter queue");

    // Run now: a delayed job in partition 1, a dead one in the base, a ready one, none.
    let mut s = State::default().raw_job("del.p1", &envelope("del.p1", "k"));
    s.delayed[1].push(("del.p1".into(), 5_000_000_000_000));
    seed(&mut c, parts.partition(1), &s).await;
    seed_dead(&mut c, parts.base(), &[("dd", "k", 1000)]).await;
    let r = q
        .run_now(&["del.p1", "dd", "c.p2", "nope"].map(String::from))
        .await
        .unwrap();
    let done: Vec<(&str, JobState, Option<&str>)> = r
        .done
        .iter()
        .map(|d| (d.id.as_str(), d.from, d.lane.as_deref()))
        .collect();
    let p1 = parts.partition(1).name();
    assert_eq!(
        done,
        [
            ("del.p1", JobState::Delayed, Some(p1)),
            ("dd", JobState::Dead, Some(ctx.queue.as_str()))
        ]
    );
    let skipped: Vec<(&str, Option<JobState>)> = r.skipped.iter().map(|s| (s.id.as_str(), s.state)).collect();
    assert_eq!(skipped, [("c.p2", Some(JobState::Ready)), ("nope", None)]);
    assert_eq!(lane_stats(&c, parts.partition(1)).await.ready[1], 1);
    let base = lane_stats(&c, parts.base()).await;
    assert_eq!((base.ready[1], base.dead), (2, 0), "dd joined old");
}
