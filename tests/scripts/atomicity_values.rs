//! Garbage where scripts read values (settings, counters, deferral records, envelopes)
//! never fails a call, and a script's own extra keys (cron, the worker registry, per-key
//! shares) of the wrong type fail it before any write (see atomicity.rs).

use crate::atomicity::{CALLS, Call, check_call, dump_all, rich, run};
use crate::common::*;

#[tokio::test]
async fn a_scripts_extra_key_of_the_wrong_type_fails_it_before_any_write() {
    let ctx = Ctx::new("atom-extra").await;
    let k = &ctx.keys;
    let t = |key: String| key.replace(&format!("{{{}}}", k.name()), "{Q}");
    let extra = [
        (t(k.cron()), Call::CronSet),
        (t(k.cron_fired()), Call::CronSet),
        (t(k.cron_fired()), Call::CronFire),
        (t(k.workers()), Call::WorkerBeat),
        (t(k.worker("w1")), Call::WorkerBeat),
        (
            t(format!("{}auto:tenant", k.key_limits_prefix())),
            Call::KeyShares,
        ),
    ];
    for (key, call) in extra {
        for plant in [&["SET", "garbage"][..], &["SADD", "garbage"][..]] {
            let ok = check_call(&ctx, &key, &rich(), call, &[(&key, plant)]).await;
            assert!(!ok, "{call:?} refuses {key} as {}", plant[0]);
        }
    }
}

/// Garbage where weir reads values: settings, counters, envelopes.
fn garbage() -> Vec<(&'static str, State)> {
    let r = rich;
    vec![
        ("dead_cap not a number", r().setting("dead_cap", "abc")),
        ("dead_cap negative", r().setting("dead_cap", "-5")),
        ("dead_cap huge", r().setting("dead_cap", "1e400")),
        ("dead_cap empty", r().setting("dead_cap", "")),
        (
            "global concurrency garbage",
            r().setting("global_concurrency", "abc"),
        ),
        (
            "global concurrency negative",
            r().setting("global_concurrency", "-3"),
        ),
        (
            "global rate garbage",
            r().setting("global_rate", "fast").setting("global_burst", "-1"),
        ),
        (
            "global rate tiny",
            r().setting("global_rate", "0.000000000000000000001/s"),
        ),
        (
            "global rate huge burst",
            r().setting("global_rate", "5/s").setting("global_burst", "1e308"),
        ),
        (
            "envelope not JSON",
            r().raw_job("r1", "not json").raw_job("l2", "").raw_job("x1", "{"),
        ),
        (
            "envelope fields missing",
            r().raw_job("l3", r#"{"attempt":1}"#)
                .raw_job("l4", r#"{"id":"l4"}"#),
        ),
        (
            "envelope fields garbage",
            r().raw_job("x2", r#"{"attempt":"x","max_attempts":-1,"priority":9}"#),
        ),
        ("deferral record garbage", r().raw_job("d2", "{}")),
    ]
}

#[tokio::test]
async fn garbage_settings_counters_and_envelopes_never_fail_a_call() {
    let ctx = Ctx::new("atom-garbage").await;
    let counters: &[(&str, &[&str])] = &[
        (
            "weir:{Q}:counters",
            &[
                "HSET",
                "acked",
                "abc",
                "fetched",
                "99999999999999999999",
                "dead",
                "1.5",
            ],
        ),
        ("weir:{Q}:deferrals", &["HSET", "l3", "garbage", "x1", "9 x"]),
    ];
    for (what, state) in garbage() {
        for call in CALLS {
            assert!(
                check_call(&ctx, what, &state, call, &[]).await,
                "{what}: {call:?} succeeds"
            );
        }
    }
    for call in CALLS {
        let ok = check_call_keeping(&ctx, &rich(), call, counters).await;
        assert!(ok, "garbage counters and deferral records: {call:?} succeeds");
    }
}

/// [`check_call`] for planted values the call may rewrite (counters restart, records go).
async fn check_call_keeping(ctx: &Ctx, state: &State, call: Call, plant: &[(&str, &[&str])]) -> bool {
    let (_, keys) = ctx.other_queue("atom");
    let mut c = ctx.c();
    seed(&mut c, &keys, state).await;
    for (key, args) in plant {
        let key = key.replace("{Q}", &format!("{{{}}}", keys.name()));
        let _: () = redis::cmd(args[0])
            .arg(&key)
            .arg(&args[1..])
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let before = dump_all(&mut c, &keys).await;
    let r = run(call, ctx.c(), keys.clone()).await;
    if r.is_err() {
        assert!(
            before == dump_all(&mut c, &keys).await,
            "{call:?}: failed and changed the state"
        );
    }
    r.is_ok()
}
