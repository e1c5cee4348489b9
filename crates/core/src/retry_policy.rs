//! Retry policy and request timeout per channel, with a tenant default.
//!
//! A policy ([`RetryPolicy`]) sets any of `max_attempts`, `backoff` and `request_timeout_ms`;
//! a field left out is inherited. What a delivery runs with is, field by field, the channel's
//! own, else its tenant's default, else the service configuration (`worker.max_attempts`,
//! `worker.backoff_*`, `worker.request_timeout_ms`): [`in_force`].
//!
//! **When a change applies.** The tenant's and the channel's policies are merged and copied onto
//! each delivery when it is accepted (`deliveries.retry_policy`, in the statement that inserts
//! it; `max_attempts` also onto its job, as the configuration's always was). So a change applies
//! to deliveries accepted after it, never to those already waiting. The worker reads the copy
//! with the delivery in the statement that begins the attempt
//! ([`crate::circuit::admit_and_begin`], [`crate::deliveries::begin_attempt`]): no statement is
//! added, and only a failed attempt's retry looks at the backoff ([`retry_delay`]).
//!
//! **Jitter** is the configuration's (`worker.backoff_jitter`, ±20 % by default) for every
//! backoff, an explicit schedule included: a schedule's `[200, 400]` waits 160–240 ms, then
//! 320–480 ms with the default jitter.
//!
//! Bounds (each checked by [`RetryPolicy::checked`], a violation is [`Error::Invalid`] naming
//! the field, a 422 in the API): `max_attempts` 1–[`MAX_ATTEMPTS`]; an exponential backoff's
//! `base_ms` and `cap_ms` [`MIN_DELAY_MS`]–[`MAX_DELAY_MS`] with `cap_ms ≥ base_ms`, `factor`
//! 1–[`MAX_FACTOR`]; a schedule's 1–[`MAX_SCHEDULE`] delays, each
//! [`MIN_DELAY_MS`]–[`MAX_DELAY_MS`]; `request_timeout_ms` [`MIN_TIMEOUT_MS`]–[`MAX_TIMEOUT_MS`].

use crate::{Error, Result};
use breakwater_queue::Backoff;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Most attempts a policy may give a delivery.
pub(crate) const MAX_ATTEMPTS: i32 = 100;
/// Shortest retry delay of a policy, ms.
pub(crate) const MIN_DELAY_MS: i64 = 100;
/// Longest retry delay of a policy, ms (7 days).
pub(crate) const MAX_DELAY_MS: i64 = 7 * 24 * 3_600_000;
/// Largest growth factor of an exponential backoff.
pub(crate) const MAX_FACTOR: f64 = 10.0;
/// Most delays in an explicit schedule.
pub(crate) const MAX_SCHEDULE: usize = 50;
/// Shortest request timeout of a policy, ms.
pub(crate) const MIN_TIMEOUT_MS: i64 = 100;
/// Longest request timeout of a policy, ms (2 minutes).
pub const MAX_TIMEOUT_MS: i64 = 120_000;

/// A retry policy: the body field `retry_policy` of a channel (its own) or a tenant (the
/// default of its channels), and the copy on each delivery. Every field is optional: absent (or
/// null) inherits it (channel → tenant → service configuration).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"max_attempts": 7, "backoff": {"kind": "schedule", "delays_ms": [5000, 300000, 1800000, 7200000, 18000000, 36000000]}, "request_timeout_ms": 10000}))]
pub struct RetryPolicy {
    /// HTTP attempts a delivery gets before it is dead, 1–100. With a `schedule` and no
    /// `max_attempts`, the schedule's length + 1 (one first attempt, one retry per delay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub max_attempts: Option<i32>,
    /// The wait before each retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffPolicy>,
    /// Total timeout of one request (connect, send, response status and the kept excerpt of
    /// its body), ms of the node's running time, 100–120000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 100, maximum = 120000)]
    pub request_timeout_ms: Option<i64>,
}

