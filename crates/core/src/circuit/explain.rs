//! Explaining a channel's breaker from its settings alone: how many requests a
//! dead endpoint gets before the circuit opens, how often it is probed while open, the longest a
//! delivery can wait before it is dead, and the settings that fight each other. A pure function
//! ([`explain`]) of [`ExplainInput`], unit-tested here and checked against a real refusing
//! endpoint in `tests/e2e/retry_policy.rs`.
//!
//! **Before the circuit opens** the rules that decide the count are (module doc of
//! [`crate::circuit`] and [`breakwater_queue::adapt_limit`]):
//! - `failure_threshold` consecutive transient failures open it; a refused connection, a timeout
//!   and a 5xx are each one, so the three dead modes count alike;
//! - the channel's concurrency cap (cluster-wide: `min(max(floor(limit), floor), ceiling)` at the
//!   fetch) bounds the requests in flight, and every transient failure multiplies the limit by
//!   the decrease factor (0.5), down to the floor, in the transaction that records it and frees
//!   its slot;
//! - a request already sent when the circuit opens still reaches the endpoint (its failure is not
//!   counted again); a job claimed but not yet sent is parked by the gate with no request.
//!
//! So with a backlog (at least as many deliveries as requests), failures arrive one at a time,
//! and a slot is refilled only while the in-flight count is below the cap after the cut:
//! [`requests_before_open`] plays that out. At the defaults (threshold 5, limit 4, floor 1):
//! 4 requests at once, all fail (the cap falls 4 → 2 → 1 → 1), then 1 more, whose failure is
//! the 5th: **5 requests** in two rounds. A timing-out endpoint takes two request timeouts
//! (2 × 15 s = 30 s) to open; a refusing one, milliseconds. BENCHMARKS.md's load test saw 5
//! requests (timeout) and 6 (refuse, 503): 5 before the opening, plus the one probe that went
//! in the refuse and 503 runs, which outlived the 30 s cooldown after their opening (the timeout
//! runs opened 30 s later and ended before their first probe).
//!
//! The limit assumed is the channel's initial one (`worker.channel_concurrency_initial`, a
//! fresh or idle channel); a channel whose limit grew while it was healthy may have up to its
//! ceiling in flight when the endpoint dies: `at_most_requests`. The health check
//! (`health_min_attempts` in `health_window_ms` at `health_failure_ratio`) may open a circuit
//! sooner when the threshold is higher than its minimum; the count ignores it.

use super::CircuitConfig;
use crate::ratelimit::RateLimit;
use crate::retry_policy::PolicyInForce;
use serde::Serialize;

/// What [`explain`] reads: a channel's settings in force (its overrides, else the cluster's)
/// and the service configuration that applies to it.
#[derive(Debug, Clone)]
pub struct ExplainInput {
    /// The circuit configuration (`[circuit]`): probe lease, health check, caps.
    pub circuit: CircuitConfig,
    /// Failure threshold in force (channel override, else cluster default).
    pub failure_threshold: i32,
    /// First cooldown in force, ms.
    pub cooldown_ms: i64,
    /// Consecutive successes a half-open circuit needs to close.
    pub close_after_successes: i32,
    /// The channel's concurrency bounds: initial limit, floor, ceiling (its `max_in_flight`,
    /// else `worker.channel_concurrency_ceiling`), and the decrease factor of an overload.
    pub concurrency: breakwater_queue::GroupLimits,
    /// The channel's rate limit, if any.
    pub rate_limit: Option<RateLimit>,
    /// The retry policy in force ([`crate::retry_policy::in_force`]).
    pub policy: PolicyInForce,
    /// `worker.connect_timeout_ms`.
    pub connect_timeout_ms: i64,
    /// `retention.deliveries_days` (0 = kept for ever).
    pub retention_days: u32,
}

/// A dead endpoint of one kind, before the circuit opens.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DeadMode {
    /// Requests the endpoint gets before the circuit opens (with a backlog).
    pub requests: u32,
    /// In how many rounds: each round waits for the previous one's failures.
    pub rounds: u32,
    /// The least time from the first request to the opening, ms: rounds × the time one failure
    /// takes (0 for a refusal, the request timeout for a timeout, the endpoint's own answer time
    /// for a 5xx, not known here), or the rate limit's spacing of the requests if longer.
    pub time_to_open_ms: i64,
    /// What the figure assumes.
    pub note: String,
}

