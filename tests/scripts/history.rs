//! Run histories and completed jobs kept stay within their caps: a history keeps a job's
//! last runs, each cut short, and goes with its job; what a queue keeps is trimmed to its
//! count as settle keeps more.

use crate::common::*;
use weir::Priority;
use weir::queue::scripts::{self, RunHistory, Settle, StartMarks};
use weir::queue::settings::Settings;

const HISTORY: Option<RunHistory<'static>> = Some(RunHistory {
    worker: "c1",
    lease_ms: 60_000,
});

/// Bytes one run may take in a history: a message cut to 512 bytes, a worker's name to
/// 128, and the numbers and names around them.
const RUN_BYTES: usize = 800;

async fn hlen(ctx: &Ctx, key: &str) -> u64 {
    redis::cmd("HLEN")
        .arg(key)
        .query_async(&mut ctx.c())
        .await
        .unwrap()
}

/// Redis's own count of the bytes a key takes.
async fn memory(ctx: &Ctx, key: &str) -> u64 {
    let v: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(&mut ctx.c())
        .await
        .unwrap();
    v.unwrap_or(0)
}

/// 100,000 jobs of a bulk load (inline jobs) through fetch and settle, a batch of 1,000
/// at a time: every other job fails its first run with a 4 KB error, then succeeds; the
/// queue keeps 1,000 completed jobs. At every step the kept jobs stay within 1,000, and
/// the histories within the jobs stored (kept, or waiting for their retry behind the
/// load), each within its two runs of RUN_BYTES (Redis's own count of the hash's bytes);
/// at the end the queue holds the 1,000 newest completed jobs and their histories,
/// nothing else.
#[tokio::test]
async fn histories_and_kept_jobs_stay_within_their_caps_over_100_000_jobs() {
    const JOBS: usize = 100_000;
    const KEEP: u64 = 1_000;
    let ctx = Ctx::new("hist-bounds").await;
    let k = ctx.keys.clone();
    let keep = Settings {
        keep_completed_count: Some(KEEP),
        ..Settings::default()
    };
    Settings::update(&mut ctx.c(), &ctx.queue, &keep).await.unwrap();
    let jobs: Vec<weir::NewJob> = (0..JOBS)
        .map(|i| weir::NewJob::new("k", &i).unwrap().max_attempts(3))
        .collect();
    let r = ctx.producer().enqueue_bulk(jobs).await.unwrap();
    assert_eq!(r.enqueued, JOBS as u64);
    let error = "x".repeat(4096);
    let (mut settled, mut most_memory, mut batch) = (0, 0, 0);
    loop {
        batch += 1;
        let f = scripts::fetch(&mut ctx.c(), &k, 1000, 60_000).await.unwrap();
        if f.jobs.is_empty() {
            break;
        }
        let items: Vec<Settle> = f
            .jobs
            .iter()
            .map(|j| {
                let job = j.decode(1 << 20).unwrap();
                let (id, token) = (j.name.clone(), f.deadline_ms);
                let n: u64 = job.payload().unwrap();
                if n.is_multiple_of(2) && job.attempt == 0 {
                    Settle::Retry {
                        id,
                        token,
                        priority: Priority::Normal,
                        delay_ms: 0,
                        error: error.clone(),
                    }
                } else {
                    settled += 1;
                    Settle::Ack { id, token }
                }
            })
            .collect();
        let got = scripts::settle_recorded(&mut ctx.c(), &k, &items, StartMarks::default(), HISTORY)
            .await
            .unwrap();
        assert!(got.missed.is_empty() && got.missed_inline == 0);
        let done = ctx.stats().await.done;
        assert!(done <= KEEP, "{done} kept");
        let (history, stored) = (hlen(&ctx, &k.history()).await, hlen(&ctx, k.jobs()).await);
        assert!(history <= stored, "{history} histories for {stored} stored jobs");
        if batch % 10 != 0 {
            continue;
        }
        // two runs at most each, and Redis's overhead per field (about 100 bytes); read
        // every tenth batch (MEMORY USAGE reads every field)
        let bytes = memory(&ctx, &k.history()).await;
        let cap = history * (2 * RUN_BYTES as u64 + 100) + 65_536;
        assert!(bytes <= cap, "{history} histories take {bytes} bytes, cap {cap}");
        most_memory = most_memory.max(bytes);
    }
    assert_eq!(settled, JOBS);
    let s = ctx.snapshot().await;
    assert_eq!(s.done.len() as u64, KEEP);
    assert_eq!(s.jobs.len() as u64, KEEP, "only the kept jobs are stored");
    assert!(s.history.keys().all(|id| s.jobs.contains_key(id)));
    for (id, h) in &s.history {
        let runs: Vec<serde_json::Value> = serde_json::from_str(h).unwrap();
        assert!(runs.len() <= 2 && h.len() <= 2 * RUN_BYTES, "{id}: {h}");
        assert!(runs.iter().all(|r| r["message"].as_str().unwrap().len() <= 512));
    }
    let end = memory(&ctx, &k.history()).await;
    assert!(
        end as usize <= KEEP as usize * 2 * RUN_BYTES,
        "{end} bytes at the end"
    );
    assert!(
        most_memory > end,
        "the histories of the jobs waiting went with their acks"
    );
    assert_eq!(ctx.stats().await.counters.get("acked"), Some(&(JOBS as u64)));
}

/// A job that fails 20 times keeps its last 5 runs, newest last, each message cut to
/// 512 bytes at a character's start; dead-lettered, it keeps them; purged, they go.
#[tokio::test]
async fn a_history_keeps_the_last_runs_and_goes_with_its_job() {
    let ctx = Ctx::new("hist-last").await;
    let k = ctx.keys.clone();
    let mut c = ctx.c();
    ctx.producer()
        .enqueue(weir::NewJob::new("k", &1).unwrap().id("j").max_attempts(20))
        .await
        .unwrap();
    for n in 0..20 {
        let f = scripts::fetch(&mut c, &k, 1, 60_000).await.unwrap();
        assert_eq!(f.jobs.len(), 1, "run {n}");
        // 300 two-byte characters: cut at 512 bytes, on a character's start
        let error = format!("{n:02} {}", "é".repeat(300));
        let item = Settle::Retry {
            id: "j".into(),
            token: f.deadline_ms,
            priority: Priority::Normal,
            delay_ms: 0,
            error,
        };
        scripts::settle_recorded(&mut c, &k, &[item], StartMarks::default(), HISTORY)
            .await
            .unwrap();
    }
    let shown = ctx.admin().job("j").await.unwrap().unwrap();
    assert_eq!(shown.job.state, weir::queue::json::JobState::Dead);
    let runs: Vec<(&str, &str)> = shown
        .history
        .iter()
        .map(|r| (r.outcome.as_str(), &r.message[..2]))
        .collect();
    assert_eq!(
        runs,
        [
            ("retry", "15"),
            ("retry", "16"),
            ("retry", "17"),
            ("retry", "18"),
            ("dead", "19")
        ]
    );
    for r in &shown.history {
        assert!(
            r.message.len() <= 512 && r.message.len() >= 510,
            "{}",
            r.message.len()
        );
        assert_eq!(r.worker, "c1");
        assert!(r.end.as_ms() - r.start.as_ms() < 60_000);
    }
    assert_eq!(scripts::dlq_purge(&mut c, &k, 10).await.unwrap(), 1);
    let s = ctx.snapshot().await;
    assert!(s.history.is_empty() && s.jobs.is_empty(), "{s:?}");
}