/// The wait before each retry, either shape jittered by `worker.backoff_jitter`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum BackoffPolicy {
    /// After failed attempt `n` (1-based) wait `min(base_ms × factor^(n−1), cap_ms)`.
    Exponential {
        /// Wait after the first failed attempt, ms, 100–604800000.
        #[schema(minimum = 100, maximum = 604800000_i64)]
        base_ms: i64,
        /// Growth per failed attempt, 1–10.
        #[schema(minimum = 1.0, maximum = 10.0)]
        factor: f64,
        /// Longest wait, ms, from `base_ms` to 604800000.
        #[schema(minimum = 100, maximum = 604800000_i64)]
        cap_ms: i64,
    },
    /// After failed attempt `n` (1-based) wait `delays_ms[n−1]`; past the end of the list, its
    /// last delay again.
    Schedule {
        /// 1 to 50 delays, ms, each 100–604800000.
        #[schema(min_items = 1, max_items = 50)]
        delays_ms: Vec<i64>,
    },
}

impl BackoffPolicy {
    /// The service configuration's backoff (`worker.backoff_*`) in this shape.
    pub(crate) fn from_config(b: &Backoff) -> Self {
        BackoffPolicy::Exponential {
            base_ms: b.base.as_millis() as i64,
            factor: b.factor,
            cap_ms: b.cap.as_millis() as i64,
        }
    }

    /// The wait after failed attempt `attempt` (1-based), before jitter.
    pub fn nominal(&self, attempt: i32) -> Duration {
        match self {
            BackoffPolicy::Exponential {
                base_ms,
                factor,
                cap_ms,
            } => Backoff {
                base: ms(*base_ms),
                factor: *factor,
                cap: ms(*cap_ms),
                jitter: 0.0,
            }
            .nominal(attempt),
            BackoffPolicy::Schedule { delays_ms } => {
                let i = (attempt.max(1) as usize).min(delays_ms.len()).max(1) - 1;
                delays_ms.get(i).map_or(Duration::ZERO, |d| ms(*d))
            }
        }
    }

