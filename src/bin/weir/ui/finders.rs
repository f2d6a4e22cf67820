//! The queue page's finders: a job by its id (a GET of its page) and the job list's
//! filters, by kind and by job key (GETs of the queue page). Values are spliced in by
//! maud, escaped.

use super::html::queue_link;
use maud::{Markup, html};
use weir::queue::json::{JobFilter, JobState};

/// The search by id: a GET of the job's page.
pub(crate) fn job_search(name: &str) -> Markup {
    html! {
        form.filter #job-search method="get" action="/job" role="search" {
            input type="hidden" name="queue" value=(name);
            label { "Job id " input type="search" name="id" required placeholder="e.g. cron:report:1764000000000"; }
            button type="submit" { "Find" }
        }
    }
}

/// The filters of the job list: kind and job key.
pub(crate) fn filters(name: &str, state: JobState, f: JobFilter<'_>) -> Markup {
    html! {
        form.filter #job-filter method="get" action="/queue" {
            input type="hidden" name="queue" value=(name);
            input type="hidden" name="state" value=(state.as_str());
            label { "Kind " input type="text" name="kind" value=(f.kind.unwrap_or("")) placeholder="any kind"; }
            label { "Key " input type="text" name="key" value=(f.key.unwrap_or("")) placeholder="any key"; }
            button type="submit" { "Filter" }
            @if !f.is_empty() { " " a href=(queue_link(name, state.as_str())) { "clear" } }
        }
    }
}
