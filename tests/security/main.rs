//! The threats of docs/security.md, each against a real redis-server and the real `weir`
//! binary: the worker and admin ACL roles, secrets kept out of every message, hostile
//! queue names, terminal escapes, the HTTP endpoints' limits and shutdown on a closed pipe.

#[path = "../common/mod.rs"]
mod common;
#[path = "../faults/mod.rs"]
mod faults;

mod endpoints;
mod escapes;
mod names;
mod oversized;
mod redact;
mod roles;
mod shutdown;

use std::time::Duration;

/// The bound on every `weir` run of these tests.
const T: Duration = Duration::from_secs(60);
