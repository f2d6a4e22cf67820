//! Errors of the limiter layer: configuration out of range, and values that do not parse.
//!
//! [`LimiterError`] itself is defined in [`crate::error`], at the bottom of the module
//! graph, so that [`crate::Error`] can wrap it without the error module depending on the
//! limiter (which depends on the metrics, which return [`crate::Error`]).

pub use crate::error::LimiterError;

/// Checks `ok`, or reports `name` out of `range`.
pub(crate) fn check(
    ok: bool,
    name: &'static str,
    range: &'static str,
    value: impl std::fmt::Display,
) -> Result<(), LimiterError> {
    if ok {
        Ok(())
    } else {
        Err(LimiterError::OutOfRange {
            name,
            range,
            value: value.to_string(),
        })
    }
}
