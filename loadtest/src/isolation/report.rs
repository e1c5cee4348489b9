//! The isolation report: `result.json`'s fields computed from the run and from what was seen
//! after it ([`Seen`]) ([`build`]).

use super::dead_host;
use super::seen::{ms_between, probes_allowed, Seen};
use super::{latency_chart, Measured, Options};
use crate::receiver::{DeadEndpoint, DeadMode, InFlight, Sink, PHASE_BASELINE, PHASE_LOADED};
use crate::service;
use crate::stats::summarize;
use crate::stream::StreamResult;
use breakwater::config::Settings;
use breakwater_core::Tier;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// Accepted but never received, for one stream.
fn lost(sink: &Sink, phase: u8, s: &StreamResult) -> (u64, u64) {
    sink.with(phase, |p| {
        let lost = s
            .accepted
            .iter()
            .filter(|&&seq| p.seen.get(seq as usize).copied().unwrap_or(0) == 0)
            .count() as u64;
        (lost, p.duplicates)
    })
}

/// How many deliveries of a stream took over 100 ms and over 1 s, and the enqueue time (s since
/// the stream started) of the last one over 100 ms: how long the disturbance lasted.
fn slow(sink: &Sink, phase: u8, s: &StreamResult) -> Value {
    sink.with(phase, |p| {
        let over = |ms: u64| p.timeline.iter().filter(|t| t.1 > ms * 1000).count();
        let last = p
            .timeline
            .iter()
            .filter(|t| t.1 > 100_000)
            .map(|&(at, lat)| (at - lat) as f64 - s.start_us as f64)
            .fold(f64::NAN, f64::max);
        json!({
            "over_100ms": over(100),
            "over_1s": over(1000),
            "last_over_100ms_enqueued_at_s": (!last.is_nan()).then(|| (last / 1e5).round() / 10.0),
        })
    })
}

/// The slow channel's own drain (`--dead-mode slow`): the requests its endpoint received from
/// the backlog's first batch to the loaded stream's drain's end, per second, and its
/// in-flight count in the queue monitor's samples (one a second from the backlog's end, read
/// from the database: `job_groups.in_flight` of its group; the executing jobs; and the
/// endpoint's own gauge at the same moment).
fn slow_drain(m: &Measured, seen: &Seen) -> Value {
    let (from, to) = (m.backlog_start_us, m.end_us);
    let window_s = to.saturating_sub(from) as f64 / 1e6;
    let mut by_second: Vec<u64> = Vec::new();
    for &t in seen.arrivals.iter().filter(|&&t| t >= from && t <= to) {
        let i = ((t - from) / 1_000_000) as usize;
        if by_second.len() <= i {
            by_second.resize(i + 1, 0);
        }
        by_second[i] += 1;
    }
    let received: u64 = by_second.iter().sum();
    // Max and mean of a series of counts (null and null for none).
    let stats = |v: Vec<i64>| -> Value {
        let Some(&max) = v.iter().max() else {
            return json!({"max": null, "mean": null});
        };
        let mean = v.iter().sum::<i64>() as f64 / v.len() as f64;
        json!({"max": max, "mean": (mean * 100.0).round() / 100.0})
    };
    let attempts_in_window = seen
        .attempts
        .iter()
        .filter(|a| {
            let t = m.wall.to_us(a.0);
            t >= from as i64 && t <= to as i64
        })
        .count();
    let received_per_s = if window_s > 0.0 {
        (received as f64 / window_s * 100.0).round() / 100.0
    } else {
        0.0
    };
    json!({
        "window_s": (window_s * 10.0).round() / 10.0,
        "window_definition": "the backlog's first batch request → the loaded stream's drain's end",
        "received": received,
        "received_per_s": received_per_s,
        "received_by_second": by_second,
        "attempts_started_in_window": attempts_in_window,
        "samples": m.samples.len(),
        "in_flight": stats(m.samples.iter().map(|s| s.dead_group_in_flight).collect()),
        "in_flight_definition": "job_groups.in_flight of the slow channel's group (summed over the dead channels), in the queue monitor's 1-s samples (queue_samples[].dead_group_in_flight)",
        "executing_jobs": stats(m.samples.iter().map(|s| s.dead_executing).collect()),
        "endpoint_in_flight": stats(m.samples.iter().filter_map(|s| s.dead_endpoint_in_flight).map(|v| v as i64).collect()),
    })
}

