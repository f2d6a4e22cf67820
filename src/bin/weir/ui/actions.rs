//! The actions: pause and resume, delete and run-now by id, and the dead-letter queue's
//! requeue and delete (selected jobs, or every job a filter takes). Each is a POST taking
//! [`Posted`] (CSRF-checked); deleting, and acting on more than one job, first shows a
//! confirmation page whose form posts the same fields again with `confirmed=yes`. Each
//! calls the library's admin layer, as the matching command does, then redirects to a
//! page that says what it did.

use super::guard::Posted;
use super::html::{after, button, csrf, job_link, queue_link, still};
use super::pages::{done, job_table};
use super::state::{App, Failure};
use crate::output::count;
use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};
use weir::queue::json::{JobPage, JobState, JobSummary};

/// Ids a confirmation page lists before it says "and N more".
const LISTED: usize = 20;

/// The buttons of the job page, by the job's state.
pub(crate) fn job_tools(app: &App, queue: &str, j: &JobSummary) -> Markup {
    let ready = queue_link(queue, "ready");
    let here = queue_link(queue, j.state.as_str());
    let to_ready = [("queue", queue), ("id", j.id.as_str()), ("back", ready.as_str())];
    let delete = [("queue", queue), ("id", j.id.as_str()), ("back", here.as_str())];
    html! {
        @if j.state == JobState::Dead {
            (button(app, "/dead/requeue", &to_ready, "Requeue", "primary"))
        }
        @if matches!(j.state, JobState::Dead | JobState::Delayed) {
            (button(app, "/jobs/run-now", &to_ready, "Run now", ""))
        }
        (button(app, "/jobs/delete", &delete, "Delete", "danger"))
    }
}

/// The dead tab: the jobs with a checkbox each (then `pager`), the actions on the
/// selected ones, and the actions on every dead job a filter takes.
pub(crate) fn dead_tools(app: &App, queue: &str, jobs: &JobPage, pager: Markup) -> Markup {
    html! {
        form #dead-ids.bulk method="post" action="/dead/requeue" {
            (csrf(app))
            input type="hidden" name="queue" value=(queue);
            span { "Selected: " }
            button.primary type="submit" formaction="/dead/requeue" { "Requeue selected" }
            button.danger type="submit" formaction="/dead/delete" { "Delete selected" }
        }
        (job_table(jobs, Some("dead-ids")))
        (pager)
        form.bulk.filterbulk method="post" action="/dead/requeue" {
            (csrf(app))
            input type="hidden" name="queue" value=(queue);
            input type="hidden" name="scope" value="filter";
            span { "Every dead job" }
            label { "of kind " input type="text" name="kind" placeholder="any" size="12"; }
            label { " dead for over " input type="text" name="older_than" placeholder="e.g. 1h" size="8"; }
            button type="submit" formaction="/dead/requeue" { "Requeue all matching" }
            button.danger type="submit" formaction="/dead/delete" { "Delete all matching" }
        }
    }
}

pub(crate) async fn pause(State(app): State<App>, p: Posted) -> Response {
    done(&app, set_paused(&app, &p, true).await)
}

pub(crate) async fn resume(State(app): State<App>, p: Posted) -> Response {
    done(&app, set_paused(&app, &p, false).await)
}

async fn set_paused(app: &App, p: &Posted, paused: bool) -> Result<Response, Failure> {
    let name = p.queue()?;
    let q = app.queue(name)?;
    if paused {
        q.pause().await?;
    } else {
        q.resume().await?;
    }
    let did = if paused { "paused" } else { "resumed" };
    Ok(after(&back(p, &queue_link(name, "ready")), did, 0, 0))
}

/// Deletes jobs by id, in any state (a running one finishes, its outcome dropped).
pub(crate) async fn delete(State(app): State<App>, p: Posted) -> Response {
    let r = async {
        let (name, ids) = (p.queue()?, ids(&p)?);
        if !p.confirmed() {
            let what = format!("Delete {} from queue {name}?", count(ids.len() as u64, "job"));
            let note = "A running job finishes, but its outcome is dropped and it is not retried.";
            return Ok(confirm(
                &app,
                "/jobs/delete",
                &p,
                &what,
                note,
                &ids,
                &job_link(name, &ids[0]),
            ));
        }
        let r = app.queue(name)?.delete_jobs(&ids, false).await?;
        let to = back(&p, &queue_link(name, "ready"));
        Ok(after(&to, "deleted", r.done.len() as u64, r.skipped.len() as u64))
    };
    done(&app, r.await)
}

/// Moves delayed or dead jobs to the front of ready.
pub(crate) async fn run_now(State(app): State<App>, p: Posted) -> Response {
    let r = async {
        let (name, ids) = (p.queue()?, ids(&p)?);
        let r = app.queue(name)?.run_now(&ids).await?;
        let to = back(&p, &queue_link(name, "ready"));
        Ok(after(&to, "run_now", r.done.len() as u64, r.skipped.len() as u64))
    };
    done(&app, r.await)
}

