//! Gates: a second level above job groups. A gate, keyed by text (for Breakwater: a receiving
//! host), is a set of groups ([`set_group_gate`]; a group has at most one gate) that share
//!
//! - a **parked flag** ([`park_gate`], [`release_gate`]): while it is set the fetch takes no job
//!   of any of the gate's groups. Like a group's flag it is one row update, whatever the number
//!   of groups and jobs; the jobs stay where they are;
//! - a **probe slot** ([`wake_one_in_gate`]): one job of the whole parked gate, bound to the
//!   group whose job was woken (or unbound: the next job to arrive in any of its unparked
//!   groups);
//! - a **cluster-wide concurrency cap**: jobs of all its groups in state `executing`, on all
//!   nodes, never exceed `max_in_flight` (else [`crate::GroupLimits::gate_ceiling`]). The fetch
//!   locks the gate's row (`FOR UPDATE SKIP LOCKED`), re-checks the cap on it and raises its
//!   `in_flight` in the same statement; the trigger that lowers a group's count when a job
//!   leaves `executing` (any path: result, rescue, hand back, delete) lowers its gate's too. The
//!   room is shared across shares first, in the fetch's water-filling order (see
//!   [`crate::fetch`]).
//!
//! A job is fetched only if its group lets it (not parked, or a group probe slot; under the
//! group's cap) **and** its gate lets it. Groups without a gate behave as if gates did not exist.
//!
//! Lock order, everywhere: a group's row before its gate's row (the fetch, the trigger,
//! [`set_group_gate`]); gate rows among themselves in key order.

