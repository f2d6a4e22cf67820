//! The read pages: the queues overview and a queue's jobs by state (its `dead` tab is the
//! dead-letter queue, with its actions); one job's page is `job.rs`, the workers page
//! `workers.rs`.

use super::html::{age_ms, button, flash, job_link, page, query, queue_link, when};
use super::state::{App, Failure};
use axum::extract::{Query, State};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use weir::Stats;
use weir::queue::json::{JobFilter, JobPage, JobState, JobSummary, QueueList, Timestamp};
use weir::queue::samples::SamplesConfig;

/// Jobs per page unless `limit` says otherwise.
const PAGE: usize = 50;

/// The query of every page: which queue, state, kind and page, and an action's flash.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PageQuery {
    pub(crate) queue: Option<String>,
    pub(crate) state: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) key: Option<String>,
    pub(crate) cursor: Option<String>,
    pub(crate) limit: Option<usize>,
    pub(crate) id: Option<String>,
    did: Option<String>,
    n: Option<u64>,
    skipped: Option<u64>,
}

impl PageQuery {
    pub(crate) fn queue(&self) -> Result<&str, Failure> {
        self.queue
            .as_deref()
            .filter(|q| !q.is_empty())
            .ok_or_else(|| Failure::bad_request("no queue given (?queue=NAME)"))
    }

    /// The state asked for (ready when none).
    pub(crate) fn state(&self) -> Result<JobState, Failure> {
        match self.state.as_deref().filter(|s| !s.is_empty()) {
            None => Ok(JobState::Ready),
            Some(s) => JobState::parse(s).ok_or_else(|| {
                Failure::bad_request(format!("unknown state {s:?}: ready, delayed, in_flight or dead"))
            }),
        }
    }

    pub(crate) fn kind(&self) -> Option<&str> {
        self.kind.as_deref().filter(|k| !k.is_empty())
    }

    pub(crate) fn key(&self) -> Option<&str> {
        self.key.as_deref().filter(|k| !k.is_empty())
    }

    /// The kind and key filters asked for.
    pub(crate) fn filter(&self) -> JobFilter<'_> {
        JobFilter {
            kind: self.kind(),
            key: self.key(),
        }
    }

    pub(crate) fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref().filter(|c| !c.is_empty())
    }

    pub(crate) fn flash(&self) -> Markup {
        flash(
            self.did.as_deref(),
            self.n.unwrap_or(0),
            self.skipped.unwrap_or(0),
        )
    }
}

/// A page handler's answer: the page, or the error page.
pub(crate) fn render(app: &App, r: Result<Response, Failure>) -> Response {
    r.unwrap_or_else(|f| super::html::error_page(app, &f, true))
}

/// An action's answer: its redirect or confirmation page, or an error page that does not
/// reload itself.
pub(crate) fn done(app: &App, r: Result<Response, Failure>) -> Response {
    r.unwrap_or_else(|f| super::html::error_page(app, &f, false))
}

pub(crate) async fn not_found(State(app): State<App>) -> Response {
    render(&app, Err(Failure::not_found("no such page")))
}

pub(crate) async fn overview(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    let r = async {
        let list = app.queue_list().await?;
        Ok(page(&app, "Queues", "queues", overview_body(&list, q.flash())))
    };
    render(&app, r.await)
}

fn overview_body(list: &QueueList, flash: Markup) -> Markup {
    let rate = |q: &weir::queue::json::QueueSummary, f: fn(&weir::queue::json::Rates) -> f64| {
        q.rates
            .as_ref()
            .map_or("–".to_owned(), |r| format!("{:.1}", f(r)))
    };
    html! {
        h1 { "Queues" }
        (flash)
        (invalid_entries(&list.invalid))
        @if list.queues.is_empty() {
            p.empty { "No queues yet: a queue is listed from its first enqueue." }
        } @else {
            table.data #queues {
                thead { tr {
                    th { "Queue" } th.n { "Ready" } th.n { "High / normal / low" } th.n { "Delayed" }
                    th.n { "In flight" } th.n { "Dead" } th.n { "Oldest ready" }
                    th.n { "Enqueued/s" } th.n { "Acked/s" } th.n { "Failed/s" } th.n { "Acked" }
                } }
                tbody {
                    @for q in &list.queues {
                        tr data-queue=(q.name) {
                            td {
                                a href=(queue_link(&q.name, "ready")) { (q.name) }
                                @if q.paused { " " span.badge.paused { "paused" } }
                                @if let Some(n) = q.partitions { " " span.badge { (n) " partitions" } }
                            }
                            td.n { (q.ready.total) }
                            td.n.muted { (q.ready.high) " / " (q.ready.normal) " / " (q.ready.low) }
                            td.n { a href=(queue_link(&q.name, "delayed")) { (q.delayed) } }
                            td.n { a href=(queue_link(&q.name, "in_flight")) { (q.in_flight) } }
                            td.n { a href=(queue_link(&q.name, "dead")) class=[(q.dead > 0).then_some("bad")] { (q.dead) } }
                            td.n { (age_ms(q.oldest_ready_age_ms)) }
                            td.n { (rate(q, |r| r.enqueued_per_s)) }
                            td.n { (rate(q, |r| r.acked_per_s)) }
                            td.n { (rate(q, |r| r.retried_per_s + r.dead_per_s)) }
                            td.n.acked { (q.counters.get("acked").copied().unwrap_or(0)) }
                        }
                    }
                }
            }
            p.muted { "Rates are over the last period of each queue's history (the samples its consumers                        write every 10 s by default); – when no consumer sampled the queue lately." }
        }
    }
}

