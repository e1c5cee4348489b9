//! Inserting jobs.

use crate::wake::{notify_due, MovedJob};
use crate::{JobState, NewJob, Result, NOTIFY_CHANNEL};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// Inserts one job and wakes its queue. Returns the new id, or `None` when a live job with the
/// same `unique_key` already exists (nothing is inserted then).
///
/// Runs on the caller's connection, so it can be part of the caller's transaction; the wake-up
/// `NOTIFY` is then delivered at commit.
pub async fn enqueue(conn: &mut PgConnection, job: &NewJob) -> Result<Option<i64>> {
    Ok(enqueue_many(conn, std::slice::from_ref(job)).await?.pop())
}

/// Inserts a batch of jobs and wakes their queues, in one statement. Returns the ids of the jobs
/// inserted, in no particular order; a job whose `unique_key` already has a live job (or
/// repeats an earlier key of the same batch) is skipped.
///
/// The wake-up (`pg_notify` on [`NOTIFY_CHANNEL`](crate::NOTIFY_CHANNEL), one per queue that
/// got an `available` job) is part of the insert statement rather than a statement of its own:
/// an enqueue is on the API's hot path, and each statement is a round trip and Postgres CPU.
pub async fn enqueue_many(conn: &mut PgConnection, jobs: &[NewJob]) -> Result<Vec<i64>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let n = jobs.len();
    let mut queue = Vec::with_capacity(n);
    let mut kind = Vec::with_capacity(n);
    let mut args = Vec::with_capacity(n);
    let mut priority = Vec::with_capacity(n);
    let mut max_attempts = Vec::with_capacity(n);
    let mut scheduled_at: Vec<Option<DateTime<Utc>>> = Vec::with_capacity(n);
    let mut unique_key: Vec<Option<String>> = Vec::with_capacity(n);
    let mut group_id: Vec<Option<Uuid>> = Vec::with_capacity(n);
    for j in jobs {
        queue.push(j.queue.as_str());
        kind.push(j.kind.as_str());
        args.push(&j.args);
        priority.push(j.priority);
        max_attempts.push(j.max_attempts);
        scheduled_at.push(j.scheduled_at);
        unique_key.push(j.unique_key.clone());
        group_id.push(j.group_id);
    }

    // A job due now goes straight to 'available' (the fetch index); a future one waits in
    // 'scheduled' until the promoter moves it. ON CONFLICT names the partial unique index's
    // predicate, so a second live job with the same unique key is skipped, not an error; two
    // nodes inserting the same key at once are serialised by the index itself.
    let rows = sqlx::query!(
        r#"
        WITH groups AS (
            -- Every group gets its row (slots, limit, parked flag) before its first job. Only a
            -- group without one is inserted: the unique check of an insert that meets an
            -- existing row waits for any open transaction that updated that row (a claim, a
            -- result), so a plain ON CONFLICT DO NOTHING made every enqueue wait for the
            -- group's in-flight commits, past the API's lock_timeout on a slow disk.
            INSERT INTO job_groups (group_id)
            SELECT DISTINCT g FROM unnest($8::uuid[]) AS g
            WHERE g IS NOT NULL AND NOT EXISTS (SELECT 1 FROM job_groups x WHERE x.group_id = g)
            ON CONFLICT DO NOTHING
        ), inserted AS (
            INSERT INTO jobs (queue, kind, args, priority, max_attempts, scheduled_at, state, unique_key, group_id)
            SELECT queue, kind, args, priority, max_attempts,
                   coalesce(scheduled_at, now()),
                   CASE WHEN coalesce(scheduled_at, now()) <= now() THEN 'available' ELSE 'scheduled' END,
                   unique_key, group_id
            FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::int2[], $5::int4[],
                        $6::timestamptz[], $7::text[], $8::uuid[])
                 AS t(queue, kind, args, priority, max_attempts, scheduled_at, unique_key, group_id)
            ON CONFLICT (unique_key)
                WHERE unique_key IS NOT NULL AND state IN ('available', 'scheduled', 'executing')
                DO NOTHING
            RETURNING id, queue, state
        ), woken AS (
            -- Delivered at commit, like any NOTIFY of a transaction. A plain SELECT in a WITH
            -- runs only when read: the final SELECT reads it (count(*) >= 0 is always true).
            SELECT pg_notify($9, q.queue)
            FROM (SELECT DISTINCT queue FROM inserted WHERE state = 'available') AS q
        )
        SELECT id AS "id!"
        FROM inserted
        WHERE (SELECT count(*) FROM woken) >= 0
        "#,
        &queue as _,
        &kind as _,
        &args as _,
        &priority[..],
        &max_attempts[..],
        &scheduled_at as _,
        &unique_key as _,
        &group_id as _,
        NOTIFY_CHANNEL,
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// Moves the waiting live job with unique key `$key` (SQL `$1`) in state `$states` (a string
/// literal: SQL, `= …` or `IN (…)`) to the time `$time` (a string literal: SQL over
/// `scheduled_at` and `$2` = `$at`), `available` if that is due, and wakes its queue then.
/// Evaluates to whether a job moved.
macro_rules! move_unique {
    ($conn:expr, $time:literal, $states:literal, $key:expr, $at:expr) => {{
        let moved = sqlx::query_as!(
            MovedJob,
            r#"
        UPDATE jobs
        SET scheduled_at = "#
                + $time
                + r#",
            state = CASE WHEN "#
                + $time
                + r#" <= now() THEN 'available' ELSE 'scheduled' END
        WHERE unique_key = $1 AND state "#
                + $states
                + r#"
        RETURNING queue, state AS "state: JobState"
        "#,
            $key,
            $at,
        )
        .fetch_optional(&mut *$conn)
        .await?;
        notify_due(&mut *$conn, moved).await?
    }};
}

/// Makes sure a job with `job.unique_key` (required) is due no later than `job.scheduled_at`:
/// inserts it, or, when a live job with that key is already waiting, moves that job's time
/// earlier if needed (never later). Returns true if a new job was inserted.
///
/// For singleton jobs such as a per-group watcher: at most one exists, and whoever schedules it
/// gets it run by their time.
pub async fn schedule_unique(conn: &mut PgConnection, job: &NewJob) -> Result<bool> {
    let key = job
        .unique_key
        .as_deref()
        .expect("schedule_unique needs a unique key");
    if enqueue(&mut *conn, job).await?.is_some() {
        return Ok(true);
    }
    move_unique!(
        conn,
        "least(scheduled_at, coalesce($2, now()))",
        "= 'scheduled'",
        key,
        job.scheduled_at
    );
    Ok(false)
}

/// Makes sure a job with `job.unique_key` (required) is due at `job.scheduled_at` (`None` = now),
/// later or earlier than before: inserts it, or moves the time of the waiting (`scheduled` or
/// `available`) live job with that key to it. Returns true if a new job was inserted.
///
/// For a singleton timer that must fire a fixed time after the *last* of a series of events
/// ("quiet for a window"): each event pushes it back. A live job that is executing right now is
/// left alone (the update matches nothing, the insert conflicts); such a handler must re-check
/// its condition and snooze itself, which is what makes the push-back safe on several nodes.
pub async fn reschedule_unique(conn: &mut PgConnection, job: &NewJob) -> Result<bool> {
    let key = job
        .unique_key
        .as_deref()
        .expect("reschedule_unique needs a unique key");
    let moved = move_unique!(
        conn,
        "coalesce($2, now())",
        "IN ('scheduled', 'available')",
        key,
        job.scheduled_at
    );
    if moved {
        Ok(false)
    } else {
        Ok(enqueue(&mut *conn, job).await?.is_some())
    }
}
