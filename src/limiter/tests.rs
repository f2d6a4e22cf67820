use super::*;

const MS: Duration = Duration::from_millis(1);

fn config() -> LimiterConfig {
    LimiterConfig {
        aimd: AimdConfig {
            target: Target::Absolute(100 * MS),
            ..AimdConfig::default()
        },
        window: WindowConfig {
            min_samples: 10,
            min_duration: Duration::from_secs(1),
            ..WindowConfig::default()
        },
    }
}

#[tokio::test(start_paused = true)]
async fn a_closing_window_drives_the_limit() {
    let limit = Limit::new(20);
    let l = Limiter::new(config(), limit.clone()).unwrap();
    let permits: Vec<_> = futures_util::future::join_all((0..20).map(|_| limit.acquire())).await;
    let t0 = Instant::now();
    tokio::time::advance(Duration::from_secs(1)).await;
    for _ in 0..9 {
        assert_eq!(l.record(t0, 50 * MS, Signal::Success), None);
    }
    // The 10th sample, 1 s after the window opened, closes it: healthy and binding, no
    // congestion seen yet, so slow start doubles.
    let d = l.record(t0 + 950 * MS, 50 * MS, Signal::Success).unwrap();
    assert_eq!((d.from, d.to, d.reason), (20, 40, Reason::SlowStart));
    assert_eq!(limit.get(), 40);
    // Jobs that started before the change no longer count.
    let t1 = Instant::now();
    tokio::time::advance(Duration::from_secs(1)).await;
    for _ in 0..20 {
        assert_eq!(l.record(t0, 500 * MS, Signal::Overload), None);
    }
    for _ in 0..10 {
        l.record(t1 + 700 * MS, 300 * MS, Signal::Success);
    }
    assert_eq!(limit.get(), 30, "p95 300 ms over 100 ms: 40 × 0.75");
    drop(permits);
}

#[tokio::test(start_paused = true)]
async fn starts_from_the_limit_clamped_and_reconfigures_live() {
    let limit = Limit::new(5000);
    let l = Limiter::new(config(), limit.clone()).unwrap();
    assert_eq!(limit.get(), 1000, "default max");
    let mut c = l.config();
    c.aimd.max = 40;
    c.aimd.target = Target::Relative(3.0);
    l.reconfigure(c.clone()).unwrap();
    assert_eq!(limit.get(), 40);
    assert_eq!(l.config(), c);
    assert_eq!(l.target(), None, "no latency seen yet");
    c.aimd.min = 50;
    let e = l.reconfigure(c).unwrap_err().to_string();
    assert!(
        e.contains("max concurrency must be between min concurrency"),
        "{e}"
    );
    assert_eq!(limit.get(), 40, "a refused change changes nothing");
}

#[tokio::test(start_paused = true)]
async fn a_batch_records_every_job_under_one_lock() {
    let limit = Limit::new(4);
    let l = Limiter::new(config(), limit.clone()).unwrap();
    let t0 = Instant::now();
    tokio::time::advance(Duration::from_secs(1)).await;
    let signals = [Signal::Overload; 4].into_iter().chain([Signal::Success; 6]);
    let d = l.record_batch(t0, Duration::from_secs(1), signals).unwrap();
    assert_eq!((d.from, d.to), (4, 2), "10 samples, 40 % errors: halved");
}

#[tokio::test(start_paused = true)]
async fn answered_statuses_are_classified_by_the_overload_setting() {
    let limit = Limit::new(4);
    let mut c = config();
    c.aimd.overload_status = vec![429, 503, 502];
    let l = Limiter::new(c, limit.clone()).unwrap();
    assert_eq!(l.last_decision(), None);
    let permits: Vec<_> = futures_util::future::join_all((0..4).map(|_| limit.acquire())).await;
    let t0 = Instant::now();
    tokio::time::advance(Duration::from_secs(1)).await;
    // Four plain 500s among ten: the job's failures, and the limit (binding) doubles.
    let signals = [Signal::Status(500); 4].into_iter().chain([Signal::Success; 6]);
    let d = l.record_batch(t0 + 950 * MS, 50 * MS, signals).unwrap();
    assert_eq!((d.from, d.to, d.reason), (4, 8, Reason::SlowStart));
    let (last, s) = l.last_decision().unwrap();
    assert_eq!((last, s.failures, s.overloads), (d, 4, 0));
    // Four 502s: listed, so overload; 40 % of the window: halved.
    let t1 = Instant::now();
    tokio::time::advance(Duration::from_secs(1)).await;
    let signals = [Signal::Status(502); 4].into_iter().chain([Signal::Success; 6]);
    let d = l.record_batch(t1 + 950 * MS, 50 * MS, signals).unwrap();
    assert!(
        matches!(d.reason, Reason::Overload { rate } if rate == 0.4),
        "{d:?}"
    );
    assert_eq!((d.from, d.to), (8, 4));
    drop(permits);
}
