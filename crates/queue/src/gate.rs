//! Gates: a second level above job groups. A gate, keyed by text (for Breakwater: a receiving
//! host), is a set of groups ([`set_group_gate`]; a group has at most one gate) that share
//!
//! - a **parked flag** ([`park_gate`], [`release_gate`]): while it is set the fetch takes no job
//!   of any of the gate's groups. Like a group's flag it is one row update, whatever the number
//!   of groups and jobs; the jobs stay where they are;
//! - a **probe slot** ([`wake_one_in_gate`]): one job of the whole parked gate, bound to the
//!   group whose job was woken (or unbound: the next job to arrive in any of its unparked
//!   groups);
//! - a **cluster-wide concurrency cap**, opt-in: jobs of all its groups in state `executing`,
//!   on all nodes, never exceed `max_in_flight` (else [`crate::GroupLimits::gate_ceiling`], if
//!   set) ([`set_gate_max_in_flight`]).
//!
//! **Counting.** A gate is counted only while it is capped or parked. The fetch locks a counted
//! gate's row (after the group rows), re-checks it and raises its `in_flight` in the same
//! statement, and stamps each job it takes with the gate it was counted in (`jobs.gate_slot`);
//! the trigger that lowers a group's count when a job leaves `executing` (any path: result,
//! rescue, hand back, delete) lowers the stamped gate's count, and touches no gate row for a job
//! without a stamp. So a gate with no cap that is not parked — the common case: a host shared by
//! many channels of many tenants — is never locked or written by claims and results, and the
//! counts are exact whatever happens to a group's gate or to the cap meanwhile: `in_flight` is
//! always the number of executing jobs stamped with the gate ([`crate::slots_drift`] checks it).
//! The room of a counted gate is shared across shares first, in the fetch's water-filling order
//! (see [`crate::fetch`]).
//!
//! A job is fetched only if its group lets it (not parked, or a group probe slot; under the
//! group's cap) **and** its gate lets it. Groups without a gate behave as if gates did not exist.
//!
//! Lock order, everywhere: a group's row before its gate's row (the fetch, the trigger); gate
//! rows among themselves in key order; [`set_gate_max_in_flight`] takes job rows, then the gate
//! row.

