//! `weir work`'s flags: defaults, queue lists, moved options.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    work: WorkArgs,
}

/// With only the (required) handler, `weir work` runs the library's defaults, and so does
/// [`WorkArgs::defaults`] (which `weir demo` starts from).
#[test]
fn the_flags_default_to_the_library_defaults() {
    let parsed = Cli::try_parse_from(["weir", "--handler", "noop", "--redis-url", "redis://x"])
        .unwrap()
        .work;
    let library = format!("{:?}", ConsumerConfig::default());
    assert_eq!(format!("{:?}", parsed.config().unwrap()), library);
    let built = WorkArgs::defaults(parsed.connect.clone(), ConsumerConfig::DEFAULT_QUEUE);
    assert_eq!(format!("{:?}", built.config().unwrap()), library);
    assert_eq!(
        (parsed.http.http_timeout, parsed.metrics_addr),
        (built.http.http_timeout, built.metrics_addr)
    );
    let batched = Cli::try_parse_from(["weir", "--handler", "noop", "--batch-http"])
        .unwrap()
        .work;
    assert_eq!(
        batched.http.batch_http,
        Some(crate::handlers::http_defaults().max_batch)
    );
}

#[test]
fn queues_repeat_or_come_as_a_list_with_weights() {
    let parse = |args: &[&str]| {
        let all = [&["weir", "--handler", "noop"][..], args].concat();
        Cli::try_parse_from(all).map(|c| c.work.queue)
    };
    let q = WeightedQueue::new;
    assert_eq!(parse(&[]).unwrap(), [q("default", 1)]);
    assert_eq!(parse(&["-q", "a"]).unwrap(), [q("a", 1)]);
    let two = [q("a", 1), q("b", 3)];
    assert_eq!(parse(&["--queue", "a", "--queue", "b:3"]).unwrap(), two);
    assert_eq!(parse(&["--queue", "a,b:3"]).unwrap(), two);
    assert_eq!(parse(&["-q", "emails:high"]).unwrap(), [q("emails:high", 1)]);
    for (bad, says) in [
        ("a:0", "weight must be between 1 and 1000"),
        ("a:2x", "weight \"2x\" is not a whole number"),
        ("bad name", "invalid queue name"),
    ] {
        let e = parse(&["--queue", "ok", "--queue", bad]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{bad}");
        assert!(e.to_string().contains(says), "{bad}: {e}");
    }
}

#[test]
fn dead_cap_names_the_command_that_sets_it_now() {
    let e = Cli::try_parse_from(["weir", "--dead-cap", "10"]).err().unwrap();
    assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
    assert!(e.to_string().contains("weir limits set --dead-cap N"), "{e}");
}
