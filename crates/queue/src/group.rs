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
