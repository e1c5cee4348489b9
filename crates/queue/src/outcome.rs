//! Recording the result of a claimed job.
//!
//! Every call here is one conditional UPDATE on `(id, claim_token, state = 'executing')`: if the
//! job was rescued (or handed back) since it was claimed, the token no longer matches, the call
//! changes nothing and returns `false` / `None`. That is the fence that makes a late result from
//! a rescued run harmless.

use crate::group::Adaptation;
use crate::wake::{notify_due, MovedJob};
use crate::{notify_queues, Feedback, GroupLimits, JobState, Result};
use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use std::time::Duration;
use uuid::Uuid;

pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Marks the job completed. Returns false if the claim is no longer held.
pub async fn complete(exec: impl PgExecutor<'_>, id: i64, claim_token: Uuid) -> Result<bool> {
    let r = sqlx::query!(
        "UPDATE jobs SET state = 'completed', finalized_at = now(), claim_token = NULL
         WHERE id = $1 AND claim_token = $2 AND state = 'executing'",
        id,
        claim_token,
    )
    .execute(exec)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// One claimed job's end in a [`finish_batch`]: completed, or cancelled (its work was called off
/// while it ran) with `cancel_reason` appended to its `errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finish<'a> {
    /// The job.
    pub id: i64,
    /// The claim its result belongs to ([`crate::Job::claim_token`]).
    pub claim_token: Uuid,
    /// `None`: completed; `Some(reason)`: cancelled.
    pub cancel_reason: Option<&'a str>,
}

/// One group's successes in a [`finish_batch`]: `runs` runs of the group succeeded, in
/// `mean_latency` on average; they move its adaptive limit as [`crate::Feedback::Ok`] does in
/// [`crate::adapt_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSuccesses {
    /// The job group (a channel's id).
    pub group_id: Uuid,
    /// The runs' mean latency (from the request's start to its answer).
    pub mean_latency: Duration,
    /// How many successful runs.
    pub runs: u32,
}