pub(crate) async fn queue(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    let r = async {
        let name = q.queue()?;
        let state = q.state()?;
        let handle = app.queue(name)?;
        let limit = q.limit.unwrap_or(PAGE);
        let stats = handle.stats().await?;
        let jobs = handle.jobs_where(state, q.filter(), limit, q.cursor()).await?;
        // When the next delayed job (a retry's next attempt) falls due.
        let next_due = handle.next_due().await?.map(Timestamp);
        let history = handle.samples(SamplesConfig::DEFAULT_KEPT).await?;
        let first = q.cursor().is_none();
        let body = html! {
            (queue_head(&app, name, &stats, (next_due, jobs.now)))
            (q.flash())
            (super::charts::queue_charts(&history))
            (tabs(name, state, &stats))
            div.finders {
                (super::finders::job_search(name))
                (super::finders::filters(name, state, q.filter()))
            }
            @if state == JobState::Dead { (super::actions::dead_tools(&app, name, &jobs, pager(&jobs, limit, first))) }
            @else { (job_table(&jobs, None)) (pager(&jobs, limit, first)) }
        };
        Ok(page(&app, name, "queues", body))
    };
    render(&app, r.await)
}

fn queue_head(app: &App, name: &str, s: &Stats, (next_due, now): (Option<Timestamp>, Timestamp)) -> Markup {
    let fields = [("queue", name)];
    html! {
        div.head {
            h1 { "Queue " (name) @if s.paused { " " span.badge.paused { "paused" } } }
            div.tools {
                @if s.paused { (button(app, "/queue/resume", &fields, "Resume", "primary")) }
                @else { (button(app, "/queue/pause", &fields, "Pause", "")) }
                a.button href={ "/limits?" (query(&fields)) } { "Limits" }
                a.button href={ "/cron?" (query(&fields)) } { "Cron" }
                a.button href={ "/workers?" (query(&fields)) } { "Workers" }
            }
        }
        dl.cards {
            div { dt { "Ready" } dd { (s.ready_total()) } }
            div { dt { "Delayed" } dd { (s.delayed) } }
            div { dt { "Next due" } dd { (when(next_due, now)) } }
            div { dt { "In flight" } dd { (s.in_flight) } }
            div { dt { "Dead" } dd { (s.dead) small { " / cap " (s.dead_cap) } } }
            div { dt { "Deferred" } dd { (s.deferred) } }
            div { dt { "Oldest ready" } dd { (age_ms(s.oldest_ready_age_ms)) } }
        }
        p.counters.muted {
            @for (k, v) in &s.counters { span { (k) " " b { (v) } } " " }
        }
    }
}

fn tabs(name: &str, on: JobState, s: &Stats) -> Markup {
    let n = |st: JobState| match st {
        JobState::Ready => s.ready_total(),
        JobState::Delayed => s.delayed,
        JobState::InFlight => s.in_flight,
        JobState::Dead => s.dead,
        JobState::Done => s.done,
    };
    html! {
        nav.tabs {
            @for st in JobState::ALL {
                a href=(queue_link(name, st.as_str())) class=[(st == on).then_some("on")] {
                    (label(st)) " " span.count { (n(st)) }
                }
            }
        }
    }
}

/// A state as the tabs name it.
pub(crate) fn label(s: JobState) -> &'static str {
    match s {
        JobState::Ready => "Ready",
        JobState::Delayed => "Delayed",
        JobState::InFlight => "In flight",
        JobState::Dead => "Dead",
        JobState::Done => "Done",
    }
}

