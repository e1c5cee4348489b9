//! The operator's view and changes of host circuits (force open/close, list, overrides) and
//! the reconciler of host gates.

use super::{
    assign, close, host_key, open, park_host_jobs, release_host_jobs, Granularity, HostsConfig,
    State, Transition,
};
use crate::audit;
use crate::{Error, Result};
use breakwater_queue::Reconciled;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

/// An operator's change of a host circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manual {
    /// Open now (park every channel on the host; a probe follows after the cooldown). From
    /// `closed` or `half_open`.
    ForceOpen,
    /// Close now and release every channel on the host. From `open` or `half_open`.
    ForceClose,
}

/// Applies an operator's change with one conditional UPDATE; `None` when the host is already
/// where the change would put it (nothing written, no audit row) or does not exist.
pub async fn apply_manual(
    tx: &mut PgConnection,
    key: &str,
    change: Manual,
    actor: &str,
    reason: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    match change {
        Manual::ForceOpen => {
            open(
                tx,
                key,
                &[State::Closed, State::HalfOpen],
                false,
                reason,
                actor,
                cfg,
            )
            .await
        }
        Manual::ForceClose => {
            close(
                tx,
                key,
                &[State::Open, State::HalfOpen],
                None,
                reason,
                actor,
            )
            .await
        }
    }
}

/// A host circuit as the operator sees it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct HostCircuit {
    /// The host key (see [`host_key`]).
    pub host_key: String,
    /// `closed` | `open` | `half_open`.
    pub state: State,
    /// Bumped by every transition.
    pub generation: i64,
    /// When the state last changed.
    pub changed_at: DateTime<Utc>,
    /// When the next probe may run, while open.
    pub next_probe_at: Option<DateTime<Utc>>,
    /// Failed host probes in a row (the cooldown doubles with each).
    pub probe_failures: i32,
    /// The delivery that is the half-open probe, once chosen.
    pub probe_delivery_id: Option<Uuid>,
    /// Last failure that opened or re-opened the host.
    pub last_failure_at: Option<DateTime<Utc>>,
    /// Its reason.
    pub last_failure_reason: Option<String>,
    /// Operator override of the threshold (distinct failing channels); null = configuration.
    pub failure_threshold: Option<i32>,
    /// Operator override of the first cooldown, ms; null = configuration.
    pub cooldown_ms: Option<i64>,
    /// Operator override of the cap of deliveries in flight to the host; null = configuration.
    pub max_in_flight: Option<i32>,
    /// Live channels on the host.
    pub channels: i64,
    /// Waiting jobs of those channels held by the host (0 while the host's gate is not parked).
    pub parked: i64,
    /// Deliveries of those channels in flight now, cluster-wide.
    pub in_flight: i64,
    /// The cap in force: the override or `hosts.max_in_flight`; null = not capped.
    pub cap: Option<i32>,
}

/// The host list's select: each host circuit with its channels and its queue gate's figures
/// ([`breakwater_queue::gate_summary_sql`]); `$1` is the default cap.
pub(super) static HOST_SELECT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let [parked, waiting, in_flight, cap] = breakwater_queue::gate_summary_sql("h.host_key");
    format!(
        "SELECT h.host_key, h.state, h.generation, h.changed_at, h.next_probe_at,
        h.probe_failures, h.probe_delivery_id, h.last_failure_at, h.last_failure_reason,
        h.failure_threshold, h.cooldown_ms, h.max_in_flight,
        (SELECT count(*) FROM channels c WHERE c.host_key = h.host_key AND c.deleted_at IS NULL) AS channels,
        CASE WHEN {parked} THEN {waiting} ELSE 0 END AS parked,
        {in_flight} AS in_flight,
        coalesce({cap}, h.max_in_flight, $1) AS cap
     FROM host_circuits h"
    )
});

