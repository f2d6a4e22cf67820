//! The handlers `weir work` has built in: `noop`, `sleep:<duration>`, `print[:<duration>]`
//! and an HTTP(S) URL (each job POSTed there; see `weir::handler::http`), with the HTTP flags.

use crate::parse_duration;
use clap::Args;
use futures_util::future::BoxFuture;
use std::path::PathBuf;
use std::time::Duration;
use weir::handler::exec::{ExecConfig, ExecHandler};
use weir::handler::http::{HttpConfig, HttpHandler, HttpHeader, Secret};
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
    /// Sends jobs to worker processes running this command (`sh -c`), see `weir::handler::exec`.
    Exec(String),
}

pub(crate) fn parse_handler(s: &str) -> Result<BuiltIn, String> {
    if s.starts_with("http://") || s.starts_with("https://") {
        return Ok(BuiltIn::Http(s.to_owned()));
    }
    if let Some(cmd) = s.strip_prefix("exec:") {
        if cmd.trim().is_empty() {
            return Err("exec: needs a command, as in exec:'node worker.js'".into());
        }
        return Ok(BuiltIn::Exec(cmd.to_owned()));
    }
    match s.split_once(':') {
        None if s == "noop" => Ok(BuiltIn::Noop),
        None if s == "print" => Ok(BuiltIn::Print(Duration::ZERO)),
        Some(("sleep", d)) => Ok(BuiltIn::Sleep(parse_duration(d)?)),
        Some(("print", d)) => Ok(BuiltIn::Print(parse_duration(d)?)),
        _ => Err(format!(
            "unknown handler {s:?}: use noop, sleep:<duration>, print[:<duration>] an http(s):// URL or exec:<command>"
        )),
    }
}

/// How `weir work` calls an HTTP handler (its `--http-*`, `--header` and
/// `--sign-secret-env` flags).
#[derive(Args, Debug, Clone)]
pub(crate) struct HttpArgs {
    /// HTTP handler: per-request timeout.
    #[arg(long, default_value = shown(http_defaults().timeout), value_parser = parse_duration)]
    pub http_timeout: Duration,
    /// HTTP handler: POST JSON arrays of up to N jobs (default 100) instead of one per request.
    #[arg(
        long,
        value_name = "N",
        num_args = 0..=1,
        default_missing_value = http_defaults().max_batch.to_string()
    )]
    pub batch_http: Option<usize>,
    /// HTTP handler: a header sent with every request, as 'Name: value' (repeatable).
    /// `$VAR` or `${VAR}` in the value is read from the environment (`$$` is a literal
    /// `$`), so secrets stay out of the command line: --header 'Authorization: Bearer
    /// $TOKEN' (in single quotes). Such values, and those of Authorization and Cookie,
    /// are never logged.
    #[arg(long, value_name = "'NAME: VALUE'")]
    pub header: Vec<String>,
    /// HTTP handler, https://: PEM file of the CA(s) to trust instead of the system's roots.
    #[arg(long, value_name = "FILE", env = "WEIR_HTTP_CA")]
    pub http_ca: Option<PathBuf>,
    /// HTTP handler: sign each request body with the secret in this environment variable:
    /// header `X-Weir-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
    #[arg(long, value_name = "VAR")]
    pub sign_secret_env: Option<String>,
}

/// How `weir work` runs an exec handler (its `--exec-*` flags).
#[derive(Args, Debug, Clone)]
pub(crate) struct ExecArgs {
    /// Exec handler: worker processes to run (each started as `sh -c <command>`).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub exec_procs: usize,
    /// Exec handler: most jobs per batch frame.
    #[arg(long, value_name = "N", default_value_t = ExecConfig::new("").max_batch)]
    pub exec_batch: usize,
    /// Exec handler: most jobs in flight in one process, over all its batches.
    #[arg(long, value_name = "N", default_value_t = ExecConfig::new("").inflight)]
    pub exec_inflight: usize,
}

