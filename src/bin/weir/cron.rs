//! `weir cron add|list|remove`: periodic jobs, which the queue's consumers enqueue (see
//! `weir::queue::cron`).

use crate::{Common, parse_duration, parse_priority};
use clap::{ArgGroup, Args, Subcommand};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use weir::Priority;
use weir::queue::cron::{Added, Schedule, Schedules, When};

#[derive(Args, Debug)]
pub(crate) struct CronArgs {
    #[command(subcommand)]
    pub command: CronCommand,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Subcommand, Debug)]
pub(crate) enum CronCommand {
    /// Add a schedule, or replace the one of that name. Ticks up to now count as fired:
    /// the first job comes at the next tick. Adding the same schedule again changes
    /// nothing.
    Add(AddArgs),
    /// List the schedules with their last and next ticks.
    List {
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Remove a schedule.
    Remove {
        /// The schedule's name.
        #[arg(long)]
        name: String,
    },
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("when").required(true).args(["every", "cron"])))]
pub(crate) struct AddArgs {
    /// The schedule's name, unique in the queue (A-Z a-z 0-9 _ . : -).
    #[arg(long)]
    name: String,
    /// Fire every interval (at least 1s), counted from the Unix epoch: 1h fires on the
    /// hour, 1d at midnight UTC.
    #[arg(long, value_parser = parse_duration)]
    every: Option<Duration>,
    /// Fire on a cron pattern: 'min hour day month weekday', or with seconds first.
    #[arg(long, value_name = "PATTERN")]
    cron: Option<String>,
    /// With --cron: the IANA time zone of the pattern (default UTC).
    #[arg(long, requires = "cron")]
    tz: Option<String>,
    /// The jobs' kind.
    #[arg(long)]
    kind: String,
    /// The jobs' payload (JSON).
    #[arg(long, default_value = "{}")]
    payload: String,
    /// The jobs' priority: high, normal or low.
    #[arg(long, default_value = "normal", value_parser = parse_priority)]
    priority: Priority,
}

impl AddArgs {
    fn schedule(&self) -> crate::error::Result<Schedule> {
        serde_json::from_str::<serde::de::IgnoredAny>(&self.payload)
            .map_err(|e| crate::usage(format!("--payload is not valid JSON: {e}")))?;
        let when = match (&self.every, &self.cron) {
            (Some(d), _) => When::Every(*d),
            (None, pattern) => When::Cron {
                pattern: pattern.clone().unwrap_or_default(),
                tz: self.tz.clone(),
            },
        };
        Ok(Schedule::new(&self.name, when, &self.kind, &self.payload)?.priority(self.priority))
    }
}

pub(crate) async fn run(a: CronArgs) -> crate::error::Result<ExitCode> {
    // Usage errors first, before Redis is reached.
    let add = match &a.command {
        CronCommand::Add(args) => Some(args.schedule()?),
        _ => None,
    };
    let access = match &a.command {
        CronCommand::List { .. } => crate::known::Access::Read,
        _ => crate::known::Access::Write,
    };
    let conn = a.common.checked_conn(access).await?;
    if add.is_some() {
        // A queue nobody enqueued to yet is listed from its first schedule, so `weir
        // queues` shows where the cron jobs go.
        weir::Queues::new(conn.clone()).register(&a.common.queue).await?;
    }
    let schedules = Schedules::new(conn, &a.common.queue)?;
    let q = &a.common.queue;
    match (a.command, add) {
        (CronCommand::Add(_), Some(s)) => match schedules.add(&s).await? {
            Added::New => println!("schedule {} added to queue {q}", s.name),
            Added::Changed => println!("schedule {} of queue {q} changed", s.name),
            Added::Unchanged => println!("schedule {} of queue {q} unchanged", s.name),
        },
        (CronCommand::Remove { name }, _) => {
            if schedules.remove(&name).await? {
                println!("schedule {name} removed from queue {q}");
            } else {
                // Removing what is not there leaves the state asked for: not an error, so
                // a deploy script can remove unconditionally.
                println!("no schedule {name} in queue {q}: nothing removed");
            }
        }
        (CronCommand::List { json }, _) => list(&schedules, json).await?,
        (CronCommand::Add(_), None) => unreachable!("parsed above"),
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(schedules: &Schedules, json: bool) -> crate::error::Result<()> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    for (s, last) in schedules.list().await? {
        let next = s.next_tick_after(now);
        let when = match s.when() {
            When::Every(d) => serde_json::json!({ "every": humantime::format_duration(d).to_string() }),
            When::Cron { pattern, tz } => {
                serde_json::json!({ "cron": pattern, "tz": tz.unwrap_or("UTC".into()) })
            }
        };
        if json {
            let line = serde_json::json!({
                "name": s.name, "when": when, "kind": s.kind, "payload": &*s.payload,
                "last_fired_ms": last, "next_ms": next,
            });
            println!("{line}");
        } else {
            let when = when
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k} {v}"));
            println!(
                "{}  {}  kind {}  last {}  next {}",
                s.name,
                when.collect::<Vec<_>>().join(" "),
                s.kind,
                show(last),
                show(next)
            );
        }
    }
    Ok(())
}

/// A tick as an RFC 3339 UTC time, or `-`.
fn show(ms: Option<u64>) -> String {
    ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms as i64).ok())
        .map_or_else(|| "-".into(), |t| t.to_string())
}