/// A page of host circuits by host key, optionally only those in `state`.
pub async fn list(
    conn: &mut PgConnection,
    state: Option<State>,
    cfg: &HostsConfig,
    page: &crate::page::Keyset<String>,
) -> Result<Vec<HostCircuit>> {
    let sql = format!(
        "{} WHERE ($2::text IS NULL OR h.state = $2){}{} LIMIT $3",
        *HOST_SELECT,
        page.seek("h.host_key", 4),
        page.order_by("h.host_key"),
    );
    let q = sqlx::query_as(&sql)
        .bind(cfg.default_cap())
        .bind(state)
        .bind(page.limit);
    Ok(page.bind_cursor(q).fetch_all(&mut *conn).await?)
}

/// One host circuit, or [`Error::NotFound`].
pub async fn get(conn: &mut PgConnection, key: &str, cfg: &HostsConfig) -> Result<HostCircuit> {
    sqlx::query_as(&format!("{} WHERE h.host_key = $2", *HOST_SELECT))
        .bind(cfg.default_cap())
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(Error::NotFound("host"))
}

/// The state of host `key`'s circuit; `None` when the key is `None` (a channel not keyed yet) or
/// has no circuit row yet (no result recorded for the host).
pub async fn state_of(exec: impl sqlx::PgExecutor<'_>, key: Option<&str>) -> Result<Option<State>> {
    let Some(key) = key else { return Ok(None) };
    Ok(
        sqlx::query_scalar("SELECT state FROM host_circuits WHERE host_key = $1")
            .bind(key)
            .fetch_optional(exec)
            .await?,
    )
}

/// Operator overrides of one host (`PATCH`): `None` leaves a field alone, `Some(None)` returns
/// it to the configuration's.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Distinct failing channels that open the host (1–10000).
    pub failure_threshold: Option<Option<i32>>,
    /// First cooldown, ms (1–86400000).
    pub cooldown_ms: Option<Option<i64>>,
    /// Cap of deliveries in flight to the host (1–100000).
    pub max_in_flight: Option<Option<i32>>,
}

/// Applies `o` to host `key` (checked: errors name the field) and writes one
/// `host.settings_changed` audit row by `actor` with the old and new values of what changed
/// (none when nothing did). [`Error::NotFound`] for an unknown host.
pub async fn set_overrides(
    tx: &mut PgConnection,
    key: &str,
    o: &Overrides,
    actor: &str,
) -> Result<()> {
    let in_range = |field: &'static str, v: Option<i64>, min: i64, max: i64, unit: &str| match v {
        Some(v) if !(min..=max).contains(&v) => Err(Error::invalid(
            field,
            format!("must be between {min} and {max}{unit}"),
        )),
        _ => Ok(()),
    };
    // At least 2 distinct channels: one channel's failures alone are its own circuit's job.
    in_range(
        "failure_threshold",
        o.failure_threshold.flatten().map(i64::from),
        2,
        10_000,
        " (distinct failing channels; one channel alone is its own circuit's job)",
    )?;
    in_range(
        "cooldown_ms",
        o.cooldown_ms.flatten(),
        1,
        86_400_000,
        " (24 h)",
    )?;
    in_range(
        "max_in_flight",
        o.max_in_flight.flatten().map(i64::from),
        1,
        100_000,
        "",
    )?;
    type Vals = (Option<i32>, Option<i64>, Option<i32>);
    let old: Vals = sqlx::query_as(
        "SELECT failure_threshold, cooldown_ms, max_in_flight FROM host_circuits WHERE host_key = $1 FOR UPDATE",
    )
    .bind(key)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("host"))?;
    let new: Vals = (
        o.failure_threshold.unwrap_or(old.0),
        o.cooldown_ms.unwrap_or(old.1),
        o.max_in_flight.unwrap_or(old.2),
    );
    if new == old {
        return Ok(());
    }
    sqlx::query(
        "UPDATE host_circuits SET failure_threshold = $2, cooldown_ms = $3, max_in_flight = $4,
             updated_at = now() WHERE host_key = $1",
    )
    .bind(key)
    .bind(new.0)
    .bind(new.1)
    .bind(new.2)
    .execute(&mut *tx)
    .await?;
    if new.2 != old.2 {
        breakwater_queue::set_gate_max_in_flight(&mut *tx, key, new.2).await?;
    }
    let as_json = |v: &Vals| serde_json::json!({ "failure_threshold": v.0, "cooldown_ms": v.1, "max_in_flight": v.2 });
    let details =
        audit::changes(&as_json(&old), &as_json(&new)).unwrap_or_else(|| serde_json::json!({}));
    let mut details = details;
    details["host_key"] = serde_json::json!(key);
    audit::record(
        &mut *tx,
        &audit::Entry {
            actor,
            action: "host.settings_changed",
            details,
            ..Default::default()
        },
    )
    .await?;
    Ok(())
}