/// Ends many claimed jobs in one statement — each [`complete`]d or [`cancel`]led as its
/// [`Finish`] says, each fenced by its own claim token as every result is — releases their
/// slots, and moves the adaptive limit of each group in `successes` by those runs, all in the
/// same statement: one update per group (its slots and its limit together) and one per counted
/// gate, taken in key order, instead of the slot-release trigger's one update per job and a
/// second update of each group for its limit (migration `20261204000002`: the statement sets
/// `breakwater.slot_release = 'caller'` for its transaction, so the trigger leaves these rows
/// to it). The limit moves by the rule of [`crate::adapt_limit`] (the SQL function
/// `group_limit_adapted`), once per group with all its runs of the batch, its growth condition
/// counting the group's jobs still in flight after this release plus these runs. A group of
/// `successes` none of whose jobs ended here keeps its limit (its runs were not recorded).
/// Lock order as every result's: job rows, then group rows, then gate rows; two batches that
/// share groups take them in the same order and cannot deadlock.
///
/// Returns the ids whose claim still held (ended here); a job missing from it was rescued or
/// handed back since its claim, and this changed nothing of it. Call it last in the caller's
/// transaction (the setting lasts until the transaction ends, and any later job update of the
/// same transaction would release no slot).
pub async fn finish_batch(
    exec: impl PgExecutor<'_>,
    jobs: &[Finish<'_>],
    successes: &[GroupSuccesses],
    limits: &GroupLimits,
) -> Result<Vec<i64>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
    let tokens: Vec<Uuid> = jobs.iter().map(|j| j.claim_token).collect();
    let reasons: Vec<Option<&str>> = jobs.iter().map(|j| j.cancel_reason).collect();
    let adapted: Vec<(Uuid, Adaptation)> = successes
        .iter()
        .filter_map(|s| {
            let ok = Feedback::Ok {
                latency: s.mean_latency,
                runs: s.runs,
            };
            Adaptation::of(ok, limits).map(|a| (s.group_id, a))
        })
        .collect();
    let groups: Vec<Uuid> = adapted.iter().map(|(g, _)| *g).collect();
    let latencies: Vec<Option<f32>> = adapted.iter().map(|(_, a)| a.latency_ms).collect();
    let runs: Vec<f32> = adapted.iter().map(|(_, a)| a.runs).collect();
    let recent_w: Vec<f32> = adapted.iter().map(|(_, a)| a.recent_weight).collect();
    let baseline_w: Vec<f32> = adapted.iter().map(|(_, a)| a.baseline_weight).collect();
    // `gate_locks` reads `group_locks` (its `count(*) >= 0` is always true) so that every group
    // row is locked before any gate row, whatever order Postgres runs the CTEs in: the lock
    // order of every result (group rows, then gate rows). A group without successes here joins
    // no feedback row (`f` is NULL), and the LEFT JOIN LATERAL gives no adaptation: each column
    // keeps its value through the coalesce (an adaptation's own NULL is the value it keeps).
    let done = sqlx::query_scalar!(
        r#"
        WITH caller AS (
            SELECT set_config('breakwater.slot_release', 'caller', true) AS released_here
        ), done AS (
            UPDATE jobs j
            SET state = CASE WHEN i.reason IS NULL THEN 'completed' ELSE 'cancelled' END,
                finalized_at = now(), claim_token = NULL,
                errors = CASE WHEN i.reason IS NULL THEN j.errors
                              ELSE j.errors || jsonb_build_object('attempt', j.attempt, 'at', now(),
                                                                  'error', i.reason) END
            FROM unnest($1::int8[], $2::uuid[], $3::text[]) AS i(id, token, reason)
            WHERE j.id = i.id AND j.claim_token = i.token AND j.state = 'executing'
              AND (SELECT released_here FROM caller) IS NOT NULL
            RETURNING j.id, j.group_id, j.gate_slot
        ), per_group AS (
            SELECT group_id, count(*)::int AS n FROM done WHERE group_id IS NOT NULL
            GROUP BY group_id
        ), group_locks AS (
            SELECT g.group_id FROM job_groups g JOIN per_group p ON p.group_id = g.group_id
            ORDER BY g.group_id
            FOR NO KEY UPDATE OF g
        ), groups_released AS (
            UPDATE job_groups g
            SET in_flight = greatest(g.in_flight - p.n, 0),
                (concurrency_limit, latency_recent_ms, latency_baseline_ms, limit_cut_at) = (
                    SELECT coalesce(a.new_limit, g.concurrency_limit),
                           coalesce(a.new_recent_ms, g.latency_recent_ms),
                           coalesce(a.new_baseline_ms, g.latency_baseline_ms),
                           coalesce(a.new_cut_at, g.limit_cut_at)
                    FROM (SELECT) one
                    LEFT JOIN LATERAL group_limit_adapted(
                        g.concurrency_limit, g.max_in_flight,
                        (greatest(g.in_flight - p.n, 0) + f.runs)::real,
                        g.latency_recent_ms, g.latency_baseline_ms, g.limit_cut_at,
                        f.latency, f.runs, f.recent_w, f.baseline_w,
                        $9, $10, $11, $12, $13, $14) a ON f.group_id IS NOT NULL)
            FROM per_group p
            JOIN group_locks l ON l.group_id = p.group_id
            LEFT JOIN unnest($4::uuid[], $5::real[], $6::real[], $7::real[], $8::real[])
                AS f(group_id, latency, runs, recent_w, baseline_w) ON f.group_id = p.group_id
            WHERE g.group_id = p.group_id
        ), per_gate AS (
            SELECT gate_slot, count(*)::int AS n FROM done
            WHERE group_id IS NOT NULL AND gate_slot IS NOT NULL
            GROUP BY gate_slot
        ), gate_locks AS (
            SELECT x.gate_key FROM job_gates x JOIN per_gate p ON p.gate_slot = x.gate_key
            WHERE (SELECT count(*) FROM group_locks) >= 0
            ORDER BY x.gate_key
            FOR NO KEY UPDATE OF x
        ), gates_released AS (
            UPDATE job_gates x SET in_flight = greatest(x.in_flight - p.n, 0)
            FROM per_gate p JOIN gate_locks l ON l.gate_key = p.gate_slot
            WHERE x.gate_key = p.gate_slot
        )
        SELECT id AS "id!" FROM done
        "#,
        &ids,
        &tokens,
        &reasons as &[Option<&str>],
        &groups,
        &latencies as &[Option<f32>],
        &runs,
        &recent_w,
        &baseline_w,
        limits.initial as f32,
        limits.floor as f32,
        limits.ceiling as i32,
        limits.decrease_factor as f32,
        limits.latency_tolerance as f32,
        limits.latency_noise.as_secs_f64() as f32 * 1e3,
    )
    .fetch_all(exec)
    .await?;
    Ok(done)
}

