//! Circuit settings: the configuration, the cluster-wide defaults in force (`circuit_defaults`)
//! and the range checks of `close_after_successes`.

use crate::audit;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor};
/// Circuit settings (`[circuit]` in `config/default.toml`; environment
/// `BREAKWATER_CIRCUIT__<FIELD>`). Threshold and cooldown can be overridden per channel.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CircuitConfig {
    /// Consecutive transient failures that open a closed circuit.
    pub failure_threshold: i32,
    /// Wait from opening to the first probe, ms.
    pub cooldown_ms: i64,
    /// Largest cooldown while probes keep failing (it doubles each time), ms.
    pub max_cooldown_ms: i64,
    /// Consecutive successful probe deliveries (1–100) before a half-open circuit closes: the
    /// probe, then `close_after_successes − 1` trials, one at a time (see the module doc,
    /// "Careful closing"). Overridable per channel and at run time (`circuit_defaults`).
    pub close_after_successes: i32,
    /// How long a half-open probe may take before the next probe may take over (a probe whose
    /// node died cannot pin the circuit half-open), ms. Should exceed the request timeout.
    pub probe_lease_ms: i64,
    /// Sliding window of the health check, ms.
    pub health_window_ms: i64,
    /// Fewest attempts in the window before the health check judges a channel.
    pub health_min_attempts: i64,
    /// Failure ratio (transient failures / attempts in the window) at or above which a channel is
    /// unhealthy, 0.0–1.0.
    pub health_failure_ratio: f64,
    /// Period of the health check, ms.
    pub health_check_interval_ms: u64,
    /// Longest wait a `Retry-After` header can impose on a channel, ms.
    pub retry_after_cap_ms: i64,
}

impl Default for CircuitConfig {
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cooldown_ms: 30_000,
            max_cooldown_ms: 600_000,
            close_after_successes: 1,
            probe_lease_ms: 60_000,
            health_window_ms: 3_600_000,
            health_min_attempts: 20,
            health_failure_ratio: 0.5,
            health_check_interval_ms: 30_000,
            retry_after_cap_ms: 3_600_000,
        }
    }
}

impl CircuitConfig {
    /// Checks the settings; the error names the field.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let positive = [
            ("circuit.failure_threshold", self.failure_threshold as i64),
            ("circuit.cooldown_ms", self.cooldown_ms),
            ("circuit.max_cooldown_ms", self.max_cooldown_ms),
            ("circuit.probe_lease_ms", self.probe_lease_ms),
            ("circuit.health_window_ms", self.health_window_ms),
            ("circuit.health_min_attempts", self.health_min_attempts),
            (
                "circuit.health_check_interval_ms",
                self.health_check_interval_ms as i64,
            ),
        ];
        for (name, v) in positive {
            if v <= 0 {
                return Err(format!("{name} must be greater than 0"));
            }
        }
        if !(1..=MAX_CLOSE_AFTER_SUCCESSES).contains(&self.close_after_successes) {
            return Err(format!(
                "circuit.close_after_successes must be between 1 and {MAX_CLOSE_AFTER_SUCCESSES}"
            ));
        }
        if self.max_cooldown_ms < self.cooldown_ms {
            return Err("circuit.max_cooldown_ms must be at least circuit.cooldown_ms".into());
        }
        if !(0.0..=1.0).contains(&self.health_failure_ratio) || self.health_failure_ratio == 0.0 {
            return Err("circuit.health_failure_ratio must be in (0.0, 1.0]".into());
        }
        if self.retry_after_cap_ms < 0 {
            return Err("circuit.retry_after_cap_ms must not be negative".into());
        }
        Ok(())
    }
}

/// The cluster-wide defaults in force: each value is the operator's edit (table
/// `circuit_defaults`) if there is one, else the configuration's. Returns
/// `(failure_threshold, cooldown_ms, threshold_edited, cooldown_edited)`.
pub async fn effective_defaults(
    exec: impl PgExecutor<'_>,
    cfg: &CircuitConfig,
) -> Result<(i32, i64, bool, bool)> {
    let (t, c): (Option<i32>, Option<i64>) =
        sqlx::query_as("SELECT failure_threshold, cooldown_ms FROM circuit_defaults")
            .fetch_one(exec)
            .await?;
    Ok((
        t.unwrap_or(cfg.failure_threshold),
        c.unwrap_or(cfg.cooldown_ms),
        t.is_some(),
        c.is_some(),
    ))
}

/// Largest `close_after_successes` (per channel, cluster default or configuration).
pub(crate) const MAX_CLOSE_AFTER_SUCCESSES: i32 = 100;

/// Checks a `close_after_successes` value (1–[`MAX_CLOSE_AFTER_SUCCESSES`]); the error names the
/// field `close_after_successes`.
pub(crate) fn check_close_after_successes(k: Option<i32>) -> Result<()> {
    if k.is_some_and(|k| !(1..=MAX_CLOSE_AFTER_SUCCESSES).contains(&k)) {
        return Err(Error::invalid(
            "close_after_successes",
            format!("must be between 1 and {MAX_CLOSE_AFTER_SUCCESSES}"),
        ));
    }
    Ok(())
}

/// The cluster-wide `close_after_successes` in force: the operator's edit (table
/// `circuit_defaults`) if there is one, else the configuration's. Returns `(value, edited)`.
pub async fn effective_close_after_successes(
    exec: impl PgExecutor<'_>,
    cfg: &CircuitConfig,
) -> Result<(i32, bool)> {
    let k: Option<i32> = sqlx::query_scalar("SELECT close_after_successes FROM circuit_defaults")
        .fetch_one(exec)
        .await?;
    Ok((k.unwrap_or(cfg.close_after_successes), k.is_some()))
}

