//! `weir limits`: the queue's settings hash, which binds every consumer of the queue: the
//! runtime limits a live fleet applies within a second, the global limits the whole fleet
//! obeys together, and the dead-letter cap. (The limit flags of `weir work` are the
//! library's `weir::limiter::LimiterOptions`.) A partitioned queue's settings are its
//! base lane's; each partition holds its share of the fleet-wide ones (`Settings::share`).

use crate::Common;
use std::process::ExitCode;
use weir::queue::keys::QueueKeys;
use weir::queue::partitions::Partitions;
use weir::queue::settings::{DEFAULT_DEAD_CAP, Settings};

mod args;
pub(crate) use args::LimitsArgs;
use args::LimitsCommand;

pub(crate) async fn run(a: LimitsArgs) -> crate::error::Result<ExitCode> {
    let access = match a.command {
        LimitsCommand::Get => crate::known::Access::Read,
        _ => crate::known::Access::Write,
    };
    let mut conn = a.common.checked_conn(access).await?;
    let queue = &a.common.queue;
    match a.command {
        LimitsCommand::Get => {}
        LimitsCommand::Clear(c) if !c.groups().is_empty() || !c.keys.is_empty() => {
            Settings::clear_some(&mut conn, queue, &c.groups()).await?;
            Settings::clear_keys(&mut conn, queue, &c.keys).await?;
        }
        LimitsCommand::Clear(_) => Settings::clear(&mut conn, queue).await?,
        LimitsCommand::Set(s) => {
            let update = Settings {
                min: s.min_concurrency,
                max: s.max_concurrency,
                target_p95: s.target_p95,
                error_threshold: s.error_threshold,
                overload_status: s.overload_status.clone(),
                rate: s.rate.map(|r| s.burst.map_or(r, |b| r.with_burst(b))),
                dead_cap: s.dead_cap,
                keep_completed: s.keep_completed,
                keep_completed_count: s.keep_completed_count,
                history_runs: s.history_runs,
                global_rate: s.global_rate.map(|r| {
                    let burst = s
                        .global_burst
                        .unwrap_or_else(|| Settings::default_global_burst(&r));
                    r.with_burst(burst)
                }),
                global_concurrency: s.global_concurrency,
                key_rate: s.per_key_rate.map(|r| {
                    let burst = s
                        .per_key_burst
                        .unwrap_or_else(|| Settings::default_global_burst(&r));
                    r.with_burst(burst)
                }),
                key_concurrency: s.per_key_concurrency,
                key_overrides: s.key_overrides(),
            };
            Settings::update(&mut conn, queue, &update).await?;
        }
    }
    show(&a.common, &mut conn).await?;
    Ok(ExitCode::SUCCESS)
}

/// What `weir limits` prints after any subcommand: the settings stored now, a partitioned
/// queue's shares, what the fleet holds, and the keys held back the most.
async fn show(common: &Common, conn: &mut weir::Conn) -> crate::error::Result<()> {
    let queue = &common.queue;
    let now = Settings::load(conn, queue).await?;
    let cap = match now.dead_cap {
        Some(_) => String::new(),
        None => format!(" (dead_cap={DEFAULT_DEAD_CAP}: the default)"),
    };
    if now == Settings::default() {
        println!("queue {queue}: no runtime settings (consumers use their own flags){cap}");
    } else {
        println!("queue {queue}: {now}{cap}");
    }
    let parts = Partitions::read(conn, queue).await?;
    if let Some(p) = &parts {
        print!("{}", shares(p.count(), &now));
    }
    print!("{}", fleet(common, &now).await?);
    if now.per_key() {
        let lanes: Vec<QueueKeys> = match &parts {
            Some(p) => p.lanes().cloned().collect(),
            None => vec![QueueKeys::new(queue)?],
        };
        print!("{}", throttled(conn, &lanes).await?);
    }
    Ok(())
}

