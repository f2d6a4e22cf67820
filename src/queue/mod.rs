//! The Redis side of the queue: key names, the job envelope, the Lua scripts and their
//! typed wrappers, the Functions library built from them, the producer, operator actions and
//! the retry policy.
//!
//! Everything here speaks to Redis in one round trip per batch; nothing here runs jobs.

pub mod admin;
pub mod cron;
pub mod envelope;
pub mod functions;
pub mod json;
pub mod keys;
pub mod partitions;
pub mod producer;
pub mod retry_policy;
pub mod retry_rules;
pub mod samples;
pub mod settings;
mod spread;
// The typed script wrappers: public so the script tables in tests/scripts and the
// `scripts` bench can call each script alone, not an API for applications (they use
// `Producer`, `Consumer` and `Queue`). Hidden from the docs for that reason.
#[doc(hidden)]
pub mod scripts;