/// The requests before the circuit opens, per dead mode.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct BeforeOpen {
    /// Nothing listens (connection refused).
    pub refused: DeadMode,
    /// The endpoint accepts and never answers.
    pub timing_out: DeadMode,
    /// The endpoint answers 5xx (or 408, 429).
    pub server_error: DeadMode,
    /// Requests before the opening if the channel's limit had grown to its ceiling while it was
    /// healthy (every slot in flight when the endpoint dies).
    pub at_most_requests: u32,
    /// The concurrency limit the figures start from (the initial one).
    pub initial_limit: u32,
}

/// How the open circuit is probed.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WhileOpen {
    /// From the opening to the first probe, ms.
    pub first_probe_after_ms: i64,
    /// Each failed probe doubles the next wait, up to `max_cooldown_ms`.
    pub growth_factor: f64,
    /// The longest wait between probes, ms.
    pub max_cooldown_ms: i64,
    /// When the first probes go, ms after the opening, while each fails (at most 12).
    pub probes_at_ms: Vec<i64>,
    /// Probes in the first hour open.
    pub probes_first_hour: u32,
    /// Probes a day once the wait reached its cap.
    pub probes_per_day_at_cap: u32,
    /// Consecutive successful probe deliveries before the circuit closes.
    pub close_after_successes: i32,
}

/// The longest a delivery can wait before it is dead.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct UntilDead {
    /// HTTP attempts.
    pub max_attempts: i32,
    /// The waits between them, ms, before jitter (`max_attempts − 1` of them, at most 100
    /// shown).
    pub waits_ms: Vec<i64>,
    /// Their sum, ms.
    pub waits_total_ms: i64,
    /// Every attempt timing out: `max_attempts × request_timeout_ms`.
    pub requests_total_ms: i64,
    /// The longest, ms: the waits at their jitter's upper end plus every attempt timing out.
    pub longest_ms: i64,
    /// The same if every retry met a `Retry-After` at its cap (`circuit.retry_after_cap_ms`)
    /// where that is longer than the wait, ms.
    pub longest_with_retry_after_ms: i64,
    /// Time parked while the circuit is open or paused is not in these figures: a parked
    /// delivery uses no attempt and waits until the circuit closes, however long.
    pub parked_time_excluded: bool,
}

/// A pair of settings that fight each other.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Warning {
    /// Stable code: `timeout_exceeds_cooldown`, `timeout_exceeds_probe_lease`,
    /// `schedule_outlives_retention`, `rate_limit_below_health_minimum`,
    /// `rate_limit_slower_than_health_window`, `attempts_below_threshold`,
    /// `cooldown_above_max_cooldown`.
    pub code: &'static str,
    /// What happens, with the figures.
    pub message: String,
}

/// The answer of `GET /api/v1/channels/{id}/circuit/explain`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Explanation {
    /// Requests a dead endpoint gets before the circuit opens.
    pub before_open: BeforeOpen,
    /// Probing while open.
    pub while_open: WhileOpen,
    /// The longest a delivery waits before it is dead.
    pub until_dead: UntilDead,
    /// The settings in force that fight each other (empty when none).
    pub warnings: Vec<Warning>,
    /// The settings these figures come from.
    pub settings: ExplainedSettings,
}

/// The settings an [`Explanation`] is computed from.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ExplainedSettings {
    /// Failure threshold in force.
    pub failure_threshold: i32,
    /// First cooldown in force, ms.
    pub cooldown_ms: i64,
    /// The concurrency limit a channel starts at (`worker.channel_concurrency_initial`).
    pub concurrency_initial: u32,
    /// Its floor (`worker.channel_concurrency_floor`).
    pub concurrency_floor: u32,
    /// Its ceiling (the channel's `max_in_flight`, else `worker.channel_concurrency_ceiling`).
    pub concurrency_ceiling: u32,
    /// Rate limit, if any.
    pub rate_limit: Option<String>,
    /// The retry policy in force.
    pub retry_policy: PolicyInForce,
    /// `retention.deliveries_days`.
    pub retention_days: u32,
}