use crate::wake::{notify_moved, Moved};
use crate::{notify_queues, Error, Result, PRIORITY_NORMAL};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// Creates gate `gate_key`'s row (not parked, no cap of its own) if it is missing.
async fn ensure_gate(exec: impl PgExecutor<'_>, gate_key: &str) -> Result<()> {
    sqlx::query!(
        "INSERT INTO job_gates (gate_key) VALUES ($1) ON CONFLICT DO NOTHING",
        gate_key
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Puts group `group_id` in gate `gate_key` (`None`: in no gate). Creates the gate's row (not
/// parked, no cap of its own) and the group's row if they are missing.
///
/// One update of the group's row; no count moves. That is exact: a job counts in the gate it
/// was stamped with when claimed (`jobs.gate_slot`), and its slot is released there, whatever
/// gate its group is in by then. The group's jobs already executing therefore stay counted in
/// the old gate until they finish, and do not count against the new gate's cap (the new gate's
/// cap binds from the next claim on). The fetch reads a group's gate from the group row under
/// its lock, so a claim sees either the old or the new gate, never a mix.
///
/// Errors: [`Error::Database`] only.
pub async fn set_group_gate(
    conn: &mut PgConnection,
    group_id: Uuid,
    gate_key: Option<&str>,
) -> Result<()> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    if let Some(key) = gate_key {
        ensure_gate(&mut *tx, key).await?;
    }
    sqlx::query!(
        "INSERT INTO job_groups (group_id, gate_key) VALUES ($1, $2)
         ON CONFLICT (group_id) DO UPDATE SET gate_key = EXCLUDED.gate_key
         WHERE job_groups.gate_key IS DISTINCT FROM EXCLUDED.gate_key",
        group_id,
        gate_key,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Sets gate `gate_key`'s own cap: jobs of all its groups executing at once, cluster-wide
/// (`None`: the pool's [`crate::GroupLimits::gate_ceiling`], which may be `None` too: then the
/// gate is not capped and, unless parked, not counted). Creates the gate's row if it is missing.
/// Lowering the cap below the jobs already running stops new claims until enough finish;
/// nothing running is interrupted.
///
/// **Turning a cap on under load stays exact.** When the gate gets a cap, the jobs of its groups
/// already executing without a stamp (claimed while the gate was not counted) are stamped with
/// it and added to its `in_flight`, in this transaction: first one UPDATE of those job rows
/// (a job finishing concurrently either finished before it — not counted — or waits for its row
/// and then, stamped, lowers the count after this commits), then the gate row (its cap and the
/// count, under its lock). So from the next fetch on, jobs running plus jobs claimed stay within
/// the cap. A fetch already running when this commits, whose snapshot saw the gate uncapped,
/// can still claim a few jobs unstamped (at most its limit); they run uncounted. Removing a cap
/// leaves the stamped jobs to lower the count as they finish.
///
/// Takes job rows before the gate row: a result's transaction holds its job row and may then
/// take the gate row (its trigger, a host transition), never the other way round.
///
/// Errors: [`Error::InvalidArgument`] if `max` is not ≥ 1; [`Error::Database`].
pub async fn set_gate_max_in_flight(
    conn: &mut PgConnection,
    gate_key: &str,
    max: Option<i32>,
) -> Result<()> {
    if max.is_some_and(|m| m < 1) {
        return Err(Error::InvalidArgument("max_in_flight must be at least 1"));
    }
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    ensure_gate(&mut *tx, gate_key).await?;
    let stamped = if max.is_some() {
        sqlx::query!(
            "UPDATE jobs SET gate_slot = $1
             WHERE state = 'executing' AND gate_slot IS NULL
               AND group_id IN (SELECT group_id FROM job_groups WHERE gate_key = $1)",
            gate_key,
        )
        .execute(&mut *tx)
        .await?
        .rows_affected() as i32
    } else {
        0
    };
    sqlx::query!(
        "UPDATE job_gates SET max_in_flight = $2, in_flight = in_flight + $3
         WHERE gate_key = $1 AND (max_in_flight IS DISTINCT FROM $2 OR $3 > 0)",
        gate_key,
        max,
        stamped,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Parks gate `gate_key`: the fetch takes no job of any of its groups until [`release_gate`]
/// (waiting jobs stay exactly as they are; executing ones finish on their own). Any probe slot
/// is withdrawn. Creates the gate's row if it is missing. Returns the number of waiting
/// (`available` or `scheduled`) jobs of the gate's groups, parked or not.
///
/// One update of the gate's row, whatever the number of groups and jobs. It waits for a fetch
/// holding that row (a counted gate's), so a job claimed just before is either claimed (it
/// finishes, its slot released as usual) or not (it stays parked). A fetch already running
/// whose snapshot saw the gate neither parked nor capped does not lock it and may still claim
/// a job of it after this returns (the caller's own admission check, e.g. the host circuit's,
/// holds such a job); a fetch that starts after this returns takes none but the probe.
///
/// A job woken as a probe keeps its urgent priority: [`wake_one_in_gate`] picks it again first
/// among the groups its caller does not rank, and after a release it merely runs first in its
/// group.
pub async fn park_gate(conn: &mut PgConnection, gate_key: &str) -> Result<u64> {
    sqlx::query!(
        "INSERT INTO job_gates (gate_key, parked, parked_at) VALUES ($1, true, now())
         ON CONFLICT (gate_key) DO UPDATE
         SET parked = true, probe_slots = 0, probe_group = NULL,
             parked_at = CASE WHEN job_gates.parked THEN job_gates.parked_at ELSE now() END",
        gate_key,
    )
    .execute(&mut *conn)
    .await?;
    gate_waiting_count(&mut *conn, gate_key).await
}

/// Releases gate `gate_key`: the fetch takes its groups' jobs again (each group still subject
/// to its own parked flag and cap) and their queues are woken (`NOTIFY`, at commit inside a
/// transaction). Returns the number of waiting jobs of the gate's groups. One update of the
/// gate's row; releasing a gate that is not parked changes nothing but still wakes.
pub async fn release_gate(conn: &mut PgConnection, gate_key: &str) -> Result<u64> {
    sqlx::query!(
        "UPDATE job_gates SET parked = false, probe_slots = 0, probe_group = NULL, parked_at = NULL
         WHERE gate_key = $1 AND (parked OR probe_slots > 0)",
        gate_key,
    )
    .execute(&mut *conn)
    .await?;
    let moved = sqlx::query_as!(
        Moved,
        r#"SELECT j.queue AS "queue!", count(*) AS "n!" FROM job_groups g
         JOIN jobs j ON j.group_id = g.group_id AND j.state IN ('available', 'scheduled')
         WHERE g.gate_key = $1
         GROUP BY j.queue"#,
        gate_key,
    )
    .fetch_all(&mut *conn)
    .await?;
    notify_moved(&mut *conn, moved).await
}

/// Waiting (`available` or `scheduled`) jobs of gate `gate_key`'s groups, parked or not.
pub(crate) async fn gate_waiting_count(exec: impl PgExecutor<'_>, gate_key: &str) -> Result<u64> {
    let n: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM job_groups g
         JOIN jobs j ON j.group_id = g.group_id AND j.state IN ('available', 'scheduled')
         WHERE g.gate_key = $1"#,
        gate_key,
    )
    .fetch_one(exec)
    .await?;
    Ok(n as u64)
}

/// Wakes exactly one waiting job of `kind` of gate `gate_key` as the gate's probe: among the
/// gate's groups that are not parked themselves and not in `avoid` (group ids the caller knows
/// cannot run a job now, e.g. channels under a `Retry-After` hold), the head of the first group of `prefer` (group
/// ids, best first: the caller's ranking, e.g. the host circuit's healthiest channels) that has
/// one (a fifo group's head is its oldest live job, [`crate::set_group_fifo`]), else the job first in fetch order (lowest priority number, then oldest `scheduled_at`,
/// then id) of the other groups, becomes due now at `priority` (urgent), any
/// other job of that group at or below `priority` goes back to normal priority, and the gate
/// gets one probe slot **bound to that group**: while the gate is parked the fetch takes exactly
/// that one job of the whole gate. Returns `(job id, its group, its args)`.
///
/// If no unparked group of the gate outside `avoid` has a waiting job of that kind, returns
/// `None` and grants the slot **unbound**: the next job to arrive in any unparked group of the
/// gate is the one fetched (exactly one; `avoid` does not bind the fetch). The slot is spent by the fetch that takes its job, withdrawn by
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
    prefer: &[Uuid],
    avoid: &[Uuid],
) -> Result<Option<(i64, Uuid, serde_json::Value)>> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    ensure_gate(&mut *tx, gate_key).await?;
    lock_rows!(&mut *tx, "job_gates", "gate_key = $1", gate_key);
    // One index probe per group of the gate (its first waiting job of `kind`, available or
    // scheduled, each an ordered range of jobs_group_idx), never a walk of its backlog.
    let row = sqlx::query!(
        r#"
        WITH chosen AS (
            SELECT j.id, g.group_id
            FROM job_groups g
            CROSS JOIN LATERAL (
                SELECT id, priority, scheduled_at FROM (
                    (SELECT id, priority, scheduled_at FROM jobs
                     WHERE group_id = g.group_id AND state = 'available' AND kind = $2
                       AND NOT g.fifo
                     ORDER BY priority, scheduled_at, id LIMIT 1)
                    UNION ALL
                    (SELECT id, priority, scheduled_at FROM jobs
                     WHERE group_id = g.group_id AND state = 'scheduled' AND kind = $2
                       AND NOT g.fifo
                     ORDER BY priority, scheduled_at, id LIMIT 1)
                    UNION ALL
                    -- A fifo group offers only its head (oldest live job), none while it
                    -- executes: the fetch would take no other job of it.
                    SELECT id, priority, scheduled_at FROM (
                        SELECT id, priority, scheduled_at, state, kind FROM jobs
                        WHERE group_id = g.group_id AND g.fifo
                          AND state IN ('available', 'scheduled', 'executing') AND attempt >= 0
                        ORDER BY id LIMIT 1) f
                    WHERE f.state <> 'executing' AND f.kind = $2) u
                ORDER BY priority, scheduled_at, id
                LIMIT 1) j
            WHERE g.gate_key = $1 AND NOT g.parked AND NOT (g.group_id = ANY($6::uuid[]))
            ORDER BY coalesce(array_position($5::uuid[], g.group_id), 2147483647),
                     j.priority, j.scheduled_at, j.id
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
        gate_key,
        kind,
        priority,
        PRIORITY_NORMAL,
        prefer,
        avoid,
    )
    .fetch_optional(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE job_gates SET probe_slots = 1, probe_group = $2 WHERE gate_key = $1",
        gate_key,
        row.as_ref().map(|r| r.group_id)
    )
    .execute(&mut *tx)
    .await?;
    let out = match row {
        Some(r) => {
            notify_queues(&mut *tx, &[r.queue]).await?;
            Some((r.id, r.group_id, r.args))
        }
        None => None,
    };
    tx.commit().await?;
    Ok(out)
}

/// A gate's row as an operator (or the host circuit) sees it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct GateState {
    /// Jobs executing now, cluster-wide, counted in the gate (always 0 for a gate that was never
    /// capped or parked: such a gate is not counted).
    pub in_flight: i32,
    /// The gate's own cap, if set (else the pool's [`crate::GroupLimits::gate_ceiling`], if any).
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
    // sqlx reads `groups` (a computed column) as nullable; a `!` override in its alias would
    // change the statement's text, so the impossible NULL count becomes 0 here.
    Ok(sqlx::query!(
        "SELECT x.in_flight, x.max_in_flight, x.parked, x.probe_slots, x.probe_group,
                (SELECT count(*) FROM job_groups g WHERE g.gate_key = x.gate_key) AS groups
         FROM job_gates x WHERE x.gate_key = $1",
        gate_key,
    )
    .map(|r| GateState {
        in_flight: r.in_flight,
        max_in_flight: r.max_in_flight,
        parked: r.parked,
        probe_slots: r.probe_slots,
        probe_group: r.probe_group,
        groups: r.groups.unwrap_or_default(),
    })
    .fetch_optional(exec)
    .await?)
}

/// Keys of the gates that are parked, sorted (a reconciler compares them with their owner's
/// state, e.g. host circuits that are closed).
pub async fn parked_gates(exec: impl PgExecutor<'_>) -> Result<Vec<String>> {
    Ok(
        sqlx::query_scalar!("SELECT gate_key FROM job_gates WHERE parked ORDER BY gate_key")
            .fetch_all(exec)
            .await?,
    )
}

/// SQL expressions over the gate whose key is the SQL expression `gate_key`, for a caller's
/// statement that lists many gates at once (the operator's host list):
/// `(parked, waiting, in_flight, cap)` — whether the gate is parked (`false` without a gate
/// row), its groups' waiting (`available` or `scheduled`) jobs (`bigint`), its groups' jobs
/// executing now (`bigint`, cluster-wide) and the gate's own cap (`int4`, null when none).
/// `gate_key` must be trusted SQL, never user input.
pub fn gate_summary_sql(gate_key: &str) -> [String; 4] {
    [
        format!("coalesce((SELECT x.parked FROM job_gates x WHERE x.gate_key = {gate_key}), false)"),
        format!(
            "(SELECT count(*) FROM job_groups g
               JOIN jobs j ON j.group_id = g.group_id AND j.state IN ('available', 'scheduled')
             WHERE g.gate_key = {gate_key})"
        ),
        format!(
            "(SELECT coalesce(sum(g.in_flight), 0) FROM job_groups g WHERE g.gate_key = {gate_key})::int8"
        ),
        format!("(SELECT x.max_in_flight FROM job_gates x WHERE x.gate_key = {gate_key})"),
    ]
}
