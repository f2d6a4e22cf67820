//! End to end through the public API: `Producer` in, `Consumer` + `Registry` out, against a
//! real redis-server; crashes and shutdown also through `weir work` processes. Outcomes
//! are checked in Redis; waits are bounded polls, never timings.

#[path = "../common/mod.rs"]
mod common;
#[path = "../faults/mod.rs"]
mod faults;

mod batch;
mod bulk;
mod compact;
mod crash;
mod drain_wait;
mod failures;
mod flow;
mod history;
mod load;
mod multi;
mod multi_slots;
mod options;
mod poison;
mod prefetch;
mod resilience;
mod results;
mod retry_rules;
mod samples;
mod shutdown;
mod stored;
mod support;
