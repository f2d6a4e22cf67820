//! reclaim.lua: what happens to leases that expire. Only a job that ran alone, as a
//! suspect, is charged: a job that never ran comes back uncharged (a deferral), a job that
//! was running becomes a suspect.

use crate::common::*;
use crate::{H, L, N};
use std::time::Duration;
use weir::queue::retry_policy::DeferralBudget;
use weir::queue::scripts::{self, Reclaimed};

struct Reclaim {
    name: &'static str,
    before: State,
    n: usize,
    /// The queue's dead-letter cap (its setting, seeded before and kept after).
    cap: u64,
    /// Deferral budget: most deferrals, longest time since the first.
    budget: (u32, Duration),
    reply: Reclaimed,
    after: State,
}

const BUDGET: (u32, Duration) = (1_000, Duration::from_secs(86_400));
const NEVER_RAN: &str = "lease expired before its run started";

fn reclaimed(returned: u64, suspects: u64, dead: u64) -> Reclaimed {
    Reclaimed {
        returned,
        suspects,
        dead,
        ..Reclaimed::default()
    }
}

/// The table: state before, the batch size, cap and budget, the reply, state after.
fn reclaim_cases() -> Vec<Reclaim> {
    let crash = State::default()
        .job("s", 0, 2, 1)
        .job("b", 0, 1, 1)
        .job("u", 0, 1, 1)
        .lease(&[("s", PAST), ("b", PAST), ("u", PAST)])
        .started("s", "c1:s")
        .started("b", "c1");
    // A first deferral a moment ago (Redis reads the same clock), so the reason says 0 s.
    let recently = weir::queue::envelope::unix_ms() - 100;
    vec![
        Reclaim {
            name: "no lease expired",
            before: State::default().job("a", 0, 3, 1).lease(&[("a", FUTURE)]),
            n: 100,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(0, 0, 0),
            after: State::default().job("a", 0, 3, 1).lease(&[("a", FUTURE)]),
        },
        Reclaim {
            name: "never started: back to the FRONT of its ready list, attempt untouched, a deferral",
            before: State::default()
                .job("a", 0, 1, 2)
                .job("x", 0, 3, 2)
                .ready(L, &["x"])
                .lease(&[("a", PAST)]),
            n: 100,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(1, 0, 0),
            after: State::default()
                .job("a", 0, 1, 2)
                .job("x", 0, 3, 2)
                .ready(L, &["a", "x"])
                .error("a", NEVER_RAN)
                .deferral("a", 1, NOW)
                .counter("reclaimed", 1)
                .counter("deferred", 1),
        },
        Reclaim {
            name: "never started, deferral budget spent: dead-lettered with the reason",
            before: State::default()
                .job("a", 0, 5, 1)
                .lease(&[("a", PAST)])
                .deferral("a", 3, recently),
            n: 100,
            cap: 10,
            budget: (3, Duration::from_secs(3600)),
            reply: reclaimed(0, 0, 1),
            after: State::default()
                .job("a", 0, 5, 1)
                .dead(&[("a", NOW)])
                .error(
                    "a",
                    "deferral budget spent (3 deferrals over 0 s): lease expired before its run started",
                )
                .counter("reclaimed", 1)
                .counter("dead", 1),
        },
        Reclaim {
            name: "started at a consumer that died: to the suspects, uncharged, mark gone",
            before: State::default()
                .job("a", 0, 1, 1)
                .job("x", 0, 1, 1)
                .suspects(&["x"])
                .lease(&[("a", PAST)])
                .started("a", "c1"),
            n: 100,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(0, 1, 0),
            after: State::default()
                .job("a", 0, 1, 1)
                .job("x", 0, 1, 1)
                .suspects(&["x", "a"])
                .counter("reclaimed", 1),
        },
        Reclaim {
            name: "a suspect that died running alone: charged, back to the suspects",
            before: State::default()
                .job("a", 0, 2, 1)
                .lease(&[("a", PAST)])
                .started("a", "c1:s"),
            n: 100,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(0, 1, 0),
            after: State::default()
                .job("a", 1, 2, 1)
                .suspects(&["a"])
                .error("a", "lease expired while it ran as a suspect")
                .counter("reclaimed", 1),
        },
        Reclaim {
            name: "a crash beside a suspect: the suspect charged, the bystander not, the un-started a deferral",
            before: crash.clone(),
            n: 100,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(1, 2, 0),
            after: State::default()
                .job("s", 1, 2, 1)
                .job("b", 0, 1, 1)
                .job("u", 0, 1, 1)
                .suspects(&["b", "s"])
                .ready(N, &["u"])
                .error("s", "lease expired while it ran as a suspect")
                .error("u", NEVER_RAN)
                .deferral("u", 1, NOW)
                .counter("reclaimed", 3)
                .counter("deferred", 1),
        },
        Reclaim {
            name: "a suspect on its last attempt: dead-lettered, with a reason that says so",
            before: crash.clone().job("s", 1, 2, 1),
            n: 100,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(1, 1, 1),
            after: State::default()
                .job("s", 2, 2, 1)
                .job("b", 0, 1, 1)
                .job("u", 0, 1, 1)
                .dead(&[("s", NOW)])
                .suspects(&["b"])
                .ready(N, &["u"])
                .error("s", "lease expired while it ran as a suspect after 2 attempts")
                .error("u", NEVER_RAN)
                .deferral("u", 1, NOW)
                .counter("reclaimed", 3)
                .counter("deferred", 1)
                .counter("dead", 1),
        },
        Reclaim {
            name: "an extended lease: its token is forgotten with it",
            before: State::default()
                .job("a", 0, 3, 1)
                .job("b", 0, 3, 1)
                .lease(&[("a", PAST), ("b", FUTURE)])
                .lease_token("a", 7)
                .lease_token("b", 8)
                .started("a", "c1")
                .started("b", "c1"),
            n: 100,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(0, 1, 0),
            after: State::default()
                .job("a", 0, 3, 1)
                .job("b", 0, 3, 1)
                .lease(&[("b", FUTURE)])
                .lease_token("b", 8)
                .started("b", "c1")
                .suspects(&["a"])
                .counter("reclaimed", 1),
        },
        Reclaim {
            name: "an envelope weir did not write goes back to normal ready as it is",
            before: State::default().raw_job("x", "{not json").lease(&[("x", PAST)]),
            n: 100,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(1, 0, 0),
            after: State::default()
                .raw_job("x", "{not json")
                .ready(N, &["x"])
                .counter("reclaimed", 1),
        },
        Reclaim {
            name: "at most n per call, oldest leases first",
            before: State::default()
                .job("a", 0, 3, 0)
                .job("b", 0, 3, 0)
                .job("c", 0, 3, 0)
                .lease(&[("a", PAST), ("b", PAST + 1), ("c", PAST + 2)]),
            n: 2,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(2, 0, 0),
            after: State::default()
                .job("a", 0, 3, 0)
                .job("b", 0, 3, 0)
                .job("c", 0, 3, 0)
                .ready(H, &["b", "a"])
                .error("a", NEVER_RAN)
                .error("b", NEVER_RAN)
                .deferral("a", 1, NOW)
                .deferral("b", 1, NOW)
                .lease(&[("c", PAST + 2)])
                .counter("reclaimed", 2)
                .counter("deferred", 2),
        },
        Reclaim {
            name: "a lease whose job was purged is dropped",
            before: State::default().lease(&[("ghost", PAST)]).started("ghost", "c1"),
            n: 100,
            cap: 10,
            budget: BUDGET,
            reply: reclaimed(0, 0, 0),
            after: State::default(),
        },
        Reclaim {
            name: "dead-lettering by reclaim respects the cap",
            before: State::default()
                .job("old", 3, 3, 1)
                .dead(&[("old", 5)])
                .error("old", "x")
                .job("a", 0, 1, 1)
                .lease(&[("a", PAST)])
                .started("a", "c1:s"),
            n: 100,
            cap: 1,
            budget: BUDGET,
            reply: Reclaimed {
                trimmed: 1,
                trimmed_total: 1,
                ..reclaimed(0, 0, 1)
            },
            after: State::default()
                .job("a", 1, 1, 1)
                .dead(&[("a", NOW)])
                .error("a", "lease expired while it ran as a suspect after 1 attempts")
                .counter("reclaimed", 1)
                .counter("dead", 1)
                .counter("trimmed", 1),
        },
    ]
}

