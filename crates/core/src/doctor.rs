//! Invariants between deliveries, their jobs and the queue's bookkeeping, checked (and, on
//! request, repaired) by `breakwater doctor` and after every end-to-end test.
//!
//! Every path that finishes or abandons a job leaves its delivery in the matching state in the
//! same transaction (the worker itself, and the `jobs_delivery_follows` trigger for the paths
//! that do not know deliveries). This module is the check that this holds, for operators and
//! tests, and the repair for a database that went wrong anyway (a bug, a hand edit, a restore).

use crate::deliveries::Status;
use crate::Result;
use breakwater_queue::{JobState, SlotOwner};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// A delivery waiting (`pending`, `delivering`, `paused`, `failed`) with no live job: nothing
    /// would ever send it. Repair: cancelled if its channel was deleted, dead (with the reason)
    /// if its last job was discarded, else a fresh job.
    Stranded {
        /// The delivery.
        delivery_id: Uuid,
        /// Its status.
        status: Status,
        /// The state of its newest job, if it has any.
        last_job_state: Option<JobState>,
    },
    /// A live job of a delivery that is already final (`delivered`, `dead`, `cancelled`): it
    /// would send a finished delivery again. Repair: the waiting job is cancelled (an executing
    /// one finishes and changes nothing).
    Orphaned {
        /// The delivery.
        delivery_id: Uuid,
        /// Its status.
        status: Status,
        /// The job.
        job_id: i64,
    },
    /// A delivery shown `delivering` while its job waits. Repair: `pending`.
    NotDelivering {
        /// The delivery.
        delivery_id: Uuid,
    },
    /// A job group whose `in_flight` differs from its executing jobs. Repair: the count.
    /// (On a live cluster a claim or result in progress can show here for an instant; repair
    /// runs under the group's row lock and re-counts.)
    SlotsDrift {
        /// The group.
        group_id: Uuid,
        /// Its counter.
        in_flight: i32,
        /// Its jobs in state `executing`.
        executing: i64,
    },
    /// A job gate (e.g. a host's) whose `in_flight` differs from its groups' executing jobs.
    /// Repair: the count, under the gate's row lock ([`breakwater_queue::recount_gate_slots`]).
    GateSlotsDrift {
        /// The gate's key.
        gate_key: String,
        /// Its counter.
        in_flight: i32,
        /// Its groups' jobs in state `executing`.
        executing: i64,
    },
    /// A live job whose `attempt` counter is out of range (`i32::MAX`, where the fetch keeps
    /// it rather than fail every fetch of its queue, or negative): a bug, a hand edit, a
    /// restore. Not repaired automatically: the job runs (as its last attempt) and ends as its
    /// handler decides; an operator may cancel it.
    AttemptOutOfRange {
        /// The job.
        job_id: i64,
        /// Its queue.
        queue: String,
        /// Its counter.
        attempt: i32,
    },
}

/// The unique key of delivery `d`'s job, as SQL (the key [`crate::deliveries::delivery_job`]
/// gives it), for the queue's fragments.
const JOB_KEY: &str = "'delivery:' || d.id";

/// The condition on delivery `d` of a [`Finding::Stranded`]: waiting, with no live job. Checked
/// by [`check`], and again by the repair under the delivery's row lock.
fn stranded_sql() -> String {
    format!(
        "d.status IN ('pending', 'delivering', 'paused', 'failed')
         AND NOT {}",
        breakwater_queue::live_job_exists_sql(JOB_KEY)
    )
}

/// Every broken invariant, at most `limit` of each kind. Reads only; safe on production.
pub async fn check(conn: &mut PgConnection, limit: i64) -> Result<Vec<Finding>> {
    let mut out = Vec::new();
    let waiting_jobs = breakwater_queue::WAITING_JOBS_SQL;
    find(
        conn,
        &format!(
            "SELECT d.id, d.status, {last_state}
             FROM deliveries d
             WHERE {stranded}
             LIMIT $1",
            last_state = breakwater_queue::last_job_state_sql(JOB_KEY),
            stranded = stranded_sql(),
        ),
        limit,
        &mut out,
        |(delivery_id, status, last_job_state): (Uuid, Status, Option<JobState>)| {
            Finding::Stranded {
                delivery_id,
                status,
                last_job_state,
            }
        },
    )
    .await?;
    find(
        conn,
        &format!(
            "SELECT d.id, d.status, j.id
             FROM {waiting_jobs} j
             JOIN deliveries d ON j.unique_key = {JOB_KEY}
             WHERE d.status IN ('delivered', 'dead', 'cancelled')
             LIMIT $1"
        ),
        limit,
        &mut out,
        |(delivery_id, status, job_id): (Uuid, Status, i64)| Finding::Orphaned {
            delivery_id,
            status,
            job_id,
        },
    )
    .await?;
    find(
        conn,
        &format!(
            "SELECT d.id FROM deliveries d
             JOIN {waiting_jobs} j ON j.unique_key = {JOB_KEY}
             WHERE d.status = 'delivering'
             LIMIT $1"
        ),
        limit,
        &mut out,
        |(delivery_id,): (Uuid,)| Finding::NotDelivering { delivery_id },
    )
    .await?;
    let drift = breakwater_queue::slots_drift(&mut *conn, limit).await?;
    out.extend(drift.into_iter().map(|d| match d.owner {
        SlotOwner::Group(group_id) => Finding::SlotsDrift {
            group_id,
            in_flight: d.in_flight,
            executing: d.executing,
        },
        SlotOwner::Gate(gate_key) => Finding::GateSlotsDrift {
            gate_key,
            in_flight: d.in_flight,
            executing: d.executing,
        },
    }));
    let attempts = breakwater_queue::attempts_out_of_range(&mut *conn, limit).await?;
    out.extend(attempts.into_iter().map(|a| Finding::AttemptOutOfRange {
        job_id: a.job_id,
        queue: a.queue,
        attempt: a.attempt,
    }));
    Ok(out)
}

