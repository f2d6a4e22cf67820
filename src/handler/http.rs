//! The HTTP handler: POSTs each job (or, batched, a JSON array of jobs) to a URL, which
//! makes weir a webhook dispatcher that protects the service it calls.
//!
//! What the response means for the job, and for the adaptive limiter:
//!
//! | response                          | job                           | limiter |
//! |-----------------------------------|-------------------------------|---------|
//! | 2xx                               | acked (while the queue keeps completed jobs, the body's first 512 bytes are its result) | latency sample |
//! | 429, 503                          | deferred, not charged an attempt: back after `Retry-After` (seconds or HTTP date, capped by the pool's `max_defer_delay`), else backoff | overload (by default) |
//! | timeout, connection refused or reset | retried with backoff       | overload |
//! | other 5xx, 408, other connection errors | retried with backoff    | the job's failure |
//! | other 4xx, 3xx (redirects are not followed) | dead-lettered with the status and the first 512 bytes of the body | the job's failure |
//!
//! In batch mode a 2xx answer may settle each job on its own: a JSON body
//! `{"outcomes":[{"i":0,"status":"ok"},{"id":"..","status":"retry","after_ms":5000}, ...]}`
//! (statuses `ok`, `retry`, `fail`, `defer`; see `items.rs` and docs/http-handler.md).
//!
//! Every answered failure carries its status ([`JobError::status`]), and the limiter's
//! `overload_status` setting (CLI `--overload-status`, default 429,503) decides which
//! statuses are congestion: add 502,504 when a gateway answers them under load. A
//! plain 500 is one broken request, not an overloaded service.
//!
//! Each job is sent as `{"id","kind","attempt","max_attempts","trace_id"?,"payload"}` with
//! `Idempotency-Key: <job id>` (delivery is at-least-once), the configured extra headers
//! (`headers.rs`: values may come from environment variables and stay redacted) and,
//! given a signing secret, `X-Weir-Signature` (`sign.rs`). Connections are pooled and
//! kept alive; bodies are read (up to 64 KiB) so a connection goes back to the pool.
//! `https://` runs on rustls with the `ring` provider (`tls.rs`), trusting the system's
//! roots or only a private CA ([`HttpConfig::ca_file`]).

use crate::handler::{BatchHandler, Handler, JobError, JobResult};
use crate::queue::envelope::Job;
use crate::redis::conn::{redact_in, redact_url};
use futures_util::future::BoxFuture;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use serde::Serialize;
use serde_json::value::RawValue;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod headers;
mod items;
mod sign;
mod tls;
pub use headers::{HttpHeader, SIGNATURE_HEADER, Secret};
use sign::Signer;

/// Longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// Most bytes of an error body kept in the dead-letter reason.
const SNIPPET: usize = 512;
/// Most bytes of a success body read to free the connection (past it, it is closed).
const DRAIN: usize = 64 * 1024;

pub use crate::error::HttpError;

/// Settings of the HTTP handler.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// Where to POST (`http://host[:port]/path`).
    pub url: String,
    /// Per-request timeout, connect included (default 30 s).
    pub timeout: Duration,
    /// Most jobs per POST when batched (default 100).
    pub max_batch: usize,
    /// Extra headers sent with every request (default none).
    pub headers: Vec<HttpHeader>,
    /// For `https://`: a PEM file of the CA(s) to trust instead of the system's roots
    /// (default none: the system's roots).
    pub ca_file: Option<PathBuf>,
    /// Sign every request body with this secret (see [`SIGNATURE_HEADER`]; default none).
    pub sign_secret: Option<Secret>,
}

impl HttpConfig {
    /// Settings for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            timeout: Duration::from_secs(30),
            max_batch: 100,
            headers: Vec::new(),
            ca_file: None,
            sign_secret: None,
        }
    }
}

/// POSTs each job to a URL. [`HttpHandler::batched`] gives the batch form.
#[derive(Clone, Debug)]
pub struct HttpHandler {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: reqwest::Client,
    url: reqwest::Url,
    /// For `https://`: the client's TLS settings, which the start-up probe uses too.
    tls: Option<Arc<rustls::ClientConfig>>,
    signer: Option<Signer>,
    config: HttpConfig,
}

