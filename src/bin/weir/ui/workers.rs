//! The workers page: the live consumers of one queue or of every queue (the limits page
//! shows a queue's own with [`workers_table`]).

use super::html::{page, queue_link, when};
use super::pages::{PageQuery, invalid_entries, render};
use super::state::App;
use axum::extract::{Query, State};
use axum::response::Response;
use maud::{Markup, html};
use weir::queue::json::WorkerList;

pub(crate) async fn workers(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    let r = async {
        let (names, invalid) = match q.queue.as_deref().filter(|n| !n.is_empty()) {
            Some(n) => (vec![n.to_owned()], Vec::new()),
            None => app.queues().entries().await?,
        };
        let mut lists = Vec::new();
        for n in &names {
            lists.push(app.queue(n)?.workers().await?);
        }
        let title = match q.queue.as_deref() {
            Some(n) if !n.is_empty() => format!("Workers of {n}"),
            _ => "Workers".to_owned(),
        };
        let body = html! { h1 { (title) } (invalid_entries(&invalid)) (workers_table(&lists)) };
        Ok(page(&app, &title, "workers", body))
    };
    render(&app, r.await)
}

/// The live consumers of the queues in `lists`, one row each.
pub(crate) fn workers_table(lists: &[WorkerList]) -> Markup {
    let total: usize = lists.iter().map(|l| l.workers.len()).sum();
    html! {
        @if total == 0 {
            p.empty { "No live consumers." }
        } @else {
            table.data #workers {
                thead { tr {
                    th { "Queue" } th { "Id" } th { "Host" } th.n { "Pid" } th { "Version" }
                    th { "Started" } th.n { "Limit" } th.n { "Running" } th.n { "Leased" } th { "Last beat" }
                } }
                tbody {
                    @for l in lists { @for w in &l.workers {
                        tr {
                            td { a href=(queue_link(&l.queue, "in_flight")) { (l.queue) } }
                            td.id { (w.id) } td { (w.host) } td.n { (w.pid) } td { (w.weir_version) }
                            td { (when(Some(w.started_at), l.now)) }
                            td.n { (w.concurrency_limit) } td.n { (w.running) } td.n { (w.leased) }
                            td { (when(Some(w.last_beat), l.now)) }
                        }
                    } }
                }
            }
        }
    }
}
