//! [`Timestamp`]: the admin answers' points in time, written as RFC 3339 in UTC with
//! milliseconds.

use serde::Serialize;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time, ms since the Unix epoch; serialized as an RFC 3339 string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// Milliseconds since the Unix epoch.
    pub fn as_ms(self) -> u64 {
        self.0
    }

    /// How long before `now` this was (zero if it is after `now`).
    pub fn age(self, now: Timestamp) -> Duration {
        Duration::from_millis(now.0.saturating_sub(self.0))
    }

    /// How long after `now` this is (zero if it is before `now`).
    pub fn until(self, now: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(now.0))
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = UNIX_EPOCH + Duration::from_millis(self.0);
        write!(f, "{}", humantime::format_rfc3339_millis(t))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Self {
        Timestamp(t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64))
    }
}