/// The safety net for a missed park or release of a host (the host part of the parking
/// reconciler, run beside [`crate::circuit::reconcile_parking`]): compares every host circuit
/// with its gate's parked flag and repairs a mismatch with the same one-row park or release,
/// each in its own transaction under the host row's lock, re-checked there. Reads the parked
/// gates and the hosts that are not closed (two partial indexes), never a job.
pub async fn reconcile_gates(conn: &mut PgConnection) -> Result<Reconciled> {
    let parked = breakwater_queue::parked_gates(&mut *conn).await?;
    let to_release: Vec<String> = sqlx::query_scalar(
        "SELECT k FROM unnest($1::text[]) k
         WHERE NOT EXISTS (SELECT 1 FROM host_circuits h WHERE h.host_key = k AND h.state <> 'closed')
           AND EXISTS (SELECT 1 FROM host_circuits h WHERE h.host_key = k)",
    )
    .bind(&parked)
    .fetch_all(&mut *conn)
    .await?;
    let to_park: Vec<String> = sqlx::query_scalar(
        "SELECT host_key FROM host_circuits WHERE state <> 'closed' AND NOT (host_key = ANY($1))",
    )
    .bind(&parked)
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Reconciled::default();
    for (keys, park) in [(to_release, false), (to_park, true)] {
        for key in keys {
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let state: Option<State> = sqlx::query_scalar(
                "SELECT state FROM host_circuits WHERE host_key = $1 FOR UPDATE",
            )
            .bind(&key)
            .fetch_optional(&mut *tx)
            .await?;
            let gate_parked = breakwater_queue::gate_state(&mut *tx, &key)
                .await?
                .is_some_and(|g| g.parked);
            let needs = match state {
                Some(State::Closed) => !park && gate_parked,
                Some(_) => park && !gate_parked,
                None => false,
            };
            if needs {
                let jobs = if park {
                    out.parked += 1;
                    park_host_jobs(&mut tx, &key).await?
                } else {
                    out.released += 1;
                    release_host_jobs(&mut tx, &key).await?
                };
                tracing::warn!(host_key = %key, jobs, park, "reconciler: repaired a missed host park or release");
            }
            tx.commit().await?;
        }
    }
    Ok(out)
}

/// Gives every live channel without a host key its key at granularity `g` (channels created
/// before host circuits existed, or a granularity change on a restart is *not* re-applied: keys
/// are set when a URL is set). One transaction per channel. Returns how many were keyed.
pub async fn rekey_missing(conn: &mut PgConnection, g: Granularity) -> Result<u64> {
    let rows: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT id, url FROM channels WHERE host_key IS NULL AND deleted_at IS NULL ORDER BY id LIMIT 10000",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut n = 0;
    for (id, url) in rows {
        let Ok(key) = host_key(&url, g) else { continue };
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        sqlx::query("SELECT 1 FROM channels WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        assign(&mut tx, id, &key).await?;
        tx.commit().await?;
        n += 1;
    }
    Ok(n)
}
