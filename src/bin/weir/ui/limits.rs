//! The limits page: a queue's settings (what `weir limits get` shows), the form that
//! stores them (`weir limits set`: [`Settings::update`], the same call) and the clear
//! buttons (`weir limits clear [--dead-cap]`), with each live consumer's limit now.

use super::guard::Posted;
use super::html::{after, button, csrf, page, query};
use super::pages::{PageQuery, done, render};
use super::state::{App, Failure};
use super::workers::workers_table;
use axum::extract::{Query, State};
use axum::response::Response;
use maud::{Markup, html};
use std::str::FromStr;
use weir::limiter::Rate;
use weir::queue::settings::{Cleared, DEFAULT_DEAD_CAP, RateSetting, Settings};

/// The form's fields: name, label, example (shown as "e.g. ..." in a blank field).
const FIELDS: [(&str, &str, &str); 17] = [
    ("min_concurrency", "Lowest concurrency (adaptive)", "4"),
    ("max_concurrency", "Highest concurrency (adaptive)", "200"),
    ("target_p95", "p95 target (adaptive)", "250ms or 1.5x"),
    (
        "error_threshold",
        "Overload-rate threshold, 0 to 1 (adaptive)",
        "0.05",
    ),
    (
        "overload_status",
        "HTTP statuses that mean overload (adaptive)",
        "429,503,502,504",
    ),
    ("rate", "Jobs/s cap per consumer", "500/s, 30/m or off"),
    ("burst", "Burst for the rate", "100"),
    ("dead_cap", "Dead-letter cap", "10000"),
    ("global_rate", "Jobs/s the whole fleet starts", "500/s"),
    ("global_burst", "Burst for the global rate", "50"),
    ("global_concurrency", "Jobs leased at once, fleet-wide", "10"),
    ("key_rate", "Jobs/s of each job key, fleet-wide", "5/s"),
    ("key_burst", "Burst for the per-key rate", "1"),
    ("key_concurrency", "Jobs of each job key leased at once", "2"),
    ("keep_completed", "Keep completed jobs this long", "1h"),
    ("keep_completed_count", "Completed jobs kept at most", "10000"),
    ("history_runs", "Runs each job's history keeps", "5"),
];

async fn view(app: &App, q: &PageQuery) -> Result<Response, Failure> {
    let name = q.queue()?;
    let workers = app.queue(name)?.workers().await?;
    let now = Settings::load(&mut app.conn(), name).await?;
    let stored = now.to_fields();
    let fields = [("queue", name)];
    let body = html! {
        div.head {
            h1 { "Limits of " (name) }
            div.tools {
                a.button href={ "/queue?" (query(&fields)) } { "Queue" }
                (button(app, "/limits/clear", &[("queue", name), ("only", "dead_cap")], "Reset dead-letter cap", ""))
                (button(app, "/limits/clear", &[("queue", name), ("only", "global_rate")], "Lift global rate", ""))
                (button(app, "/limits/clear", &[("queue", name), ("only", "global_concurrency")], "Lift global concurrency", ""))
                (button(app, "/limits/clear", &[("queue", name), ("only", "per_key")], "Lift per-key limits", ""))
                (button(app, "/limits/clear", &[("queue", name), ("only", "keep_completed")], "Keep no completed jobs", ""))
                (button(app, "/limits/clear", &fields, "Clear all", "danger"))
            }
        }
        (q.flash())
        p.muted { "Stored in Redis; every consumer of the queue applies them within about a second. \
                   A limit not set leaves each consumer's own flag in force. The global limits bind \
                   all consumers together." }
        (form(app, name, &stored))
        h2 { "Consumers now" }
        (workers_table(std::slice::from_ref(&workers)))
    };
    Ok(page(app, &format!("Limits of {name}"), "queues", body))
}

fn form(app: &App, name: &str, stored: &[(String, String)]) -> Markup {
    // (the age is stored in ms, shown as a duration)
    let age = stored
        .iter()
        .find(|(k, _)| k == "keep_completed_ms")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .map(|ms| humantime::format_duration(std::time::Duration::from_millis(ms)).to_string());
    let value = |f: &str| match f {
        "keep_completed" => age.as_deref(),
        f => stored.iter().find(|(k, _)| k == f).map(|(_, v)| v.as_str()),
    };
    html! {
        form.limits method="post" action="/limits/set" {
            (csrf(app))
            input type="hidden" name="queue" value=(name);
            table.data {
                thead { tr { th { "Setting" } th { "Now" } th { "Set to" } } }
                tbody {
                    @for (field, text, example) in FIELDS {
                        tr {
                            td { label for=(field) { (text) } br; code.muted { (field) } }
                            td.now { (now_text(field, value(field))) }
                            td { input id=(field) type="text" name=(field) value=(value(field).unwrap_or("")) placeholder={ "e.g. " (example) } size="14"; }
                        }
                    }
                }
            }
            p { button.primary type="submit" { "Store" } " " span.muted { "Each field holds the value in force;                 blank fields stay as they are (to lift a limit, use its button above)." } }
        }
    }
}