impl ExecArgs {
    /// The flags' defaults.
    pub(crate) fn defaults() -> Self {
        let c = ExecConfig::new("");
        Self {
            exec_procs: c.procs,
            exec_batch: c.max_batch,
            exec_inflight: c.inflight,
        }
    }
}

/// What `registry` builds besides the registry: the handlers that need a probe or a shutdown.
#[derive(Debug, Default)]
pub(crate) struct Extras {
    /// The HTTP handler, for [`HttpHandler::probe`].
    pub http: Option<HttpHandler>,
    /// The exec handler, for [`ExecHandler::shutdown`].
    pub exec: Option<ExecHandler>,
}

impl HttpArgs {
    /// The flags' defaults (the library's).
    pub(crate) fn defaults() -> Self {
        Self {
            http_timeout: http_defaults().timeout,
            batch_http: None,
            header: Vec::new(),
            http_ca: None,
            sign_secret_env: None,
        }
    }

    /// The handler's settings for `url`; reads the variables the headers and the secret
    /// name.
    fn config(&self, url: &str) -> crate::error::Result<HttpConfig> {
        let mut config = HttpConfig::new(url);
        config.timeout = self.http_timeout;
        config.max_batch = self.batch_http.unwrap_or(config.max_batch);
        config.headers = self
            .header
            .iter()
            .map(|h| HttpHeader::parse(h))
            .collect::<Result<_, _>>()?;
        config.ca_file = self.http_ca.clone();
        if let Some(var) = &self.sign_secret_env {
            config.sign_secret = Some(Secret::from_env(var)?);
        }
        Ok(config)
    }
}

/// A default duration as `--help` shows it (and `parse_duration` reads it back).
pub(crate) fn shown(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// The HTTP handler's defaults.
pub(crate) fn http_defaults() -> HttpConfig {
    HttpConfig::new(String::new())
}

impl BuiltIn {
    /// A registry sending every kind to this handler, and the handlers that need a probe
    /// or a shutdown. An exec handler's processes start here (on the current runtime).
    pub(crate) fn registry(
        &self,
        http: &HttpArgs,
        exec: &ExecArgs,
        job_timeout: Option<Duration>,
    ) -> crate::error::Result<(Registry, Extras)> {
        let http_only = http.batch_http.is_some()
            || !http.header.is_empty()
            || http.http_ca.is_some()
            || http.sign_secret_env.is_some();
        if http_only && !matches!(self, BuiltIn::Http(_)) {
            return Err(crate::usage(
                "--batch-http, --header, --http-ca and --sign-secret-env need an http(s):// handler",
            ));
        }
        Ok(match self {
            BuiltIn::Noop => (Registry::new().fallback(Local(None)), Extras::default()),
            BuiltIn::Sleep(d) => (Registry::new().fallback(Local(Some(*d))), Extras::default()),
            BuiltIn::Print(d) => (Registry::new().fallback(Print(*d)), Extras::default()),
            BuiltIn::Exec(cmd) => {
                let mut c = ExecConfig::new(cmd.clone());
                c.procs = exec.exec_procs;
                c.max_batch = exec.exec_batch;
                c.inflight = exec.exec_inflight;
                c.job_timeout = job_timeout;
                let h = ExecHandler::start(c)?;
                let extras = Extras {
                    exec: Some(h.clone()),
                    ..Extras::default()
                };
                (Registry::new().fallback_batch(h), extras)
            }
            BuiltIn::Http(url) => {
                let h = HttpHandler::new(http.config(url)?)?;
                let registry = match http.batch_http {
                    Some(_) => Registry::new().fallback_batch(h.clone().batched()),
                    None => Registry::new().fallback(h.clone()),
                };
                let extras = Extras {
                    http: Some(h),
                    ..Extras::default()
                };
                (registry, extras)
            }
        })
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
