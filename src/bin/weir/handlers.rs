//! The handlers `weir work` has built in: `noop`, `sleep:<duration>`, `print[:<duration>]`
//! and an HTTP URL (each job POSTed there; see `weir::http`).

use crate::parse_duration;
use futures_util::future::BoxFuture;
use std::time::Duration;
use weir::http::{HttpConfig, HttpHandler};
use weir::{Handler, Job, JobResult, Registry};

/// A built-in handler, as `--handler` names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BuiltIn {
    /// Acks every job at once.
    Noop,
    /// Sleeps, then acks.
    Sleep(Duration),
    /// Sleeps, prints the job as a JSON line on standard output, then acks: a trace of
    /// every job run, for debugging a queue or piping jobs to another tool.
    Print(Duration),
    /// POSTs each job to this URL.
    Http(String),
}

pub(crate) fn parse_handler(s: &str) -> Result<BuiltIn, String> {
    if s.starts_with("http://") || s.starts_with("https://") {
        return Ok(BuiltIn::Http(s.to_owned()));
    }
    match s.split_once(':') {
        None if s == "noop" => Ok(BuiltIn::Noop),
        None if s == "print" => Ok(BuiltIn::Print(Duration::ZERO)),
        Some(("sleep", d)) => Ok(BuiltIn::Sleep(parse_duration(d)?)),
        Some(("print", d)) => Ok(BuiltIn::Print(parse_duration(d)?)),
        _ => Err(format!(
            "unknown handler {s:?}: use noop, sleep:<duration>, print[:<duration>] or an http:// URL"
        )),
    }
}

/// How `weir work` calls an HTTP handler.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HttpOptions {
    /// Per-request timeout.
    pub timeout: Duration,
    /// POST arrays of up to this many jobs instead of one job per request.
    pub batch: Option<usize>,
}

impl BuiltIn {
    /// A registry sending every kind to this handler.
    pub(crate) fn registry(&self, http: HttpOptions) -> weir::Result<Registry> {
        if http.batch.is_some() && !matches!(self, BuiltIn::Http(_)) {
            return Err(weir::Error::Config(
                "--batch-http needs an http:// handler".into(),
            ));
        }
        Ok(match self {
            BuiltIn::Noop => Registry::new().fallback(Local(None)),
            BuiltIn::Sleep(d) => Registry::new().fallback(Local(Some(*d))),
            BuiltIn::Print(d) => Registry::new().fallback(Print(*d)),
            BuiltIn::Http(url) => {
                let mut config = HttpConfig::new(url);
                config.timeout = http.timeout;
                config.max_batch = http.batch.unwrap_or(config.max_batch);
                let h = HttpHandler::new(config)?;
                match http.batch {
                    Some(_) => Registry::new().fallback_batch(h.batched()),
                    None => Registry::new().fallback(h),
                }
            }
        })
    }

    /// For an HTTP handler, checks that its host takes TCP connections, so a typo in the
    /// URL or a service that is not up is one line of error (exit 1) before any job is
    /// fetched, rather than every job failing into the dead-letter queue. A connect and
    /// nothing more: no request is sent, so the service sees nothing it could take for a
    /// job. Skipped when requests go through a proxy (`http_proxy`, `all_proxy`): the
    /// proxy, not the host, is what a connect would reach.
    pub(crate) async fn check_reachable(&self, timeout: Duration) -> weir::Result<()> {
        let BuiltIn::Http(url) = self else {
            return Ok(());
        };
        let proxied = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|p| !p.is_empty()));
        if proxied {
            tracing::debug!("requests go through a proxy: the handler's host is not checked");
            return Ok(());
        }
        let fail = |why: String| {
            crate::failure(format!(
                "cannot reach the handler at {url}: {why}; no job was fetched"
            ))
        };
        // The registry parsed the URL already; a URL without a host fails here, not later.
        let parsed = reqwest::Url::parse(url).map_err(|e| fail(e.to_string()))?;
        let host = parsed
            .host_str()
            .ok_or_else(|| fail("the URL has no host".into()))?;
        let host = host.trim_start_matches('[').trim_end_matches(']'); // IPv6 literal
        let port = parsed.port_or_known_default().unwrap_or(80);
        let connect = async {
            let mut last = None;
            for addr in tokio::net::lookup_host((host, port)).await? {
                match tokio::net::TcpStream::connect(addr).await {
                    Ok(_) => return Ok(()),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| std::io::Error::other("the host name has no address")))
        };
        match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(fail(e.to_string())),
            Err(_) => Err(fail(format!(
                "no connection within {}",
                humantime::format_duration(timeout)
            ))),
        }
    }
}

/// `print` or `print:<duration>`.
struct Print(Duration);

impl Handler for Print {
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult> {
        let d = self.0;
        Box::pin(async move {
            if !d.is_zero() {
                tokio::time::sleep(d).await;
            }
            print_job(&job)
        })
    }
}

/// A line of `print`: the payload as the producer wrote it, byte for byte (a JSON value
/// would round big numbers and reorder keys).
#[derive(serde::Serialize)]
struct Printed<'a> {
    id: &'a str,
    kind: &'a str,
    attempt: u32,
    payload: &'a serde_json::value::RawValue,
}

fn print_job(job: &Job) -> JobResult {
    use std::io::Write;
    let line = Printed {
        id: &job.id,
        kind: &job.kind,
        attempt: job.attempt,
        payload: &job.payload,
    };
    let line = serde_json::to_string(&line).map_err(|e| weir::JobError::fatal(e.to_string()))?;
    writeln!(std::io::stdout().lock(), "{line}")
        .map_err(|e| weir::JobError::retry(format!("cannot write to standard output: {e}")))
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