fn now_text(field: &str, v: Option<&str>) -> String {
    match (field, v) {
        (_, Some(v)) => v.to_owned(),
        ("dead_cap", None) => format!("{DEFAULT_DEAD_CAP} (default)"),
        ("history_runs", None) => "5 (default)".into(),
        (_, None) => "not set".into(),
    }
}

pub(crate) async fn show(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    render(&app, view(&app, &q).await)
}

/// Stores the fields given, once the settings they make pass the checks `weir limits set`
/// makes.
pub(crate) async fn set(State(app): State<App>, p: Posted) -> Response {
    let r = async {
        let name = p.queue()?;
        let burst: Option<u32> = field(&p, "burst")?;
        let global_burst: Option<u32> = field(&p, "global_burst")?;
        let key_burst: Option<u32> = field(&p, "key_burst")?;
        let update = Settings {
            min: field(&p, "min_concurrency")?,
            max: field(&p, "max_concurrency")?,
            target_p95: field(&p, "target_p95")?,
            error_threshold: field(&p, "error_threshold")?,
            overload_status: field(&p, "overload_status")?,
            rate: field::<RateSetting>(&p, "rate")?.map(|r| burst.map_or(r, |b| r.with_burst(b))),
            dead_cap: field(&p, "dead_cap")?,
            global_rate: field::<Rate>(&p, "global_rate")?.map(|r| {
                let burst = global_burst.unwrap_or_else(|| Settings::default_global_burst(&r));
                r.with_burst(burst)
            }),
            global_concurrency: field(&p, "global_concurrency")?,
            key_rate: field::<Rate>(&p, "key_rate")?
                .map(|r| r.with_burst(key_burst.unwrap_or_else(|| Settings::default_global_burst(&r)))),
            key_concurrency: field(&p, "key_concurrency")?,
            key_overrides: Default::default(),
            keep_completed: field::<humantime::Duration>(&p, "keep_completed")?.map(Into::into),
            keep_completed_count: field(&p, "keep_completed_count")?,
            history_runs: field(&p, "history_runs")?,
        };
        if key_burst.is_some() && update.key_rate.is_none() {
            return Err(Failure::bad_request(
                "a per-key burst goes with a per-key rate: give both",
            ));
        }
        if burst.is_some() && update.rate.is_none() {
            return Err(Failure::bad_request("a burst goes with a rate: give both"));
        }
        if global_burst.is_some() && update.global_rate.is_none() {
            return Err(Failure::bad_request(
                "a global burst goes with a global rate: give both",
            ));
        }
        if update == Settings::default() {
            return Err(Failure::bad_request("nothing to store: every field was blank"));
        }
        Settings::update(&mut app.conn(), name, &update).await?;
        Ok(after(&limits_link(name), "limits_set", 0, 0))
    };
    done(&app, r.await)
}

/// Removes every setting, or
/// (`only=dead_cap|global_rate|global_concurrency|per_key|keep_completed`) that group.
pub(crate) async fn clear(State(app): State<App>, p: Posted) -> Response {
    let r = async {
        let name = p.queue()?;
        let one = match p.get("only") {
            Some("dead_cap") => Some(Cleared::DeadCap),
            Some("global_rate") => Some(Cleared::GlobalRate),
            Some("global_concurrency") => Some(Cleared::GlobalConcurrency),
            Some("per_key") => Some(Cleared::PerKey),
            Some("keep_completed") => Some(Cleared::KeepCompleted),
            Some(other) => return Err(Failure::bad_request(format!("no setting {other:?} to clear"))),
            None => None,
        };
        match one {
            Some(c) => Settings::clear_some(&mut app.conn(), name, &[c]).await?,
            None => Settings::clear(&mut app.conn(), name).await?,
        }
        Ok(after(&limits_link(name), "limits_cleared", 0, 0))
    };
    done(&app, r.await)
}

fn limits_link(name: &str) -> String {
    format!("/limits?{}", query(&[("queue", name)]))
}

/// The form field `name` parsed, `None` when blank; a value that does not parse is a 400
/// naming the field.
fn field<T: FromStr>(p: &Posted, name: &str) -> Result<Option<T>, Failure>
where
    T::Err: std::fmt::Display,
{
    p.get(name)
        .map(|v| {
            v.parse::<T>()
                .map_err(|e| Failure::bad_request(format!("{name} = {v:?}: {e}")))
        })
        .transpose()
}
