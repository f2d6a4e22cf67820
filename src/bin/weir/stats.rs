//! `weir stats`: the queue's sizes and counters, as text or JSON.

use crate::Common;
use clap::Args;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    pub common: Common,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(a: StatsArgs) -> weir::Result<ExitCode> {
    let q = a.common.queue_handle().await?;
    let s = q.stats().await?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&serde_json::json!({ "queue": a.common.queue, "stats": s }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "queue      {}{}",
        a.common.queue,
        if s.paused { " (paused)" } else { "" }
    );
    println!(
        "ready      {} (high {}, normal {}, low {})",
        s.ready_total(),
        s.ready[0],
        s.ready[1],
        s.ready[2]
    );
    println!("delayed    {}", s.delayed);
    println!("in flight  {}", s.in_flight);
    println!("dead       {}", s.dead);
    println!(
        "oldest     {}",
        humantime::format_duration(std::time::Duration::from_millis(s.oldest_ready_age_ms))
    );
    let counters: Vec<String> = s.counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "counters   {}",
        if counters.is_empty() {
            "none yet".into()
        } else {
            counters.join(", ")
        }
    );
    Ok(ExitCode::SUCCESS)
}
