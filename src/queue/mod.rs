//! The Redis side of the queue: key names, the job envelope, the Lua scripts and their
//! typed wrappers, the producer, operator actions and the retry policy.
//!
//! Everything here speaks to Redis in one round trip per batch; nothing here runs jobs.

pub mod admin;
pub mod envelope;
pub mod keys;
pub mod producer;
pub mod retry;
pub mod scripts;
