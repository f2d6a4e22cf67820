//! Housekeeping: the consumer's periodic work, each task a small struct with
//! `run(self, shutdown)`:
//! - `Reclaimer` (reclaimer.rs): brings back the jobs of crashed or stalled consumers once
//!   their leases expire;
//! - `SettingsWatch` (settings.rs): applies the runtime settings an operator stores for the
//!   queue;
//! - `SamplesTask` (samples.rs): samples the queue's counters and sizes into its history
//!   in Redis, once per period fleet-wide;
//! - `Sampler` (sampler.rs): publishes queue depths and the local limit as metrics;
//! - `DrainWatch` (drain.rs): in drain mode, stops the consumer once the queue is empty;
//! - `CronTask` (cron.rs): fires the queue's periodic jobs;
//! - `KeyShares` (key_shares.rs): with adaptive per-key limits, writes this consumer's
//!   shares of them.
//!
//! On an idle queue none of them polls each second: the reclaimer and the sampler slow
//! down while the fetcher sees no work (`quiet.rs`), and the settings watch and the cron
//! task wait for change notices (`consumer/notices.rs`) with a slow safety poll.
//!
//! (The lease heartbeat is a task of its own, `consumer/heartbeat.rs`, beside the acker:
//! both work on the table of leases held.)

mod cron;
mod drain;
mod key_shares;
mod quiet;
mod reclaimer;
mod sampler;
mod samples;
mod settings;
mod trims;

pub(crate) use cron::CronTask;
pub(crate) use drain::DrainWatch;
pub(crate) use key_shares::KeyShares;
pub(crate) use quiet::Activity;
pub(crate) use reclaimer::Reclaimer;
pub(crate) use sampler::Sampler;
pub(crate) use samples::SamplesTask;
pub(crate) use settings::SettingsWatch;