    fn check(&self) -> Result<()> {
        let delay = |v: i64| (MIN_DELAY_MS..=MAX_DELAY_MS).contains(&v);
        match self {
            BackoffPolicy::Exponential {
                base_ms,
                factor,
                cap_ms,
            } => {
                if !delay(*base_ms) {
                    return Err(Error::invalid(
                        "retry_policy.backoff.base_ms",
                        format!("must be between {MIN_DELAY_MS} and {MAX_DELAY_MS}"),
                    ));
                }
                if !factor.is_finite() || !(1.0..=MAX_FACTOR).contains(factor) {
                    return Err(Error::invalid(
                        "retry_policy.backoff.factor",
                        format!("must be between 1 and {MAX_FACTOR}"),
                    ));
                }
                if !delay(*cap_ms) || cap_ms < base_ms {
                    return Err(Error::invalid(
                        "retry_policy.backoff.cap_ms",
                        format!("must be between base_ms and {MAX_DELAY_MS}"),
                    ));
                }
            }
            BackoffPolicy::Schedule { delays_ms } => {
                if delays_ms.is_empty() || delays_ms.len() > MAX_SCHEDULE {
                    return Err(Error::invalid(
                        "retry_policy.backoff.delays_ms",
                        format!("must hold 1 to {MAX_SCHEDULE} delays"),
                    ));
                }
                if let Some((i, d)) = delays_ms.iter().enumerate().find(|(_, d)| !delay(**d)) {
                    return Err(Error::invalid(
                        "retry_policy.backoff.delays_ms",
                        format!(
                            "delay {i} is {d} ms: each must be between {MIN_DELAY_MS} and {MAX_DELAY_MS}"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn ms(v: i64) -> Duration {
    Duration::from_millis(v.max(0) as u64)
}

impl RetryPolicy {
    /// Checks the bounds (module doc) and normalises: a `schedule` without `max_attempts` gets
    /// the schedule's length + 1. `None` for a policy that sets nothing (`{}`: the same as
    /// none). Errors are [`Error::Invalid`] naming the field (`retry_policy.max_attempts`,
    /// `retry_policy.backoff.base_ms`, …).
    pub fn checked(mut self) -> Result<Option<Self>> {
        if let Some(n) = self.max_attempts {
            if !(1..=MAX_ATTEMPTS).contains(&n) {
                return Err(Error::invalid(
                    "retry_policy.max_attempts",
                    format!("must be between 1 and {MAX_ATTEMPTS}"),
                ));
            }
        }
        if let Some(b) = &self.backoff {
            b.check()?;
            if let (BackoffPolicy::Schedule { delays_ms }, None) = (b, self.max_attempts) {
                self.max_attempts = Some(delays_ms.len() as i32 + 1);
            }
        }
        if let Some(t) = self.request_timeout_ms {
            if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&t) {
                return Err(Error::invalid(
                    "retry_policy.request_timeout_ms",
                    format!("must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS}"),
                ));
            }
        }
        Ok((self != RetryPolicy::default()).then_some(self))
    }

    /// `own`'s fields, else `default`'s, field by field (what a delivery is accepted with; the
    /// statements that accept deliveries do the same in SQL, `tenant || channel` on the JSON).
    #[cfg(test)]
    pub(crate) fn merged(own: Option<&Self>, default: Option<&Self>) -> Option<Self> {
        let m = RetryPolicy {
            max_attempts: own
                .and_then(|p| p.max_attempts)
                .or(default.and_then(|p| p.max_attempts)),
            backoff: own
                .and_then(|p| p.backoff.clone())
                .or(default.and_then(|p| p.backoff.clone())),
            request_timeout_ms: own
                .and_then(|p| p.request_timeout_ms)
                .or(default.and_then(|p| p.request_timeout_ms)),
        };
        (m != RetryPolicy::default()).then_some(m)
    }
}

/// The service configuration's policy: what applies where neither the channel nor its tenant
/// sets a field.
#[derive(Debug, Clone, Copy)]
pub struct ServiceRetry {
    /// `worker.max_attempts`.
    pub max_attempts: i32,
    /// `worker.backoff_*` (its jitter applies to every policy).
    pub backoff: Backoff,
    /// `worker.request_timeout_ms`.
    pub request_timeout: Duration,
}

impl Default for ServiceRetry {
    fn default() -> Self {
        ServiceRetry {
            max_attempts: 12,
            backoff: Backoff::default(),
            request_timeout: Duration::from_secs(15),
        }
    }
}

/// Where a field of the policy in force comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PolicySource {
    /// The channel's own `retry_policy`.
    Channel,
    /// The tenant's default `retry_policy`.
    Tenant,
    /// The service configuration.
    Config,
}

/// Where each field of a [`PolicyInForce`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PolicySources {
    /// Of `max_attempts`.
    pub max_attempts: PolicySource,
    /// Of `backoff`.
    pub backoff: PolicySource,
    /// Of `request_timeout_ms`.
    pub request_timeout_ms: PolicySource,
}

/// The policy a channel's new deliveries are accepted with: every field resolved (channel,
/// else tenant, else configuration), with the configuration's jitter and where each comes from.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PolicyInForce {
    /// HTTP attempts before a delivery is dead.
    pub max_attempts: i32,
    /// The wait before each retry (before jitter).
    pub backoff: BackoffPolicy,
    /// Total timeout of one request, ms.
    pub request_timeout_ms: i64,
    /// Proportional jitter of every wait (`worker.backoff_jitter`): a wait is scaled by a random
    /// factor in `[1 − jitter, 1 + jitter]`.
    pub jitter: f64,
    /// Where each field comes from.
    pub source: PolicySources,
}

/// The policy in force for a channel whose own policy is `channel` and whose tenant's default
/// is `tenant`, over the configuration's `service` (module doc).
pub fn in_force(
    channel: Option<&RetryPolicy>,
    tenant: Option<&RetryPolicy>,
    service: &ServiceRetry,
) -> PolicyInForce {
    fn pick<T>(c: Option<T>, t: Option<T>, config: impl FnOnce() -> T) -> (T, PolicySource) {
        match (c, t) {
            (Some(v), _) => (v, PolicySource::Channel),
            (None, Some(v)) => (v, PolicySource::Tenant),
            (None, None) => (config(), PolicySource::Config),
        }
    }
    let (max_attempts, s_attempts) = pick(
        channel.and_then(|p| p.max_attempts),
        tenant.and_then(|p| p.max_attempts),
        || service.max_attempts,
    );
    let (backoff, s_backoff) = pick(
        channel.and_then(|p| p.backoff.clone()),
        tenant.and_then(|p| p.backoff.clone()),
        || BackoffPolicy::from_config(&service.backoff),
    );
    let (request_timeout_ms, s_timeout) = pick(
        channel.and_then(|p| p.request_timeout_ms),
        tenant.and_then(|p| p.request_timeout_ms),
        || service.request_timeout.as_millis() as i64,
    );
    PolicyInForce {
        max_attempts,
        backoff,
        request_timeout_ms,
        jitter: service.backoff.jitter,
        source: PolicySources {
            max_attempts: s_attempts,
            backoff: s_backoff,
            request_timeout_ms: s_timeout,
        },
    }
}

/// The wait before the retry of a delivery whose attempt `attempt` (1-based, the job's) failed:
/// its own copy's backoff (`policy`, `deliveries.retry_policy`), else the configuration's,
/// jittered by the configuration's jitter.
pub fn retry_delay(policy: Option<&RetryPolicy>, attempt: i32, service: &Backoff) -> Duration {
    let Some(b) = policy.and_then(|p| p.backoff.as_ref()) else {
        return service.delay(attempt);
    };
    let nominal = b.nominal(attempt).as_secs_f64();
    let j = service.jitter.clamp(0.0, 1.0);
    let scale = if j > 0.0 {
        rand::thread_rng().gen_range(1.0 - j..=1.0 + j)
    } else {
        1.0
    };
    Duration::from_secs_f64(nominal * scale)
}

/// The request timeout of a delivery: its own copy's (`policy`), else the configuration's
/// (`default`, `worker.request_timeout_ms`).
pub fn request_timeout(policy: Option<&RetryPolicy>, default: Duration) -> Duration {
    policy
        .and_then(|p| p.request_timeout_ms)
        .map_or(default, ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> RetryPolicy {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn both_backoff_shapes_round_trip_and_a_schedule_sets_its_attempts() {
        let p = parse(json!({"backoff": {"kind": "schedule", "delays_ms": [200, 400]}}))
            .checked()
            .unwrap()
            .unwrap();
        assert_eq!(p.max_attempts, Some(3));
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"max_attempts": 3, "backoff": {"kind": "schedule", "delays_ms": [200, 400]}})
        );
        let e = parse(
            json!({"backoff": {"kind": "exponential", "base_ms": 1000, "factor": 2.0, "cap_ms": 5000}, "request_timeout_ms": 3000}),
        );
        let e = e.checked().unwrap().unwrap();
        assert_eq!(e.max_attempts, None);
        let b = e.backoff.unwrap();
        let waits: Vec<u128> = (1..=5).map(|n| b.nominal(n).as_millis()).collect();
        assert_eq!(waits, [1000, 2000, 4000, 5000, 5000]);
        // Past the schedule's end, its last delay again.
        let s = BackoffPolicy::Schedule {
            delays_ms: vec![200, 400],
        };
        let waits: Vec<u128> = (1..=4).map(|n| s.nominal(n).as_millis()).collect();
        assert_eq!(waits, [200, 400, 400, 400]);
        // An empty policy is none.
        assert_eq!(RetryPolicy::default().checked().unwrap(), None);
        // Unknown fields and kinds are refused by the parser.
        assert!(serde_json::from_value::<RetryPolicy>(json!({"retries": 3})).is_err());
        assert!(
            serde_json::from_value::<RetryPolicy>(json!({"backoff": {"kind": "linear"}})).is_err()
        );
    }

    #[test]
    fn out_of_bounds_values_name_their_field() {
        let field = |v| match parse(v).checked() {
            Err(Error::Invalid { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(json!({"max_attempts": 0})),
            "retry_policy.max_attempts"
        );
        assert_eq!(
            field(json!({"max_attempts": 101})),
            "retry_policy.max_attempts"
        );
        assert_eq!(
            field(json!({"request_timeout_ms": 99})),
            "retry_policy.request_timeout_ms"
        );
        assert_eq!(
            field(json!({"request_timeout_ms": 120001})),
            "retry_policy.request_timeout_ms"
        );
        assert_eq!(
            field(json!({"backoff": {"kind": "schedule", "delays_ms": []}})),
            "retry_policy.backoff.delays_ms"
        );
        assert_eq!(
            field(json!({"backoff": {"kind": "schedule", "delays_ms": [200, 50]}})),
            "retry_policy.backoff.delays_ms"
        );
        assert_eq!(
            field(
                json!({"backoff": {"kind": "exponential", "base_ms": 10, "factor": 2.0, "cap_ms": 1000}})
            ),
            "retry_policy.backoff.base_ms"
        );
        assert_eq!(
            field(
                json!({"backoff": {"kind": "exponential", "base_ms": 1000, "factor": 0.5, "cap_ms": 1000}})
            ),
            "retry_policy.backoff.factor"
        );
        assert_eq!(
            field(
                json!({"backoff": {"kind": "exponential", "base_ms": 1000, "factor": 2.0, "cap_ms": 999}})
            ),
            "retry_policy.backoff.cap_ms"
        );
    }

    #[test]
    fn the_policy_in_force_takes_each_field_from_channel_then_tenant_then_config() {
        let service = ServiceRetry::default();
        let none = in_force(None, None, &service);
        assert_eq!(none.max_attempts, 12);
        assert_eq!(none.request_timeout_ms, 15_000);
        assert_eq!(
            none.backoff,
            BackoffPolicy::from_config(&Backoff::default())
        );
        assert_eq!(none.source.backoff, PolicySource::Config);
        let tenant = parse(json!({"max_attempts": 4, "request_timeout_ms": 5000}));
        let channel = parse(json!({"request_timeout_ms": 700}));
        let p = in_force(Some(&channel), Some(&tenant), &service);
        assert_eq!((p.max_attempts, p.request_timeout_ms), (4, 700));
        assert_eq!(
            (
                p.source.max_attempts,
                p.source.request_timeout_ms,
                p.source.backoff
            ),
            (
                PolicySource::Tenant,
                PolicySource::Channel,
                PolicySource::Config
            )
        );
        // The copy a delivery is accepted with merges the same way.
        let m = RetryPolicy::merged(Some(&channel), Some(&tenant)).unwrap();
        assert_eq!(m.max_attempts, Some(4));
        assert_eq!(m.request_timeout_ms, Some(700));
        assert_eq!(RetryPolicy::merged(None, None), None);
        // And the SQL merge (`tenant || channel` on the stored JSON) agrees, as the stored JSON
        // leaves unset fields out.
        let mut sql = serde_json::to_value(&tenant).unwrap();
        for (k, v) in serde_json::to_value(&channel).unwrap().as_object().unwrap() {
            sql[k] = v.clone();
        }
        assert_eq!(parse(sql), m);
    }

    #[test]
    fn the_retry_delay_follows_the_delivery_copy_with_the_configured_jitter() {
        let service = Backoff {
            jitter: 0.0,
            ..Backoff::default()
        };
        let p = parse(json!({"backoff": {"kind": "schedule", "delays_ms": [200, 400]}}));
        assert_eq!(
            retry_delay(Some(&p), 1, &service),
            Duration::from_millis(200)
        );
        assert_eq!(
            retry_delay(Some(&p), 2, &service),
            Duration::from_millis(400)
        );
        assert_eq!(retry_delay(None, 1, &service), Duration::from_secs(10));
        let jittery = Backoff {
            jitter: 0.2,
            ..service
        };
        for _ in 0..200 {
            let d = retry_delay(Some(&p), 2, &jittery).as_secs_f64();
            assert!((0.32..=0.48).contains(&d), "{d}");
        }
        let t = parse(json!({"request_timeout_ms": 700}));
        assert_eq!(
            request_timeout(Some(&t), Duration::from_secs(15)),
            Duration::from_millis(700)
        );
        assert_eq!(
            request_timeout(Some(&p), Duration::from_secs(15)),
            Duration::from_secs(15)
        );
    }
}
