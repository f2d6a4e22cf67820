//! `weir stats`: the queue's sizes and counters, as text or JSON, once or refreshing; a
//! partitioned queue's summed over its lanes, and with `--partitions` lane by lane.

use crate::output::count;
use crate::{Common, parse_duration};
use clap::Args;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;
use weir::Stats;
use weir::queue::json::Rates;
use weir::queue::retry_rules::RetryRules;
use weir::queue::settings::Settings;

#[derive(Args, Debug)]
pub(crate) struct StatsArgs {
    #[command(flatten)]
    pub common: Common,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Refresh in place until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Refresh interval with --watch.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Stop after this many refreshes with --watch (default: until interrupted).
    #[arg(long)]
    pub count: Option<u64>,
    /// A partitioned queue: also a table of each lane (its partitions, then its base).
    #[arg(long)]
    pub partitions: bool,
}

/// The queue's snapshot, and each lane's if it is partitioned (a partitioned queue has
/// two lanes at least: a partition and its base).
async fn read(q: &weir::Queue) -> crate::error::Result<(Stats, Option<Vec<(String, Stats)>>)> {
    let lanes = q.stats_by_lane().await?;
    let total = Stats::sum(lanes.iter().map(|(_, s)| s));
    Ok((total, (lanes.len() > 1).then_some(lanes)))
}

