//! The cron page: a queue's schedules (`weir cron list`), each with its next tick and the
//! job its last tick enqueued (`cron:<name>:<tick ms>`, linked while it is still in the
//! queue; none for a schedule that has not ticked since it was stored).

use super::html::{job_link, page, query, when};
use super::pages::{PageQuery, render};
use super::state::{App, Failure};
use axum::extract::{Query, State};
use axum::response::Response;
use maud::html;
use weir::Schedules;
use weir::queue::cron::When;
use weir::queue::json::Timestamp;

pub(crate) async fn cron(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    render(&app, view(&app, &q).await)
}

async fn view(app: &App, q: &PageQuery) -> Result<Response, Failure> {
    let name = q.queue()?;
    let list = Schedules::new(app.conn(), name)?.list().await?;
    // Redis's clock, the one the consumers fire by.
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(&mut app.conn())
        .await
        .map_err(weir::Error::from)?;
    let now = Timestamp(secs * 1000 + micros / 1000);
    // Each schedule's last job, if it is still in the queue (done jobs leave no trace).
    let mut rows = Vec::with_capacity(list.len());
    for (s, stored) in list {
        // The last fired tick; a schedule added or changed holds the time it was stored
        // instead (ticks before it count as fired), which is no tick and fired no job.
        let last = stored.filter(|&t| s.next_tick_after(t.saturating_sub(1)) == Some(t));
        let job = match last {
            Some(t) => {
                let id = format!("cron:{}:{t}", s.name);
                let found = app.queue(name)?.job(&id).await?;
                Some((id, found.map(|d| d.job.state)))
            }
            None => None,
        };
        rows.push((s, (last, stored), job));
    }
    let fields = [("queue", name)];
    let body = html! {
        div.head {
            h1 { "Cron schedules of " (name) }
            div.tools { a.button href={ "/queue?" (query(&fields)) } { "Queue" } }
        }
        @if rows.is_empty() {
            p.empty { "No schedules. Add one with " code { "weir cron add --queue " (name) " NAME --every 1h --kind KIND" } "." }
        } @else {
            table.data #schedules {
                thead { tr {
                    th { "Name" } th { "When" } th { "Kind" } th { "Next tick" } th { "Last tick" } th { "Last job" }
                } }
                tbody {
                    @for (s, (last, stored), job) in &rows {
                        tr data-schedule=(s.name) {
                            td { (s.name) }
                            td { code { (describe(&s.when())) } }
                            td { (s.kind) }
                            td.next { (when(s.next_tick_after(now.0).map(Timestamp), now)) }
                            td {
                                @if last.is_some() { (when(last.map(Timestamp), now)) }
                                @else { span.muted { "none since it was stored " } (when(stored.map(Timestamp), now)) }
                            }
                            td.job {
                                @match job {
                                    None => { span.muted { "none yet" } }
                                    Some((id, Some(state))) => { a href=(job_link(name, id)) { code { (id) } } " " span.badge { (super::pages::label(*state)) } }
                                    Some((id, None)) => { code { (id) } " " span.muted { "(done: no longer in the queue)" } }
                                }
                            }
                        }
                    }
                }
            }
            p.muted { "Consumers of the queue fire the schedules; with none running, nothing fires." }
        }
    };
    Ok(page(app, &format!("Cron of {name}"), "queues", body))
}

/// A schedule's timing in words: `every 1h`, `0 3 * * * (Europe/Berlin)`.
fn describe(w: &When) -> String {
    match w {
        When::Every(d) => format!("every {}", humantime::format_duration(*d)),
        When::Cron { pattern, tz } => format!("{pattern} ({})", tz.as_deref().unwrap_or("UTC")),
    }
}
