//! Per-key limits for the `keys` scenario: queue settings in the queue's settings hash
//! (`weir:{Q}:settings`, [`weir::queue::keys::QueueKeys::settings`]) that the fetch script is to
//! honour for each job key separately:
//!
//! ```text
//! key_concurrency "2"     at most that many jobs of each key leased at once, fleet-wide
//! key_rate        "5/s"   jobs of each key started per second, with key_burst
//! key_burst       "5"
//! key_concurrency:<key>, key_rate:<key>   overrides for one key (not set here)
//! ```
//!
//! Stored through [`weir::queue::settings::Settings`], as `weir limits set --per-key-*` stores them.

use weir::Conn;
use weir::Rate;
use weir::queue::settings::{Cleared, Settings};

/// The per-key limits a run stores (none: the unlimited baseline).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct KeyLimits {
    pub concurrency: Option<u64>,
    /// With the burst given (`--per-key-burst`), or `None` for the scripts' default.
    pub rate: Option<(Rate, Option<u32>)>,
}

impl KeyLimits {
    /// The settings hash fields and values.
    pub(crate) fn fields(&self) -> Vec<(&'static str, String)> {
        let mut f = Vec::new();
        if let Some(n) = self.concurrency {
            f.push(("key_concurrency", n.to_string()));
        }
        if let Some((r, burst)) = self.rate {
            f.push(("key_rate", r.spec()));
            if let Some(b) = burst {
                f.push(("key_burst", b.to_string()));
            }
        }
        f
    }

    /// What the report shows: the fields stored, or `null` for the unlimited baseline.
    pub(crate) fn describe(&self) -> serde_json::Value {
        let f = self.fields();
        if f.is_empty() {
            return serde_json::Value::Null;
        }
        f.into_iter()
            .map(|(k, v)| (k.to_owned(), serde_json::Value::from(v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

impl KeyLimits {
    /// The same limits as queue settings (a rate without `--per-key-burst` takes the
    /// settings' default burst, as `weir limits set` does).
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            key_concurrency: self.concurrency,
            key_rate: self
                .rate
                .map(|(r, burst)| r.with_burst(burst.unwrap_or_else(|| Settings::default_global_burst(&r)))),
            ..Settings::default()
        }
    }
}

/// Stores `limits` in `queue`'s settings, checked as `weir limits set` checks them
/// (nothing if there are none).
pub(crate) async fn store(conn: &Conn, queue: &str, limits: &KeyLimits) -> anyhow::Result<()> {
    if limits.fields().is_empty() {
        return Ok(());
    }
    Settings::update(&mut conn.clone(), queue, &limits.settings()).await?;
    Ok(())
}

/// Removes the queue's per-key limits, leaving its other settings.
pub(crate) async fn clear(conn: &Conn, queue: &str, limits: &KeyLimits) -> anyhow::Result<()> {
    if limits.fields().is_empty() {
        return Ok(());
    }
    Settings::clear_some(&mut conn.clone(), queue, &[Cleared::PerKey]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_the_settings_names() {
        assert!(KeyLimits::default().fields().is_empty());
        assert_eq!(KeyLimits::default().describe(), serde_json::Value::Null);
        let l = KeyLimits {
            concurrency: Some(2),
            rate: Some(("5/s".parse().unwrap(), Some(3))),
        };
        assert_eq!(
            l.fields(),
            [
                ("key_concurrency", "2".to_owned()),
                ("key_rate", "5/s".to_owned()),
                ("key_burst", "3".to_owned())
            ]
        );
    }
}
