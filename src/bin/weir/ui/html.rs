//! The page frame, the pieces pages share (times, counts, links, the CSRF field, flash
//! messages, error pages) and the two static files. Pages are maud templates: every value
//! spliced in, whatever it came from (Redis above all), is HTML-escaped by maud.

use super::state::{App, Failure};
use crate::output::{age, count};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use std::time::Duration;
use weir::queue::json::Timestamp;

const CSS: &str = include_str!("assets/ui.css");
const JS: &str = include_str!("assets/ui.js");

pub(crate) async fn css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

pub(crate) async fn js() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], JS).into_response()
}

/// A whole page: `title`, the navigation (`nav` marks the current section), `body`; it
/// refreshes itself.
pub(crate) fn page(app: &App, title: &str, nav: &str, body: Markup) -> Response {
    frame(app, title, nav, body, true)
}

/// A page that must not reload itself: the answer to a POST (a reload would post again).
pub(crate) fn still(app: &App, title: &str, nav: &str, body: Markup) -> Response {
    frame(app, title, nav, body, false)
}

fn frame(app: &App, title: &str, nav: &str, body: Markup, live: bool) -> Response {
    let refresh = if live { app.refresh().as_millis() } else { 0 };
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · weir" }
                link rel="stylesheet" href="/static/ui.css";
                script src="/static/ui.js" defer {}
            }
            body data-refresh-ms=(refresh) {
                header.top {
                    a.brand href="/" { "weir" }
                    nav {
                        a href="/" class=[(nav == "queues").then_some("on")] { "Queues" }
                        a href="/workers" class=[(nav == "workers").then_some("on")] { "Workers" }
                    }
                    @if refresh > 0 {
                        label.refresh title="Pages reload themselves unless you are filling in a form" {
                            input #auto-refresh type="checkbox" checked;
                            " refresh every " (humantime::format_duration(app.refresh()))
                        }
                    }
                }
                main { (body) }
                footer { "weir " (env!("CARGO_PKG_VERSION")) }
            }
        }
    };
    Html(markup.into_string()).into_response()
}

/// An error page; `live` for a GET (its refresh goes on, so a page that failed because
/// Redis was away comes back by itself), not for a POST.
pub(crate) fn error_page(app: &App, f: &Failure, live: bool) -> Response {
    let title = f.status.canonical_reason().unwrap_or("Error");
    let body = html! {
        h1 { (title) }
        p.error { (f.message) }
        p { a href="/" { "Back to the queues" } }
    };
    (f.status, frame(app, title, "", body, live)).into_response()
}

/// The hidden field every action form carries.
pub(crate) fn csrf(app: &App) -> Markup {
    html! { input type="hidden" name="csrf" value=(app.csrf()); }
}

/// A form posting `fields` to `action` with one button; `class` styles the button.
pub(crate) fn button(app: &App, action: &str, fields: &[(&str, &str)], label: &str, class: &str) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            (csrf(app))
            @for (k, v) in fields { input type="hidden" name=(k) value=(v); }
            button class=(class) type="submit" { (label) }
        }
    }
}

/// A query string from pairs, each value percent-encoded (blank values left out).
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    parts.join("&")
}

/// Percent-encodes everything but the unreserved characters of RFC 3986.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The link to a queue's page, on one state's tab.
pub(crate) fn queue_link(queue: &str, state: &str) -> String {
    format!("/queue?{}", query(&[("queue", queue), ("state", state)]))
}

/// The link to a job's page.
pub(crate) fn job_link(queue: &str, id: &str) -> String {
    format!("/job?{}", query(&[("queue", queue), ("id", id)]))
}

/// A time as "3m 20s ago" / "in 5s"; ui.js puts the local date and time before it (the
/// browser knows the reader's time zone, the server does not). Its tooltip gives the
/// epoch in ms and the time in UTC.
pub(crate) fn when(t: Option<Timestamp>, now: Timestamp) -> Markup {
    let Some(t) = t else {
        return html! { span.muted { "–" } };
    };
    let tip = format!("epoch {} ms · {t}", t.as_ms());
    let rel = if t >= now {
        format!("in {}", age(t.until(now)))
    } else {
        format!("{} ago", age(t.age(now)))
    };
    html! { time datetime=(t) data-ms=(t.as_ms()) title=(tip) { (rel) } }
}

/// An age in ms, or a dash when zero.
pub(crate) fn age_ms(ms: u64) -> String {
    if ms == 0 {
        "–".into()
    } else {
        age(Duration::from_millis(ms))
    }
}

/// The message an action leaves on the page it redirects to (`did`, `n`, `skipped` in
/// the query; only known actions are worded, so a link cannot put words on a page).
pub(crate) fn flash(did: Option<&str>, n: u64, skipped: u64) -> Markup {
    let jobs = count(n, "job");
    let text = match did {
        Some("requeued") => format!("Requeued {jobs}."),
        Some("deleted") => format!("Deleted {jobs}."),
        Some("run_now") => format!("Moved {jobs} to the front of ready."),
        Some("paused") => "Paused: consumers stop fetching; running jobs finish.".into(),
        Some("resumed") => "Resumed.".into(),
        Some("limits_set") => "Limits stored: running consumers apply them within about a second.".into(),
        Some("limits_cleared") => "Limits cleared.".into(),
        _ => return html! {},
    };
    html! {
        p.flash role="status" {
            (text)
            @if skipped > 0 { " " (count(skipped, "job")) " skipped (gone or in another state)." }
        }
    }
}

/// Where to go after an action: `to` with the flash message's fields.
pub(crate) fn after(to: &str, did: &str, n: u64, skipped: u64) -> Response {
    let sep = if to.contains('?') { '&' } else { '?' };
    let n = n.to_string();
    let skipped = skipped.to_string();
    let q = query(&[("did", did), ("n", &n), ("skipped", &skipped)]);
    axum::response::Redirect::to(&format!("{to}{sep}{q}")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_encoded_and_values_escaped() {
        assert_eq!(query(&[("queue", "a:b"), ("kind", "")]), "queue=a%3Ab");
        assert_eq!(encode("x y&<z>"), "x%20y%26%3Cz%3E");
        let m = html! { p { ("<script>alert(1)</script>") } };
        assert_eq!(m.into_string(), "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>");
    }
}
