//! `weir dlq list|requeue|purge`: the dead-letter queue.

use crate::Common;
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub(crate) struct DlqArgs {
    #[command(subcommand)]
    pub command: DlqCommand,
    #[command(flatten)]
    pub common: Common,
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
    /// Requeue dead-lettered jobs with a fresh attempt count: the ids given, or with --all
    /// every one (oldest first, up to --limit).
    Requeue {
        /// Job ids.
        ids: Vec<String>,
        /// Requeue all (up to --limit).
        #[arg(long, conflicts_with = "ids")]
        all: bool,
        /// Most jobs requeued with --all.
        #[arg(long, default_value_t = 10_000)]
        limit: usize,
    },
    /// Delete every dead-lettered job.
    Purge,
}

pub(crate) async fn run(a: DlqArgs) -> weir::Result<ExitCode> {
    // A usage error, so checked before Redis is reached.
    if let DlqCommand::Requeue { ids, all: false, .. } = &a.command
        && ids.is_empty()
    {
        return Err(weir::Error::Config("give job ids to requeue, or --all".into()));
    }
    let q = a.common.queue_handle().await?;
    match a.command {
        DlqCommand::List { limit, offset, json } => {
            for d in q.dead_jobs(offset, limit).await? {
                if json {
                    println!("{}", serde_json::to_string(&d)?);
                } else {
                    println!(
                        "{}  {}  {}",
                        d.id,
                        d.dead_at_ms,
                        d.reason.as_deref().unwrap_or("-")
                    );
                }
            }
        }
        DlqCommand::Requeue { ids, limit, .. } => {
            let (n, missing) = q.requeue_dead(&ids, limit).await?;
            println!("requeued {n} jobs");
            if !missing.is_empty() {
                eprintln!("not in the dead-letter queue: {}", missing.join(", "));
                return Ok(ExitCode::from(crate::exit::PARTIAL));
            }
        }
        DlqCommand::Purge => println!("purged {} jobs", q.purge_dead().await?),
    }
    Ok(ExitCode::SUCCESS)
}