impl HttpHandler {
    /// A handler for `config.url`; checks the URL, and for `https://` reads the CA file.
    pub fn new(config: HttpConfig) -> Result<Self, HttpError> {
        let bad = |reason: String| HttpError::Url {
            url: redact_url(&config.url),
            reason: redact_in(&reason, &config.url),
        };
        let url = reqwest::Url::parse(&config.url).map_err(|e| bad(e.to_string()))?;
        let roots = match url.scheme() {
            "http" => None,
            "https" => Some(tls::roots(config.ca_file.as_deref())?),
            s => return Err(bad(format!("scheme {s:?} is not http or https"))),
        };
        let https = roots.is_some();
        let tls = Arc::new(tls::client_config(
            roots.unwrap_or_else(rustls::RootCertStore::empty),
        )?);
        if config.max_batch == 0 {
            return Err(bad("batch size must be at least 1".into()));
        }
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            // A redirected POST may become a GET without the job: treat 3xx as final.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("weir/", env!("CARGO_PKG_VERSION")))
            .tls_backend_preconfigured(rustls::ClientConfig::clone(&tls))
            .build()?;
        let signer = config.sign_secret.as_ref().map(Signer::new);
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                url,
                tls: https.then_some(tls),
                signer,
                config,
            }),
        })
    }

    /// Checks that the handler's host takes connections and, for `https://`, completes a
    /// TLS handshake with the configured roots: a typo, a service that is not up or a
    /// wrong CA is one error before any job is fetched, rather than every job failing.
    /// No request is sent, so the service sees nothing it could take for a job. Skipped
    /// when requests go through a proxy (`http_proxy`, `https_proxy`, `all_proxy`): the
    /// proxy, not the host, is what a connect would reach.
    pub async fn probe(&self, timeout: Duration) -> Result<(), HttpError> {
        let url = &self.inner.url;
        let vars = ["http_proxy", "https_proxy", "all_proxy"];
        let proxied = vars.iter().any(|v| {
            [v.to_string(), v.to_uppercase()]
                .iter()
                .any(|v| std::env::var_os(v).is_some_and(|p| !p.is_empty()))
        });
        if proxied {
            tracing::debug!("requests go through a proxy: the handler's host is not checked");
            return Ok(());
        }
        let fail = |reason: String| HttpError::Unreachable {
            url: redact_url(url.as_str()),
            reason: redact_in(&reason, url.as_str()),
        };
        let host = url.host_str().ok_or_else(|| fail("the URL has no host".into()))?;
        let host = host.trim_start_matches('[').trim_end_matches(']'); // IPv6 literal
        let port = url.port_or_known_default().unwrap_or(80);
        tls::probe(host, port, self.inner.tls.clone(), timeout)
            .await
            .map_err(fail)
    }

    /// The batch form: one POST of a JSON array per call, one outcome for all its jobs.
    pub fn batched(self) -> HttpBatch {
        HttpBatch(self)
    }
}

/// [`HttpHandler`] posting arrays of jobs.
#[derive(Clone, Debug)]
pub struct HttpBatch(HttpHandler);

#[derive(Serialize)]
struct Body<'a> {
    id: &'a str,
    kind: &'a str,
    attempt: u32,
    max_attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
    payload: &'a RawValue,
}

impl<'a> From<&'a Job> for Body<'a> {
    fn from(j: &'a Job) -> Self {
        Body {
            id: &j.id,
            kind: &j.kind,
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            trace_id: j.trace_id.as_deref(),
            payload: &j.payload,
        }
    }
}

impl Handler for HttpHandler {
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let body = serde_json::to_vec(&Body::from(&job)).map_err(|e| JobError::fatal(e.to_string()))?;
            outcome(inner.send(body, Some(&job.id)).await?, Some(&job)).await
        })
    }
}

impl BatchHandler for HttpBatch {
    fn call(&self, jobs: Vec<Job>) -> BoxFuture<'static, Vec<JobResult>> {
        let inner = self.0.inner.clone();
        Box::pin(async move {
            let bodies: Vec<Body<'_>> = jobs.iter().map(Body::from).collect();
            let n = jobs.len();
            let body = match serde_json::to_vec(&bodies) {
                Ok(body) => body,
                Err(e) => return vec![Err(JobError::fatal(e.to_string())); n],
            };
            match inner.send(body, None).await {
                Ok(mut resp) if resp.status().is_success() => {
                    let json = resp
                        .headers()
                        .get(CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|v| v.trim_start().starts_with("application/json"));
                    let body = read_bytes(&mut resp, items::ANSWER_MAX).await;
                    items::results(&body, json, &jobs)
                }
                Ok(resp) => vec![outcome(resp, None).await; n],
                Err(e) => vec![Err(e); n],
            }
        })
    }

    fn max_batch(&self) -> usize {
        self.0.inner.config.max_batch
    }
}