/// Requeues dead jobs (fresh attempt count, back of ready): the selected ones, or every
/// one the filter takes. More than one asks first.
pub(crate) async fn dead_requeue(State(app): State<App>, p: Posted) -> Response {
    done(&app, dead_action(&app, &p, true).await)
}

/// Deletes dead jobs: the selected ones, or every one the filter takes. Asks first.
pub(crate) async fn dead_delete(State(app): State<App>, p: Posted) -> Response {
    done(&app, dead_action(&app, &p, false).await)
}

async fn dead_action(app: &App, p: &Posted, requeue: bool) -> Result<Response, Failure> {
    let name = p.queue()?;
    let q = app.queue(name)?;
    let dead_tab = queue_link(name, "dead");
    let (action, verb) = if requeue {
        ("/dead/requeue", "Requeue")
    } else {
        ("/dead/delete", "Delete")
    };
    let did = if requeue { "requeued" } else { "deleted" };
    if p.get("scope") == Some("filter") {
        let kind = p.get("kind");
        let older = p
            .get("older_than")
            .map(crate::parse_duration)
            .transpose()
            .map_err(Failure::bad_request)?;
        if !p.confirmed() {
            let what = format!(
                "{verb} every dead job{} of queue {name}?",
                describe(kind, p.get("older_than"))
            );
            return Ok(confirm(app, action, p, &what, "", &[], &dead_tab));
        }
        let r = q.dead_where(requeue, kind, older).await?;
        return Ok(after(&back(p, &dead_tab), did, r.count, 0));
    }
    let ids = ids(p)?;
    if !p.confirmed() && (!requeue || ids.len() > 1) {
        let what = format!(
            "{verb} {} of the dead-letter queue of {name}?",
            count(ids.len() as u64, "job")
        );
        return Ok(confirm(app, action, p, &what, "", &ids, &dead_tab));
    }
    let (n, skipped) = if requeue {
        let (n, missing) = q.requeue_dead(&ids, ids.len()).await?;
        (n, missing.len() as u64)
    } else {
        let r = q.delete_jobs(&ids, true).await?;
        (r.done.len() as u64, r.skipped.len() as u64)
    };
    Ok(after(&back(p, &dead_tab), did, n, skipped))
}

/// The filter in words: ` of kind K dead for over 1h`.
fn describe(kind: Option<&str>, older_than: Option<&str>) -> String {
    let mut s = String::new();
    if let Some(k) = kind {
        s += &format!(" of kind {k}");
    }
    if let Some(d) = older_than {
        s += &format!(" dead for over {d}");
    }
    s
}

/// The selected ids (at least one).
fn ids(p: &Posted) -> Result<Vec<String>, Failure> {
    let ids = p.all("id");
    if ids.is_empty() {
        return Err(Failure::bad_request(
            "no job selected: tick the jobs to act on, or use the filter",
        ));
    }
    Ok(ids)
}

/// Where to go after the action: the form's `back` when it is a path on this server
/// (never another site, and nothing a header cannot hold), else `default`.
fn back(p: &Posted, default: &str) -> String {
    match p.get("back") {
        Some(b) if local_path(b) => b.to_owned(),
        _ => default.to_owned(),
    }
}

fn local_path(b: &str) -> bool {
    b.starts_with('/') && !b.starts_with("//") && b.bytes().all(|c| c.is_ascii_graphic() && c != b'\\')
}

/// The confirmation page: `question`, the ids (some), and a form that posts the same
/// fields to `action` with `confirmed=yes`; Cancel goes to `cancel`.
fn confirm(
    app: &App,
    action: &str,
    p: &Posted,
    question: &str,
    note: &str,
    ids: &[String],
    cancel: &str,
) -> Response {
    let body = html! {
        h1 { "Confirm" }
        div.confirm {
            p.question { (question) }
            @if !note.is_empty() { p.muted { (note) } }
            @if !ids.is_empty() {
                ul.ids {
                    @for id in ids.iter().take(LISTED) { li { code { (id) } } }
                    @if ids.len() > LISTED { li { "and " (ids.len() - LISTED) " more" } }
                }
            }
            form method="post" action=(action) {
                (csrf(app))
                @for (k, v) in p.fields() { input type="hidden" name=(k) value=(v); }
                input type="hidden" name="confirmed" value="yes";
                button.danger type="submit" { "Yes, go ahead" }
                " "
                a.button href=(cancel) { "Cancel" }
            }
        }
    };
    still(app, "Confirm", "queues", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_back() {
        assert!(local_path("/queue?queue=a&state=dead"));
        for bad in [
            "https://evil.example/",
            "//evil.example/",
            "/\\evil.example",
            "/a\r\nSet-Cookie: x",
            "queue",
            "",
        ] {
            assert!(!local_path(bad), "{bad:?}");
        }
    }
}
