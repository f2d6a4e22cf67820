//! Unit tests of the rule's settings: ranges, status classes, target parsing.

use super::*;
use crate::limiter::aimd::Aimd;
use crate::limiter::aimd::tests::{MS, cfg};

#[test]
fn statuses_are_overload_only_when_listed() {
    let c = cfg();
    let classify = |st| c.classify(Signal::Status(st));
    assert_eq!(
        [429, 503, 500, 502, 504, 404].map(classify),
        [
            Signal::Overload,
            Signal::Overload,
            Signal::Failure,
            Signal::Failure,
            Signal::Failure,
            Signal::Failure
        ]
    );
    let gateway = AimdConfig {
        overload_status: vec![429, 503, 502, 504],
        ..cfg()
    };
    assert_eq!(gateway.classify(Signal::Status(502)), Signal::Overload);
    assert_eq!(gateway.classify(Signal::Success), Signal::Success);
    let bad = AimdConfig {
        overload_status: vec![429, 600],
        ..cfg()
    };
    assert_eq!(
        bad.validate().unwrap_err().to_string(),
        "overload status must be between 100 and 599 (got 600)"
    );
}

#[test]
fn validation_names_the_range() {
    let bad = [
        (
            AimdConfig { min: 0, ..cfg() },
            "min concurrency must be between 1 and 100000 (got 0)",
        ),
        (
            AimdConfig {
                min: 5,
                max: 4,
                ..cfg()
            },
            "max concurrency must be between min concurrency and 100000 (got 4)",
        ),
        (
            AimdConfig { beta: 1.0, ..cfg() },
            "beta must be between 0.1 and 0.99 (got 1)",
        ),
        (
            AimdConfig {
                error_threshold: 1.5,
                ..cfg()
            },
            "error threshold must be between 0 and 1 (got 1.5)",
        ),
        (
            AimdConfig {
                target: Target::Relative(0.5),
                ..cfg()
            },
            "relative target p95 must be between 1x and 100x (got 0.5)",
        ),
    ];
    for (c, msg) in bad {
        assert_eq!(Aimd::new(c, 10).unwrap_err().to_string(), msg);
    }
    let mut a = Aimd::new(cfg(), 10).unwrap();
    assert!(a.reconfigure(AimdConfig { alpha: 0, ..cfg() }).is_err());
    a.reconfigure(AimdConfig { max: 5, ..cfg() }).unwrap();
    assert_eq!(a.limit(), 5, "reconfigure clamps at once");
}

#[test]
fn targets_parse() {
    assert_eq!("200ms".parse(), Ok(Target::Absolute(200 * MS)));
    assert_eq!(" 2x".parse(), Ok(Target::Relative(2.0)));
    assert_eq!("1.5X".parse(), Ok(Target::Relative(1.5)));
    let e = "fast".parse::<Target>().unwrap_err().to_string();
    assert!(e.contains("like 200ms") && e.contains("1.5x"), "{e}");
    assert_eq!(Target::Relative(2.5).to_string(), "2.5x");
    assert_eq!(Target::Absolute(200 * MS).to_string(), "200ms");
}
