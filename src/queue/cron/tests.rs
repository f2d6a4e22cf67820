use super::*;

/// 2026-03-28T12:34:56.789Z, a Saturday; Berlin is UTC+1 until the switch to summer time
/// at 2026-03-29T01:00Z.
const NOW: u64 = 1_774_701_296_789;
const HOUR: u64 = 3_600_000;

fn cron(pattern: &str, tz: Option<&str>) -> Schedule {
    let when = When::Cron {
        pattern: pattern.into(),
        tz: tz.map(str::to_owned),
    };
    Schedule::new("nightly", when, "report", "{}").unwrap()
}

fn iso(ms: u64) -> String {
    Timestamp::from_millisecond(ms as i64).unwrap().to_string()
}

#[test]
fn intervals_count_from_the_epoch() {
    let s = Schedule::new("n", When::Every(Duration::from_secs(3600)), "k", "1").unwrap();
    let t = s.ticks().unwrap();
    assert_eq!(iso(t.latest(NOW).unwrap()), "2026-03-28T12:00:00Z");
    assert_eq!(iso(t.next(NOW).unwrap()), "2026-03-28T13:00:00Z");
    // A tick is its own latest; the next one is a whole interval on.
    let tick = t.latest(NOW).unwrap();
    assert_eq!(t.latest(tick), Some(tick));
    assert_eq!(t.next(tick), Some(tick + HOUR));
}

#[test]
fn cron_patterns_follow_the_time_zone() {
    let utc = cron("0 3 * * *", None).ticks().unwrap();
    assert_eq!(iso(utc.latest(NOW).unwrap()), "2026-03-28T03:00:00Z");
    assert_eq!(iso(utc.next(NOW).unwrap()), "2026-03-29T03:00:00Z");
    let berlin = cron("0 3 * * *", Some("Europe/Berlin")).ticks().unwrap();
    // 03:00 in Berlin: 02:00Z in winter; the next day is summer time, 01:00Z.
    assert_eq!(iso(berlin.latest(NOW).unwrap()), "2026-03-28T02:00:00Z");
    assert_eq!(iso(berlin.next(NOW).unwrap()), "2026-03-29T01:00:00Z");
    let secs = cron("*/10 * * * * *", None).ticks().unwrap();
    assert_eq!(iso(secs.latest(NOW).unwrap()), "2026-03-28T12:34:50Z");
    assert_eq!(iso(secs.next(NOW).unwrap()), "2026-03-28T12:35:00Z");
}

#[test]
fn bad_schedules_are_refused_with_the_reason() {
    let every = |d| Schedule::new("n", When::Every(d), "k", "{}");
    let e = every(Duration::from_millis(999)).unwrap_err().to_string();
    assert!(e.contains("at least 1s"), "{e}");
    let e = Schedule::new("n", When::Every(Duration::from_secs(1)), "k", "{nope")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot encode payload"), "{e}");
    let bad = |p: &str, tz: Option<&str>| {
        let when = When::Cron {
            pattern: p.into(),
            tz: tz.map(str::to_owned),
        };
        Schedule::new("n", when, "k", "{}").unwrap_err().to_string()
    };
    let e = bad("61 * * * *", None);
    assert!(e.contains("invalid cron pattern \"61 * * * *\""), "{e}");
    let e = bad("0 3 * * *", Some("Mars/Olympus"));
    assert!(e.contains("unknown time zone \"Mars/Olympus\""), "{e}");
    let e = Schedule::new("a b", When::Every(Duration::from_secs(1)), "k", "{}")
        .unwrap_err()
        .to_string();
    assert!(e.contains("invalid schedule name"), "{e}");
}

#[test]
fn stored_form_round_trips_and_names_the_tick_job() {
    let s = cron("0 3 * * *", Some("Europe/Berlin")).priority(Priority::High);
    let json = s.to_json();
    assert_eq!(
        json,
        r#"{"cron":"0 3 * * *","tz":"Europe/Berlin","kind":"report","payload":{},"priority":0}"#
    );
    let back = Schedule::from_json("nightly", &json).unwrap();
    assert_eq!(back.to_json(), json);
    assert_eq!(back.when(), s.when());
    let job = back.job(1_000, 2_000).unwrap();
    assert_eq!(job.id, "cron:nightly:1000");
    assert_eq!(job.priority, Priority::High);
    let env = String::from_utf8(job.envelope).unwrap();
    assert!(env.contains(r#""kind":"report""#), "{env}");
}
