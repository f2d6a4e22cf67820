use super::*;

const MS: Duration = Duration::from_millis(1);

fn cfg(min_samples: usize) -> WindowConfig {
    WindowConfig {
        min_samples,
        min_duration: Duration::from_secs(1),
        max_duration: Duration::from_secs(5),
        max_kept: 1000,
    }
}

#[test]
fn percentiles_by_nearest_rank() {
    let mut v: Vec<u32> = (1..=100).rev().collect();
    assert_eq!(
        percentiles(&mut v),
        (Duration::from_micros(50), Duration::from_micros(95))
    );
    let mut one = vec![7];
    assert_eq!(
        percentiles(&mut one),
        (Duration::from_micros(7), Duration::from_micros(7))
    );
    let mut twenty: Vec<u32> = (1..=20).collect();
    assert_eq!(
        percentiles(&mut twenty),
        (Duration::from_micros(10), Duration::from_micros(19))
    );
    assert_eq!(percentiles(&mut []), (Duration::ZERO, Duration::ZERO));
}

#[test]
fn closes_after_min_samples_and_min_duration() {
    let t0 = Instant::now();
    let mut w = Window::new(cfg(10), t0).unwrap();
    for i in 0..9 {
        w.record(t0, (i + 1) * MS, Signal::Success);
    }
    assert!(!w.ready(t0 + 2 * Duration::from_secs(1)), "9 of 10 samples");
    w.record(t0, 10 * MS, Signal::Overload);
    assert!(!w.ready(t0 + 999 * MS), "10 samples but under 1 s");
    assert!(w.ready(t0 + 1000 * MS));
    let s = w.close(t0 + 1000 * MS, 7);
    assert_eq!((s.successes, s.overloads, s.peak_in_flight), (9, 1, 7));
    assert_eq!((s.p50, s.p95), (5 * MS, 9 * MS));
    assert!((s.overload_rate() - 0.1).abs() < 1e-12);
    assert_eq!(w.samples(), 0, "close opens an empty window");
    assert!(!w.ready(t0 + 1500 * MS), "the new window opened at 1 s");
}

#[test]
fn trickle_closes_at_max_duration() {
    let t0 = Instant::now();
    let mut w = Window::new(cfg(50), t0).unwrap();
    assert!(
        !w.ready(t0 + Duration::from_secs(60)),
        "no samples, nothing to say"
    );
    w.record(t0, 3 * MS, Signal::Success);
    assert!(!w.ready(t0 + 4999 * MS));
    assert!(w.ready(t0 + 5000 * MS));
}

#[test]
fn ignored_and_stale_jobs_give_no_sample() {
    let t0 = Instant::now();
    let mut w = Window::new(cfg(1), t0).unwrap();
    w.record(t0, MS, Signal::Ignored);
    assert_eq!(w.samples(), 0);
    w.discard_before(t0 + 100 * MS);
    w.record(t0 + 99 * MS, MS, Signal::Success);
    w.record(t0 + 99 * MS, MS, Signal::Overload);
    assert_eq!(w.samples(), 0, "started before the limit changed");
    w.record(t0 + 100 * MS, 4 * MS, Signal::Success);
    let s = w.close(t0 + 2000 * MS, 1);
    assert_eq!((s.successes, s.overloads, s.p95), (1, 0, 4 * MS));
}

#[test]
fn thinning_keeps_counts_exact_and_percentiles_close() {
    let t0 = Instant::now();
    let c = WindowConfig {
        max_kept: 100,
        ..cfg(1)
    };
    let mut w = Window::new(c, t0).unwrap();
    // 1000 latencies 1..=1000 µs in a scrambled order (37 is coprime with 1000).
    for i in 0..1000u64 {
        w.record(t0, Duration::from_micros((i * 37) % 1000 + 1), Signal::Success);
    }
    assert!(w.latencies.len() <= 100, "kept {}", w.latencies.len());
    let s = w.close(t0 + Duration::from_secs(1), 1);
    assert_eq!(s.successes, 1000);
    let p95 = s.p95.as_micros() as i64;
    let p50 = s.p50.as_micros() as i64;
    assert!((p95 - 950).abs() <= 30, "p95 {p95}");
    assert!((p50 - 500).abs() <= 30, "p50 {p50}");
}

#[test]
fn huge_latencies_saturate() {
    let t0 = Instant::now();
    let mut w = Window::new(cfg(1), t0).unwrap();
    w.record(t0, Duration::from_secs(10 * 3600), Signal::Success);
    let s = w.close(t0 + Duration::from_secs(1), 1);
    assert_eq!(s.p95, Duration::from_micros(u32::MAX as u64));
}

#[test]
fn validation_names_the_range() {
    let t0 = Instant::now();
    let e = Window::new(cfg(0), t0).unwrap_err().to_string();
    assert_eq!(e, "window min samples must be between 1 and 1000000 (got 0)");
    let c = WindowConfig {
        max_duration: 10 * MS,
        ..cfg(1)
    };
    let e = Window::new(c, t0).unwrap_err().to_string();
    assert_eq!(
        e,
        "window max duration must be between window min duration and 1h (got 10ms)"
    );
}

#[test]
fn a_quick_window_closes_after_its_own_duration() {
    let t0 = Instant::now();
    let mut w = Window::new(cfg(10), t0).unwrap();
    w.set_quick(Some(80 * MS));
    for _ in 0..10 {
        w.record(t0, 20 * MS, Signal::Success);
    }
    assert!(!w.ready(t0 + 79 * MS));
    assert!(w.ready(t0 + 80 * MS), "10 samples over the quick 80 ms");
    // Never longer than min_duration, and None restores it.
    w.set_quick(Some(Duration::from_secs(3)));
    assert!(w.ready(t0 + 1000 * MS));
    w.set_quick(None);
    assert!(!w.ready(t0 + 999 * MS));
}

#[test]
fn overload_answers_close_the_window_at_once() {
    let t0 = Instant::now();
    let mut w = Window::new(cfg(10), t0).unwrap();
    w.set_overload_close(Some(0.05));
    for _ in 0..100 {
        w.record(t0, 20 * MS, Signal::Success);
    }
    for _ in 0..9 {
        w.record(t0, MS, Signal::Overload);
    }
    assert!(!w.ready(t0 + MS), "9 overload answers, fewer than min_samples");
    w.record(t0, MS, Signal::Overload);
    assert!(w.ready(t0 + MS), "10 of 110: over 5 %, at once");
    // Under the rate, or without the setting, the window waits.
    let mut w = Window::new(cfg(10), t0).unwrap();
    w.set_overload_close(Some(0.05));
    for _ in 0..300 {
        w.record(t0, 20 * MS, Signal::Success);
    }
    for _ in 0..10 {
        w.record(t0, MS, Signal::Overload);
    }
    assert!(!w.ready(t0 + MS), "10 of 310 is 3 %");
    w.set_overload_close(None);
    for _ in 0..100 {
        w.record(t0, MS, Signal::Overload);
    }
    assert!(!w.ready(t0 + MS));
}
