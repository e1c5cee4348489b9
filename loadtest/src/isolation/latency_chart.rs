//! `latency.svg`: the healthy channel's latency in the baseline and in the loaded stream, with
//! the backlog's enqueue and the breaker's (or the host's) transitions marked.

use super::seen::Seen;
use super::{Measured, Options};
use crate::chart::{self, Marker, Panel};
use crate::receiver::{DeadMode, Sink, PHASE_BASELINE, PHASE_LOADED};
use crate::stats::Summary;
use crate::stream::StreamResult;
use std::path::Path;

fn panel(sink: &Sink, phase: u8, s: &StreamResult, title: String) -> Panel {
    let points = sink.with(phase, |p| {
        p.timeline
            .iter()
            .map(|&(at, lat)| {
                (
                    (at as f64 - lat as f64 - s.start_us as f64) / 1e6,
                    (lat as f64 / 1000.0).max(0.01),
                )
            })
            .collect::<Vec<_>>()
    });
    let x_max = points.iter().map(|p| p.0).fold(0.0f64, f64::max).ceil() + 1.0;
    Panel {
        title,
        points,
        x_max,
        ..Panel::default()
    }
}

/// Writes `dir/latency.svg` (creating `dir`): the baseline's panel and the loaded stream's, on
/// one time axis; `baseline_sum` and `healthy_sum` are the two streams' latency summaries.
pub(super) fn write(
    dir: &Path,
    o: &Options,
    sink: &Sink,
    m: &Measured,
    seen: &Seen,
    baseline_sum: Summary,
    healthy_sum: Summary,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let base_panel = panel(
        sink,
        PHASE_BASELINE,
        &m.base,
        format!("baseline (no backlog): p95 {:.1} ms", baseline_sum.p95_ms),
    );
    let mut loaded_panel = panel(
        sink,
        PHASE_LOADED,
        &m.loaded,
        format!(
            "with {} dead-channel backlog ({}): p95 {:.1} ms",
            o.backlog,
            o.dead_mode.as_str(),
            healthy_sum.p95_ms
        ),
    );
    let rel = |us: i64| (us - m.loaded.start_us as i64) as f64 / 1e6;
    loaded_panel.markers = vec![
        Marker {
            t_s: rel(m.backlog_start_us as i64),
            label: "backlog.enqueue_started".into(),
        },
        Marker {
            t_s: rel(m.backlog_end_us as i64),
            label: "backlog.enqueued".into(),
        },
    ];
    if let Some(t) = m.open_seen_us {
        loaded_panel.markers.push(Marker {
            t_s: rel(t as i64),
            label: "circuit.open_seen".into(),
        });
    }
    if m.multi {
        // Dozens of channel transitions would bury the chart: the host's only.
        if let Some((t, _)) = m.host_seen {
            loaded_panel.markers.push(Marker {
                t_s: rel(t as i64),
                label: "host.open_seen".into(),
            });
        }
        loaded_panel
            .markers
            .extend(seen.host_audit.iter().map(|a| Marker {
                t_s: rel(m.wall.to_us(a.1)),
                label: a.0.clone(),
            }));
    } else {
        loaded_panel
            .markers
            .extend(seen.audit.iter().map(|a| Marker {
                t_s: rel(m.wall.to_us(a.1)),
                label: a.0.clone(),
            }));
    }
    loaded_panel.x_min = rel(m.backlog_start_us as i64).floor().min(0.0);
    loaded_panel.dead_requests = match o.dead_mode {
        DeadMode::Refuse => seen
            .attempts
            .iter()
            .map(|a| rel(m.wall.to_us(a.0)))
            .collect(),
        _ => seen.arrivals.iter().map(|&a| rel(a as i64)).collect(),
    };
    // Both panels on the same x range, so their times line up when read side by side.
    let x_min = base_panel.x_min.min(loaded_panel.x_min);
    let x_max = base_panel.x_max.max(loaded_panel.x_max);
    let mut panels = [base_panel, loaded_panel];
    for p in &mut panels {
        p.x_min = x_min;
        p.x_max = x_max;
    }
    chart::latency_svg(
        &dir.join("latency.svg"),
        &format!(
            "Healthy channel latency, {} /s, {} node(s); the dead channel's backlog and breaker transitions marked (t < 0: before the stream)",
            o.rate, o.service.nodes
        ),
        &panels,
    )?;
    Ok(())
}
