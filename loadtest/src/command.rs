//! The command line: one subcommand per scenario, and the hidden `consumer` subcommand
//! the harness runs in its child processes. Only `main.rs` reads it: it names every
//! scenario, so no scenario may import it.

use crate::cli::{ChaosArgs, Common, DownstreamArgs, DrainArgs, KeysArgs, SteadyArgs};
use clap::{Parser, Subcommand};

/// Load-test harness for weir: runs the real producer and consumer against a real Redis.
#[derive(Parser, Debug)]
#[command(name = "weir-loadtest", version)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub scenario: Scenario,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Scenario {
    /// Enqueue N jobs in bulk, then drain them with no-op handlers.
    Drain(DrainArgs),
    /// Enqueue at a target rate while consumers process; end-to-end latency.
    Steady(SteadyArgs),
    /// Consumers call a simulated downstream whose capacity changes over time.
    Downstream(DownstreamArgs),
    /// Kill and restart consumer processes at random moments; every job must still run.
    Chaos(ChaosArgs),
    /// Jobs spread over many keys, one slow or hot: run without it, then with it, and
    /// compare the other keys' throughput (per-key limits).
    Keys(KeysArgs),
    /// The adaptive limiter's named scenarios (plain errors, an error burst, a latency
    /// knee, capacity steps, a Retry-After storm, a cold start, a fleet), each with a
    /// RESULT line and charts.
    Scenarios(crate::scenarios::suite::SuiteArgs),
    /// Serve the simulated downstream over local HTTP (for HTTP handlers).
    ServeDownstream(crate::http::ServeArgs),
    /// Watch how often, and how long, the machine pauses a thread that never waits (one
    /// per core): the floor under any latency figure measured here.
    Pauses(crate::pauses::PausesArgs),
    /// Push the lines of a file as they are, with raw RPUSH in weir's bulk chunks: the
    /// raw client `weir enqueue` is measured against.
    Rpush(crate::rpush::RpushArgs),
    /// A consumer process of a fleet (started by the harness itself).
    #[command(hide = true)]
    Consumer(crate::child::ChildArgs),
}

impl Scenario {
    /// The options of a load-test scenario (none for the helpers: consumer, serve-downstream,
    /// pauses, rpush).
    pub(crate) fn common(&self) -> Option<&Common> {
        match self {
            Scenario::Drain(a) => Some(&a.common),
            Scenario::Steady(a) => Some(&a.common),
            Scenario::Downstream(a) => Some(&a.common),
            Scenario::Chaos(a) => Some(&a.common),
            Scenario::Keys(a) => Some(&a.common),
            Scenario::Scenarios(a) => Some(&a.common),
            Scenario::Consumer(_)
            | Scenario::ServeDownstream(_)
            | Scenario::Pauses(_)
            | Scenario::Rpush(_) => None,
        }
    }
}
