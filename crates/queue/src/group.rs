//! Parking and releasing a whole group of jobs.

use crate::outcome::millis;
use crate::{notify_queues, Result, PRIORITY_NORMAL, PRIORITY_PARKED};
use sqlx::PgConnection;
use std::time::Duration;
use uuid::Uuid;

/// Parks every waiting (`available` or `scheduled`) job of `group_id`: priority
/// [`PRIORITY_PARKED`], state `scheduled`, due after `park` plus a per-job random jitter in
/// `[0, jitter)`, so that parked jobs do not all wake at the same instant. Executing jobs are
/// left alone (their runs finish or fail on their own). Returns the number of jobs parked.
///
/// One UPDATE on `jobs_group_idx`; rows that another transaction holds are waited for, so a
/// job being inserted for the group at the same moment is either parked here or seen later by
/// the caller's own checks.
pub async fn park_group(
    conn: &mut PgConnection,
    group_id: Uuid,
    park: Duration,
    jitter: Duration,
) -> Result<u64> {
    let r = sqlx::query(
        r#"
        UPDATE jobs
        SET state = 'scheduled', priority = $2,
            scheduled_at = now() + (($3::float8 + floor(random() * $4::float8)) * interval '1 millisecond')
        WHERE group_id = $1 AND state IN ('available', 'scheduled')
        "#,
    )
    .bind(group_id)
    .bind(PRIORITY_PARKED)
    .bind(millis(park))
    .bind(millis(jitter).max(1))
    .execute(&mut *conn)
    .await?;
    Ok(r.rows_affected())
}

/// Releases every parked job of `group_id` (priority ≥ [`PRIORITY_PARKED`], waiting): back to
/// `available` at [`PRIORITY_NORMAL`], due now, and wakes their queues. One UPDATE on
/// `jobs_group_idx`. Returns the number of jobs released.
pub async fn release_group(conn: &mut PgConnection, group_id: Uuid) -> Result<u64> {
    let queues: Vec<(String, i64)> = sqlx::query_as(
        r#"
        WITH released AS (
            UPDATE jobs
            SET state = 'available', priority = $2, scheduled_at = now()
            WHERE group_id = $1 AND state IN ('available', 'scheduled') AND priority >= $3
            RETURNING queue
        )
        SELECT queue, count(*) FROM released GROUP BY queue
        "#,
    )
    .bind(group_id)
    .bind(PRIORITY_NORMAL)
    .bind(PRIORITY_PARKED)
    .fetch_all(&mut *conn)
    .await?;
    let n = queues.iter().map(|q| q.1 as u64).sum();
    let names: Vec<String> = queues.into_iter().map(|q| q.0).collect();
    notify_queues(&mut *conn, &names).await?;
    Ok(n)
}

/// Wakes exactly one waiting job of `group_id` and `kind` (any one: no ordering, so it costs
/// the same with 100 000 parked jobs): `available` now at `priority`, and notifies its queue.
/// Returns its id and args, or `None` if the group has no waiting job of that kind.
///
/// `FOR UPDATE SKIP LOCKED` in the subquery: two callers racing wake two different jobs, never
/// the same one twice; callers that need exactly one (a probe) hold their own fence.
pub async fn wake_one(
    conn: &mut PgConnection,
    group_id: Uuid,
    kind: &str,
    priority: i16,
) -> Result<Option<(i64, serde_json::Value)>> {
    let row: Option<(i64, serde_json::Value, String)> = sqlx::query_as(
        r#"
        UPDATE jobs SET state = 'available', priority = $3, scheduled_at = now()
        WHERE id = (
            SELECT id FROM jobs
            WHERE group_id = $1 AND state IN ('available', 'scheduled') AND kind = $2
            LIMIT 1
            FOR UPDATE SKIP LOCKED)
        RETURNING id, args, queue
        "#,
    )
    .bind(group_id)
    .bind(kind)
    .bind(priority)
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some((id, args, queue)) => {
            notify_queues(&mut *conn, &[queue]).await?;
            Ok(Some((id, args)))
        }
        None => Ok(None),
    }
}