/// Runs one read-only check: `sql` (its `$1` is `limit`) and each row it returns, made a
/// finding by `finding`, appended to `out`.
async fn find<T>(
    conn: &mut PgConnection,
    sql: &str,
    limit: i64,
    out: &mut Vec<Finding>,
    finding: impl FnMut(T) -> Finding,
) -> Result<()>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
{
    let rows: Vec<T> = sqlx::query_as(sql)
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
    out.extend(rows.into_iter().map(finding));
    Ok(())
}

/// Repairs `findings` (from [`check`]), each in its own transaction and re-checked there, so a
/// finding that resolved itself meanwhile is left alone. New jobs for stranded deliveries get
/// `max_attempts`. Returns how many were repaired.
pub async fn repair(
    conn: &mut PgConnection,
    findings: &[Finding],
    max_attempts: i32,
) -> Result<u64> {
    let mut repaired = 0;
    for f in findings {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let changed = match f {
            Finding::Stranded { delivery_id, .. } => {
                repair_stranded(&mut tx, *delivery_id, max_attempts).await?
            }
            Finding::Orphaned { job_id, .. } => {
                breakwater_queue::cancel_waiting_job(&mut *tx, *job_id).await?
            }
            Finding::NotDelivering { delivery_id } => {
                sqlx::query(&format!(
                    "UPDATE deliveries d SET status = 'pending', updated_at = now()
                     WHERE d.id = $1 AND d.status = 'delivering'
                       AND NOT {}",
                    breakwater_queue::executing_job_exists_sql(JOB_KEY)
                ))
                .bind(delivery_id)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                    > 0
            }
            Finding::SlotsDrift { group_id, .. } => {
                breakwater_queue::recount_group_slots(&mut *tx, *group_id).await?
            }
            Finding::GateSlotsDrift { gate_key, .. } => {
                breakwater_queue::recount_gate_slots(&mut tx, gate_key).await?
            }
            // Reported only (see the variant).
            Finding::AttemptOutOfRange { .. } => false,
        };
        tx.commit().await?;
        if changed {
            repaired += 1;
        }
    }
    Ok(repaired)
}

async fn repair_stranded(
    tx: &mut PgConnection,
    delivery_id: Uuid,
    max_attempts: i32,
) -> Result<bool> {
    // Re-check under the delivery's row lock.
    let row: Option<(Uuid, String, bool, Option<i32>)> = sqlx::query_as(&format!(
        "SELECT d.channel_id, t.tier,
                EXISTS (SELECT 1 FROM channels c WHERE c.id = d.channel_id AND c.deleted_at IS NOT NULL),
                (d.retry_policy->>'max_attempts')::int
         FROM deliveries d JOIN tenants t ON t.id = d.tenant_id
         WHERE d.id = $1 AND {}
         FOR UPDATE OF d",
        stranded_sql()
    ))
    .bind(delivery_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((channel_id, tier, channel_deleted, own_attempts)) = row else {
        return Ok(false);
    };
    if channel_deleted {
        return crate::deliveries::cancel_orphan(
            &mut *tx,
            delivery_id,
            crate::lifecycle::REASON_CHANNEL_DELETED,
        )
        .await;
    }
    let last = breakwater_queue::last_job(&mut *tx, &format!("delivery:{delivery_id}")).await?;
    if let Some((_, error)) = last.filter(|(s, _)| *s == JobState::Discarded) {
        sqlx::query(
            "UPDATE deliveries SET status = 'dead', updated_at = now(),
                    last_error = coalesce($2, last_error, 'its job was discarded')
             WHERE id = $1",
        )
        .bind(delivery_id)
        .bind(error)
        .execute(&mut *tx)
        .await?;
    } else {
        let tier: crate::Tier = tier.parse()?;
        // The attempts of the retry policy the delivery was accepted with, if it set them.
        let attempts = own_attempts.unwrap_or(max_attempts);
        let job = crate::deliveries::delivery_job(tier, channel_id, delivery_id, attempts);
        breakwater_queue::enqueue(&mut *tx, &job).await?;
        sqlx::query(
            "UPDATE deliveries SET status = CASE WHEN status = 'delivering' THEN 'pending' ELSE status END,
                    updated_at = now()
             WHERE id = $1",
        )
        .bind(delivery_id)
        .execute(&mut *tx)
        .await?;
    }
    Ok(true)
}
