//! Each job's run history (its last runs: start, end, worker, outcome, message) and the
//! completed jobs a queue keeps on request, through a running consumer.

use crate::common::*;
use crate::support::*;
use weir::queue::json::JobState;
use weir::queue::settings::{Cleared, Settings};
use weir::{JobError, NewJob, Registry};

/// Fails its first two runs (`down #N`), then succeeds; `fatal` jobs fail for good.
fn registry() -> Registry {
    Registry::new()
        .on(
            "flaky",
            weir::handler_fn(|job| async move {
                match job.attempt {
                    n @ 0..=1 => Err(JobError::retry(format!("down #{n}"))),
                    _ => Ok(()),
                }
            }),
        )
        .on(
            "fatal",
            weir::handler_fn(|_| async { Err(JobError::fatal("bad input")) }),
        )
        .on("ok", weir::handler_fn(|_| async { Ok(()) }))
}

fn flaky(id: &str) -> NewJob {
    NewJob::new("flaky", &1)
        .unwrap()
        .id(id)
        .retry("fixed:10ms,attempts=5".parse().unwrap())
}

async fn keep(ctx: &Ctx, count: u64) {
    let s = Settings {
        keep_completed_count: Some(count),
        ..Settings::default()
    };
    Settings::update(&mut ctx.c(), &ctx.queue, &s).await.unwrap();
}

/// A queue that keeps completed jobs: the job that failed twice and then succeeded is
/// kept as done with its three runs (retry, retry, done) by the consumer that ran them;
/// the dead one has its one run; inline jobs of bulk loads are kept too, also when a
/// flush holds nothing but their acks (which otherwise skip the settle script). `weir
/// jobs --state done` lists them, and deleting a kept job deletes its history.
#[tokio::test]
async fn kept_jobs_show_their_runs() {
    let ctx = Ctx::new("hist-keep").await;
    keep(&ctx, 100).await;
    let p = ctx.producer();
    p.enqueue(flaky("h")).await.unwrap();
    p.enqueue(NewJob::new("fatal", &1).unwrap().id("f"))
        .await
        .unwrap();
    p.enqueue_bulk(vec![NewJob::new("flaky", &2).unwrap().max_attempts(5)])
        .await
        .unwrap();
    let c = start(&ctx, config(&ctx), registry());
    wait_stats(&ctx, "two done, one dead", |s| s.done == 2 && s.dead == 1).await;
    let ok: Vec<NewJob> = (0..20).map(|i| NewJob::new("ok", &i).unwrap()).collect();
    p.enqueue_bulk(ok).await.unwrap();
    let s = wait_stats(&ctx, "22 done", |s| s.done == 22).await;
    let worker = ctx.admin().workers().await.unwrap().workers[0].id.clone();
    c.stop().await;
    assert_eq!(s.pending(), 0);

    let h = ctx.admin().job("h").await.unwrap().expect("a kept job exists");
    assert_eq!(h.job.state, JobState::Done);
    assert!(h.job.done_at.is_some());
    let outcomes: Vec<&str> = h.history.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(outcomes, ["retry", "retry", "done"], "{:?}", h.history);
    let messages: Vec<&str> = h.history.iter().map(|r| r.message.as_str()).collect();
    assert_eq!(messages, ["down #0", "down #1", ""]);
    for r in &h.history {
        assert_eq!(r.worker, worker);
        assert!(r.start <= r.end, "{r:?}");
    }
    let f = ctx.admin().job("f").await.unwrap().expect("dead jobs stay");
    let runs: Vec<(&str, &str)> = f
        .history
        .iter()
        .map(|r| (r.outcome.as_str(), r.message.as_str()))
        .collect();
    assert_eq!(runs, [("dead", "bad input")]);

    let page = ctx.admin().jobs(JobState::Done, None, 10, None).await.unwrap();
    assert!(page.next_cursor.is_some());
    let flaky = ctx
        .admin()
        .jobs(JobState::Done, Some("flaky"), 10, None)
        .await
        .unwrap();
    let mut ids: Vec<&str> = flaky.jobs.iter().map(|j| j.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&"h"));
    assert_eq!(page.jobs.len(), 10, "a page of 10");

    let gone = ctx.admin().delete_jobs(&["h".to_owned()], false).await.unwrap();
    assert_eq!(gone.done[0].from, JobState::Done);
    let snap = ctx.snapshot().await;
    assert!(!snap.history.contains_key("h"), "{:?}", snap.history);
    assert!(!snap.jobs.contains_key("h"));
}

/// Without keeping, a job that failed and then succeeded is deleted with its history;
/// turning keeping off drops what was kept (housekeeping trims it).
#[tokio::test]
async fn an_ack_drops_the_history_and_clearing_keep_drops_the_kept() {
    let ctx = Ctx::new("hist-drop").await;
    let p = ctx.producer();
    p.enqueue(flaky("a")).await.unwrap();
    let c = start(&ctx, config(&ctx), registry());
    wait_stats(&ctx, "acked after two retries", |s| {
        s.counters.get("acked") == Some(&1)
    })
    .await;
    let snap = ctx.snapshot().await;
    assert!(snap.history.is_empty() && snap.jobs.is_empty(), "{snap:?}");

    keep(&ctx, 10).await;
    p.enqueue(flaky("b")).await.unwrap();
    wait_stats(&ctx, "b kept", |s| s.done == 1).await;
    assert_eq!(ctx.admin().job("b").await.unwrap().unwrap().history.len(), 3);
    Settings::clear_some(&mut ctx.c(), &ctx.queue, &[Cleared::KeepCompleted])
        .await
        .unwrap();
    wait_stats(&ctx, "nothing kept", |s| s.done == 0).await;
    c.stop().await;
    let snap = ctx.snapshot().await;
    assert!(snap.history.is_empty() && snap.jobs.is_empty(), "{snap:?}");
}
