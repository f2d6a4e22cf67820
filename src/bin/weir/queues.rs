//! `weir queues` (every queue in this Redis, from the registry enqueue keeps) and `weir
//! workers` (the live consumers of a queue, from the registry their heartbeats keep).

use crate::output::{age, count, json, table, when};
use crate::{Common, parse_duration};
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;
use weir::queue::admin::Queues;
use weir::queue::json::{QueueList, WorkerList};

#[derive(Args, Debug)]
pub(crate) struct QueuesArgs {
    #[command(flatten)]
    pub common: Common,
    /// Print JSON (docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
    /// Rates from two reads of the counters this far apart, instead of the queue's history
    /// (the two newest samples its consumers wrote, as `weir stats` and the UI show them).
    #[arg(long, value_parser = parse_duration)]
    pub rate_window: Option<Duration>,
    /// Look for queues created before the registry (a SCAN of every key) first. It runs
    /// by itself the first time; this runs it again.
    #[arg(long)]
    pub rescan: bool,
    /// Remove a queue from the list (its keys stay; an enqueue lists it again).
    #[arg(long, value_name = "QUEUE")]
    pub forget: Option<String>,
}

pub(crate) async fn run(a: QueuesArgs) -> crate::error::Result<ExitCode> {
    let queues = Queues::new(a.common.redis()?.connect().await?);
    if let Some(name) = &a.forget {
        let was = queues.forget(name).await?;
        let note = if was { "no longer listed" } else { "was not listed" };
        eprintln!("queue {} {note}", crate::output::term(name));
    }
    if a.rescan {
        let added = queues.rescan().await?;
        eprintln!("rescan found {} not listed before", count(added, "queue"));
    }
    let list = queues.list(a.rate_window).await?;
    if !list.invalid.is_empty() {
        let shown: Vec<String> = list.invalid.iter().map(|n| format!("{n:?}")).collect();
        eprintln!(
            "warning: the queue registry holds {} {} that {} not queue names, skipped: {}; \
             remove one with `weir queues --forget NAME`",
            list.invalid.len(),
            if list.invalid.len() == 1 {
                "entry"
            } else {
                "entries"
            },
            if list.invalid.len() == 1 { "is" } else { "are" },
            shown.join(", ")
        );
    }
    if a.json {
        json(&list)?;
    } else {
        print!("{}", render_queues(&list));
    }
    Ok(ExitCode::SUCCESS)
}

fn render_queues(list: &QueueList) -> String {
    if list.queues.is_empty() {
        return "no queues yet (a queue is listed from its first enqueue)\n".into();
    }
    let mut rows = vec![
        [
            "QUEUE",
            "READY",
            "HIGH/NORMAL/LOW",
            "DELAYED",
            "IN FLIGHT",
            "DEAD",
            "PAUSED",
            "OLDEST",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let with_rates = list.queues.iter().any(|q| q.rates.is_some());
    if with_rates {
        rows[0].extend(["ENQUEUED/S", "ACKED/S", "FAILED/S"].map(String::from));
    }
    // Partitioned queues' figures are summed over their lanes; the column says how many.
    let partitioned = list.queues.iter().any(|q| q.partitions.is_some());
    if partitioned {
        rows[0].push("PARTITIONS".into());
    }
    for q in &list.queues {
        let r = &q.ready;
        let mut row = vec![
            q.name.clone(),
            r.total.to_string(),
            format!("{}/{}/{}", r.high, r.normal, r.low),
            q.delayed.to_string(),
            q.in_flight.to_string(),
            q.dead.to_string(),
            if q.paused { "yes" } else { "no" }.into(),
            if r.total == 0 {
                "-".into()
            } else {
                age(Duration::from_millis(q.oldest_ready_age_ms))
            },
        ];
        if let Some(rt) = &q.rates {
            let f = |x: f64| format!("{x:.0}");
            row.extend([
                f(rt.enqueued_per_s),
                f(rt.acked_per_s),
                f(rt.retried_per_s + rt.dead_per_s),
            ]);
        }
        if partitioned {
            row.push(q.partitions.map_or("-".into(), |p| p.to_string()));
        }
        rows.push(row);
    }
    table(&rows)
}

#[derive(Args, Debug)]
pub(crate) struct WorkersArgs {
    #[command(flatten)]
    pub common: Common,
    /// Print JSON (docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
}

pub(crate) async fn run_workers(a: WorkersArgs) -> crate::error::Result<ExitCode> {
    let list = a
        .common
        .checked_queue(crate::known::Access::Read)
        .await?
        .workers()
        .await?;
    if a.json {
        json(&list)?;
    } else {
        print!("{}", render_workers(&list));
    }
    Ok(ExitCode::SUCCESS)
}

fn render_workers(list: &WorkerList) -> String {
    if list.workers.is_empty() {
        return format!("no live consumers on queue {}\n", list.queue);
    }
    let mut rows = vec![
        [
            "ID",
            "HOST",
            "PID",
            "VERSION",
            "STARTED",
            "LIMIT",
            "RUNNING",
            "LEASED",
            "LAST BEAT",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for w in &list.workers {
        rows.push(vec![
            w.id.clone(),
            w.host.clone(),
            w.pid.to_string(),
            w.weir_version.clone(),
            when(w.started_at, list.now),
            w.concurrency_limit.to_string(),
            w.running.to_string(),
            w.leased.to_string(),
            format!("{} ago", age(w.last_beat.age(list.now))),
        ]);
    }
    let mut out = format!(
        "{} on queue {}\n",
        count(list.workers.len() as u64, "consumer"),
        list.queue
    );
    out += &table(&rows);
    out
}
