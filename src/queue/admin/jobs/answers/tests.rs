//! Unit tests of `answers.rs`: cursors and summaries, without Redis.

use super::*;

#[test]
fn cursors_round_trip_and_bad_ones_are_refused() {
    assert_eq!(parse_cursor(JobState::Ready, None).unwrap(), [0, 0, 0]);
    let o = [3, 0, 7];
    let c = format_cursor(JobState::Delayed, o);
    assert_eq!(c, "3.0.7");
    assert_eq!(parse_cursor(JobState::Delayed, Some(&c)).unwrap(), o);
    assert_eq!(parse_cursor(JobState::Dead, Some("12")).unwrap(), [12, 0, 0]);
    for (state, bad) in [
        (JobState::Dead, "1.2.3"),
        (JobState::Delayed, "4"),
        (JobState::Ready, "x"),
        (JobState::Ready, ""),
        (JobState::InFlight, "-1"),
    ] {
        let e = parse_cursor(state, Some(bad)).unwrap_err();
        assert!(
            matches!(&e, Error::Config { setting, .. } if *setting == format!("page cursor {bad:?}")),
            "{state} {bad}: {e}"
        );
    }
}

#[test]
fn a_summary_reads_the_header_and_strips_the_suspect_mark() {
    let env = r#"{"attempt":2,"max_attempts":5,"priority":0,"enqueued_at":1000,"id":"a","kind":"mail","payload":{}}"#;
    let raw = Raw {
        id: "a",
        state: JobState::InFlight,
        envelope: Some(env),
        score: Some(9000),
        error: Some("boom"),
        mark: Some("00ff:s"),
        suspect: false,
        result: None,
    };
    let s = raw.summary(Timestamp(4000));
    assert_eq!(s.kind.as_deref(), Some("mail"));
    assert_eq!(
        (s.attempt, s.max_attempts, s.priority),
        (Some(2), Some(5), Some("high"))
    );
    assert_eq!(
        (s.age_ms, s.lease_deadline, s.due_at),
        (Some(3000), Some(Timestamp(9000)), None)
    );
    assert_eq!(s.worker.as_deref(), Some("00ff"));
    assert!(s.suspect);
    let bad = Raw {
        envelope: Some("{not json"),
        mark: None,
        ..raw
    };
    let s = bad.summary(Timestamp(4000));
    assert_eq!((s.kind, s.attempt, s.worker), (None, None, None));
}
