//! `weir dlq list|requeue|delete|purge`: the dead-letter queue.

use crate::output::{confirm, count, json, table, unattended, when};
use crate::{Common, parse_duration};
use clap::{Args, Subcommand};
use std::process::ExitCode;
use std::time::Duration;
use weir::Queue;
use weir::queue::json::Timestamp;

#[derive(Args, Debug)]
pub(crate) struct DlqArgs {
    #[command(subcommand)]
    pub command: DlqCommand,
    #[command(flatten)]
    pub common: Common,
}

/// Which dead-lettered jobs a bulk action takes.
#[derive(Args, Debug, Clone)]
pub(crate) struct Filter {
    /// Only jobs of this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only jobs dead-lettered at least this long ago (e.g. 1h).
    #[arg(long, value_parser = parse_duration)]
    pub older_than: Option<Duration>,
}

impl Filter {
    fn is_empty(&self) -> bool {
        self.kind.is_none() && self.older_than.is_none()
    }

    /// The filter in words: ` of kind K dead-lettered over 1h ago`.
    fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(k) = &self.kind {
            s += &format!(" of kind {k}");
        }
        if let Some(d) = self.older_than {
            s += &format!(" dead-lettered over {} ago", humantime::format_duration(d));
        }
        s
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum DlqCommand {
    /// List dead-lettered jobs, newest first.
    List {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Skip this many of the newest.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Requeue dead-lettered jobs with a fresh attempt count: the ids given, every one
    /// with --all (oldest first, up to --limit), or those --kind and/or --older-than take.
    Requeue {
        /// Job ids.
        #[arg(conflicts_with_all = ["all", "kind", "older_than"])]
        ids: Vec<String>,
        /// Requeue all (up to --limit).
        #[arg(long, conflicts_with_all = ["kind", "older_than"])]
        all: bool,
        /// Most jobs requeued with --all.
        #[arg(long, default_value_t = 10_000)]
        limit: usize,
        #[command(flatten)]
        filter: Filter,
        /// Print JSON (docs/cli-json.md).
        #[arg(long)]
        json: bool,
    },
    /// Delete dead-lettered jobs by id. More than one asks for confirmation.
    Delete {
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<String>,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
        /// Print JSON (docs/cli-json.md).
        #[arg(long)]
        json: bool,
    },
    /// Delete every dead-lettered job, or those --kind and/or --older-than take. Asks for
    /// confirmation.
    Purge {
        #[command(flatten)]
        filter: Filter,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
        /// Print JSON (docs/cli-json.md).
        #[arg(long)]
        json: bool,
    },
}

pub(crate) async fn run(a: DlqArgs) -> crate::error::Result<ExitCode> {
    // A usage error, so checked before Redis is reached.
    if let DlqCommand::Requeue {
        ids,
        all: false,
        filter,
        ..
    } = &a.command
        && ids.is_empty()
        && filter.is_empty()
    {
        return Err(crate::usage(
            "give job ids to requeue, --all, or --kind/--older-than",
        ));
    }
    let queue = a.common.queue.clone();
    match &a.command {
        DlqCommand::Delete { ids, yes, .. } => crate::jobs::confirm_many(ids, &queue, *yes)?,
        DlqCommand::Purge { yes, .. } => unattended("purging the dead-letter queue", *yes)?,
        _ => {}
    }
    // An unseen queue has nothing to requeue or delete: told, not refused.
    let q = a.common.checked_queue(crate::known::Access::Read).await?;
    match a.command {
        DlqCommand::List { limit, offset, json } => list(&q, limit, offset, json).await?,
        DlqCommand::Requeue {
            ids,
            limit,
            filter,
            json: as_json,
            ..
        } => {
            if !filter.is_empty() {
                let r = q
                    .dead_where(true, filter.kind.as_deref(), filter.older_than)
                    .await?;
                return bulk_done(&r, as_json, "requeued", &filter);
            }
            let (n, missing) = q.requeue_dead(&ids, limit).await?;
            if as_json {
                json(&serde_json::json!({
                    "version": weir::queue::json::JSON_VERSION,
                    "queue": queue, "action": "requeue", "count": n, "missing": missing,
                }))?;
            } else {
                println!("requeued {}", count(n, "job"));
            }
            if !missing.is_empty() {
                if !as_json {
                    eprintln!("not in the dead-letter queue: {}", missing.join(", "));
                }
                return Ok(ExitCode::from(crate::exit::PARTIAL));
            }
        }
        DlqCommand::Delete { ids, json, .. } => {
            return crate::jobs::report(&q.delete_jobs(&ids, true).await?, json);
        }
        DlqCommand::Purge { filter, yes, json } => return purge(&q, &filter, yes, json).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// One line of `weir dlq list --json` (see docs/cli-json.md).
#[derive(serde::Serialize)]
struct DeadListed<'a> {
    id: &'a str,
    /// A partitioned queue's lane the job is in (left out for other queues).
    #[serde(skip_serializing_if = "Option::is_none")]
    lane: Option<&'a str>,
    dead_at: Timestamp,
    age_ms: u64,
    reason: Option<&'a str>,
    /// The envelope as JSON, when it parses.
    envelope: Option<&'a serde_json::value::RawValue>,
    /// The envelope as stored, when it does not parse as JSON.
    envelope_text: Option<&'a str>,
}

async fn list(q: &Queue, limit: usize, offset: usize, as_json: bool) -> crate::error::Result<()> {
    let now = Timestamp::from(std::time::SystemTime::now());
    let dead = q.dead_jobs(offset, limit).await?;
    // A partitioned queue's jobs say their lane.
    let lanes = dead.iter().any(|d| d.lane.is_some());
    let mut rows = vec![vec![
        "ID".to_owned(),
        "DEAD-LETTERED".to_owned(),
        "REASON".to_owned(),
    ]];
    if lanes {
        rows[0].insert(1, "LANE".to_owned());
    }
    for d in &dead {
        let at = Timestamp(d.dead_at_ms);
        if as_json {
            let raw = d
                .envelope
                .as_deref()
                .and_then(|e| serde_json::from_str::<&serde_json::value::RawValue>(e).ok());
            json(&DeadListed {
                id: &d.id,
                lane: d.lane.as_deref(),
                dead_at: at,
                age_ms: at.age(now).as_millis() as u64,
                reason: d.reason.as_deref(),
                envelope: raw,
                envelope_text: if raw.is_none() {
                    d.envelope.as_deref()
                } else {
                    None
                },
            })?;
        } else {
            let mut row = vec![
                d.id.clone(),
                when(at, now),
                d.reason.as_deref().unwrap_or("-").to_owned(),
            ];
            if lanes {
                row.insert(1, d.lane.clone().unwrap_or_default());
            }
            rows.push(row);
        }
    }
    if !as_json && rows.len() > 1 {
        print!("{}", table(&rows));
    }
    Ok(())
}

async fn purge(q: &Queue, filter: &Filter, yes: bool, as_json: bool) -> crate::error::Result<ExitCode> {
    let name = q.keys().name().to_owned();
    if filter.is_empty() {
        let dead = q.stats().await?.dead;
        confirm(
            &format!(
                "purge {} from the dead-letter queue of {name}",
                count(dead, "job")
            ),
            yes,
        )?;
        let n = q.purge_dead().await?;
        let r = weir::queue::json::BulkActed {
            version: weir::queue::json::JSON_VERSION,
            queue: name,
            action: "delete",
            kind: None,
            older_than_ms: None,
            count: n,
        };
        return bulk_done(&r, as_json, "purged", filter);
    }
    let what = format!(
        "delete the dead-lettered jobs{} from queue {name}",
        filter.describe()
    );
    confirm(&what, yes)?;
    let r = q
        .dead_where(false, filter.kind.as_deref(), filter.older_than)
        .await?;
    bulk_done(&r, as_json, "purged", filter)
}

fn bulk_done(
    r: &weir::queue::json::BulkActed,
    as_json: bool,
    verb: &str,
    filter: &Filter,
) -> crate::error::Result<ExitCode> {
    if as_json {
        json(r)?;
    } else {
        println!("{verb} {}{}", count(r.count, "job"), filter.describe());
    }
    Ok(ExitCode::SUCCESS)
}
