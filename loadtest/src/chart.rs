//! Charts (SVG, plotters): healthy latency over time beside the baseline with breaker
//! transitions marked, and deliveries per second for the throughput scenario.

use plotters::prelude::*;
use std::path::Path;

/// A vertical marker (a breaker transition).
#[derive(Debug, Clone)]
pub struct Marker {
    /// Seconds since the panel's stream started.
    pub t_s: f64,
    /// Audit action, e.g. `circuit.opened`.
    pub label: String,
}

/// One panel: latency points over time.
#[derive(Debug, Clone, Default)]
pub struct Panel {
    /// Caption.
    pub title: String,
    /// (enqueue time in seconds since the stream started, latency ms) per delivery.
    pub points: Vec<(f64, f64)>,
    /// Breaker transitions.
    pub markers: Vec<Marker>,
    /// Dead-endpoint requests (seconds since the stream started), drawn as ticks at the bottom.
    pub dead_requests: Vec<f64>,
    /// Start of the x axis, seconds (negative: before the stream started).
    pub x_min: f64,
    /// End of the x axis, seconds.
    pub x_max: f64,
}

fn marker_color(label: &str) -> RGBColor {
    match label {
        "circuit.opened" => RGBColor(214, 39, 40),
        "circuit.open_seen" => RGBColor(227, 119, 194),
        "circuit.reopened" => RGBColor(140, 20, 20),
        "circuit.probe_started" => RGBColor(255, 127, 14),
        "circuit.closed" => RGBColor(44, 160, 44),
        "backlog.enqueue_started" | "backlog.enqueued" => RGBColor(148, 103, 189),
        _ => RGBColor(100, 100, 100),
    }
}

/// Draws panels side by side on one shared log-scale latency axis.
pub fn latency_svg(path: &Path, title: &str, panels: &[Panel]) -> anyhow::Result<()> {
    let y_hi = panels
        .iter()
        .flat_map(|p| p.points.iter().map(|q| q.1))
        .fold(750.0f64, f64::max)
        * 4.0;
    let y_lo = panels
        .iter()
        .flat_map(|p| p.points.iter().map(|q| q.1))
        .fold(f64::INFINITY, f64::min)
        .clamp(0.05, 1.0)
        * 0.5;
    let width = 700 * panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (area, p) in areas.iter().zip(panels) {
        let x_min = p.x_min.min(0.0);
        let x_max = p.x_max.max(x_min + 1.0);
        let mut chart = ChartBuilder::on(area)
            .caption(&p.title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x_min..x_max, (y_lo..y_hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("enqueue time, seconds since the stream started")
            .y_desc("end-to-end latency, ms (log scale)")
            .y_label_formatter(&|v| {
                if *v >= 1.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                }
            })
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for (y, label, color) in [
            (100.0, "goal 100 ms", RGBColor(44, 160, 44)),
            (1_000.0, "floor 1 s", RGBColor(214, 39, 40)),
        ] {
            chart
                .draw_series(LineSeries::new(
                    vec![(x_min, y), (x_max, y)],
                    color.mix(0.5).stroke_width(1),
                ))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.mix(0.5)));
        }
        let blue = RGBColor(31, 119, 180);
        chart
            .draw_series(
                p.points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 2, blue.mix(0.55).filled())),
            )?
            .label(format!("delivery ({} points)", p.points.len()))
            .legend(move |(x, y)| Circle::new((x + 8, y), 3, blue.filled()));
        let mut labelled = std::collections::HashSet::new();
        // Labels of markers close together (a backlog enqueued and its breaker opening in the
        // same second) go on different heights, so they do not print over one another.
        let near = (x_max - x_min) * 0.12;
        let mut placed: Vec<f64> = Vec::new();
        for m in &p.markers {
            if m.t_s < x_min || m.t_s > x_max {
                continue;
            }
            let c = marker_color(&m.label);
            let s = chart.draw_series(std::iter::once(PathElement::new(
                vec![(m.t_s, y_lo), (m.t_s, y_hi)],
                c.stroke_width(2),
            )))?;
            if labelled.insert(m.label.clone()) {
                s.label(m.label.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                });
            }
            let short = m.label.trim_start_matches("circuit.");
            let level = placed.iter().filter(|&&x| (x - m.t_s).abs() < near).count();
            placed.push(m.t_s);
            let y_text = y_hi / 1.6 / (1.0 + 0.6 * (level % 5) as f64);
            // A time that rounds to zero is "0.0s", not "-0.0s".
            let t = if m.t_s.abs() < 0.05 { 0.0 } else { m.t_s };
            chart.draw_series(std::iter::once(Text::new(
                format!(" {short} @{t:.1}s"),
                (m.t_s, y_text),
                ("sans-serif", 12).into_font().color(&c),
            )))?;
        }
        // After the markers, so a transition's line does not hide the requests around it.
        if !p.dead_requests.is_empty() {
            let gray = RGBColor(90, 90, 90);
            let y0 = y_lo * 1.15;
            let y1 = y_lo * 1.6;
            let step = (p.dead_requests.len() / 5_000).max(1);
            chart
                .draw_series(
                    p.dead_requests
                        .iter()
                        .step_by(step)
                        .map(|&x| PathElement::new(vec![(x, y0), (x, y1)], gray.mix(0.6))),
                )?
                .label(format!("dead-endpoint request ({})", p.dead_requests.len()))
                .legend(move |(x, y)| PathElement::new(vec![(x + 8, y - 5), (x + 8, y + 5)], gray));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 12))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Draws deliveries received and enqueued per second.
pub fn rate_svg(
    path: &Path,
    title: &str,
    received: &[(f64, f64)],
    enqueued: &[(f64, f64)],
) -> anyhow::Result<()> {
    let x_max = received
        .iter()
        .chain(enqueued)
        .map(|p| p.0)
        .fold(1.0f64, f64::max)
        + 1.0;
    let y_max = received
        .iter()
        .chain(enqueued)
        .map(|p| p.1)
        .fold(10.0f64, f64::max)
        * 1.15;
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first enqueue")
        .y_desc("deliveries per second")
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let series = [
        (enqueued, RGBColor(255, 127, 14), "accepted by the API /s"),
        (
            received,
            RGBColor(31, 119, 180),
            "received by the endpoints /s",
        ),
    ];
    for (points, color, label) in series {
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    root.present()?;
    Ok(())
}
