//! A queue name never seen in this Redis is a likely typo: commands that change a queue
//! refuse it without `--create` (exit 2, nothing written), commands that read it warn, and
//! both name the nearest known queue. `weir cron add` registers its queue.

use crate::common::*;
use crate::{cli, no_panic, text};

/// `weir args... --redis-url <ctx>`: (exit code, stdout, stderr).
fn weir(ctx: &Ctx, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = args.to_vec();
    all.extend(["--redis-url", &ctx.url]);
    let input = if args[0] == "enqueue" {
        "{\"kind\":\"k\",\"payload\":1}\n"
    } else {
        ""
    };
    let o = cli(ctx, &all, input);
    no_panic(&o);
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}

async fn listed(ctx: &Ctx) -> Vec<String> {
    weir::Queues::new(ctx.c()).names().await.unwrap()
}

#[tokio::test]
async fn a_write_to_an_unseen_queue_is_refused_with_the_nearest_name() {
    // A server of its own: the registry holds only this test's queues.
    let ctx = Ctx::private("typo-write").await;
    let (code, _, err) = weir(&ctx, &["enqueue", "-q", "hooks"]);
    assert_eq!(code, Some(0), "{err}");

    let (code, out, err) = weir(&ctx, &["pause", "-q", "hoks"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("queue hoks has never been seen"), "{err}");
    assert!(err.contains("did you mean hooks?"), "{err}");
    assert!(err.contains("--create"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let paused: bool = ctx.cmd(&["EXISTS", "weir:{hoks}:paused"]).await;
    assert!(!paused, "a refused pause wrote its flag");
    for args in [
        &["resume", "-q", "hoks"][..],
        &["limits", "-q", "hoks", "set", "--dead-cap", "5"],
        &["limits", "-q", "hoks", "clear"],
        &[
            "cron", "-q", "hoks", "add", "--name", "n", "--every", "1h", "--kind", "k",
        ],
    ] {
        let (code, _, err) = weir(&ctx, args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("did you mean hooks?"), "{args:?}: {err}");
    }
    assert_eq!(listed(&ctx).await, ["hooks"]);

    // The queue that is there is not questioned.
    let (code, out, err) = weir(&ctx, &["pause", "-q", "hooks"]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");

    // --create acts, and lists the new queue.
    let (code, out, err) = weir(&ctx, &["pause", "-q", "hoks", "--create"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("queue hoks paused"), "{out}");
    assert_eq!(listed(&ctx).await, ["hoks", "hooks"]);
}

#[tokio::test]
async fn a_read_of_an_unseen_queue_warns_and_goes_on() {
    let ctx = Ctx::private("typo-read").await;
    let (code, _, err) = weir(&ctx, &["enqueue", "-q", "emails"]);
    assert_eq!(code, Some(0), "{err}");
    for args in [
        &["stats", "-q", "emials"][..],
        &["dlq", "-q", "emials", "list"],
        &["jobs", "-q", "emials", "--state", "ready"],
        &["limits", "-q", "emials", "get"],
        &["workers", "-q", "emials"],
        &["cron", "-q", "emials", "list"],
    ] {
        let (code, _, err) = weir(&ctx, args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(
            err.starts_with("warning: queue emials has never been seen"),
            "{args:?}: {err}"
        );
        assert!(err.contains("did you mean emails?"), "{args:?}: {err}");
    }
    // No near name: the warning, without a guess.
    let (code, _, err) = weir(&ctx, &["stats", "-q", "reports"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("queue reports has never been seen") && !err.contains("did you mean"),
        "{err}"
    );
    // A known queue reads quietly.
    let (code, _, err) = weir(&ctx, &["stats", "-q", "emails"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(listed(&ctx).await, ["emails"], "reads register nothing");
}

#[tokio::test]
async fn cron_add_lists_its_queue_and_a_served_queue_counts_as_seen() {
    let ctx = Ctx::private("typo-cron").await;
    let add = [
        "cron", "-q", "nightly", "add", "--name", "n", "--every", "1h", "--kind", "k",
    ];
    let (code, _, err) = weir(&ctx, &add);
    assert_eq!(code, Some(2), "{err}");
    let (code, out, err) = weir(&ctx, &[&add[..], &["--create"]].concat());
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("schedule n added to queue nightly"), "{out}");
    let (_, out, _) = weir(&ctx, &["queues", "--rate-window", "0s"]);
    assert!(out.contains("nightly"), "{out}");

    // A queue with only its schedules (no registry entry, as before this check) is seen,
    // and cron add registers it again, without --create.
    let _: u64 = ctx.cmd(&["SREM", "weir:queues", "nightly"]).await;
    assert!(listed(&ctx).await.is_empty());
    let (code, _, err) = weir(&ctx, &add);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(listed(&ctx).await, ["nightly"]);
}