/// The jobs of a page; with `select`, a checkbox per row for the form of that id.
pub(crate) fn job_table(p: &JobPage, select: Option<&str>) -> Markup {
    let when_head = match p.state {
        JobState::Ready => "Enqueued",
        JobState::Delayed => "Due",
        JobState::InFlight => "Lease ends",
        JobState::Dead => "Dead since",
        JobState::Done => "Completed",
    };
    if p.jobs.is_empty() {
        return html! { p.empty { "No " (label(p.state).to_lowercase()) " jobs here." } };
    }
    html! {
        table.data.jobs {
            thead { tr {
                @if select.is_some() { th { input type="checkbox" data-select-all title="Select all"; } }
                th { "Id" } th { "Kind" } th { "Key" } th { "Payload" } th.n { "Failed attempts" } th { (when_head) }
                @if p.state == JobState::InFlight { th { "Worker" } }
                // (completed jobs have no last error: their results instead)
                th { @if p.state == JobState::Done { "Result" } @else { "Last error" } }
            } }
            tbody {
                @for j in &p.jobs { (job_row(p, j, select)) }
            }
        }
    }
}

fn job_row(p: &JobPage, j: &JobSummary, select: Option<&str>) -> Markup {
    let at = match p.state {
        JobState::Ready => j.enqueued_at,
        JobState::Delayed => j.due_at,
        JobState::InFlight => j.lease_deadline,
        JobState::Dead => j.dead_at,
        JobState::Done => j.done_at,
    };
    html! {
        tr data-job=(j.id) {
            @if let Some(form) = select {
                td { input type="checkbox" name="id" value=(j.id) form=(form) aria-label={ "select " (j.id) }; }
            }
            td.id { a href=(job_link(&p.queue, &j.id)) { (j.id) } @if j.suspect { " " span.badge { "suspect" } } @if j.parked { " " span.badge { "parked" } } }
            td { (j.kind.as_deref().unwrap_or("?")) }
            td.key { (j.key.as_deref().unwrap_or("–")) }
            td.payload { code title=(j.payload_preview.as_deref().unwrap_or("")) { (j.payload_preview.as_deref().unwrap_or("")) } }
            td.n { (attempts(j)) }
            td { (when(at, p.now)) }
            @if p.state == JobState::InFlight { td.id { (j.worker.as_deref().unwrap_or("–")) } }
            @if p.state == JobState::Done {
                td.result { code title=(j.result.as_deref().unwrap_or("")) { (j.result.as_deref().unwrap_or("–")) } }
            } @else {
                td.err title=(j.last_error.as_deref().unwrap_or("")) { (j.last_error.as_deref().unwrap_or("")) }
            }
        }
    }
}

/// Failed attempts charged, of the runs allowed: a job that ran once and failed fatally
/// was charged none (the same words in the CLI, the UI and docs/cli-json.md).
pub(crate) fn attempts(j: &JobSummary) -> String {
    match (j.attempt, j.max_attempts) {
        (Some(a), Some(m)) => format!("{a} charged of {m} runs"),
        _ => "?".into(),
    }
}

/// Links to the first page (unless this is it) and the next (unless this is the last).
fn pager(p: &JobPage, limit: usize, first: bool) -> Markup {
    let limit = limit.to_string();
    let base = [
        ("queue", p.queue.as_str()),
        ("state", p.state.as_str()),
        ("kind", p.kind.as_deref().unwrap_or("")),
        ("key", p.key.as_deref().unwrap_or("")),
        ("limit", limit.as_str()),
    ];
    let next = p.next_cursor.as_deref().map(|c| {
        let mut next = base.to_vec();
        next.push(("cursor", c));
        query(&next)
    });
    html! {
        nav.pager {
            @if !first { a href={ "/queue?" (query(&base)) } { "First page" } }
            @if let Some(next) = next { a href={ "/queue?" (next) } { "Next page →" } }
        }
    }
}

/// The registry entries that are not queue names, skipped: a warning naming them (HTML
/// escaped) and how to remove one.
pub(crate) fn invalid_entries(invalid: &[String]) -> Markup {
    html! {
        @if !invalid.is_empty() {
            p.error #invalid-queues {
                "The queue registry holds " (invalid.len())
                @if invalid.len() == 1 { " entry that is not a queue name" } @else { " entries that are not queue names" }
                " (skipped): "
                @for (i, n) in invalid.iter().enumerate() {
                    @if i > 0 { ", " }
                    code { (format!("{n:?}")) }
                }
                ". Remove one with " code { "weir queues --forget NAME" } "."
            }
        }
    }
}