/// Requests a dead endpoint gets before `threshold` consecutive failures open the circuit, and
/// in how many rounds, starting from concurrency limit `initial` (module doc): failures come
/// one at a time, oldest first; each multiplies the limit by `decrease` (down to `floor`) and
/// frees its slot; then slots are refilled up to the cap `min(max(⌊limit⌋, floor), ceiling)`.
/// The requests in flight at the opening are counted (they were sent).
pub(crate) fn requests_before_open(
    threshold: u32,
    initial: f64,
    floor: u32,
    ceiling: u32,
    decrease: f64,
) -> (u32, u32) {
    let ceiling = ceiling.max(1);
    let lo = floor.min(ceiling).max(1) as f64;
    let hi = ceiling as f64;
    let clamp = |l: f64| l.max(lo).min(hi);
    let cap = |l: f64| (clamp(l).floor() as u32).clamp(lo as u32, ceiling);
    let mut limit = clamp(initial);
    // Each request in flight, by its round.
    let mut in_flight: std::collections::VecDeque<u32> = (0..cap(limit)).map(|_| 1).collect();
    let mut sent = in_flight.len() as u32;
    let mut rounds = 1;
    let mut failures = 0;
    while let Some(round) = in_flight.pop_front() {
        failures += 1;
        rounds = rounds.max(round);
        if failures >= threshold.max(1) {
            break;
        }
        limit = (clamp(limit) * decrease).max(lo);
        while (in_flight.len() as u32) < cap(limit) {
            in_flight.push_back(round + 1);
            sent += 1;
        }
    }
    (sent, rounds)
}

/// When the probes of a circuit that keeps failing them go, ms after the opening: the first
/// after `cooldown_ms`, each next one `min(cooldown_ms × 2^k, max_cooldown_ms)` after the k-th
/// failed probe (`probe_failed`), until `horizon_ms` (at most `max` of them).
pub(crate) fn probe_times(
    cooldown_ms: i64,
    max_cooldown_ms: i64,
    horizon_ms: i64,
    max: usize,
) -> Vec<i64> {
    let mut out = Vec::new();
    let mut t = cooldown_ms.max(1);
    let mut k = 0u32;
    while t <= horizon_ms && out.len() < max {
        out.push(t);
        k += 1;
        let wait = (cooldown_ms as f64 * 2f64.powi(k.min(30) as i32)).min(max_cooldown_ms as f64);
        t += wait.max(1.0) as i64;
    }
    out
}

fn human(ms: i64) -> String {
    let s = ms as f64 / 1000.0;
    if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 172_800.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} days", s / 86_400.0)
    }
}

