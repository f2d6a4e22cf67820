//! `weir work --drain` with delayed jobs left: it says once what it waits for, and with
//! `--drain-ignore-delayed` it exits leaving them.

use crate::common::*;
use crate::support::*;
use std::time::Duration;
use weir::NewJob;

/// A job delayed for an hour keeps a plain drain running: the log names the delayed job
/// and when it falls due. With `--drain-ignore-delayed` the drain exits 0 and the job
/// stays delayed.
#[tokio::test]
async fn drain_says_what_it_waits_for_and_can_leave_delayed_jobs() {
    let ctx = Ctx::new("drain-wait").await;
    ctx.producer()
        .enqueue(
            NewJob::new("k", &1)
                .unwrap()
                .id("later")
                .delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut p = weir_work(&ctx, "noop", &["--drain"], dir.path(), "plain");
    let err = dir.path().join("err-plain");
    wait_until("the drain says what it waits for", SOON, || async {
        let log = std::fs::read_to_string(&err).unwrap_or_default();
        log.contains("drain: nothing ready") && log.contains("delayed=1") && log.contains("next_due=")
    })
    .await;
    assert!(
        p.wait_timeout(Duration::ZERO).is_none(),
        "a plain drain waits for the delayed job"
    );
    p.sigterm();
    assert!(p.wait_timeout(SOON).is_some_and(|s| s.success()));

    let mut p = weir_work(
        &ctx,
        "noop",
        &["--drain", "--drain-ignore-delayed"],
        dir.path(),
        "ignore",
    );
    let status = p
        .wait_timeout(SOON)
        .expect("the drain exits, leaving the delayed job");
    assert!(status.success(), "{status:?}");
    let s = ctx.stats().await;
    assert_eq!((s.delayed, s.ready_total(), s.in_flight), (1, 0, 0));
}
