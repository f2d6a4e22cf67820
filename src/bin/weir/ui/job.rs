//! One job's page (`/job?queue=Q&id=ID`): its state, attempts, lease, last error, runs
//! and envelope, with the actions it allows (`actions.rs`).

use super::html::{self, query, queue_link, when};
use super::pages::{PageQuery, attempts, label, render};
use super::state::{App, Failure};
use axum::extract::{Query, State};
use axum::response::Response;
use maud::{Markup, html};
use weir::queue::json::JobState;

/// One job's page: its facts and its envelope, with the actions it allows.
pub(crate) async fn page(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    let r = async {
        let name = q.queue()?;
        let id = q.id.as_deref().unwrap_or("");
        let Some(d) = app.queue(name)?.job(id).await? else {
            return Err(Failure::not_found(format!("no job {id} in queue {name}")));
        };
        let body = html! {
            div.head {
                h1 { "Job " (id) }
                div.tools { (super::actions::job_tools(&app, name, &d.job)) }
            }
            (q.flash())
            (job_facts(&d))
        };
        Ok(html::page(&app, id, "queues", body))
    };
    render(&app, r.await)
}

fn job_facts(d: &weir::queue::json::JobDetail) -> Markup {
    let j = &d.job;
    let envelope = match (&d.envelope, &d.envelope_text) {
        (Some(e), _) => serde_json::from_str::<serde_json::Value>(e.get())
            .and_then(|v| serde_json::to_string_pretty(&v))
            .unwrap_or_else(|_| e.get().to_owned()),
        (None, Some(t)) => t.clone(),
        (None, None) => String::new(),
    };
    html! {
        dl.facts {
            dt { "Queue" } dd { a href=(queue_link(&d.queue, j.state.as_str())) { (d.queue) } }
            @if let Some(l) = &j.lane { dt { "Lane" } dd { code { (l) } } }
            dt { "State" } dd.state { (label(j.state)) @if j.suspect { " (suspect: runs alone)" } @if j.parked { " (parked: waits for a slot of its key)" } }
            dt { "Kind" } dd { (j.kind.as_deref().unwrap_or("? (not a weir envelope)")) }
            @if let Some(k) = &j.key { dt { "Key" } dd { a href={ "/queue?" (query(&[("queue", d.queue.as_str()), ("state", j.state.as_str()), ("key", k)])) } { code { (k) } } } }
            dt { "Priority" } dd { (j.priority.unwrap_or("?")) }
            dt { "Failed attempts" } dd { (attempts(j)) }
            dt { "Enqueued" } dd { (when(j.enqueued_at, d.now)) }
            @if j.due_at.is_some() { dt { "Due" } dd { (when(j.due_at, d.now)) } }
            @if j.dead_at.is_some() { dt { "Dead since" } dd { (when(j.dead_at, d.now)) } }
            @if j.done_at.is_some() { dt { "Completed" } dd { (when(j.done_at, d.now)) } }
            @if let Some(l) = &d.lease {
                dt { "Lease ends" } dd { (when(Some(l.deadline), d.now)) }
                dt { "Held by" } dd {
                    @match &l.worker {
                        Some(w) => { "consumer " code { (w) } " (running)" }
                        None => { "a consumer that has not started it yet" }
                    }
                }
            }
            @if let Some(f) = &d.deferrals {
                dt { "Deferred" } dd { (crate::output::count(f.count, "time")) ", first " (when(Some(f.first_at), d.now)) }
            }
            dt { "Last error" } dd { pre.err { (j.last_error.as_deref().unwrap_or("–")) } }
            @if j.state == JobState::Done {
                dt { "Result" } dd { pre.result { (j.result.as_deref().unwrap_or("–")) } }
            }
        }
        h2 { "Runs" }
        @if d.history.is_empty() {
            p.empty { "No runs recorded (a job keeps its last runs once one fails, or while completed jobs are kept)." }
        } @else {
            table.data.runs {
                thead { tr { th { "Started" } th { "Ended" } th { "Worker" } th { "Outcome" } th { "Message" } } }
                tbody {
                    @for r in &d.history {
                        tr {
                            td { (when(Some(r.start), d.now)) }
                            td { (when(Some(r.end), d.now)) }
                            td { code { (r.worker) } }
                            td { (r.outcome) }
                            td.err title=(r.message) { (r.message) }
                        }
                    }
                }
            }
        }
        h2 { "Envelope" @if d.envelope.is_none() && d.envelope_text.is_some() { " (not valid JSON)" } }
        pre.envelope { (envelope) }
    }
}
