//! The dead host's part of the report (only with several dead channels or tenants):
//! when the host circuit opened, the requests the host received before that and in all, and the
//! budget of [`host_budget`].

use super::seen::{ms_between, probes_allowed, AuditRow, Seen};
use super::{Measured, Options};
use crate::receiver::DeadMode;
use breakwater::config::Settings;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

/// The most distinct channels whose failures a host may need before it opens
/// (`crates/core/src/hosts/results.rs`): `threshold`, and on a host several tenants use, failing
/// channels of at least two tenants — in the worst order every one of the largest tenant's
/// `channels` (channel `i` → tenant `i mod tenants`) fails first, then one of another tenant.
pub fn failures_to_open(threshold: u64, channels: u64, tenants: u64) -> u64 {
    if tenants > 1 {
        threshold.max(channels.div_ceil(tenants) + 1)
    } else {
        threshold
    }
}

/// The dead host's request budget, from the code (`crates/core/src/hosts/`, the
/// fetch's gate cap): `failures` distinct channels' failures open the host
/// ([`failures_to_open`]); every request
/// admitted before the opening committed may still be sent, and at most `in_flight_cap` are in
/// flight at once (the host gate's cluster-wide cap, `hosts.max_in_flight`, and never more than
/// the tier's pools); after the opening, the host is parked and only host probes go, at most
/// `host_probes` (one per cooldown, doubling). Channel probes wait while the host holds.
///
/// This is "threshold + in flight" with the in-flight part at its cap, **not a hard
/// bound**: failures are counted one at a time under the host row's lock, so more than
/// `failures` requests can finish before the opening commits (a burst of timeouts), and each
/// slot they free can be refilled by the fetch until the park commits. The report gives the
/// parts (`attempts_completed_before_host_open`, `in_flight_at_host_open_by_attempt_times`) so
/// an excess can be read off.
pub fn host_budget(failures: u64, in_flight_cap: u64, host_probes: u64) -> u64 {
    failures + in_flight_cap + host_probes
}