/// What [`retry`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOutcome {
    /// Scheduled to run again at this (database) time.
    Retried(DateTime<Utc>),
    /// That was the last attempt: the job is discarded (dead letter).
    Discarded,
}

/// Records a failed run: if attempts remain, schedules the job after `delay` (the caller's
/// backoff, see [`crate::Backoff`]); otherwise discards it to the dead letter state. `error` is
/// appended to the job's `errors`. Returns `None` if the claim is no longer held.
pub async fn retry(
    exec: impl PgExecutor<'_>,
    id: i64,
    claim_token: Uuid,
    delay: Duration,
    error: &str,
) -> Result<Option<RetryOutcome>> {
    let row = sqlx::query!(
        r#"
        UPDATE jobs
        SET state = CASE WHEN attempt >= max_attempts THEN 'discarded' ELSE 'scheduled' END,
            scheduled_at = CASE WHEN attempt >= max_attempts THEN scheduled_at
                                ELSE now() + ($3::float8 * interval '1 millisecond') END,
            finalized_at = CASE WHEN attempt >= max_attempts THEN now() END,
            errors = errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error', $4::text),
            claim_token = NULL
        WHERE id = $1 AND claim_token = $2 AND state = 'executing'
        RETURNING state AS "state: JobState", scheduled_at
        "#,
        id,
        claim_token,
        millis(delay) as _,
        error,
    )
    .fetch_optional(exec)
    .await?;
    Ok(row.map(|r| {
        if r.state == JobState::Discarded {
            RetryOutcome::Discarded
        } else {
            RetryOutcome::Retried(r.scheduled_at)
        }
    }))
}

/// Discards the job at once (dead letter), whatever attempts remain. Returns false if the claim
/// is no longer held.
pub async fn discard(
    exec: impl PgExecutor<'_>,
    id: i64,
    claim_token: Uuid,
    error: &str,
) -> Result<bool> {
    end_claim(exec, id, claim_token, JobState::Discarded, error).await
}

