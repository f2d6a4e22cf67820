//! How a finished job counts for the limiter: the one type the window records and the
//! rule classifies, kept apart from both so neither imports the other for it.

/// How a finished job counts for the limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// It succeeded: a latency sample.
    Success,
    /// It failed in a way that says the downstream is overloaded: a timeout, a refused
    /// or reset connection, backpressure. Counts toward the overload rate.
    Overload,
    /// It failed on its own (a plain 500, a 4xx, a handler error): counted, not
    /// congestion.
    Failure,
    /// The downstream answered this HTTP status: overload or failure by the rule's
    /// `overload_status` ([`super::AimdConfig::classify`], which the limiter applies
    /// before recording; a window given one directly counts a failure).
    Status(u16),
    /// It says nothing about the downstream (a panic, a declined job): no sample.
    Ignored,
}
