//! The queue page's charts: throughput, failures, deferrals and depth over the queue's
//! history (`weir::queue::samples`: samples its consumers write on a fixed clock), drawn
//! as inline SVG on the server. No script, no build step; every number is spliced in by
//! maud (escaped), and colours come from the stylesheet (the CSP allows no inline style).

use maud::{Markup, html};
use weir::queue::json::Timestamp;
use weir::queue::samples::Samples;

/// The drawing's size, in SVG units (it scales to the card's width).
const W: f64 = 320.0;
const H: f64 = 110.0;
/// Room for the labels: left, right, top, bottom.
const PAD: (f64, f64, f64, f64) = (4.0, 4.0, 14.0, 14.0);

/// The span a chart covers: the last hour, or longer if the history is.
const SPAN_MS: u64 = 3_600_000;

/// One line of a chart: its legend, its CSS class (its colour) and its points (time, value).
struct Series {
    label: &'static str,
    class: &'static str,
    points: Vec<(Timestamp, f64)>,
}

/// The four charts of a queue's page, or a note when its history is empty.
pub(crate) fn queue_charts(h: &Samples) -> Markup {
    if h.samples.len() < 2 {
        return html! {
            p.muted #charts-empty {
                "No history yet: consumers sample the queue's counters every few seconds while they run; \
                 the charts fill in from their second sample."
            }
        };
    }
    let rates = h.rate_points();
    let rate = |f: fn(&weir::queue::json::Rates) -> f64| rates.iter().map(|(t, r)| (*t, f(r))).collect();
    let size =
        |f: fn(&weir::queue::samples::Sample) -> u64| h.samples.iter().map(|s| (s.at, f(s) as f64)).collect();
    let span = span(h);
    let gap = gap_ms(h);
    html! {
        div.charts #charts {
            (chart("throughput", "Throughput, jobs/s", span, gap, &[
                Series { label: "acked", class: "s0", points: rate(|r| r.acked_per_s) },
                Series { label: "enqueued", class: "s1", points: rate(|r| r.enqueued_per_s) },
            ]))
            (chart("failures", "Failures, jobs/s", span, gap, &[
                Series { label: "retried", class: "s2", points: rate(|r| r.retried_per_s) },
                Series { label: "dead-lettered", class: "s3", points: rate(|r| r.dead_per_s) },
            ]))
            (chart("deferrals", "Deferrals, jobs/s (put back uncharged)", span, gap, &[
                Series { label: "deferred", class: "s4", points: rate(|r| r.deferred_per_s) },
            ]))
            (chart("depth", "Depth, jobs", span, gap, &[
                Series { label: "ready", class: "s0", points: size(|s| s.ready) },
                Series { label: "delayed", class: "s1", points: size(|s| s.delayed) },
                Series { label: "in flight", class: "s4", points: size(|s| s.in_flight) },
            ]))
        }
    }
}

/// The time the charts cover: the last hour up to Redis's clock at the read (longer if
/// the history is).
fn span(h: &Samples) -> (u64, u64) {
    let end = h.now.0.max(h.samples.last().map_or(0, |s| s.at.0));
    let first = h.samples.first().map_or(end, |s| s.at.0);
    (first.min(end.saturating_sub(SPAN_MS)), end)
}

/// Samples further apart than this are not joined by a line: no consumer sampled the
/// queue in between (two periods and a half, the period the smallest step seen).
fn gap_ms(h: &Samples) -> u64 {
    let step = h
        .samples
        .windows(2)
        .map(|w| w[1].slot.0.saturating_sub(w[0].slot.0))
        .filter(|d| *d > 0)
        .min()
        .unwrap_or(10_000);
    step * 5 / 2
}

fn chart(id: &str, title: &str, (t0, t1): (u64, u64), gap: u64, series: &[Series]) -> Markup {
    let top = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0_f64, f64::max);
    let ymax = nice(top);
    let x = |t: Timestamp| {
        PAD.0 + (t.0.saturating_sub(t0)) as f64 / (t1 - t0).max(1) as f64 * (W - PAD.0 - PAD.1)
    };
    let y = |v: f64| H - PAD.3 - v / ymax * (H - PAD.2 - PAD.3);
    let minutes = (t1 - t0) / 60_000;
    html! {
        figure.chart data-chart=(id) {
            figcaption { (title) }
            svg viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(title) preserveAspectRatio="none" {
                title { (title) ", the last " (minutes) " minutes" }
                line.axis x1=(PAD.0) y1=(y(0.0)) x2=(W - PAD.1) y2=(y(0.0)) {}
                line.grid x1=(PAD.0) y1=(y(ymax)) x2=(W - PAD.1) y2=(y(ymax)) {}
                text.label x=(PAD.0) y=(PAD.2 - 3.0) { (number(ymax)) }
                text.label x=(PAD.0) y=(H - 2.0) { "−" (minutes) " min" }
                text.label.end x=(W - PAD.1) y=(H - 2.0) { "now" }
                @for s in series {
                    @for run in runs(&s.points, gap) {
                        polyline class=(s.class) data-series=(s.label) points=(polyline(run, &x, &y)) {}
                    }
                }
            }
            ul.legend {
                @for s in series {
                    li {
                        span class={ "swatch " (s.class) } {}
                        (s.label) " "
                        b { (s.points.last().map_or("–".to_owned(), |p| number(p.1))) }
                    }
                }
            }
        }
    }
}

/// Runs of points no further apart than `gap` (a single point draws nothing).
fn runs(points: &[(Timestamp, f64)], gap: u64) -> Vec<&[(Timestamp, f64)]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=points.len() {
        if i == points.len() || points[i].0.0.saturating_sub(points[i - 1].0.0) > gap {
            if i - start >= 2 {
                out.push(&points[start..i]);
            }
            start = i;
        }
    }
    out
}

fn polyline(run: &[(Timestamp, f64)], x: &impl Fn(Timestamp) -> f64, y: &impl Fn(f64) -> f64) -> String {
    let pts: Vec<String> = run
        .iter()
        .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
        .collect();
    pts.join(" ")
}

/// The top of the scale: the smallest 1, 2 or 5 times a power of ten at or above `v`
/// (1 for an empty chart).
fn nice(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * p)
}

/// A value as the charts print it: whole above 10 (and whole values), one decimal below.
fn number(v: f64) -> String {
    if v >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_and_runs() {
        assert_eq!(nice(0.0), 1.0);
        assert_eq!(nice(3.2), 5.0);
        assert_eq!(nice(120.0), 200.0);
        assert_eq!(nice(1000.0), 1000.0);
        let p = |t| (Timestamp(t), 1.0);
        let pts = [p(0), p(10), p(20), p(100), p(110), p(500)];
        let r = runs(&pts, 25);
        assert_eq!(r.len(), 2, "a gap splits the line, a lone point draws nothing");
        assert_eq!((r[0].len(), r[1].len()), (3, 2));
    }
}