#[tokio::test]
async fn reclaim_table() {
    let ctx = Ctx::new("reclaim").await;
    for c in reclaim_cases() {
        let (n, cap) = (c.n, c.cap.to_string());
        let mut budget = DeferralBudget::default();
        (budget.max_deferrals, budget.max_age) = c.budget;
        let (before, after) = (
            c.before.setting("dead_cap", &cap),
            c.after.setting("dead_cap", &cap),
        );
        let reply = run_case(
            &ctx,
            c.name,
            &before,
            |mut conn, k| async move { scripts::reclaim(&mut conn, &k, n, budget).await },
            &after,
        )
        .await;
        // (When the next lease expires: reclaim_says_when_the_next_lease_expires.)
        let reply = Reclaimed {
            next_expiry: None,
            ..reply
        };
        assert_eq!(reply, c.reply, "case {:?}", c.name);
    }
}

/// Its reply says how long until the earliest lease left expires (zero when one left is
/// expired already: the call's batch was full), none when no lease is left: what a
/// reclaimer on a quiet queue sleeps.
#[tokio::test]
async fn reclaim_says_when_the_next_lease_expires() {
    let ctx = Ctx::new("reclaim-next").await;
    let budget = DeferralBudget::default();
    let in_an_hour = weir::queue::envelope::unix_ms() + 3_600_000;
    let cases = [
        (
            "one left, in an hour",
            State::default()
                .job("a", 0, 3, 1)
                .job("b", 0, 3, 1)
                .lease(&[("a", in_an_hour), ("b", PAST)]),
            State::default()
                .job("a", 0, 3, 1)
                .job("b", 0, 3, 1)
                .lease(&[("a", in_an_hour)])
                .ready(N, &["b"])
                .error("b", NEVER_RAN)
                .deferral("b", 1, NOW)
                .counter("reclaimed", 1)
                .counter("deferred", 1),
            1,
        ),
        ("none left", State::default(), State::default(), 100),
    ];
    let mut replies = Vec::new();
    for (name, before, after, n) in cases {
        replies.push(
            run_case(
                &ctx,
                name,
                &before,
                |mut conn, k| async move { scripts::reclaim(&mut conn, &k, n, budget).await },
                &after,
            )
            .await
            .next_expiry,
        );
    }
    let hour = replies[0].expect("a lease is left");
    assert!(
        (Duration::from_secs(3_590)..=Duration::from_secs(3_600)).contains(&hour),
        "{hour:?}"
    );
    assert_eq!(replies[1], None);
}
