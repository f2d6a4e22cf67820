//! `weir queue create --partitions P` and `weir queue show`: a queue's partitions, which
//! spread one logical queue over every shard of a Redis Cluster (docs/scaling.md).

use crate::Common;
use crate::output;
use clap::{Args, Subcommand};
use std::process::ExitCode;
use weir::queue::partitions::{MAX_PARTITIONS, Partitions};

#[derive(Args, Debug)]
pub(crate) struct QueueArgs {
    #[command(subcommand)]
    action: Action,
    #[command(flatten)]
    common: Common,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Make the queue partitioned: P lanes, each the layout of a queue under a tag of its
    /// own, spread evenly over the cluster's primaries. Idempotent: a queue that has
    /// partitions keeps them (asking for another count is an error).
    Create {
        /// Partitions, 1 to 1024 (on a cluster: a multiple of the primaries spreads them
        /// evenly).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_PARTITIONS as u64))]
        partitions: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the queue's partitions.
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) async fn run(a: QueueArgs) -> crate::error::Result<ExitCode> {
    let q = &a.common.queue;
    let mut conn = a.common.redis()?.connect().await?;
    match a.action {
        Action::Create { partitions, json } => {
            // Consumers running now read the queue as unpartitioned when they started.
            let running = weir::Queue::new(conn.clone(), q)?.workers().await?.workers.len();
            let made = Partitions::create(&mut conn, q, partitions as usize).await?;
            let tags: Vec<&str> = (0..made.partitions.count())
                .map(|i| made.partitions.partition(i).name())
                .collect();
            if json {
                let placement: Vec<serde_json::Value> = made
                    .placement
                    .iter()
                    .map(|(slot, addr)| serde_json::json!({ "slot": slot, "primary": addr }))
                    .collect();
                output::json(&serde_json::json!({
                    "queue": q,
                    "partitions": tags,
                    "created": made.created,
                    "placement": placement,
                    "running_consumers": if made.created { running } else { 0 },
                }))?;
            } else if made.created {
                println!("queue {q}: {} partitions", tags.len());
                for (i, tag) in tags.iter().enumerate() {
                    match made.placement.get(i) {
                        Some((slot, addr)) => println!("  {i}: {{{tag}}} slot {slot} on {addr}"),
                        None => println!("  {i}: {{{tag}}}"),
                    }
                }
                print_spread(&made.placement);
                if running > 0 {
                    println!(
                        "{} running: restart {} so {} the partitions (until then {} only the queue's own lane)",
                        output::count(running as u64, "consumer"),
                        if running == 1 { "it" } else { "them" },
                        if running == 1 { "it serves" } else { "they serve" },
                        if running == 1 { "it serves" } else { "they serve" },
                    );
                }
            } else {
                println!("queue {q} has {} partitions already", tags.len());
            }
        }
        Action::Show { json } => {
            let parts = Partitions::read(&mut conn, q).await?;
            let tags: Vec<String> = parts
                .iter()
                .flat_map(|p| (0..p.count()).map(|i| p.partition(i).name().to_owned()))
                .collect();
            if json {
                output::json(&serde_json::json!({ "queue": q, "partitions": tags }))?;
            } else if tags.is_empty() {
                println!("queue {q} is not partitioned");
            } else {
                println!("queue {q}: {} partitions", tags.len());
                for (i, tag) in tags.iter().enumerate() {
                    println!("  {i}: {{{tag}}}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How many partitions each primary holds.
fn print_spread(placement: &[(u16, String)]) {
    if placement.is_empty() {
        return;
    }
    let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
    for (_, addr) in placement {
        *by.entry(addr).or_default() += 1;
    }
    let spread: Vec<String> = by.iter().map(|(a, n)| format!("{a}: {n}")).collect();
    println!("spread over {} primaries: {}", by.len(), spread.join(", "));
}

/// `weir pause` (`paused`) and `weir resume`: a queue never seen is refused without
/// `--create`.
pub(crate) async fn pause(c: Common, paused: bool) -> crate::error::Result<ExitCode> {
    let q = c.checked_queue(crate::known::Access::Write).await?;
    let changed = if paused {
        q.pause().await?
    } else {
        q.resume().await?
    };
    let state = if paused { "paused" } else { "resumed" };
    if changed {
        println!("queue {} {state}", c.queue);
    } else {
        println!("queue {} was already {state}", c.queue);
    }
    Ok(ExitCode::SUCCESS)
}
