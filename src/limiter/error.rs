//! Errors of the limiter layer: configuration out of range, and values that do not parse.

/// An error from the limiter's configuration or its parsers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimiterError {
    /// A setting outside its documented range.
    #[error("{name} must be {range} (got {value})")]
    OutOfRange {
        /// The setting's name, as the CLI and the settings hash spell it.
        name: &'static str,
        /// The accepted range, in words.
        range: &'static str,
        /// The value given.
        value: String,
    },
    /// Two settings that contradict each other.
    #[error("{0}")]
    Conflict(String),
    /// A value that does not parse.
    #[error("invalid {what} {value:?}: {hint}")]
    Parse {
        /// What was being parsed.
        what: &'static str,
        /// The text given.
        value: String,
        /// How to write it.
        hint: &'static str,
    },
}

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
