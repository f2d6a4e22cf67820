//! The handlers `weir work` has built in: `noop`, `sleep:<duration>`, and an HTTP URL
//! (each job POSTed there; see `weir::http`).

use crate::parse_duration;
use futures_util::future::BoxFuture;
use std::time::Duration;
use weir::http::{HttpConfig, HttpHandler};
use weir::{Handler, Job, JobResult, Registry};

/// A built-in handler, as `--handler` names it.
#[derive(Debug, Clone, PartialEq)]
pub enum BuiltIn {
    /// Acks every job at once.
    Noop,
    /// Sleeps, then acks.
    Sleep(Duration),
    /// POSTs each job to this URL.
    Http(String),
}

pub fn parse_handler(s: &str) -> Result<BuiltIn, String> {
    if s.starts_with("http://") || s.starts_with("https://") {
        return Ok(BuiltIn::Http(s.to_owned()));
    }
    match s.split_once(':') {
        None if s == "noop" => Ok(BuiltIn::Noop),
        Some(("sleep", d)) => Ok(BuiltIn::Sleep(parse_duration(d)?)),
        _ => Err(format!(
            "unknown handler {s:?}: use noop, sleep:<duration> or an http:// URL"
        )),
    }
}

/// How `weir work` calls an HTTP handler.
#[derive(Debug, Clone, Copy)]
pub struct HttpOptions {
    /// Per-request timeout.
    pub timeout: Duration,
    /// POST arrays of up to this many jobs instead of one job per request.
    pub batch: Option<usize>,
}

impl BuiltIn {
    /// A registry sending every kind to this handler.
    pub fn registry(&self, http: HttpOptions) -> weir::Result<Registry> {
        if http.batch.is_some() && !matches!(self, BuiltIn::Http(_)) {
            return Err(weir::Error::Config(
                "--batch-http needs an http:// handler".into(),
            ));
        }
        Ok(match self {
            BuiltIn::Noop => Registry::new().fallback(Local(None)),
            BuiltIn::Sleep(d) => Registry::new().fallback(Local(Some(*d))),
            BuiltIn::Http(url) => {
                let config = HttpConfig {
                    timeout: http.timeout,
                    max_batch: http.batch.unwrap_or(100),
                    ..HttpConfig::new(url)
                };
                let h = HttpHandler::new(config)?;
                match http.batch {
                    Some(_) => Registry::new().fallback_batch(h.batched()),
                    None => Registry::new().fallback(h),
                }
            }
        })
    }
}

/// `noop` (no sleep) or `sleep:<duration>`.
struct Local(Option<Duration>);

impl Handler for Local {
    fn call(&self, _job: Job) -> BoxFuture<'static, JobResult> {
        match self.0 {
            None => Box::pin(std::future::ready(Ok(()))),
            Some(d) => Box::pin(async move {
                tokio::time::sleep(d).await;
                Ok(())
            }),
        }
    }
}