/// What each of a partitioned queue's `parts` partitions holds of the queue's fleet-wide
/// limits: its share (the base lane holds the queue's own values, shown above).
fn shares(parts: usize, now: &Settings) -> String {
    let all: Vec<Settings> = (0..parts).map(|i| now.share(parts, i)).collect();
    let range = |f: fn(&Settings) -> Option<u64>| {
        let v: Vec<u64> = all.iter().filter_map(f).collect();
        let (lo, hi) = (v.iter().min()?, v.iter().max()?);
        Some(if lo == hi {
            lo.to_string()
        } else {
            format!("{lo} to {hi}")
        })
    };
    let mut held = Vec::new();
    if let (Some(r), Some(b)) = (
        all[0].global_rate,
        range(|s| s.global_rate.map(|r| u64::from(r.burst))),
    ) {
        held.push(format!("global rate {} (burst {b})", r.spec()));
    }
    if let Some(c) = range(|s| s.global_concurrency) {
        held.push(format!("global concurrency {c}"));
    }
    if let Some(c) = range(|s| s.dead_cap) {
        held.push(format!("dead-letter cap {c}"));
    }
    let each = match held.is_empty() {
        true => "no fleet-wide limit to share".to_owned(),
        false => held.join(", "),
    };
    format!(
        "partitions {parts}, each holding its share: {each}; per-key limits and runtime knobs as the queue's\n"
    )
}

/// How many keys `weir limits get` lists among the most held back.
const TOP_KEYS: isize = 10;

/// The keys whose limits held back the most jobs so far, over `lanes` (the queue, or a
/// partitioned queue's lanes: a key's jobs are mostly in one of them).
async fn throttled(conn: &mut weir::Conn, lanes: &[QueueKeys]) -> crate::error::Result<String> {
    // In the order the lanes list them (ties keep it), summed per key.
    let mut top: Vec<(String, f64)> = Vec::new();
    for lane in lanes {
        let got: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(lane.key_throttled())
            .arg(0)
            .arg(TOP_KEYS - 1)
            .arg("REV")
            .arg("WITHSCORES")
            .query_async(conn)
            .await?;
        for (k, n) in got {
            match top.iter_mut().find(|(t, _)| *t == k) {
                Some(t) => t.1 += n,
                None => top.push((k, n)),
            }
        }
    }
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    top.truncate(TOP_KEYS as usize);
    if top.is_empty() {
        return Ok("keys held back: none so far\n".into());
    }
    let mut out = String::from("keys held back the most (jobs so far):\n");
    for (k, n) in top {
        out += &format!("  {k}: {n}\n");
    }
    Ok(out)
}

/// What the fleet holds now: under a global limit the queue's leases against it; and
/// each live consumer's share, its limit and, for an adaptive one, the limiter's latest
/// decision with the figures that drove it (from the worker registry, as of its last
/// heartbeat).
async fn fleet(common: &Common, now: &Settings) -> crate::error::Result<String> {
    let q = common.queue_handle().await?;
    let workers = q.workers().await?;
    let mut out = if now.global_rate.is_some() || now.global_concurrency.is_some() {
        let stats = q.stats().await?;
        match now.global_concurrency {
            Some(c) => format!(
                "fleet: {} leased of a global concurrency of {c}\n",
                stats.in_flight
            ),
            None => format!("fleet: {} leased\n", stats.in_flight),
        }
    } else {
        "consumers:\n".to_owned()
    };
    for w in &workers.workers {
        out += &format!(
            "  consumer {} ({} pid {}): {} leased, {} running, limit {}\n",
            w.id, w.host, w.pid, w.leased, w.running, w.concurrency_limit
        );
        let decision = w
            .limiter
            .as_deref()
            .unwrap_or("no decision (a fixed limit, or no window closed yet)");
        out += &format!("    limiter: {decision}\n");
    }
    if workers.workers.is_empty() {
        out += "  no live consumers\n";
    }
    Ok(out)
}
