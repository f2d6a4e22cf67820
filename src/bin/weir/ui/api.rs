//! `/api/`: the JSON of the read commands, the same types `--json` prints
//! (docs/cli-json.md). Parameters are the commands' flags as query fields: `/api/jobs?
//! queue=Q&state=dead&kind=K&limit=20&cursor=C` is `weir jobs --queue Q --state dead
//! --kind K --limit 20 --cursor C --json`. A failure is a status with
//! `{"version": 1, "error": "..."}`.

use super::pages::PageQuery;
use super::state::{App, Failure};
use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use weir::queue::json::JSON_VERSION;

/// The longest `rate_window` one request may wait for.
const MAX_RATE_WINDOW: Duration = Duration::from_secs(10);

/// `/api/jobs` without a `limit`: `weir jobs`'s default.
const DEFAULT_LIMIT: usize = 20;

fn answer<T: Serialize>(r: Result<T, Failure>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(f) => {
            let body = serde_json::json!({ "version": JSON_VERSION, "error": f.message });
            (f.status, Json(body)).into_response()
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct QueuesQuery {
    rate_window: Option<String>,
}

/// `weir queues --json`. Without `rate_window`, rates cover the time since this server's
/// previous read (as the overview page shows them; `null` on the first read); with it
/// (`1s`), the counters are read twice that far apart, as the command does.
pub(crate) async fn queues(State(app): State<App>, Query(q): Query<QueuesQuery>) -> Response {
    let r = async {
        match q.rate_window.as_deref() {
            None => app.queue_list().await,
            Some(w) => {
                let w = crate::parse_duration(w).map_err(Failure::bad_request)?;
                if w > MAX_RATE_WINDOW {
                    return Err(Failure::bad_request(format!(
                        "rate_window is at most {}",
                        humantime::format_duration(MAX_RATE_WINDOW)
                    )));
                }
                Ok(app.queues().list(Some(w)).await?)
            }
        }
    };
    answer(r.await)
}

/// `weir jobs --json`.
pub(crate) async fn jobs(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    let r = async {
        let handle = app.queue(q.queue()?)?;
        let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
        Ok(handle
            .jobs_where(q.state()?, q.filter(), limit, q.cursor())
            .await?)
    };
    answer(r.await)
}

/// `weir job show --json`; 404 when there is no such job.
pub(crate) async fn job(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    let r = async {
        let name = q.queue()?;
        let id = q.id.as_deref().unwrap_or("");
        app.queue(name)?
            .job(id)
            .await?
            .ok_or_else(|| Failure::not_found(format!("no job {id} in queue {name}")))
    };
    answer(r.await)
}

/// The queue's history (`weir::queue::samples`): its samples, oldest first, and the rates
/// over the newest two (what the queue page's charts draw).
pub(crate) async fn samples(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    let r = async {
        let max = weir::queue::samples::SamplesConfig::DEFAULT_KEPT;
        Ok(app.queue(q.queue()?)?.samples(max).await?)
    };
    answer(r.await)
}

/// `weir workers --json`.
pub(crate) async fn workers(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    let r = async { Ok(app.queue(q.queue()?)?.workers().await?) };
    answer(r.await)
}
