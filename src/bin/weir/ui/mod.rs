//! `weir ui`: the web UI. Server-rendered pages over the library's admin layer
//! (`weir::queue::admin`), the same calls the commands make, and JSON endpoints under `/api/`
//! that return the same types as `--json` (docs/cli-json.md).
//!
//! Requests pass, in order: the security headers every answer gets, the Host check
//! (without `--auth`, only loopback host names: a page of another site that rebinds its
//! name to 127.0.0.1 is refused), authentication (`--auth`), then the route. Every
//! action is a POST whose form carries this process's CSRF token and whose Origin, when
//! the browser sends one, is this server (see [`guard`]).
//!
//! Routes: `/` (queues), `/queue` (a queue's charts and jobs by state; the dead-letter
//! queue is its `dead` tab), `/job`, `/workers`, `/limits`, `/cron`; actions under `/queue/`, `/jobs/`,
//! `/dead/`, `/limits/`; `/api/queues`, `/api/jobs`, `/api/job`, `/api/workers`, `/api/samples`.

mod actions;
mod api;
mod charts;
mod cron;
mod finders;
mod guard;
mod html;
mod job;
mod limits;
mod pages;
mod state;
mod workers;

use crate::{Common, parse_duration};
use axum::Router;
use axum::routing::{get, post};
use clap::Args;
use guard::Auth;
use state::App;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

/// `weir ui`.
#[derive(Args, Debug)]
pub(crate) struct UiArgs {
    #[command(flatten)]
    pub common: Common,
    /// Address to serve on (IP:PORT). Loopback by default; any other address needs --auth.
    #[arg(long, default_value = "127.0.0.1:9465")]
    pub addr: SocketAddr,
    /// Who may use the UI: `basic:USER:PASSWORD_VAR` (HTTP basic auth; the password is
    /// read from the environment variable PASSWORD_VAR) or `token:TOKEN_VAR` (the token
    /// read from TOKEN_VAR, sent as `Authorization: Bearer TOKEN`, or as the password of
    /// basic auth with any user name). Required for a non-loopback --addr.
    #[arg(long, value_name = "SPEC")]
    pub auth: Option<String>,
    /// How often pages refresh themselves (0s: never).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub refresh: Duration,
}

pub(crate) async fn run(a: UiArgs) -> crate::error::Result<ExitCode> {
    let auth = a.auth.as_deref().map(Auth::from_spec).transpose()?;
    if auth.is_none() && !a.addr.ip().is_loopback() {
        return Err(crate::usage(format!(
            "--addr {} is not a loopback address: serving the UI beyond this machine needs \
             --auth basic:USER:PASSWORD_VAR or --auth token:TOKEN_VAR (the secret is read \
             from that environment variable)",
            a.addr
        )));
    }
    let conn = a.common.redis()?.connect().await?;
    let listener = tokio::net::TcpListener::bind(a.addr)
        .await
        .map_err(|e| crate::failure(format!("cannot listen on {}: {e}", a.addr)))?;
    let app = App::new(conn, auth, a.refresh);
    tracing::info!("weir ui on http://{} ({})", a.addr, app.auth_note());
    serve(listener, router(app)).await;
    Ok(ExitCode::SUCCESS)
}

/// How long a client has to send a request's head: a slow client (slowloris) is closed
/// then, before authentication, rather than holding a connection for minutes.
pub(crate) const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Connections served at once; more are closed as they come.
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// Serves `router` on `listener` until SIGINT or SIGTERM, then lets the requests in
/// progress finish (for at most [`HEADER_TIMEOUT`]).
async fn serve(listener: tokio::net::TcpListener, router: Router) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::server::graceful::GracefulShutdown;
    use hyper_util::service::TowerToHyperService;
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let stop = shutdown();
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors, say: wait rather than spin.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue; // dropped: closed at once
        };
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
        let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(router.clone()));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    let _ = tokio::time::timeout(HEADER_TIMEOUT, graceful.shutdown()).await;
}

fn router(app: App) -> Router {
    use axum::middleware::{from_fn_with_state, map_response};
    Router::new()
        .route("/", get(pages::overview))
        .route("/queue", get(pages::queue))
        .route("/job", get(job::page))
        .route("/workers", get(workers::workers))
        .route("/limits", get(limits::show))
        .route("/cron", get(cron::cron))
        .route("/queue/pause", post(actions::pause))
        .route("/queue/resume", post(actions::resume))
        .route("/jobs/delete", post(actions::delete))
        .route("/jobs/run-now", post(actions::run_now))
        .route("/dead/requeue", post(actions::dead_requeue))
        .route("/dead/delete", post(actions::dead_delete))
        .route("/limits/set", post(limits::set))
        .route("/limits/clear", post(limits::clear))
        .route("/api/queues", get(api::queues))
        .route("/api/jobs", get(api::jobs))
        .route("/api/job", get(api::job))
        .route("/api/workers", get(api::workers))
        .route("/api/samples", get(api::samples))
        .route("/static/ui.css", get(html::css))
        .route("/static/ui.js", get(html::js))
        .fallback(pages::not_found)
        .layer(from_fn_with_state(app.clone(), guard::check))
        .layer(map_response(guard::headers))
        .with_state(app)
}

/// Resolves on SIGINT or SIGTERM: the server stops taking connections and finishes the
/// requests it has.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("weir ui: shutting down");
}