pub(crate) async fn run(a: StatsArgs) -> crate::error::Result<ExitCode> {
    let mut conn = a.common.checked_conn(crate::known::Access::Read).await?;
    let q = weir::Queue::new(conn.clone(), &a.common.queue)?;
    if !a.watch {
        let (s, lanes) = read(&q).await?;
        let limits = Settings::load(&mut conn, &a.common.queue).await?;
        let due = Due::read(&q, &mut conn, &a.common.queue).await?;
        let rates = q.samples(2).await?.rates;
        if a.json {
            let mut v = as_json(&a.common.queue, &s, &limits, lanes.as_deref());
            v["rates"] = serde_json::to_value(rates)?;
            due.add_json(&mut v);
            println!("{}", serde_json::to_string(&v)?);
        } else {
            print!("{}", render(&a.common.queue, &s, &limits, rates.as_ref()));
            print!("{}", due.render());
            print!("{}", render_lanes(lanes.as_deref(), a.partitions));
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Frames redraw in place on a terminal; into a pipe or a file they follow one another,
    // a blank line apart, with no control codes.
    let clear = if std::io::stdout().is_terminal() {
        "\x1b[2J\x1b[H"
    } else {
        ""
    };
    let mut shown = 0u64;
    loop {
        let (s, lanes) = read(&q).await?;
        let limits = Settings::load(&mut conn, &a.common.queue).await?;
        let due = Due::read(&q, &mut conn, &a.common.queue).await?;
        let rates = q.samples(2).await?.rates;
        let mut out = std::io::stdout().lock();
        // Clear the screen and home the cursor (on a terminal), then draw the frame.
        if shown > 0 && clear.is_empty() {
            let _ = writeln!(out);
        }
        let _ = write!(
            out,
            "{clear}{}{}{}",
            render(&a.common.queue, &s, &limits, rates.as_ref()),
            due.render(),
            render_lanes(lanes.as_deref(), a.partitions)
        );
        let _ = out.flush();
        shown += 1;
        if a.count.is_some_and(|c| shown >= c) {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::select! {
            _ = tokio::time::sleep(a.interval) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// When the next delayed job (a retry's next attempt) falls due, and the retry rules in
/// force (`weir retry set`).
struct Due {
    next_due_ms: Option<u64>,
    rules: RetryRules,
}

impl Due {
    async fn read(q: &weir::Queue, conn: &mut weir::Conn, queue: &str) -> crate::error::Result<Self> {
        Ok(Self {
            next_due_ms: q.next_due().await?,
            rules: RetryRules::load(conn, queue).await?,
        })
    }

    fn render(&self) -> String {
        let mut o = String::new();
        if let Some(at) = self.next_due_ms {
            let when = std::time::UNIX_EPOCH + Duration::from_millis(at);
            let wait = when
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            let wait = Duration::from_secs(wait.as_secs());
            o += &format!(
                "next due   {} (in {})\n",
                humantime::format_rfc3339_seconds(when),
                humantime::format_duration(wait)
            );
        }
        if let Some(r) = &self.rules.queue {
            o += &format!("retry      {r}\n");
        }
        let mut kinds: Vec<_> = self.rules.kinds.iter().collect();
        kinds.sort_by_key(|(k, _)| k.as_str());
        for (k, r) in kinds {
            o += &format!("retry      kind {k}: {r}\n");
        }
        o
    }

    /// `next_due_at` (ms, null when nothing is delayed) and `retry` (the rules as specs).
    fn add_json(&self, v: &mut serde_json::Value) {
        v["next_due_at"] = self.next_due_ms.into();
        let kinds: serde_json::Map<String, serde_json::Value> = self
            .rules
            .kinds
            .iter()
            .map(|(k, r)| (k.clone(), r.to_string().into()))
            .collect();
        v["retry"] = serde_json::json!({
            "queue": self.rules.queue.as_ref().map(|r| r.to_string()),
            "kinds": kinds,
        });
    }
}

/// What `weir stats --json` prints (docs/cli-json.md).
fn as_json(
    queue: &str,
    s: &Stats,
    limits: &Settings,
    lanes: Option<&[(String, Stats)]>,
) -> serde_json::Value {
    let global = serde_json::json!({
        "rate": limits.global_rate.map(|r| r.spec()),
        "burst": limits.global_rate.map(|r| r.burst),
        "concurrency": limits.global_concurrency,
    });
    let per_key = serde_json::json!({
        "rate": limits.key_rate.map(|r| r.spec()),
        "burst": limits.key_rate.map(|r| r.burst),
        "concurrency": limits.key_concurrency,
        "keys_with_own_limits": limits.key_overrides.len(),
    });
    let partitions = lanes.map(|l| {
        l.iter()
            .map(|(lane, s)| serde_json::json!({ "lane": lane, "stats": s }))
            .collect::<Vec<_>>()
    });
    let mut v = serde_json::json!({
        "queue": queue, "stats": s, "global_limits": global, "per_key_limits": per_key,
    });
    // Only a partitioned queue's answer has its lanes: another's stays as it was.
    if let Some(p) = partitions {
        v["partitions"] = p.into();
    }
    v
}

/// A partitioned queue's lanes: a line, or (`table`) a row each.
fn render_lanes(lanes: Option<&[(String, Stats)]>, table: bool) -> String {
    let Some(lanes) = lanes else {
        return if table {
            "partitions none: the queue is not partitioned\n".into()
        } else {
            String::new()
        };
    };
    let parts = lanes.len() - 1;
    if !table {
        return format!("partitions {parts} and the base (weir stats --partitions shows each)\n");
    }
    let head = [
        "LANE",
        "READY",
        "DELAYED",
        "IN FLIGHT",
        "DEAD",
        "PAUSED",
        "OLDEST",
        "ENQUEUED",
        "ACKED",
    ];
    let mut rows = vec![head.map(String::from).to_vec()];
    for (i, (lane, s)) in lanes.iter().enumerate() {
        let counter = |k: &str| s.counters.get(k).copied().unwrap_or(0).to_string();
        let name = if i == parts {
            format!("{lane} (base)")
        } else {
            lane.clone()
        };
        rows.push(vec![
            name,
            s.ready_total().to_string(),
            s.delayed.to_string(),
            s.in_flight.to_string(),
            s.dead.to_string(),
            if s.paused { "yes" } else { "no" }.into(),
            match s.ready_total() {
                0 => "-".into(),
                _ => crate::output::age(Duration::from_millis(s.oldest_ready_age_ms)),
            },
            counter("enqueued"),
            counter("acked"),
        ]);
    }
    format!(
        "partitions {parts} and the base:\n{}",
        crate::output::table(&rows)
    )
}

fn render(queue: &str, s: &Stats, limits: &Settings, rates: Option<&Rates>) -> String {
    let mut o = String::new();
    let paused = if s.paused { " (paused)" } else { "" };
    o += &format!("queue      {queue}{paused}\n");
    o += &format!(
        "ready      {} (high {}, normal {}, low {})\n",
        s.ready_total(),
        s.ready[0],
        s.ready[1],
        s.ready[2]
    );
    o += &format!("delayed    {}\n", s.delayed);
    let counter = |k: &str| s.counters.get(k).copied().unwrap_or(0);
    match limits.global_concurrency {
        Some(c) => o += &format!("in flight  {} (global concurrency {c})\n", s.in_flight),
        None => o += &format!("in flight  {}\n", s.in_flight),
    }
    if let Some(r) = limits.global_rate {
        o += &format!("global     rate {} fleet-wide (burst {})\n", r.spec(), r.burst);
    }
    if limits.per_key() {
        let mut per = Vec::new();
        if let Some(r) = limits.key_rate {
            per.push(format!("rate {} (burst {})", r.spec(), r.burst));
        }
        if let Some(c) = limits.key_concurrency {
            per.push(format!("concurrency {c}"));
        }
        if !limits.key_overrides.is_empty() {
            per.push(format!(
                "{} with limits of their own",
                count(limits.key_overrides.len() as u64, "key")
            ));
        }
        o += &format!(
            "per key    {}; {} held back so far\n",
            per.join(", "),
            counter("key_throttled")
        );
    }
    o += &format!(
        "deferred   {} (put back uncharged, {} times so far)\n",
        s.deferred,
        counter("deferred")
    );
    o += &format!(
        "dead       {} (cap {}; {} trimmed so far)\n",
        s.dead,
        s.dead_cap,
        counter("trimmed")
    );
    o += &format!(
        "oldest     {}\n",
        humantime::format_duration(Duration::from_millis(s.oldest_ready_age_ms))
    );
    match rates {
        Some(r) => {
            o += &format!(
                "rates      {:.1} enqueued/s, {:.1} acked/s, {:.1} retried/s, {:.1} deferred/s, {:.1} dead/s (the {} before the queue's last sample)\n",
                r.enqueued_per_s,
                r.acked_per_s,
                r.retried_per_s,
                r.deferred_per_s,
                r.dead_per_s,
                humantime::format_duration(Duration::from_secs(r.window_ms.div_ceil(1000)))
            );
        }
        None => o += "rates      none: no consumer sampled the queue lately\n",
    }
    let counters: Vec<String> = s.counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
    o += &format!(
        "counters   {}\n",
        if counters.is_empty() {
            "none yet".into()
        } else {
            counters.join(", ")
        }
    );
    o
}
