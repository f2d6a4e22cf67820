//! A registry entry that is not a queue name (planted by hand or by a hostile
//! `FCALL weir_enqueue` before the function checked names): the overview, the workers
//! page and `/api/queues` skip it, say so (escaped), and still list every real queue.

use super::*;

#[tokio::test]
async fn a_bad_registry_entry_is_skipped_and_reported_not_fatal() {
    let ctx = Ctx::private("hostile-ui").await;
    let job = weir::NewJob::new("a", &serde_json::json!({ "n": 1 })).unwrap();
    ctx.producer().enqueue_bulk([job]).await.unwrap();
    let _: u64 = ctx
        .cmd(&["SADD", weir::queue::keys::QUEUES, "<svg onload=alert(1)>"])
        .await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    for path in ["/", "/workers"] {
        let (status, body) = ui.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert!(
            body.contains("id=\"invalid-queues\""),
            "{path} reports it: {body}"
        );
        assert!(body.contains("&lt;svg onload=alert(1)&gt;"), "{path} escapes it");
        assert!(!body.contains("<svg"), "{path}: {body}");
    }
    let (_, overview) = ui.get("/").await;
    assert!(
        overview.contains(&format!("data-queue=\"{}\"", ctx.queue)),
        "{overview}"
    );
    let list = ui.json("/api/queues").await;
    assert_eq!(list["queues"][0]["name"], ctx.queue.as_str(), "{list}");
    assert_eq!(list["invalid"], serde_json::json!(["<svg onload=alert(1)>"]));
}
