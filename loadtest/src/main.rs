//! `weir-loadtest`: runs the real weir producer and consumer against a real Redis and
//! reports what happened. See `loadtest/README.md`.
//!
//! Flow of a run: `target` (which Redis) → `feed` (producer) → `fleet` (consumers, in
//! process or as child processes running `child`) → `handler` (no-op or `downstream`;
//! `keyed`: a latency per job key, with `key_limits` in the queue's settings) →
//! `observed` (`accounting` bitmaps, `histogram`) → `sampler` (time series) → `report`
//! (summary, RESULT line, files) → `plot` (charts).
#![forbid(unsafe_code)]

mod accounting;
mod bare;
mod child;
mod cli;
mod command;
mod cpu;
mod downstream;
mod feed;
mod fleet;
mod handler;
mod histogram;
mod http;
mod key_limits;
mod keyed;
mod limits;
mod observed;
mod pauses;
mod pipe_sink;
mod plot;
mod report;
mod rpush;
mod running;
mod sampler;
mod scenarios;
mod target;
mod wire;

use clap::Parser;
use command::{Cli, Scenario};
use std::process::ExitCode;

/// The `weir` binary's allocator, so the harness measures what the CLI runs. (Not in the
/// unit tests: `cpu.rs`'s test of the peak RSS reset needs freed memory to go back to the
/// system at once, and mimalloc keeps freed pages a while.)
#[cfg(not(test))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match weir::runtime::build(worker_threads(&cli)) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    // On Ctrl-C or SIGTERM the run is dropped, and with it the private redis-server and
    // any consumer process it started (their Drop kills them).
    let result = runtime.block_on(async {
        tokio::select! {
            r = run(cli) => r,
            _ = interrupted() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    let code = match &result {
        Ok(code) => *code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    };
    // A consumer process has a task blocked reading stdin on a blocking thread, which
    // would hold up the runtime's shutdown; its reports are flushed, so leave at once.
    runtime.shutdown_background();
    code
}

/// The runtime's worker threads: `--worker-threads`, else weir's default for where Redis
/// runs (the private redis-server and cluster run on this machine).
fn worker_threads(cli: &Cli) -> usize {
    let (given, url) = match (&cli.scenario, cli.scenario.common()) {
        (_, Some(c)) => (c.worker_threads, c.redis_url.as_deref()),
        (Scenario::Consumer(a), None) => (a.worker_threads, Some(a.redis_url.as_str())),
        (_, None) => (None, None),
    };
    let local = url.is_none_or(|u| weir::Redis::open(u).is_ok_and(|r| r.on_this_machine()));
    given.map_or_else(|| weir::runtime::worker_threads(local), usize::from)
}

async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        },
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

async fn run(mut cli: Cli) -> anyhow::Result<ExitCode> {
    if let Scenario::Downstream(a) = &mut cli.scenario {
        a.resolve();
    }
    let common = match (&cli.scenario, cli.scenario.common()) {
        (_, Some(c)) => c,
        (Scenario::Consumer(a), None) => {
            child::run(a.clone()).await?;
            return Ok(ExitCode::SUCCESS);
        }
        (Scenario::ServeDownstream(a), None) => {
            http::serve(a.clone()).await?;
            return Ok(ExitCode::SUCCESS);
        }
        (Scenario::Rpush(a), None) => {
            rpush::run(a).await?;
            return Ok(ExitCode::SUCCESS);
        }
        (Scenario::Pauses(a), None) => {
            let a = a.clone();
            tokio::task::spawn_blocking(move || pauses::run(&a)).await??;
            return Ok(ExitCode::SUCCESS);
        }
        (_, None) => unreachable!("every scenario has its common options"),
    };
    common.validate().map_err(anyhow::Error::msg)?;
    let out = common.out.clone();
    if let Scenario::Scenarios(a) = cli.scenario {
        let ok = scenarios::suite::run(a).await?;
        return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    let (report, rows) = match cli.scenario {
        Scenario::Drain(a) => scenarios::drain_modes::run(a).await?,
        Scenario::Steady(a) => scenarios::steady::run(a).await?,
        Scenario::Downstream(a) => scenarios::downstream::run(a).await?,
        Scenario::Chaos(a) => scenarios::chaos::run(a).await?,
        Scenario::Keys(a) => scenarios::keys::run(a).await?,
        Scenario::Consumer(_)
        | Scenario::ServeDownstream(_)
        | Scenario::Pauses(_)
        | Scenario::Rpush(_)
        | Scenario::Scenarios(_) => {
            unreachable!("handled above")
        }
    };
    if let Some(dir) = &out {
        report.write(dir, &rows)?;
    }
    report.print();
    Ok(if report.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