/// Explains a channel's breaker from its settings `i` (module doc).
pub fn explain(i: &ExplainInput) -> Explanation {
    let c = &i.concurrency;
    let ceiling = c.ceiling.max(1);
    let threshold = i.failure_threshold.max(1) as u32;
    let (requests, rounds) = requests_before_open(
        threshold,
        c.initial as f64,
        c.floor,
        ceiling,
        c.decrease_factor,
    );
    let (at_most, _) = requests_before_open(
        threshold,
        ceiling as f64,
        c.floor,
        ceiling,
        c.decrease_factor,
    );
    let timeout = i.policy.request_timeout_ms;
    // The rate limit spaces the requests: the last of `requests` goes at least this long after
    // the first.
    let spacing = i.rate_limit.map_or(0, |r| {
        (r.interval_us() as f64 / 1000.0 * requests.saturating_sub(1) as f64) as i64
    });
    let mode = |per_round: i64, note: String| DeadMode {
        requests,
        rounds,
        time_to_open_ms: (per_round * rounds as i64).max(spacing),
        note,
    };
    let before_open = BeforeOpen {
        refused: mode(
            0,
            "each refusal fails at once; the rounds follow each other in milliseconds".into(),
        ),
        timing_out: mode(
            timeout,
            format!(
                "each request waits its timeout ({timeout} ms); a host that drops the connection \
                 attempt instead fails at the connect timeout ({} ms) if that is shorter",
                i.connect_timeout_ms
            ),
        ),
        server_error: mode(
            0,
            "plus the endpoint's own answer time per round; a 429 or 503 with Retry-After also \
             holds the whole channel until then (capped at circuit.retry_after_cap_ms), without \
             using attempts"
                .into(),
        ),
        at_most_requests: at_most,
        initial_limit: (c.initial.max(c.floor.min(ceiling))).min(ceiling),
    };

    let max_cooldown = i.circuit.max_cooldown_ms;
    let probes_at_ms = probe_times(i.cooldown_ms, max_cooldown, i64::MAX, 12);
    let probes_first_hour =
        probe_times(i.cooldown_ms, max_cooldown, 3_600_000, 10_000).len() as u32;
    let while_open = WhileOpen {
        first_probe_after_ms: i.cooldown_ms,
        growth_factor: 2.0,
        max_cooldown_ms: max_cooldown,
        probes_at_ms,
        probes_first_hour,
        probes_per_day_at_cap: (86_400_000 / max_cooldown.max(1)) as u32,
        close_after_successes: i.close_after_successes,
    };

    let p = &i.policy;
    let n_waits = (p.max_attempts - 1).max(0);
    let waits: Vec<i64> = (1..=n_waits)
        .map(|n| p.backoff.nominal(n).as_millis() as i64)
        .collect();
    let waits_total: i64 = waits.iter().sum();
    let jitter = p.jitter.clamp(0.0, 1.0);
    let requests_total = p.max_attempts as i64 * timeout;
    let longest = (waits_total as f64 * (1.0 + jitter)) as i64 + requests_total;
    let cap = i.circuit.retry_after_cap_ms;
    let with_retry_after = waits
        .iter()
        .map(|w| ((*w as f64 * (1.0 + jitter)) as i64).max(cap))
        .sum::<i64>()
        + requests_total;
    let until_dead = UntilDead {
        max_attempts: p.max_attempts,
        waits_ms: waits.iter().take(100).copied().collect(),
        waits_total_ms: waits_total,
        requests_total_ms: requests_total,
        longest_ms: longest,
        longest_with_retry_after_ms: with_retry_after,
        parked_time_excluded: true,
    };

    let mut warnings = Vec::new();
    if timeout > i.cooldown_ms {
        warnings.push(Warning {
            code: "timeout_exceeds_cooldown",
            message: format!(
                "the request timeout ({timeout} ms) is longer than the cooldown ({} ms): a \
                 request still in flight at the opening can outlast the first wait, and the probe \
                 of a hanging endpoint holds its slot longer than the circuit rests",
                i.cooldown_ms
            ),
        });
    }
    if timeout >= i.circuit.probe_lease_ms {
        warnings.push(Warning {
            code: "timeout_exceeds_probe_lease",
            message: format!(
                "the request timeout ({timeout} ms) is not shorter than the probe lease \
                 (circuit.probe_lease_ms, {} ms): a probe still waiting for its answer is \
                 taken over by a second probe",
                i.circuit.probe_lease_ms
            ),
        });
    }
    if i.retention_days > 0 {
        let retention_ms = i.retention_days as i64 * 86_400_000;
        if longest > retention_ms {
            warnings.push(Warning {
                code: "schedule_outlives_retention",
                message: format!(
                    "a delivery can retry for up to {} but deliveries are kept {} days \
                     (retention.deliveries_days): one that dies that late is already past the \
                     retention and is pruned at the next pruner run, leaving no time to read or \
                     replay it",
                    human(longest),
                    i.retention_days
                ),
            });
        }
    }
    if let Some(r) = i.rate_limit {
        let window = i.circuit.health_window_ms;
        let per_window = (r.count as f64 * window as f64 / r.period.as_millis() as f64) as i64;
        if per_window < i.circuit.health_min_attempts {
            warnings.push(Warning {
                code: "rate_limit_below_health_minimum",
                message: format!(
                    "the rate limit {} allows {per_window} requests in the health check's window \
                     ({}), fewer than its minimum of {} attempts: the health check can never \
                     judge this channel, only {threshold} consecutive failures open it",
                    r.to_text(),
                    human(window),
                    i.circuit.health_min_attempts
                ),
            });
        }
        let to_threshold = (r.interval_us() as f64 / 1000.0 * (threshold - 1) as f64) as i64;
        if to_threshold > window {
            warnings.push(Warning {
                code: "rate_limit_slower_than_health_window",
                message: format!(
                    "at the rate limit {} the {threshold} failures that open the circuit take at \
                     least {}, longer than the circuit's window ({}): a dead endpoint keeps \
                     getting requests that long",
                    r.to_text(),
                    human(to_threshold),
                    human(window)
                ),
            });
        }
    }
    if p.max_attempts < threshold as i32 {
        warnings.push(Warning {
            code: "attempts_below_threshold",
            message: format!(
                "max_attempts ({}) is below the failure threshold ({threshold}): a delivery that \
                 is alone on the channel goes dead before its failures can open the circuit",
                p.max_attempts
            ),
        });
    }
    if i.cooldown_ms > max_cooldown {
        warnings.push(Warning {
            code: "cooldown_above_max_cooldown",
            message: format!(
                "the cooldown ({} ms) is above circuit.max_cooldown_ms ({max_cooldown} ms): after \
                 the first failed probe the wait shrinks to the cap instead of growing",
                i.cooldown_ms
            ),
        });
    }

    Explanation {
        before_open,
        while_open,
        until_dead,
        warnings,
        settings: ExplainedSettings {
            failure_threshold: i.failure_threshold,
            cooldown_ms: i.cooldown_ms,
            concurrency_initial: c.initial,
            concurrency_floor: c.floor,
            concurrency_ceiling: ceiling,
            rate_limit: i.rate_limit.map(|r| r.to_text()),
            retry_policy: i.policy.clone(),
            retention_days: i.retention_days,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry_policy::{in_force, RetryPolicy, ServiceRetry};
    use breakwater_queue::GroupLimits;

    fn defaults() -> ExplainInput {
        let circuit = CircuitConfig::default();
        ExplainInput {
            failure_threshold: circuit.failure_threshold,
            cooldown_ms: circuit.cooldown_ms,
            close_after_successes: 1,
            circuit,
            concurrency: GroupLimits {
                initial: 4,
                floor: 1,
                ceiling: 64,
                decrease_factor: 0.5,
                ..GroupLimits::default()
            },
            rate_limit: None,
            policy: in_force(None, None, &ServiceRetry::default()),
            connect_timeout_ms: 5_000,
            retention_days: 30,
        }
    }

    #[test]
    fn at_the_defaults_a_dead_endpoint_gets_five_requests_in_two_rounds() {
        // BENCHMARKS.md: 5 requests (timeout), opened after 30.1–31.1 s; 6 in refuse and 503
        // mode, which are the same 5 plus one probe after the 30 s cooldown (module doc).
        let e = explain(&defaults());
        for m in [
            &e.before_open.refused,
            &e.before_open.timing_out,
            &e.before_open.server_error,
        ] {
            assert_eq!((m.requests, m.rounds), (5, 2));
        }
        assert_eq!(e.before_open.timing_out.time_to_open_ms, 30_000);
        assert_eq!(e.before_open.refused.time_to_open_ms, 0);
        // A channel whose limit grew to 64 has 64 requests in flight when it dies.
        assert_eq!(e.before_open.at_most_requests, 64);
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn the_count_follows_the_threshold_and_the_limit() {
        // Threshold 1: the first round is sent whole.
        assert_eq!(requests_before_open(1, 4.0, 1, 64, 0.5), (4, 1));
        // Threshold 3 under limit 4: the first round's four are all sent.
        assert_eq!(requests_before_open(3, 4.0, 1, 64, 0.5), (4, 1));
        // Threshold 10: 4, then one at a time (floor 1): 4 + 6.
        assert_eq!(requests_before_open(10, 4.0, 1, 64, 0.5), (10, 7));
        // Floor 2: two at a time after the first round; the 5th failure leaves one in flight.
        assert_eq!(requests_before_open(5, 4.0, 2, 64, 0.5), (6, 2));
        // Limit 16: 16 in flight at once, more than the threshold.
        assert_eq!(requests_before_open(5, 16.0, 1, 64, 0.5), (16, 1));
        // A ceiling of 1 (max_in_flight 1): one at a time.
        assert_eq!(requests_before_open(5, 4.0, 1, 1, 0.5), (5, 5));
    }

    #[test]
    fn probes_come_after_the_cooldown_doubling_to_the_cap() {
        // 30 s, then 60 s, 120 s, 240 s, 480 s, then 600 s (the cap): at 30, 90, 210, 450, 930,
        // 1530 s.
        let t = probe_times(30_000, 600_000, 1_700_000, 100);
        assert_eq!(t, [30_000, 90_000, 210_000, 450_000, 930_000, 1_530_000]);
        let e = explain(&defaults());
        assert_eq!(e.while_open.probes_first_hour, 9);
        assert_eq!(e.while_open.probes_per_day_at_cap, 144);
    }

    #[test]
    fn the_longest_wait_sums_the_schedule_its_jitter_and_the_timeouts() {
        // The default: 12 attempts, 11 waits 10 s × 3^k capped at 12 h.
        let e = explain(&defaults());
        let waits = [
            10, 30, 90, 270, 810, 2_430, 7_290, 21_870, 43_200, 43_200, 43_200,
        ];
        assert_eq!(e.until_dead.waits_ms, waits.map(|s| s * 1000));
        let total: i64 = waits.iter().sum::<i64>() * 1000;
        assert_eq!(e.until_dead.waits_total_ms, total);
        assert_eq!(e.until_dead.requests_total_ms, 12 * 15_000);
        assert_eq!(
            e.until_dead.longest_ms,
            (total as f64 * 1.2) as i64 + 180_000
        );
        // An explicit schedule.
        let mut i = defaults();
        let own: RetryPolicy = serde_json::from_value(serde_json::json!({
            "backoff": {"kind": "schedule", "delays_ms": [5000, 300000, 1800000]},
            "request_timeout_ms": 1000
        }))
        .unwrap();
        i.policy = in_force(
            own.checked().unwrap().as_ref(),
            None,
            &ServiceRetry::default(),
        );
        let e = explain(&i);
        assert_eq!(e.until_dead.max_attempts, 4);
        assert_eq!(e.until_dead.waits_ms, [5_000, 300_000, 1_800_000]);
        assert_eq!(e.until_dead.requests_total_ms, 4_000);
    }

    #[test]
    fn settings_that_fight_are_named() {
        let codes = |i: &ExplainInput| -> Vec<&'static str> {
            explain(i).warnings.iter().map(|w| w.code).collect()
        };
        // A timeout longer than the cooldown (and than the probe lease).
        let mut i = defaults();
        i.cooldown_ms = 10_000;
        i.policy.request_timeout_ms = 60_000;
        assert_eq!(
            codes(&i),
            ["timeout_exceeds_cooldown", "timeout_exceeds_probe_lease"]
        );
        // A schedule that outlives a 1-day retention.
        let mut i = defaults();
        i.retention_days = 1;
        assert_eq!(codes(&i), ["schedule_outlives_retention"]);
        i.retention_days = 0;
        assert!(codes(&i).is_empty());
        // A rate limit under the health check's minimum, and slower than its window.
        let mut i = defaults();
        i.rate_limit = Some(RateLimit::parse("10/h").unwrap());
        assert_eq!(codes(&i), ["rate_limit_below_health_minimum"]);
        i.rate_limit = Some(RateLimit::parse("3/h").unwrap());
        i.failure_threshold = 20;
        assert_eq!(
            codes(&i),
            [
                "rate_limit_below_health_minimum",
                "rate_limit_slower_than_health_window",
                // 20 is also above the 12 attempts.
                "attempts_below_threshold"
            ]
        );
        // Fewer attempts than the threshold; a cooldown above its cap.
        let mut i = defaults();
        i.policy.max_attempts = 3;
        i.cooldown_ms = 900_000;
        assert_eq!(
            codes(&i),
            ["attempts_below_threshold", "cooldown_above_max_cooldown"]
        );
    }
}
