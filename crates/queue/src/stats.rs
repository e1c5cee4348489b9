//! What is in the queues right now: counts per queue and state, and the age of the oldest due
//! job. Read by the metrics scrape and the operator's queue view.

use crate::Result;
use serde::Serialize;
use sqlx::PgExecutor;

/// One queue's live jobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueStats {
    /// Queue name.
    pub queue: String,
    /// Due now and waiting for a worker (`available`, not parked): the queue's depth.
    pub available: i64,
    /// Waiting for their time: backoff, snooze (`scheduled`, parked or not).
    pub scheduled: i64,
    /// Claimed by a worker on some node (`executing`): in flight.
    pub executing: i64,
    /// Of `available` + `scheduled`, those of parked groups ([`crate::park_group`]) or of
    /// groups in a parked gate ([`crate::park_gate`]) — for Breakwater, deliveries held back by
    /// an open channel or host circuit, or a pause.
    // Counted by the one definition of "parked", the `job_group_parking` view.
    pub parked: i64,
    /// How long the oldest available job has been due, milliseconds (0 when none is).
    pub oldest_available_ms: i64,
}

/// Live-job counts of every queue that has live jobs, by queue name. A queue without live jobs
/// is absent (callers that know their queues fill in zeros).
///
/// One aggregate over the live states only; `available` and `scheduled` rows are covered by
/// partial indexes, so finished history does not slow it down. It reads a consistent snapshot
/// and takes no locks, so it is safe to run from every node at any time; the cost grows with
/// the number of live jobs.
pub async fn queue_stats(exec: impl PgExecutor<'_>) -> Result<Vec<QueueStats>> {
    // sqlx reads the computed columns as nullable (it cannot tell that `count(*)` and the
    // `greatest(coalesce(…), 0)` are never NULL); a `!` override in their aliases would change
    // the statement's text, so the mapping below fills the impossible NULL with 0.
    Ok(sqlx::query!(
        "SELECT queue,
                count(*) FILTER (WHERE state = 'available' AND p.group_id IS NULL) AS available,
                count(*) FILTER (WHERE state = 'scheduled') AS scheduled,
                count(*) FILTER (WHERE state = 'executing') AS executing,
                count(*) FILTER (WHERE state IN ('available', 'scheduled') AND p.group_id IS NOT NULL) AS parked,
                greatest(coalesce(floor(extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE state = 'available' AND p.group_id IS NULL)) * 1000), 0), 0)::int8
                    AS oldest_available_ms
         FROM jobs j
         LEFT JOIN (SELECT group_id FROM job_group_parking WHERE parked) p
                ON p.group_id = j.group_id
         WHERE state IN ('available', 'scheduled', 'executing')
         GROUP BY queue
         ORDER BY queue",
    )
    .map(|r| QueueStats {
        queue: r.queue,
        available: r.available.unwrap_or_default(),
        scheduled: r.scheduled.unwrap_or_default(),
        executing: r.executing.unwrap_or_default(),
        parked: r.parked.unwrap_or_default(),
        oldest_available_ms: r.oldest_available_ms.unwrap_or_default(),
    })
    .fetch_all(exec)
    .await?)
}