use crate::{notify_queues, Error, Result, PRIORITY_NORMAL};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// Puts group `group_id` in gate `gate_key` (`None`: in no gate). Creates the gate's row (not
/// parked, no cap of its own) and the group's row if they are missing.
///
/// The group's jobs in flight move with it: the old gate's `in_flight` falls and the new one's
/// rises by the group's `in_flight`, exactly, in one transaction (a savepoint if the caller is
/// already in one) that holds the group's row lock — the fetch and the slot-release trigger take
/// that lock before touching the gate, so neither can count a job on the wrong gate meanwhile.
/// Moving a group to the gate it is in changes nothing.
///
/// Errors: [`Error::Database`] only. Two calls moving different groups between the same gates
/// in opposite directions lock the gates in key order, so they do not deadlock each other.
pub async fn set_group_gate(
    conn: &mut PgConnection,
    group_id: Uuid,
    gate_key: Option<&str>,
) -> Result<()> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    if let Some(key) = gate_key {
        sqlx::query("INSERT INTO job_gates (gate_key) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(key)
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query("INSERT INTO job_groups (group_id) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(group_id)
        .execute(&mut *tx)
        .await?;
    // The group's row lock: from here until commit no fetch claims a job of the group and no
    // finished job releases its slot, so `in_flight` is the number to move.
    let (old, in_flight): (Option<String>, i32) =
        sqlx::query_as("SELECT gate_key, in_flight FROM job_groups WHERE group_id = $1 FOR UPDATE")
            .bind(group_id)
            .fetch_one(&mut *tx)
            .await?;
    if old.as_deref() == gate_key {
        tx.commit().await?;
        return Ok(());
    }
    if in_flight > 0 {
        let keys: Vec<&str> = old.as_deref().into_iter().chain(gate_key).collect();
        sqlx::query(
            "SELECT 1 FROM job_gates WHERE gate_key = ANY($1) ORDER BY gate_key FOR UPDATE",
        )
        .bind(&keys)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE job_gates
             SET in_flight = CASE WHEN gate_key = $2 THEN in_flight + $3
                                  ELSE greatest(in_flight - $3, 0) END
             WHERE gate_key = ANY($1)",
        )
        .bind(&keys)
        .bind(gate_key)
        .bind(in_flight)
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query("UPDATE job_groups SET gate_key = $2 WHERE group_id = $1")
        .bind(group_id)
        .bind(gate_key)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Sets gate `gate_key`'s own cap: jobs of all its groups executing at once, cluster-wide
/// (`None`: the pool's [`crate::GroupLimits::gate_ceiling`]). Creates the gate's row if it is
/// missing. Lowering the cap below the jobs already running stops new claims until enough
/// finish; nothing running is interrupted.
///
/// Errors: [`Error::InvalidArgument`] if `max` is not ≥ 1; [`Error::Database`].
pub async fn set_gate_max_in_flight(
    exec: impl PgExecutor<'_>,
    gate_key: &str,
    max: Option<i32>,
) -> Result<()> {
    if max.is_some_and(|m| m < 1) {
        return Err(Error::InvalidArgument("max_in_flight must be at least 1"));
    }
    sqlx::query(
        "INSERT INTO job_gates (gate_key, max_in_flight) VALUES ($1, $2)
         ON CONFLICT (gate_key) DO UPDATE SET max_in_flight = EXCLUDED.max_in_flight
         WHERE job_gates.max_in_flight IS DISTINCT FROM EXCLUDED.max_in_flight",
    )
    .bind(gate_key)
    .bind(max)
    .execute(exec)
    .await?;
    Ok(())
}

/// Parks gate `gate_key`: the fetch takes no job of any of its groups until [`release_gate`]
/// (waiting jobs stay exactly as they are; executing ones finish on their own). Any probe slot
/// is withdrawn. Creates the gate's row if it is missing. Returns the number of waiting
/// (`available` or `scheduled`) jobs of the gate's groups, parked or not.
///
/// One update of the gate's row, whatever the number of groups and jobs. It waits for a fetch
/// holding that row, so a job claimed just before is either claimed (it finishes, its slot
/// released as usual) or not (it stays parked).
///
/// A job woken as a probe keeps its urgent priority: [`wake_one_in_gate`] picks it again first,
/// and after a release it merely runs first in its group.
pub async fn park_gate(conn: &mut PgConnection, gate_key: &str) -> Result<u64> {
    sqlx::query(
        "INSERT INTO job_gates (gate_key, parked, parked_at) VALUES ($1, true, now())
         ON CONFLICT (gate_key) DO UPDATE
         SET parked = true, probe_slots = 0, probe_group = NULL,
             parked_at = CASE WHEN job_gates.parked THEN job_gates.parked_at ELSE now() END",
    )
    .bind(gate_key)
    .execute(&mut *conn)
    .await?;
    gate_waiting_count(&mut *conn, gate_key).await
}

/// Releases gate `gate_key`: the fetch takes its groups' jobs again (each group still subject
/// to its own parked flag and cap) and their queues are woken (`NOTIFY`, at commit inside a
/// transaction). Returns the number of waiting jobs of the gate's groups. One update of the
/// gate's row; releasing a gate that is not parked changes nothing but still wakes.
pub async fn release_gate(conn: &mut PgConnection, gate_key: &str) -> Result<u64> {
    sqlx::query(
        "UPDATE job_gates SET parked = false, probe_slots = 0, probe_group = NULL, parked_at = NULL
         WHERE gate_key = $1 AND (parked OR probe_slots > 0)",
    )
    .bind(gate_key)
    .execute(&mut *conn)
    .await?;
    let queues: Vec<(String, i64)> = sqlx::query_as(
        "SELECT j.queue, count(*) FROM job_groups g
         JOIN jobs j ON j.group_id = g.group_id AND j.state IN ('available', 'scheduled')
         WHERE g.gate_key = $1
         GROUP BY j.queue",
    )
    .bind(gate_key)
    .fetch_all(&mut *conn)
    .await?;
    crate::wake::notify_moved(&mut *conn, queues).await
}

/// Waiting (`available` or `scheduled`) jobs of gate `gate_key`'s groups, parked or not.
pub async fn gate_waiting_count(exec: impl PgExecutor<'_>, gate_key: &str) -> Result<u64> {
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM job_groups g
         JOIN jobs j ON j.group_id = g.group_id AND j.state IN ('available', 'scheduled')
         WHERE g.gate_key = $1",
    )
    .bind(gate_key)
    .fetch_one(exec)
    .await?;
    Ok(n as u64)
}

/// Wakes exactly one waiting job of `kind` of gate `gate_key` as the gate's probe: among the
/// gate's groups that are not parked themselves, the job first in fetch order (lowest priority
/// number, then oldest `scheduled_at`, then id) becomes due now at `priority` (urgent), any
/// other job of that group at or below `priority` goes back to normal priority, and the gate
/// gets one probe slot **bound to that group**: while the gate is parked the fetch takes exactly
/// that one job of the whole gate. Returns `(job id, its group, its args)`.
///
/// If no unparked group of the gate has a waiting job of that kind, returns `None` and grants
/// the slot **unbound**: the next job to arrive in any unparked group of the gate is the one
/// fetched (exactly one). The slot is spent by the fetch that takes its job, withdrawn by
/// [`park_gate`] and [`release_gate`]. Creates the gate's row if it is missing (not parked:
/// the slot only matters while the gate is parked).
///
/// Callers are serialised on the gate's row (locked first), so two racing calls never wake two
/// jobs under one slot; the last call's choice holds. If the bound group is parked afterwards,
/// the slot stays unused until the next call. Runs in a transaction (a savepoint inside the
/// caller's). Errors: [`Error::Database`] only.
pub async fn wake_one_in_gate(
    conn: &mut PgConnection,
    gate_key: &str,
    kind: &str,
    priority: i16,
) -> Result<Option<(i64, Uuid, serde_json::Value)>> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    sqlx::query("INSERT INTO job_gates (gate_key) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(gate_key)
        .execute(&mut *tx)
        .await?;
    sqlx::query("SELECT 1 FROM job_gates WHERE gate_key = $1 FOR UPDATE")
        .bind(gate_key)
        .execute(&mut *tx)
        .await?;
    // One index probe per group of the gate (its first waiting job of `kind`, available or
    // scheduled, each an ordered range of jobs_group_idx), never a walk of its backlog.
    let row: Option<(i64, Uuid, serde_json::Value, String)> = sqlx::query_as(
        r#"
        WITH chosen AS (
            SELECT j.id, g.group_id
            FROM job_groups g
            CROSS JOIN LATERAL (
                SELECT id, priority, scheduled_at FROM (
                    (SELECT id, priority, scheduled_at FROM jobs
                     WHERE group_id = g.group_id AND state = 'available' AND kind = $2
                     ORDER BY priority, scheduled_at, id LIMIT 1)
                    UNION ALL
                    (SELECT id, priority, scheduled_at FROM jobs
                     WHERE group_id = g.group_id AND state = 'scheduled' AND kind = $2
                     ORDER BY priority, scheduled_at, id LIMIT 1)) u
                ORDER BY priority, scheduled_at, id
                LIMIT 1) j
            WHERE g.gate_key = $1 AND NOT g.parked
            ORDER BY j.priority, j.scheduled_at, j.id
            LIMIT 1
        ), demoted AS (
            UPDATE jobs j SET priority = $4
            FROM chosen c
            WHERE j.group_id = c.group_id AND j.state IN ('available', 'scheduled')
              AND j.priority <= $3 AND j.id <> c.id
        )
        UPDATE jobs j SET state = 'available', priority = $3, scheduled_at = now()
        FROM chosen c
        WHERE j.id = c.id AND j.state IN ('available', 'scheduled')
        RETURNING j.id, c.group_id, j.args, j.queue
        "#,
    )
    .bind(gate_key)
    .bind(kind)
    .bind(priority)
    .bind(PRIORITY_NORMAL)
    .fetch_optional(&mut *tx)
    .await?;
    sqlx::query("UPDATE job_gates SET probe_slots = 1, probe_group = $2 WHERE gate_key = $1")
        .bind(gate_key)
        .bind(row.as_ref().map(|r| r.1))
        .execute(&mut *tx)
        .await?;
    let out = match row {
        Some((id, group, args, queue)) => {
            notify_queues(&mut *tx, &[queue]).await?;
            Some((id, group, args))
        }
        None => None,
    };
    tx.commit().await?;
    Ok(out)
}

/// A gate's row as an operator (or the host circuit) sees it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct GateState {
    /// Jobs of the gate's groups executing now, cluster-wide.
    pub in_flight: i32,
    /// The gate's own cap, if set (else the pool's [`crate::GroupLimits::gate_ceiling`]).
    pub max_in_flight: Option<i32>,
    /// Whether the gate is parked.
    pub parked: bool,
    /// Probe slots left (0 or 1; meaningful while parked).
    pub probe_slots: i32,
    /// The group the probe slot is bound to (`None`: unbound, or no slot).
    pub probe_group: Option<Uuid>,
    /// Number of groups in the gate.
    pub groups: i64,
}

/// Gate `gate_key`'s row, or `None` if it has none.
pub async fn gate_state(exec: impl PgExecutor<'_>, gate_key: &str) -> Result<Option<GateState>> {
    Ok(sqlx::query_as(
        "SELECT x.in_flight, x.max_in_flight, x.parked, x.probe_slots, x.probe_group,
                (SELECT count(*) FROM job_groups g WHERE g.gate_key = x.gate_key) AS groups
         FROM job_gates x WHERE x.gate_key = $1",
    )
    .bind(gate_key)
    .fetch_optional(exec)
    .await?)
}

/// Keys of the gates that are parked, sorted (a reconciler compares them with their owner's
/// state, e.g. host circuits that are closed).
pub async fn parked_gates(exec: impl PgExecutor<'_>) -> Result<Vec<String>> {
    Ok(
        sqlx::query_scalar("SELECT gate_key FROM job_gates WHERE parked ORDER BY gate_key")
            .fetch_all(exec)
            .await?,
    )
}
