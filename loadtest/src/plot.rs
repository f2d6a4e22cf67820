//! PNG charts of the time series, drawn with plotters: throughput (with the ideal, when
//! known) and the concurrency limit and jobs running over time; latency percentiles over
//! time, each in a style of its own (p95 equals p99 in windows with few jobs, and must not
//! disappear under it), with the p95 target when the run has one.
//!
//! Text needs a font. plotters' default font path goes through fontconfig and system
//! libraries; instead the harness loads one TrueType file at run time (Debian package
//! `fonts-dejavu-core` puts it at [`DEFAULT_FONT`]; `WEIR_LOADTEST_FONT` overrides).

use crate::sampler::Row;
use anyhow::anyhow;
use plotters::prelude::*;
use std::error::Error;
use std::path::Path;
use std::sync::OnceLock;

/// The font the charts use unless `WEIR_LOADTEST_FONT` names another.
pub(crate) const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const SIZE: (u32, u32) = (1200, 600);

type Drawn = Result<(), Box<dyn Error>>;

/// Registers the font once per process; the error names the file and the package.
fn load_font() -> anyhow::Result<()> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let path = std::env::var("WEIR_LOADTEST_FONT").unwrap_or_else(|_| DEFAULT_FONT.into());
            let bytes = std::fs::read(&path).map_err(|e| {
                format!(
                    "charts need a TrueType font at {path} ({e}); install it (Debian: apt-get install fonts-dejavu-core) or set WEIR_LOADTEST_FONT"
                )
            })?;
            // plotters keeps fonts for the life of the process: leaking one file once is that.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{path} is not a usable TrueType font"))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// Draws `throughput.png` and `latency.png` into `dir`; `target_p95_ms`, if the run has
/// one, is drawn on the latency chart.
pub(crate) fn charts(
    dir: &Path,
    scenario: &str,
    rows: &[Row],
    target_p95_ms: Option<f64>,
) -> anyhow::Result<()> {
    load_font()?;
    let path = dir.join("throughput.png");
    throughput(&path, scenario, rows).map_err(|e| anyhow!("cannot draw {}: {e}", path.display()))?;
    let path = dir.join("latency.png");
    latency(&path, scenario, rows, target_p95_ms)
        .map_err(|e| anyhow!("cannot draw {}: {e}", path.display()))?;
    Ok(())
}

fn t_max(rows: &[Row]) -> f64 {
    rows.last().map_or(1.0, |r| r.t_s).max(0.1)
}

/// A line of a chart: label, colour, width, and the column it reads.
type Line = (&'static str, RGBColor, u32, fn(&Row) -> f64);

/// Left axis (jobs/s) and right axis (concurrency) lines of the throughput chart; lines
/// that are all zero (no ideal or capacity outside `downstream`) are left out.
fn throughput_lines(rows: &[Row]) -> (Vec<Line>, Vec<Line>) {
    let left: [Line; 2] = [
        ("throughput (jobs/s)", RGBColor(31, 119, 180), 2, |r| r.throughput),
        ("ideal (jobs/s)", RGBColor(44, 160, 44), 4, |r| r.ideal),
    ];
    let right: [Line; 4] = [
        ("limit (right axis)", RGBColor(214, 39, 40), 2, |r| r.limit as f64),
        (
            "downstream capacity (right axis)",
            RGBColor(148, 103, 189),
            1,
            |r| r.capacity as f64,
        ),
        (
            "in flight, window mean (right axis)",
            RGBColor(64, 64, 64),
            2,
            |r| r.in_flight,
        ),
        (
            "in flight, window peak (right axis)",
            RGBColor(170, 170, 170),
            1,
            |r| r.in_flight_max as f64,
        ),
    ];
    let shown = |l: &Line| {
        rows.iter().any(|r| l.3(r) > 0.0) || l.0.starts_with("throughput") || l.0.starts_with("limit")
    };
    (
        left.into_iter().filter(shown).collect(),
        right.into_iter().filter(shown).collect(),
    )
}

fn axis_max(rows: &[Row], lines: &[Line]) -> f64 {
    let max = rows
        .iter()
        .flat_map(|r| lines.iter().map(move |l| l.3(r)))
        .fold(1.0, f64::max);
    max * 1.1
}

fn throughput(path: &Path, scenario: &str, rows: &[Row]) -> Drawn {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = throughput_lines(rows);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{scenario}: throughput and concurrency"),
            ("sans-serif", 24),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max(rows), 0.0..axis_max(rows, &left))?
        .set_secondary_coord(0.0..t_max(rows), 0.0..axis_max(rows, &right));
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("jobs/s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc("concurrency")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    for (name, color, width, get) in left {
        let points = rows.iter().map(|r| (r.t_s, get(r)));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(width)))?
            .label(name)
            .legend(legend_of(color.stroke_width(width)));
    }
    for (name, color, width, get) in right {
        let points = rows.iter().map(|r| (r.t_s, get(r)));
        chart
            .draw_secondary_series(LineSeries::new(points, color.stroke_width(width)))?
            .label(name)
            .legend(legend_of(color.stroke_width(width)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The latency chart's lines, drawn in this order: p99 first as a wide pale band, so
/// p95 (a dark line drawn over it) shows where the two are equal; p50 dashed.
const PERCENTILES: [Line; 3] = [
    ("p99", RGBColor(255, 170, 170), 6, |r| r.p99_ms),
    ("p95", RGBColor(200, 30, 30), 2, |r| r.p95_ms),
    ("p50", RGBColor(31, 119, 180), 2, |r| r.p50_ms),
];

fn latency(path: &Path, scenario: &str, rows: &[Row], target_p95_ms: Option<f64>) -> Drawn {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let y_max = rows
        .iter()
        .map(|r| r.p99_ms)
        .chain(target_p95_ms)
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{scenario}: latency percentiles per 100 ms"),
            ("sans-serif", 24),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t_max(rows), 0.0..y_max)?;
    chart.configure_mesh().x_desc("time (s)").y_desc("ms").draw()?;
    for (name, color, width, get) in PERCENTILES {
        // Windows with no completed job have no latency: leave gaps out of the line.
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.throughput > 0.0)
            .map(|r| (r.t_s, get(r)))
            .collect();
        let style = color.stroke_width(width);
        let drawn = if name == "p50" {
            chart.draw_series(DashedLineSeries::new(points, 10, 6, style))?
        } else {
            chart.draw_series(LineSeries::new(points, style))?
        };
        drawn.label(name).legend(legend_of(style));
    }
    if let Some(target) = target_p95_ms {
        let style = RGBColor(0, 0, 0).stroke_width(1);
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, target), (t_max(rows), target)],
                4,
                4,
                style,
            ))?
            .label(format!("target p95 {target:.1} ms"))
            .legend(legend_of(style));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn legend_of(style: ShapeStyle) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style)
}