/// The report (`result.json`, before [`crate::on_fresh_db`] adds what it ran on) of the run `m`
/// and what was seen after it (`seen`); with `o.run.out`, also writes the chart there.
pub(super) fn build(
    o: &Options,
    tier: Tier,
    settings: &Settings,
    sink: &Sink,
    dead: &DeadEndpoint,
    m: &Measured,
    seen: &Seen,
) -> anyhow::Result<Value> {
    // Latency.
    let healthy_sum = sink.with(PHASE_LOADED, |p| summarize(&p.hist));
    let baseline_sum = sink.with(PHASE_BASELINE, |p| summarize(&p.hist));
    let (lost_base, dup_base) = lost(sink, PHASE_BASELINE, &m.base);
    let (lost_loaded, dup_loaded) = lost(sink, PHASE_LOADED, &m.loaded);

    // The breaker.
    let opened_at = seen
        .audit
        .iter()
        .find(|a| a.0 == "circuit.opened")
        .map(|a| m.wall.to_us(a.1));
    let first_attempt_us = seen.attempts.first().map(|a| m.wall.to_us(a.0));
    let breaker_opened_after_ms = opened_at.map(|t| ms_between(m.backlog_start_us as i64, t));
    let (dead_requests, source) = match dead.in_flight() {
        None => (
            seen.attempts.len() as u64,
            "delivery_attempts (nothing listens)",
        ),
        Some(g) => (g.total(), "dead receiver"),
    };
    let dead_max_in_flight = dead.in_flight().map(InFlight::max);
    // The budget: `threshold` failures, then whatever was in flight when the breaker opened
    // (a worker that was admitted before the opening committed sends once, then blocks on the
    // channel row; so at most one per worker of the tier, cluster-wide), then one request per
    // probe, and probes come at most once per cooldown (doubling).
    let threshold = u64::try_from(settings.circuit.failure_threshold).unwrap_or(0);
    let probe_requests = seen
        .audit
        .iter()
        .filter(|a| a.0 == "circuit.probe_started")
        .count() as u64;
    let non_probe_requests = dead_requests.saturating_sub(probe_requests);
    let in_flight_at_open = non_probe_requests.saturating_sub(threshold);
    let in_flight_cap = service::tier_pool(settings, tier) as u64 * o.service.nodes as u64;
    let span_ms = opened_at.map_or(0.0, |o| ms_between(o, m.end_us as i64));
    let probes_budget = probes_allowed(
        span_ms,
        settings.circuit.cooldown_ms,
        settings.circuit.max_cooldown_ms,
    );
    let budget = threshold + in_flight_at_open.min(in_flight_cap) + probes_budget;
    // A slow endpoint never fails, so its circuit never opens and no budget applies.
    let within_budget = (o.dead_mode != DeadMode::Slow).then_some(dead_requests <= budget);
    // When the dead endpoint saw its last non-probe request, relative to the opening.
    let probe_starts: Vec<DateTime<Utc>> =
        seen.attempts.iter().filter(|a| a.2).map(|a| a.0).collect();
    let last_non_probe_us = match o.dead_mode {
        DeadMode::Refuse => seen
            .attempts
            .iter()
            .filter(|a| !a.2)
            .map(|a| m.wall.to_us(a.0))
            .max(),
        _ => seen
            .arrivals
            .iter()
            .filter(|&&t| {
                !probe_starts
                    .iter()
                    .any(|p| (m.wall.to_us(*p) - t as i64).abs() < 50_000)
            })
            .map(|&t| t as i64)
            .max(),
    };
    let in_flight_db = seen
        .attempts
        .iter()
        .filter(|(s, d, p, _)| {
            let s = m.wall.to_us(*s);
            !*p && opened_at.is_some_and(|o| s <= o && s + i64::from(*d) * 1000 > o)
        })
        .count();

    let lost_total = lost_base + lost_loaded;
    let ratio = if baseline_sum.p95_ms > 0.0 {
        Some((healthy_sum.p95_ms / baseline_sum.p95_ms * 100.0).round() / 100.0)
    } else {
        None
    };
    let all_parked_s = m
        .samples
        .iter()
        .find(|s| s.backlog_all_parked())
        .map(|s| s.t_s);

    let transitions: Vec<Value> = seen.audit
        .iter()
        .map(|(action, at, from, to, parked)| {
            json!({
                "action": action,
                "from": from,
                "to": to,
                "parked_in_bulk": parked,
                "after_backlog_start_ms": ms_between(m.backlog_start_us as i64, m.wall.to_us(*at)),
                "after_loaded_stream_start_ms": ms_between(m.loaded.start_us as i64, m.wall.to_us(*at)),
            })
        })
        .collect();

    // The dead host: only with several dead channels or tenants.
    let dead_host = m
        .multi
        .then(|| dead_host::report(o, settings, m, seen, dead_requests, in_flight_cap));

    let mut cpu_report =
        crate::cpu::report(&[("baseline", &m.cpu_baseline), ("loaded", &m.cpu_loaded)]);
    cpu_report["phases_definition"] = json!({
        "baseline": "the baseline stream's first enqueue → its drain's end",
        "loaded": "the backlog's first batch request → the loaded stream's drain's end",
    });
    let slow_drain = (o.dead_mode == DeadMode::Slow).then(|| slow_drain(m, seen));

    let mut report = json!({
        "scenario": "isolation",
        "backlog": o.backlog,
        "dead_mode": o.dead_mode.as_str(),
        "dead_ordering": o.dead_ordering.as_str(),
        "nodes": o.service.nodes,
        "tier": tier.as_str(),
        "rate_per_s": o.rate,
        "duration_s": o.duration.as_secs_f64(),
        "healthy": healthy_sum,
        "baseline": baseline_sum,
        "healthy_p95_over_baseline_p95": ratio,
        "healthy_phases": seen.healthy_phases,
        "slow": {
            "baseline": slow(sink, PHASE_BASELINE, &m.base),
            "healthy": slow(sink, PHASE_LOADED, &m.loaded),
        },
        "latency_definition": "harness clock at the enqueue request's send (in the payload) → harness clock at the receiver; includes the API request",
        "api_enqueue": {
            "baseline": summarize(&m.base.api_hist),
            "healthy": summarize(&m.loaded.api_hist),
        },
        "dead_slow_ms": (o.dead_mode == DeadMode::Slow).then_some(o.slow.as_millis() as u64),
        "dead_endpoint_requests": dead_requests,
        "dead_endpoint_requests_source": source,
        "dead_max_in_flight": dead_max_in_flight,
        "dead_max_in_flight_definition": "the most requests the dead endpoint held at once (counted from arrival until its answer or the connection's close); null for refuse",
        "dead_endpoint_attempts_recorded": seen.attempts.len(),
        "dead_endpoint_budget": {
            "failure_threshold": threshold,
            "in_flight_at_open": in_flight_at_open,
            "in_flight_at_open_cap": in_flight_cap,
            "in_flight_at_open_by_attempt_times": in_flight_db,
            "probes_allowed": probes_budget,
            "probe_requests": probe_requests,
            "budget": budget,
            "within": within_budget,
            "last_non_probe_request_after_open_ms": opened_at.zip(last_non_probe_us).map(|(o, l)| ms_between(o, l)),
        },
        "breaker_opened_after_ms": m.open_seen_us.map(|t| ms_between(m.backlog_start_us as i64, t as i64)),
        "breaker_opened_definition": "from the first backlog batch request to the first 10-ms poll that saw the channel's circuit_state leave closed (the opening committed)",
        "breaker_open_tx_started_after_ms": breaker_opened_after_ms,
        "breaker_opened_after_first_attempt_ms": opened_at.zip(first_attempt_us).map(|(o, f)| ms_between(f, o)),
        "backlog_all_parked_after_s": all_parked_s,
        "backlog_all_parked_definition": "from the first backlog batch request to the first queue sample (queue_samples: one a second, the first when the last batch is accepted) in which every waiting job of the dead channel(s) is parked (its group or its gate parked, by breakwater_queue::parked_count: dead_parked) and none of theirs is executing; null if no sample saw that (slow; or a breaker that opened only after the loaded stream's drain)",
        "transitions": transitions,
        "circuit_at_end": seen.circuit_end,
        "prune": m.prune_run.map(|run| {
            crate::prune::report(
                o.prune_rows,
                m.seed_s,
                &settings.retention,
                &run,
                m.loaded_end_us,
                sink,
                baseline_sum,
            )
        }),
        "lost": lost_total,
        "lost_detail": {"baseline": lost_base, "healthy": lost_loaded},
        "duplicates": dup_base + dup_loaded,
        "enqueue_errors": m.base.errors + m.loaded.errors,
        "enqueue_error_causes": {"baseline": m.base.error_causes, "healthy": m.loaded.error_causes},
        "generator_skipped": m.base.skipped + m.loaded.skipped,
        "healthy_attempts": {"total": seen.healthy_attempts.0, "failed": seen.healthy_attempts.1},
        "backlog_enqueued": m.enqueued,
        "backlog_enqueue_ms": ms_between(m.backlog_start_us as i64, m.backlog_end_us as i64),
        "backlog_status": seen.statuses.iter().map(|(s, n)| (s.clone(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "backlog_accounted": seen.statuses.iter().map(|s| s.1).sum::<i64>() as u64 == m.enqueued,
        "queue_samples": m.samples,
        "slow_drain": slow_drain,
        "cpu": cpu_report,
        "throughput_per_s": Value::Null,
        "goals": {
            "required_p95_under_1s": healthy_sum.p95_ms < 1000.0,
            "goal_p95_under_100ms": healthy_sum.p95_ms < 100.0,
            "goal_p95_within_1_5x_baseline": ratio.is_some_and(|r| r <= 1.5),
            "lost_zero": lost_total == 0,
            "dead_requests_within_budget": within_budget,
        },
        "service_settings": {
            "pool_high": settings.worker.pool_high,
            "pool_default": settings.worker.pool_default,
            "pool_bulk": settings.worker.pool_bulk,
            "connect_timeout_ms": settings.worker.connect_timeout_ms,
            "request_timeout_ms": settings.worker.request_timeout_ms,
            "promote_interval_ms": settings.worker.promote_interval_ms,
            "poll_interval_ms": settings.worker.poll_interval_ms,
            "max_connections_per_node": settings.database.max_connections,
            "failure_threshold": settings.circuit.failure_threshold,
            "cooldown_ms": settings.circuit.cooldown_ms,
            "max_cooldown_ms": settings.circuit.max_cooldown_ms,
        },
    });

    if let Some(h) = &dead_host {
        report["dead_channels"] = json!(o.dead_channels);
        report["dead_tenants"] = json!(o.dead_tenants);
        // With a dead host, the budget that applies is the host's (the channel budget above
        // assumes one channel).
        report["goals"]["dead_requests_within_budget"] = h["budget"]["within"].clone();
        report["dead_host"] = h.clone();
    }

    if let Some(dir) = &o.run.out {
        latency_chart::write(dir, o, sink, m, seen, baseline_sum, healthy_sum)?;
    }
    Ok(report)
}
