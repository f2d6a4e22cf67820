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

/// How many jobs the bounds test runs: 10,000 by default (a few seconds), ten times the
/// count kept, so every cap is reached and held; `WEIR_BOUNDS_JOBS=100000` runs the full
/// count (about a minute):
/// `WEIR_BOUNDS_JOBS=100000 cargo test --test scripts histories_and_kept_jobs_stay_within`.
fn bounds_jobs() -> usize {
    std::env::var("WEIR_BOUNDS_JOBS")
        .ok()
        .map(|v| v.parse().expect("WEIR_BOUNDS_JOBS: a count of jobs"))
        .unwrap_or(10_000)
}

/// JOBS jobs (10,000, or `WEIR_BOUNDS_JOBS`: 100,000 for the full run) of a bulk load
/// (inline jobs) through fetch and settle, a batch of 1,000 at a time: every other job
/// fails its first run with a 4 KB error, then succeeds with a 5 KB result; the queue
/// keeps 1,000 completed jobs. At every step the kept jobs stay within 1,000, their
/// results within them (each within RESULT_MAX_BYTES), and the histories within the jobs
/// stored (kept, or waiting for their retry behind the load), each within its two runs
/// of RUN_BYTES (Redis's own count of the hash's bytes); at the end the queue holds the
/// 1,000 newest completed jobs, their histories and results, nothing else.
#[tokio::test]
async fn histories_and_kept_jobs_stay_within_their_caps() {
    let jobs_n = bounds_jobs();
    assert!(
        jobs_n >= 10_000,
        "WEIR_BOUNDS_JOBS: at least 10000 (ten times the count kept)"
    );
    const KEEP: u64 = 1_000;
    // MEMORY USAGE reads every field: ten reads over the run
    let every = (jobs_n / 1000 / 10).max(1);
    let ctx = Ctx::new("hist-bounds").await;
    let k = ctx.keys.clone();
    let keep = Settings {
        keep_completed_count: Some(KEEP),
        ..Settings::default()
    };
    Settings::update(&mut ctx.c(), &ctx.queue, &keep).await.unwrap();
    let jobs: Vec<weir::NewJob> = (0..jobs_n)
        .map(|i| weir::NewJob::new("k", &i).unwrap().max_attempts(3))
        .collect();
    let r = ctx.producer().enqueue_bulk(jobs).await.unwrap();
    assert_eq!(r.enqueued, jobs_n as u64);
    let error = "x".repeat(4096);
    let result = format!("\"{}\"", "r".repeat(5000));
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
                    Settle::AckResult {
                        id,
                        token,
                        result: result.clone(),
                    }
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
        let results = hlen(&ctx, &k.results()).await;
        assert!(results <= done, "{results} results for {done} kept jobs");
        if batch % every != 0 {
            continue;
        }
        let bytes = memory(&ctx, &k.results()).await;
        // (a value of 4096 bytes takes the allocator's next size class, 5120, and Redis's
        // overhead per field is about 100 bytes)
        let cap = results * (scripts::RESULT_MAX_BYTES as u64 + 1024 + 100) + 65_536;
        assert!(bytes <= cap, "{results} results take {bytes} bytes, cap {cap}");
        // two runs at most each, and Redis's overhead per field (about 100 bytes); read
        // every tenth batch (MEMORY USAGE reads every field)
        let bytes = memory(&ctx, &k.history()).await;
        let cap = history * (2 * RUN_BYTES as u64 + 100) + 65_536;
        assert!(bytes <= cap, "{history} histories take {bytes} bytes, cap {cap}");
        most_memory = most_memory.max(bytes);
    }
    assert_eq!(settled, jobs_n);
    let s = ctx.snapshot().await;
    assert_eq!(s.done.len() as u64, KEEP);
    assert_eq!(s.results.len() as u64, KEEP, "each kept job has its result");
    for (id, r) in &s.results {
        assert!(s.done.iter().any(|(d, _)| d == id), "a result of {id}, not kept");
        assert_eq!(r.len(), scripts::RESULT_MAX_BYTES, "{id}: cut to the cap");
    }
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
    assert_eq!(ctx.stats().await.counters.get("acked"), Some(&(jobs_n as u64)));
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
