//! The queue page shows when the next delayed job (a retry's next attempt) falls due, and
//! job pages speak of failed attempts charged of the runs allowed.

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
