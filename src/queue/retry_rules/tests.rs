use super::*;

fn r(s: &str) -> RetryRule {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn exponential_grows_by_its_factor_then_caps() {
    let rule = r("exp:base=100ms,factor=3,cap=2s,jitter=0,attempts=7");
    assert_eq!(rule.delay(0), Duration::from_millis(100));
    assert_eq!(rule.delay(2), Duration::from_millis(900));
    assert_eq!(rule.delay(3), Duration::from_secs(2));
    assert_eq!(rule.delay(u32::MAX), Duration::from_secs(2));
    assert_eq!(rule.max_attempts(5), 7);
    // Without attempts the envelope's count stands.
    assert_eq!(r("exp:base=1s").max_attempts(5), 5);
}

#[test]
fn fixed_list_repeats_its_last_delay_and_counts_one_run_more() {
    let rule = r("fixed:10s,1m,10m");
    assert_eq!(rule.delay(0), Duration::from_secs(10));
    assert_eq!(rule.delay(2), Duration::from_secs(600));
    assert_eq!(rule.delay(9), Duration::from_secs(600));
    assert_eq!(rule.max_attempts(5), 4);
    assert_eq!(r("fixed:1s,attempts=2").max_attempts(9), 2);
}

/// The preset spans about three weeks over 25 retries, like Sidekiq's default.
#[test]
fn sidekiq_preset_spans_about_three_weeks() {
    let rule = r("sidekiq");
    assert_eq!(rule.max_attempts(5), 26);
    let total: Duration = (0..25).map(|n| rule.delay(n)).sum();
    let days = total.as_secs_f64() / 86400.0;
    assert!((20.0..22.0).contains(&days), "{days} days");
    let first = rule.delay(0).as_secs();
    assert!((15..=24).contains(&first), "{first}");
}

#[test]
fn specs_read_back_what_they_write() {
    for s in [
        "sidekiq",
        "exp:base=2s,factor=1.5,cap=1h,jitter=0.25,attempts=3",
        "fixed:1s,1m",
        "sidekiq:attempts=10",
    ] {
        let a = r(s);
        assert_eq!(r(&a.to_string()), a, "{s} -> {a}");
    }
}

#[test]
fn bad_specs_say_what_is_wrong() {
    for (s, says) in [
        ("linear:1s", "expected sidekiq"),
        ("exp:base=1s,factor=0.5", "factor"),
        ("exp:jitter=2", "jitter"),
        ("exp:base=2h,cap=1h", "cap is below base"),
        ("exp:speed=3", "unknown exp field"),
        ("fixed:", "1 to 100 delays"),
        ("fixed:soon", "not a duration"),
        ("sidekiq:attempts=0", "at least 1"),
        ("sidekiq:5s", "expected sidekiq"),
    ] {
        let e = s.parse::<RetryRule>().expect_err(s).to_string();
        assert!(e.contains(says), "{s}: {e}");
    }
}

#[test]
fn kind_rule_wins_over_queue_rule() {
    let h: HashMap<String, String> = [
        ("retry".to_owned(), "fixed:1s".to_owned()),
        ("retry:mail".to_owned(), "fixed:2s".to_owned()),
        ("rate".to_owned(), "5/s".to_owned()),
    ]
    .into_iter()
    .collect();
    let rules = RetryRules::from_hash(&h).unwrap();
    assert_eq!(rules.rule(Some("mail")).unwrap().delay(0), Duration::from_secs(2));
    assert_eq!(rules.rule(Some("sms")).unwrap().delay(0), Duration::from_secs(1));
    assert_eq!(rules.rule(None).unwrap().delay(0), Duration::from_secs(1));
    let bad: HashMap<String, String> = [("retry:x".to_owned(), "nope".to_owned())].into_iter().collect();
    assert!(
        RetryRules::from_hash(&bad)
            .unwrap_err()
            .to_string()
            .contains("retry:x")
    );
}