/// Ends a claimed job in the final `state` (discarded or cancelled), appending `error` to its
/// `errors`. Returns false if the claim is no longer held.
async fn end_claim(
    exec: impl PgExecutor<'_>,
    id: i64,
    claim_token: Uuid,
    state: JobState,
    error: &str,
) -> Result<bool> {
    let r = sqlx::query!(
        r#"
        UPDATE jobs
        SET state = $4, finalized_at = now(), claim_token = NULL,
            errors = errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error', $3::text)
        WHERE id = $1 AND claim_token = $2 AND state = 'executing'
        "#,
        id,
        claim_token,
        error,
        state.as_str(),
    )
    .execute(exec)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Ends a claimed job as cancelled: its handler found that the work it stood for was called off
/// while it ran (for Breakwater: the delivery was cancelled, or its channel deleted). Final, uses
/// no further attempt, is never retried; `reason` is appended to `errors`. Returns false if the
/// claim is no longer held.
pub async fn cancel(
    exec: impl PgExecutor<'_>,
    id: i64,
    claim_token: Uuid,
    reason: &str,
) -> Result<bool> {
    end_claim(exec, id, claim_token, JobState::Cancelled, reason).await
}

/// Puts the job back to run after `delay` without using an attempt (the fetch's increment is
/// undone). With `priority`, the job also moves to that priority (e.g.
/// [`crate::PRIORITY_PARKED`] to park it). A zero delay makes it available at once and wakes
/// its queue. Returns false if the claim is no longer held.
pub async fn snooze(
    conn: &mut sqlx::PgConnection,
    id: i64,
    claim_token: Uuid,
    delay: Duration,
    priority: Option<i16>,
) -> Result<bool> {
    let moved = sqlx::query_as!(
        MovedJob,
        r#"
        UPDATE jobs
        SET state = CASE WHEN $3 <= 0 THEN 'available' ELSE 'scheduled' END,
            scheduled_at = now() + ($3::float8 * interval '1 millisecond'),
            attempt = greatest(attempt, 1) - 1,
            priority = coalesce($4, priority),
            claim_token = NULL
        WHERE id = $1 AND claim_token = $2 AND state = 'executing'
        RETURNING queue, state AS "state: JobState"
        "#,
        id,
        claim_token,
        millis(delay) as _,
        priority,
    )
    .fetch_optional(&mut *conn)
    .await?;
    notify_due(&mut *conn, moved).await
}

/// Hands claimed jobs back as available without using an attempt (graceful shutdown: the run
/// never finished). Each `(id, claim_token)` pair is fenced like every other result. Returns
/// how many were handed back.
pub async fn hand_back(conn: &mut sqlx::PgConnection, claims: &[(i64, Uuid)]) -> Result<u64> {
    if claims.is_empty() {
        return Ok(0);
    }
    let ids: Vec<i64> = claims.iter().map(|c| c.0).collect();
    let tokens: Vec<Uuid> = claims.iter().map(|c| c.1).collect();
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    // Group rows, then gate rows, before the statement releases many slots at once (see
    // slots::lock_slots).
    let slots: Vec<(Option<Uuid>, Option<String>)> = sqlx::query!(
        "SELECT group_id, gate_slot FROM jobs WHERE id = ANY($1) AND state = 'executing'",
        &ids[..],
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|r| (r.group_id, r.gate_slot))
    .collect();
    crate::slots::lock_slots(
        &mut tx,
        slots.iter().filter_map(|s| s.0),
        slots.iter().filter_map(|s| s.1.clone()),
    )
    .await?;
    let queues: Vec<String> = sqlx::query_scalar!(
        r#"
        UPDATE jobs j
        SET state = 'available', attempt = greatest(j.attempt, 1) - 1,
            claim_token = NULL, attempted_by = NULL
        FROM unnest($1::int8[], $2::uuid[]) AS c(id, token)
        WHERE j.id = c.id AND j.claim_token = c.token AND j.state = 'executing'
        RETURNING j.queue
        "#,
        &ids[..],
        &tokens[..],
    )
    .fetch_all(&mut *tx)
    .await?;
    let n = queues.len() as u64;
    let mut distinct: Vec<String> = queues;
    distinct.sort();
    distinct.dedup();
    notify_queues(&mut *tx, &distinct).await?;
    tx.commit().await?;
    Ok(n)
}

/// Hands back the jobs of `queue` that node `node_id` holds claimed but does not know of: every
/// `executing` job of the queue attempted by the node whose id is not in `known` (the claims its
/// pool of that queue holds). Returns how many were handed back (as [`hand_back`]: available
/// again, no attempt used, fenced by their claim tokens).
///
/// A fetch whose answer was lost (the connection dropped after the statement committed: a
/// database outage, a failover) leaves jobs claimed by a node that never got them. Nothing
/// else would free them soon: the node is alive and beats, and a claim's age counts from its
/// node's current run of heartbeats, so the rescue waits the longest a run may take
/// after the outage. The pool calls this before its first fetch after a failed one, when every
/// claim it did get is in `known`. Only that pool fetches `queue` on this node, so no claim of
/// its own can be missing from `known` then.
pub async fn hand_back_unknown(
    conn: &mut sqlx::PgConnection,
    queue: &str,
    node_id: &str,
    known: &[i64],
) -> Result<u64> {
    let lost: Vec<(i64, Uuid)> = sqlx::query!(
        r#"SELECT id, claim_token AS "claim_token!" FROM jobs
         WHERE state = 'executing' AND attempted_by = $2 AND queue = $1
           AND claim_token IS NOT NULL AND NOT (id = ANY($3))"#,
        queue,
        node_id,
        known,
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.claim_token))
    .collect();
    hand_back(conn, &lost).await
}
