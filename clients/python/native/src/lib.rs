//! `weir._weir`: weir's consumer (fetch, leases, acks, limiter) on a tokio runtime in Rust
//! threads, calling handlers written in Python. The Python side (clients/python/weir)
//! wraps it: `weir.Worker`.
//!
//! Async handlers run on one asyncio loop in a Python thread of its own: the engine puts
//! their jobs in an [`inbox::Inbox`] and wakes the loop through a pipe, without the GIL;
//! the loop takes them in batches. Plain functions run on the threads of a
//! [`handlers::SyncPool`], which hold the GIL across the calls of the jobs waiting.

mod engine;
mod handlers;
mod inbox;
mod job;

use pyo3::prelude::*;

/// The module `weir._weir`.
#[pymodule]
fn _weir(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<engine::Engine>()?;
    m.add_class::<job::PyJob>()?;
    m.add_class::<job::Done>()?;
    Ok(())
}