/// Largest failure threshold (per channel or cluster default).
pub(crate) const MAX_FAILURE_THRESHOLD: i32 = 10_000;
/// Largest first cooldown (per channel or cluster default), ms: 24 h.
pub(crate) const MAX_COOLDOWN_MS: i64 = 86_400_000;

/// Checks a failure threshold and a first cooldown set per channel or as the cluster default
/// (1–[`MAX_FAILURE_THRESHOLD`], 1–[`MAX_COOLDOWN_MS`] ms); the error names the field. The
/// configuration's own values are checked by [`CircuitConfig::validate`] (greater than 0).
pub(crate) fn check_overrides(
    failure_threshold: Option<i32>,
    cooldown_ms: Option<i64>,
) -> Result<()> {
    if failure_threshold.is_some_and(|t| !(1..=MAX_FAILURE_THRESHOLD).contains(&t)) {
        return Err(Error::invalid(
            "failure_threshold",
            format!("must be between 1 and {MAX_FAILURE_THRESHOLD}"),
        ));
    }
    if cooldown_ms.is_some_and(|c| !(1..=MAX_COOLDOWN_MS).contains(&c)) {
        return Err(Error::invalid(
            "cooldown_ms",
            format!("must be between 1 and {MAX_COOLDOWN_MS} (24 h)"),
        ));
    }
    Ok(())
}

/// An operator's change of the cluster-wide defaults (table `circuit_defaults`, `PATCH
/// /api/v1/admin/circuit-defaults`): `None` leaves a field alone, `Some(None)` returns it to
/// the configuration's value, `Some(Some(v))` sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefaultsChange {
    /// Failure threshold (1–[`MAX_FAILURE_THRESHOLD`]).
    pub failure_threshold: Option<Option<i32>>,
    /// First cooldown, ms (1–[`MAX_COOLDOWN_MS`]).
    pub cooldown_ms: Option<Option<i64>>,
    /// Consecutive successes to close (1–[`MAX_CLOSE_AFTER_SUCCESSES`]).
    pub close_after_successes: Option<Option<i32>>,
}

/// Checks `change` (the error names the field) and applies it to `circuit_defaults` in the
/// caller's transaction, with one audit row (`circuit_defaults.changed`, `actor`) naming each
/// field whose setting changed, with its value in force before and after (an override, or
/// `cfg`'s value where there is none). A change that changes nothing (an empty body, the values
/// already set) writes nothing: no update, no audit row (README, "a call that changes nothing
/// writes nothing"). Returns whether it wrote. Nothing is written when a value is out of range.
/// The row is locked (`FOR UPDATE`) from the read of the old values to the write, so two
/// concurrent changes each audit what they really replaced.
pub async fn set_defaults(
    conn: &mut PgConnection,
    change: &DefaultsChange,
    cfg: &CircuitConfig,
    actor: &str,
) -> Result<bool> {
    check_overrides(
        change.failure_threshold.flatten(),
        change.cooldown_ms.flatten(),
    )?;
    check_close_after_successes(change.close_after_successes.flatten())?;
    let stored: (Option<i32>, Option<i64>, Option<i32>) = sqlx::query_as(
        "SELECT failure_threshold, cooldown_ms, close_after_successes FROM circuit_defaults
         FOR UPDATE",
    )
    .fetch_one(&mut *conn)
    .await?;
    let after = (
        change.failure_threshold.unwrap_or(stored.0),
        change.cooldown_ms.unwrap_or(stored.1),
        change.close_after_successes.unwrap_or(stored.2),
    );
    if after == stored {
        return Ok(false);
    }
    // The fields whose setting changed, each with its value in force before and after.
    let mut old = serde_json::Map::new();
    let mut new = serde_json::Map::new();
    let mut note = |field: &str, changed: bool, was: i64, now: i64| {
        if changed {
            old.insert(field.into(), was.into());
            new.insert(field.into(), now.into());
        }
    };
    let threshold = |v: Option<i32>| i64::from(v.unwrap_or(cfg.failure_threshold));
    let cooldown = |v: Option<i64>| v.unwrap_or(cfg.cooldown_ms);
    let successes = |v: Option<i32>| i64::from(v.unwrap_or(cfg.close_after_successes));
    note(
        "failure_threshold",
        after.0 != stored.0,
        threshold(stored.0),
        threshold(after.0),
    );
    note(
        "cooldown_ms",
        after.1 != stored.1,
        cooldown(stored.1),
        cooldown(after.1),
    );
    note(
        "close_after_successes",
        after.2 != stored.2,
        successes(stored.2),
        successes(after.2),
    );
    let details = serde_json::json!({ "old": old, "new": new });
    sqlx::query(
        "UPDATE circuit_defaults SET
            failure_threshold = CASE WHEN $1 THEN $2 ELSE failure_threshold END,
            cooldown_ms = CASE WHEN $3 THEN $4 ELSE cooldown_ms END,
            close_after_successes = CASE WHEN $5 THEN $6 ELSE close_after_successes END,
            updated_at = now()",
    )
    .bind(change.failure_threshold.is_some())
    .bind(change.failure_threshold.flatten())
    .bind(change.cooldown_ms.is_some())
    .bind(change.cooldown_ms.flatten())
    .bind(change.close_after_successes.is_some())
    .bind(change.close_after_successes.flatten())
    .execute(&mut *conn)
    .await?;
    audit::record(
        &mut *conn,
        &audit::Entry {
            details,
            ..audit::Entry::new(actor, "circuit_defaults.changed")
        },
    )
    .await?;
    Ok(true)
}