impl Inner {
    /// Sends the POST; a transport failure is the job's error.
    async fn send(&self, body: Vec<u8>, key: Option<&str>) -> Result<Response, JobError> {
        let mut req = self
            .client
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json");
        if let Some(k) = key {
            req = req.header("idempotency-key", k);
        }
        for h in &self.config.headers {
            let (name, value) = h.pair();
            req = req.header(name, value);
        }
        if let Some(s) = &self.signer {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            req = req.header(SIGNATURE_HEADER, s.header(now.as_secs(), &body));
        }
        req.body(body).send().await.map_err(|e| self.transport_error(e))
    }

    /// The error of a request that got no response. Its message is stored with the job
    /// (last error, dead-letter reason), so the URL's credentials never are.
    fn transport_error(&self, e: reqwest::Error) -> JobError {
        let t = humantime::format_duration(self.config.timeout);
        let url = self.url.as_str();
        let chain = || redact_in(&source_chain(&e), url);
        if e.is_timeout() {
            JobError::overloaded(format!("HTTP request timed out after {t}"))
        } else if e.is_connect() {
            JobError::overloaded(format!("cannot connect to {}: {}", redact_url(url), chain()))
        } else if was_reset(&e) {
            JobError::overloaded(format!("HTTP connection reset: {}", chain()))
        } else {
            JobError::retry(format!("HTTP request failed: {}", chain()))
        }
    }
}

/// What a response means for the job (see the module table). A 2xx answer's first
/// [`SNIPPET`] bytes are `job`'s result, while its queue keeps completed jobs.
async fn outcome(mut resp: Response, job: Option<&Job>) -> JobResult {
    let status = resp.status();
    if status.is_success() {
        let body = read_up_to(&mut resp, DRAIN).await;
        if let Some(job) = job.filter(|j| j.keeps_result()) {
            job.set_result_text(crate::queue::scripts::cut_text(body, SNIPPET));
        }
        return Ok(());
    }
    let retry_after = retry_after(resp.headers(), SystemTime::now());
    let snippet = read_up_to(&mut resp, SNIPPET).await;
    let msg = if snippet.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {snippet}")
    };
    let e = match status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
            JobError::backpressure(msg, retry_after)
        }
        StatusCode::REQUEST_TIMEOUT => JobError::retry(msg),
        s if s.is_server_error() => JobError::retry(msg),
        _ => JobError::fatal(msg),
    };
    Err(e.with_status(status.as_u16()))
}

/// True when an I/O error in the chain says the peer reset or aborted the connection
/// (an overloaded server shedding connections), classified by kind, not message text.
fn was_reset(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionRefused, ConnectionReset};
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | ConnectionRefused | BrokenPipe
            )
        {
            return true;
        }
        cur = c.source();
    }
    false
}

/// The first `max` bytes of the body.
async fn read_bytes(resp: &mut Response, max: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    while buf.len() < max {
        match resp.chunk().await {
            Ok(Some(c)) => buf.extend_from_slice(&c),
            _ => break,
        }
    }
    buf.truncate(max);
    buf
}

/// The first `max` bytes of the body as text (lossy, cut on a character boundary).
async fn read_up_to(resp: &mut Response, max: usize) -> String {
    let buf = read_bytes(resp, max).await;
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    if text.ends_with('\u{FFFD}') && buf.len() == max {
        text.pop();
    }
    text
}

/// `Retry-After` as delay-seconds or an HTTP date, capped at an hour.
fn retry_after(h: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let v = h.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let d = match v.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => httpdate::parse_http_date(v)
            .ok()?
            .duration_since(now)
            .unwrap_or_default(),
    };
    Some(d.min(MAX_RETRY_AFTER))
}

/// The error with its causes, which reqwest keeps in the source chain.
fn source_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests;
