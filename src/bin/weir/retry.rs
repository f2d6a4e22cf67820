//! `weir retry`: the queue's retry rules (the delay after a failed attempt and the runs a
//! job gets in all), for the queue and per job kind, stored in its settings hash. Running
//! consumers apply a change within about a second, to every job that fails from then on,
//! including the jobs already waiting.

use crate::Common;
use clap::{Args, Subcommand};
use std::process::ExitCode;
use weir::queue::retry_rules::{RetryRule, RetryRules};

/// `weir retry`.
#[derive(Args, Debug)]
pub(crate) struct RetryArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: RetryCommand,
}

#[derive(Subcommand, Debug)]
pub(crate) enum RetryCommand {
    /// Show the rules stored for the queue and its kinds.
    Get,
    /// Store a rule: `sidekiq` (26 runs over about 3 weeks),
    /// `exp:base=1s,factor=2,cap=1h,jitter=0.5`, or `fixed:10s,1m,10m`; each may end with
    /// `,attempts=N` (runs in all; a fixed list without it gives one run more than its
    /// delays, `exp` without it keeps each job's own max_attempts).
    Set {
        /// The rule.
        #[arg(value_parser = str::parse::<RetryRule>)]
        rule: RetryRule,
        /// Only for jobs of this kind (a kind's rule wins over the queue's).
        #[arg(long)]
        kind: Option<String>,
    },
    /// Remove the queue's rule (consumers go back to their own backoff), or a kind's.
    Clear {
        /// Only this kind's rule (it goes back to the queue's).
        #[arg(long)]
        kind: Option<String>,
    },
}

pub(crate) async fn run(a: RetryArgs) -> crate::error::Result<ExitCode> {
    let access = match a.command {
        RetryCommand::Get => crate::known::Access::Read,
        _ => crate::known::Access::Write,
    };
    let mut conn = a.common.checked_conn(access).await?;
    let queue = &a.common.queue;
    match &a.command {
        RetryCommand::Get => {}
        RetryCommand::Set { rule, kind } => RetryRules::set(&mut conn, queue, kind.as_deref(), rule).await?,
        RetryCommand::Clear { kind } => RetryRules::clear(&mut conn, queue, kind.as_deref()).await?,
    }
    let rules = RetryRules::load(&mut conn, queue).await?;
    match &rules.queue {
        Some(r) => println!("queue {queue}: retry {r}"),
        None => println!(
            "queue {queue}: no retry rule (consumers use their own backoff and each job's max_attempts)"
        ),
    }
    let mut kinds: Vec<_> = rules.kinds.iter().collect();
    kinds.sort_by_key(|(k, _)| k.as_str());
    for (k, r) in kinds {
        println!("  kind {k}: retry {r}");
    }
    Ok(ExitCode::SUCCESS)
}
