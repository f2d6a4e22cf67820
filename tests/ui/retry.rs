//! The queue page shows when the next delayed job (a retry's next attempt) falls due, job
//! pages speak of failed attempts charged of the runs allowed, and kept jobs show their results.

use crate::Ui;
use crate::common::*;
use std::time::Duration;
use weir::NewJob;

#[tokio::test]
async fn queue_page_shows_the_next_due_time_and_job_page_the_charged_attempts() {
    let ctx = Ctx::new("ui-due").await;
    ctx.producer()
        .enqueue(
            NewJob::new("k", &1)
                .unwrap()
                .id("later")
                .delay(Duration::from_secs(7200)),
        )
        .await
        .unwrap();
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = &ctx.queue;
    let (code, body) = ui.get(&format!("/queue?queue={q}&state=delayed")).await;
    assert_eq!(code, 200, "{body}");
    let card = body.split("Next due").nth(1).expect("a next-due card");
    let card = &card[..card.find("</div>").unwrap()];
    assert!(card.contains("in 1h 59m") || card.contains("in 2h"), "{card}");
    let (_, body) = ui.get(&format!("/job?queue={q}&id=later")).await;
    assert!(
        body.contains("Failed attempts") && body.contains("0 charged of 5 runs"),
        "{body}"
    );
}

/// A completed job kept shows its result: in the Done tab (a Result column, in place of
/// the last error), on its page, and in `/api/job` and `/api/jobs`.
#[tokio::test]
async fn a_kept_jobs_result_shows_in_the_done_tab_its_page_and_the_api() {
    use weir::queue::scripts::{self, Settle, StartMarks};
    let ctx = Ctx::new("ui-result").await;
    let keep = weir::queue::settings::Settings {
        keep_completed_count: Some(10),
        ..Default::default()
    };
    weir::queue::settings::Settings::update(&mut ctx.c(), &ctx.queue, &keep)
        .await
        .unwrap();
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("r1"))
        .await
        .unwrap();
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 1, 60_000).await.unwrap();
    let ack = Settle::AckResult {
        id: "r1".into(),
        token: f.deadline_ms,
        result: r#"{"thumb":"r1-small.png"}"#.into(),
    };
    scripts::settle_marked(&mut ctx.c(), &ctx.keys, &[ack], StartMarks::default())
        .await
        .unwrap();
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = &ctx.queue;
    let (code, body) = ui.get(&format!("/queue?queue={q}&state=done")).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("<th>Result</th>"), "{body}");
    assert!(body.contains("r1-small.png"), "{body}");
    let (_, body) = ui.get(&format!("/job?queue={q}&id=r1")).await;
    assert!(
        body.contains("<dt>Result</dt>") && body.contains("r1-small.png"),
        "{body}"
    );
    let api = ui.json(&format!("/api/job?queue={q}&id=r1")).await;
    assert_eq!(api["job"]["result"], r#"{"thumb":"r1-small.png"}"#, "{api}");
    let page = ui.json(&format!("/api/jobs?queue={q}&state=done")).await;
    assert_eq!(page["jobs"][0]["result"], r#"{"thumb":"r1-small.png"}"#, "{page}");
}
