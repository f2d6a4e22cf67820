//! Retry rules stored for a queue and its kinds (`weir retry set`): the delay and the runs
//! a failing job gets come from the rule in force when it fails, kind before queue.

use crate::common::*;
use crate::support::*;
use weir::queue::retry_rules::{RetryRule, RetryRules};
use weir::{JobError, NewJob};

fn rule(s: &str) -> RetryRule {
    s.parse().unwrap()
}

/// Jobs enqueued under one rule (one hour between runs, 50 runs) and still waiting when
/// the rule changes (10 ms, 3 runs) fail under the new one: three runs, then dead.
#[tokio::test]
async fn a_rule_change_binds_jobs_already_waiting() {
    let ctx = Ctx::new("rule-change").await;
    RetryRules::set(&mut ctx.c(), &ctx.queue, None, &rule("fixed:1h,attempts=50"))
        .await
        .unwrap();
    let jobs: Vec<NewJob> = (0..20)
        .map(|i| NewJob::new("k", &i).unwrap().id(format!("w{i}")).max_attempts(50))
        .collect();
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    RetryRules::set(&mut ctx.c(), &ctx.queue, None, &rule("fixed:10ms,attempts=3"))
        .await
        .unwrap();
    let seen = Seen::default();
    let registry = seen.recording("k", |_| async { Err(JobError::retry("down")) });
    let c = start(&ctx, config(&ctx), registry);
    wait_stats(&ctx, "every job dead after three runs", |s| s.dead == 20).await;
    c.stop().await;
    for i in 0..20 {
        assert_eq!(seen.attempts(&format!("w{i}")), [0, 1, 2]);
    }
}

/// A kind's rule wins over the queue's; the delay after a failure is the rule's (one
/// hour, read from the delayed set's due time), not the consumer's own backoff.
#[tokio::test]
async fn kind_rule_wins_and_its_delay_is_used() {
    let ctx = Ctx::new("rule-kind").await;
    RetryRules::set(&mut ctx.c(), &ctx.queue, None, &rule("fixed:10ms,attempts=2"))
        .await
        .unwrap();
    RetryRules::set(
        &mut ctx.c(),
        &ctx.queue,
        Some("slow"),
        &rule("fixed:1h,attempts=9"),
    )
    .await
    .unwrap();
    let p = ctx.producer();
    p.enqueue(NewJob::new("fast", &1).unwrap().id("f")).await.unwrap();
    p.enqueue(NewJob::new("slow", &1).unwrap().id("s")).await.unwrap();
    let seen = Seen::default();
    let s2 = seen.clone();
    let registry = seen
        .recording("fast", |_| async { Err(JobError::retry("down")) })
        .on(
            "slow",
            weir::handler_fn(move |job| {
                s2.record(&job);
                async { Err(JobError::retry("down")) }
            }),
        );
    let c = start(&ctx, config(&ctx), registry);
    wait_stats(&ctx, "fast dead, slow delayed", |s| s.dead == 1 && s.delayed == 1).await;
    c.stop().await;
    assert_eq!(seen.attempts("f"), [0, 1], "the queue's rule: two runs");
    assert_eq!(
        seen.attempts("s"),
        [0],
        "the kind's rule: one hour to the next run"
    );
    let now = ctx.now_ms().await;
    let shown = ctx.admin().job("s").await.unwrap().expect("s exists");
    let due = shown.job.due_at.expect("delayed with a due time").as_ms();
    let wait = due.saturating_sub(now);
    assert!((3_540_000..=3_600_000).contains(&wait), "due in {wait} ms");
    // `weir stats` shows the same time as the queue's next due.
    assert_eq!(ctx.admin().next_due().await.unwrap(), Some(due));
}

/// A job's own rule (its envelope's `retry`) wins over its kind's and its queue's, and
/// binds when the job fails, whatever rules were set while it waited: jobs enqueued with
/// `fixed:10ms,attempts=2` while the queue's and kind's rules say one hour and 50 runs
/// (set after the jobs were enqueued) run twice and are dead; their neighbours without a
/// rule of their own follow the kind's (one run, then one hour).
#[tokio::test]
async fn a_jobs_own_rule_wins_over_kind_and_queue() {
    let ctx = Ctx::new("rule-own").await;
    let p = ctx.producer();
    for i in 0..10 {
        p.enqueue(
            NewJob::new("k", &i)
                .unwrap()
                .id(format!("own{i}"))
                .max_attempts(50)
                .retry(rule("fixed:10ms,attempts=2")),
        )
        .await
        .unwrap();
        p.enqueue(
            NewJob::new("k", &i)
                .unwrap()
                .id(format!("kind{i}"))
                .max_attempts(50),
        )
        .await
        .unwrap();
    }
    RetryRules::set(&mut ctx.c(), &ctx.queue, None, &rule("fixed:1h,attempts=50"))
        .await
        .unwrap();
    RetryRules::set(&mut ctx.c(), &ctx.queue, Some("k"), &rule("fixed:1h,attempts=40"))
        .await
        .unwrap();
    let seen = Seen::default();
    let registry = seen.recording("k", |_| async { Err(JobError::retry("down")) });
    let c = start(&ctx, config(&ctx), registry);
    wait_stats(&ctx, "own-rule jobs dead, the others delayed", |s| {
        s.dead == 10 && s.delayed == 10
    })
    .await;
    c.stop().await;
    let now = ctx.now_ms().await;
    for i in 0..10 {
        assert_eq!(
            seen.attempts(&format!("own{i}")),
            [0, 1],
            "the job's own rule: two runs"
        );
        assert_eq!(
            seen.attempts(&format!("kind{i}")),
            [0],
            "the kind's rule: an hour away"
        );
        let shown = ctx.admin().job(&format!("kind{i}")).await.unwrap().unwrap();
        let wait = shown.job.due_at.unwrap().as_ms().saturating_sub(now);
        assert!(wait > 3_000_000, "due in {wait} ms");
    }
}