/// The report's `dead_host` object, from the run `m`, what was seen after it (`seen`), the dead
/// endpoint's requests (`dead_requests`, as the report counts them) and the tier's pools
/// (`in_flight_cap`, all nodes').
pub(super) fn report(
    o: &Options,
    settings: &Settings,
    m: &Measured,
    seen: &Seen,
    dead_requests: u64,
    in_flight_cap: u64,
) -> Value {
    let hs = &settings.hosts;
    let host_open_at = seen
        .host_audit
        .iter()
        .find(|a| a.0 == "host.opened")
        .map(|a| m.wall.to_us(a.1));
    let host_seen_us = m.host_seen.map(|h| h.0 as i64);
    // "Before the opening": before the first poll that saw it committed (else its
    // transaction's start).
    let boundary = host_seen_us.or(host_open_at);
    let request_times: Vec<i64> = match o.dead_mode {
        DeadMode::Refuse => seen.attempts.iter().map(|a| m.wall.to_us(a.0)).collect(),
        _ => seen.arrivals.iter().map(|&t| t as i64).collect(),
    };
    let before = boundary.map(|b| request_times.iter().filter(|&&t| t < b).count() as u64);
    let after = before.map(|b| dead_requests.saturating_sub(b));
    // By the attempts' times (database clock), against the opening transaction's start.
    let ends = |a: &(DateTime<Utc>, i32, bool, Uuid)| m.wall.to_us(a.0) + i64::from(a.1) * 1000;
    let completed_before =
        host_open_at.map(|o| seen.attempts.iter().filter(|a| ends(a) <= o).count());
    let in_flight_at_open_db = host_open_at.map(|o| {
        seen.attempts
            .iter()
            .filter(|a| m.wall.to_us(a.0) <= o && ends(a) > o)
            .count()
    });
    let channels_before = boundary.map(|b| {
        seen.attempts
            .iter()
            .filter(|a| m.wall.to_us(a.0) < b)
            .map(|a| a.3)
            .collect::<std::collections::HashSet<_>>()
            .len()
    });
    let channels_hit = seen
        .attempts
        .iter()
        .map(|a| a.3)
        .collect::<std::collections::HashSet<_>>()
        .len();
    let count = |rows: &[AuditRow], action: &str| rows.iter().filter(|a| a.0 == action).count();
    let host_count = |action: &str| seen.host_audit.iter().filter(|a| a.0 == action).count();
    let host_probes = host_count("host.probe_started") as u64;
    let probe_attempts = seen.attempts.iter().filter(|a| a.2).count() as u64;
    let threshold = u64::try_from(hs.failure_threshold).unwrap_or(0);
    // No per-host cap (the default): what the pools can hold at once.
    let cap = hs
        .max_in_flight
        .and_then(|m| u64::try_from(m).ok())
        .map_or(in_flight_cap, |c| c.min(in_flight_cap));
    let host_span_ms = host_open_at.map_or(0.0, |o| ms_between(o, m.end_us as i64));
    let host_probes_allowed = probes_allowed(host_span_ms, hs.cooldown_ms, hs.max_cooldown_ms);
    let failures = failures_to_open(threshold, o.dead_channels as u64, o.dead_tenants as u64);
    let budget = host_budget(failures, cap, host_probes_allowed);
    let within = (o.dead_mode != DeadMode::Slow).then_some(dead_requests <= budget);
    let host_transitions: Vec<Value> = seen
        .host_audit
        .iter()
        .map(|(action, at, from, to, jobs, channels, tenants)| {
            json!({
                "action": action,
                "from": from,
                "to": to,
                "jobs": jobs,
                "channels": channels,
                "tenants": tenants,
                "after_backlog_start_ms": ms_between(m.backlog_start_us as i64, m.wall.to_us(*at)),
            })
        })
        .collect();
    json!({
        "host_key": m.host_key,
        "channels": o.dead_channels,
        "tenants": o.dead_tenants,
        "backlog_per_channel": {"min": o.share(o.dead_channels - 1), "max": o.share(0)},
        "host_opened_after_ms": host_seen_us.map(|t| ms_between(m.backlog_start_us as i64, t)),
        "host_opened_definition": "from the first backlog batch request to the first 10-ms poll of host_circuits that saw the host leave closed (the opening committed)",
        "host_open_tx_started_after_ms": host_open_at.map(|t| ms_between(m.backlog_start_us as i64, t)),
        "host_opened_after_first_request_ms": host_open_at.zip(request_times.iter().min()).map(|(o, f)| ms_between(*f, o)),
        "requests_total": dead_requests,
        "requests_before_host_open": before,
        "requests_after_host_open": after,
        "requests_before_definition": "received by the dead endpoint (refuse: attempts started) before the first poll that saw the host open",
        "in_flight_at_host_open": m.host_seen.and_then(|h| h.1),
        "in_flight_at_host_open_definition": "requests the dead endpoint held when the poll saw the host open (null for refuse)",
        "in_flight_at_host_open_by_attempt_times": in_flight_at_open_db,
        "attempts_completed_before_host_open": completed_before,
        "channels_with_requests_before_host_open": channels_before,
        "channels_with_requests": channels_hit,
        "channel_circuits_opened": count(&seen.audit, "circuit.opened"),
        "channel_probes_started": count(&seen.audit, "circuit.probe_started"),
        "host_probes_started": host_probes,
        "probe_attempts": probe_attempts,
        "host_transitions_by_action": {
            "host.opened": host_count("host.opened"),
            "host.reopened": host_count("host.reopened"),
            "host.probe_started": host_probes,
            "host.closed": host_count("host.closed"),
        },
        "budget": {
            "host_failure_threshold": threshold,
            "failures_to_open": failures,
            "failures_to_open_definition": "the most distinct channels whose failures the host may need: the threshold, and on a host several tenants use, channels of two tenants (worst order: all of the largest tenant's first, then one more)",
            "in_flight_cap": cap,
            "in_flight_cap_definition": "min(hosts.max_in_flight, the tier's pool × nodes): the host gate's cluster-wide cap",
            "host_probes_allowed": host_probes_allowed,
            "budget": budget,
            "within": within,
            "without_host_circuit": o.dead_channels as u64 * u64::try_from(settings.circuit.failure_threshold).unwrap_or(0),
            "without_host_circuit_definition": "dead channels × circuit.failure_threshold: what the channels' own circuits alone would cost at the least",
        },
        "transitions": host_transitions,
        "host_settings": {
            "failure_threshold": hs.failure_threshold,
            "failure_window_ms": hs.failure_window_ms,
            "cooldown_ms": hs.cooldown_ms,
            "max_cooldown_ms": hs.max_cooldown_ms,
            "max_in_flight": hs.max_in_flight,
        },
    })
}
