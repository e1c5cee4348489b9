//! Job groups: their row in `job_groups` (share, cluster-wide slots, adaptive limit), parking and
//! releasing a whole group, and waking one job of a parked group as its probe.
//!
//! Parking is a flag on the group's row, not a write to each of its jobs: the jobs stay where
//! they are (due ones stay `available`) and the fetch skips the group with one index probe. So
//! parking and releasing 100 000 jobs is one row update each, parked jobs never wake up on their
//! own, and nothing has to re-park them.

use crate::wake::{notify_moved, Moved};
use crate::{notify_queues, Result, PRIORITY_NORMAL};
use sqlx::{PgConnection, PgExecutor};
use std::time::Duration;
use uuid::Uuid;

/// The bounds of a group's cluster-wide concurrency (see [`crate::fetch`] and [`adapt_limit`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupLimits {
    /// The limit a group starts at, before any feedback (jobs in flight at once, cluster-wide).
    pub initial: u32,
    /// The adaptive limit never falls below this (≥ 1).
    pub floor: u32,
    /// Nor rises above this, unless the group's own `max_in_flight` says otherwise.
    pub ceiling: u32,
    /// Factor the limit is multiplied by on overload or a latency rise (0 < factor < 1; e.g.
    /// 0.5).
    pub decrease_factor: f64,
    /// How far the group's recent latency may rise above its baseline before the limit is cut
    /// (a ratio, > 1): a success grows the limit while `recent ≤ tolerance × baseline` and a
    /// later one cuts it once `recent > tolerance × baseline` ([`adapt_limit`]). 1.5 (Gradient2's
    /// default) cuts a doubled latency within a few successes and ignores the jitter of a
    /// steady endpoint.
    pub latency_tolerance: f64,
    /// Weight of each success in the recent latency, an exponentially weighted moving average
    /// (0 < w ≤ 1): `recent += w × (latency − recent)` per run. 0.2 follows a change within a
    /// few successes (a doubled latency crosses a 1.5 tolerance after 4) while one slow
    /// outlier moves it by a fifth of its excess.
    pub latency_recent_weight: f64,
    /// How fast the baseline drifts up towards the recent latency, per success (0 < w ≤
    /// `latency_recent_weight`): `baseline = min(recent, baseline + w × (recent − baseline))`.
    /// It falls at once to a lower recent latency (a decaying minimum, as Vegas' base RTT), so
    /// only this drift lets an endpoint that became permanently slower be re-based: with 0.01,
    /// a doubled latency after about 40 successes at it.
    pub latency_baseline_weight: f64,
    /// Latencies below this are noise (our own scheduling, the network), not the endpoint
    /// degrading: the tolerance applies to `max(baseline, latency_noise)`. Keeps a 5-ms
    /// endpoint that answers in 15 ms on a busy node from being cut.
    pub latency_noise: Duration,
    /// A gate's default cap ([`crate::set_group_gate`]): jobs of all the gate's groups in flight
    /// at once, cluster-wide, unless the gate's own `max_in_flight`
    /// ([`crate::set_gate_max_in_flight`]) says otherwise. `None` (the default): a gate without
    /// its own `max_in_flight` is not capped, and unless parked not counted at all (see
    /// [`crate::fetch`]). Opt-in because every result of a capped gate's jobs updates that one
    /// gate row. Not adaptive. `Some(0)` counts as 1 (callers validate it away).
    pub gate_ceiling: Option<u32>,
}

impl Default for GroupLimits {
    fn default() -> Self {
        Self {
            initial: 4,
            floor: 1,
            ceiling: 64,
            decrease_factor: 0.5,
            latency_tolerance: 1.5,
            latency_recent_weight: 0.2,
            latency_baseline_weight: 0.01,
            latency_noise: Duration::from_millis(100),
            gate_ceiling: None,
        }
    }
}

impl GroupLimits {
    /// The bounds `(floor, ceiling)` a group's adaptive limit moves between, in jobs in flight
    /// cluster-wide: the ceiling is the group's own `max_in_flight` (at least 1), else
    /// [`GroupLimits::ceiling`], and 1 for a FIFO group; the floor is [`GroupLimits::floor`],
    /// never above the ceiling.
    pub fn bounds(&self, max_in_flight: Option<i32>, fifo: bool) -> (u32, u32) {
        let ceiling = if fifo {
            1
        } else {
            max_in_flight.map_or(self.ceiling, |m| m.max(1).unsigned_abs())
        };
        (self.floor.min(ceiling), ceiling)
    }

    /// The cap the fetch enforces on a group whose adaptive limit is `limit` (none yet:
    /// [`GroupLimits::initial`]): the limit rounded down and held within
    /// [`GroupLimits::bounds`]. The fetch's SQL calls the function `group_cap` (migration
    /// `20261208100000`) for the same; the test `the_cap_in_rust_is_the_cap_the_fetch_enforces`
    /// checks the two agree.
    pub fn cap(&self, limit: Option<f32>, max_in_flight: Option<i32>, fifo: bool) -> u32 {
        let (floor, ceiling) = self.bounds(max_in_flight, fifo);
        let raw = limit.unwrap_or(self.initial as f32).floor().max(0.0) as u32;
        raw.clamp(floor, ceiling)
    }

    /// Checks the bounds and the latency rule's factors. The error names the setting:
    /// `key(field)` turns a field's name (`"floor"`, `"latency_tolerance"`, …) into the key the
    /// caller's configuration calls it.
    pub fn validate(&self, key: impl Fn(&str) -> String) -> std::result::Result<(), String> {
        if self.floor == 0 {
            return Err(format!("{} must be at least 1", key("floor")));
        }
        if !(self.floor <= self.initial && self.initial <= self.ceiling) {
            return Err(format!(
                "{} ≤ {} ≤ {} must hold",
                key("floor"),
                key("initial"),
                key("ceiling")
            ));
        }
        if !(self.decrease_factor > 0.0 && self.decrease_factor < 1.0) {
            return Err(format!("{} must be in (0, 1)", key("decrease_factor")));
        }
        // `!(x > 1.0)` and friends also refuse NaN.
        if !(self.latency_tolerance > 1.0 && self.latency_tolerance.is_finite()) {
            return Err(format!(
                "{} must be greater than 1",
                key("latency_tolerance")
            ));
        }
        if !(self.latency_recent_weight > 0.0 && self.latency_recent_weight <= 1.0) {
            return Err(format!(
                "{} must be in (0, 1]",
                key("latency_recent_weight")
            ));
        }
        if !(self.latency_baseline_weight > 0.0
            && self.latency_baseline_weight <= self.latency_recent_weight)
        {
            return Err(format!(
                "{} must be in (0, {}]",
                key("latency_baseline_weight"),
                key("latency_recent_weight")
            ));
        }
        Ok(())
    }
}

/// Creates group `group_id`'s row if it has none, in share `share_key` (`None`: its own share),
/// or moves an existing group to that share.
pub async fn define_group(
    exec: impl PgExecutor<'_>,
    group_id: Uuid,
    share_key: Option<Uuid>,
) -> Result<()> {
    sqlx::query!(
        "INSERT INTO job_groups (group_id, share_key) VALUES ($1, $2)
         ON CONFLICT (group_id) DO UPDATE SET share_key = EXCLUDED.share_key
         WHERE job_groups.share_key IS DISTINCT FROM EXCLUDED.share_key",
        group_id,
        share_key,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Creates group `group_id`'s row in share `share_key` if it has none; an existing row is left
/// as it is, and is neither written nor locked (so, unlike [`define_group`], the call never waits
/// for a claim or a result holding that row). For groups whose share never changes, such as a
/// tenant's alert group: call it before enqueuing the group's first job in the same transaction
/// (the enqueue would otherwise create the row in a share of its own). Two transactions creating
/// the same row at once: the second's insert meets the first's and does nothing.
pub async fn ensure_group(
    exec: impl PgExecutor<'_>,
    group_id: Uuid,
    share_key: Option<Uuid>,
) -> Result<()> {
    sqlx::query!(
        "INSERT INTO job_groups (group_id, share_key)
         SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM job_groups WHERE group_id = $1)
         ON CONFLICT DO NOTHING",
        group_id,
        share_key,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Sets the group's own ceiling (`None`: the pool's [`GroupLimits::ceiling`]). The adaptive
/// limit is clamped to it at the next fetch.
pub async fn set_max_in_flight(
    exec: impl PgExecutor<'_>,
    group_id: Uuid,
    max_in_flight: Option<i32>,
) -> Result<()> {
    sqlx::query!(
        "INSERT INTO job_groups (group_id, max_in_flight) VALUES ($1, $2)
         ON CONFLICT (group_id) DO UPDATE SET max_in_flight = EXCLUDED.max_in_flight,
             concurrency_limit = CASE WHEN job_groups.concurrency_limit IS NULL THEN NULL
                 ELSE least(job_groups.concurrency_limit, coalesce(EXCLUDED.max_in_flight, job_groups.concurrency_limit)) END",
        group_id,
        max_in_flight,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// A group's row as the operator sees it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct GroupState {
    /// Jobs executing now, cluster-wide.
    pub in_flight: i32,
    /// The adaptive limit (`None`: not adapted yet, the initial limit applies).
    pub concurrency_limit: Option<f32>,
    /// The group's own ceiling, if set.
    pub max_in_flight: Option<i32>,
    /// Whether the group is parked.
    pub parked: bool,
    /// Recent latency of its successful runs, ms (an EWMA; `None` before the first success;
    /// see [`adapt_limit`]).
    pub latency_recent_ms: Option<f32>,
    /// Long-run baseline of that latency, ms (see [`adapt_limit`]).
    pub latency_baseline_ms: Option<f32>,
}

/// Group `group_id`'s row, or `None` if it has none.
pub async fn group_state(exec: impl PgExecutor<'_>, group_id: Uuid) -> Result<Option<GroupState>> {
    Ok(sqlx::query_as!(
        GroupState,
        "SELECT in_flight, concurrency_limit, max_in_flight, parked, latency_recent_ms, latency_baseline_ms
         FROM job_groups WHERE group_id = $1",
        group_id,
    )
    .fetch_optional(exec)
    .await?)
}

/// Parks group `group_id`: the fetch takes none of its jobs until [`release_group`] (waiting
/// jobs stay as they are; executing ones finish on their own). Any probe slot is withdrawn and
/// any job woken as a probe goes back to normal priority. Returns the number of waiting jobs
/// the group holds.
///
/// One update of the group's row (plus the few urgent jobs, if any); it waits for a fetch or a
/// result holding that row, so a job claimed just before is either claimed (it finishes) or
/// not (it stays parked).
pub async fn park_group(conn: &mut PgConnection, group_id: Uuid) -> Result<u64> {
    sqlx::query!(
        "INSERT INTO job_groups (group_id, parked, parked_at) VALUES ($1, true, now())
         ON CONFLICT (group_id) DO UPDATE
         SET parked = true, probe_slots = 0,
             parked_at = CASE WHEN job_groups.parked THEN job_groups.parked_at ELSE now() END",
        group_id,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE jobs SET priority = $2
         WHERE group_id = $1 AND state IN ('available', 'scheduled') AND priority < $2",
        group_id,
        PRIORITY_NORMAL,
    )
    .execute(&mut *conn)
    .await?;
    waiting_count(&mut *conn, group_id).await
}

/// Releases group `group_id`: the fetch takes its jobs again, oldest first, and its queues are
/// woken. Returns the number of waiting jobs the group holds.
pub async fn release_group(conn: &mut PgConnection, group_id: Uuid) -> Result<u64> {
    sqlx::query!(
        "UPDATE job_groups SET parked = false, probe_slots = 0, parked_at = NULL
         WHERE group_id = $1 AND (parked OR probe_slots > 0)",
        group_id,
    )
    .execute(&mut *conn)
    .await?;
    let moved = sqlx::query_as!(
        Moved,
        r#"SELECT queue AS "queue!", count(*) AS "n!" FROM jobs
         WHERE group_id = $1 AND state IN ('available', 'scheduled')
         GROUP BY queue"#,
        group_id,
    )
    .fetch_all(&mut *conn)
    .await?;
    notify_moved(&mut *conn, moved).await
}

/// Waiting (`available` or `scheduled`) jobs of the group, parked or not.
pub(crate) async fn waiting_count(exec: impl PgExecutor<'_>, group_id: Uuid) -> Result<u64> {
    let n: i64 = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM jobs WHERE group_id = $1 AND state IN ('available', 'scheduled')"#,
        group_id,
    )
    .fetch_one(exec)
    .await?;
    Ok(n as u64)
}

/// Locks group `group_id`'s row (`FOR UPDATE`) until the caller's transaction ends, so a caller
/// about to park or release the group's gate takes the locks in the queue's order — group row,
/// then gate row — as the fetch and the slot-release trigger do. Nothing if the group has no row.
pub async fn lock_group(exec: impl PgExecutor<'_>, group_id: Uuid) -> Result<()> {
    lock_rows!(exec, "job_groups", "group_id = $1", group_id);
    Ok(())
}

/// Waiting jobs of the group if it is parked, or its gate is ([`crate::park_gate`]), else 0.
pub async fn parked_count(exec: impl PgExecutor<'_>, group_id: Uuid) -> Result<i64> {
    Ok(backlog(exec, group_id).await?.parked)
}

/// A group's waiting (`available` or `scheduled`) jobs, both counts from one statement (one
/// snapshot, so `parked <= waiting`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    /// Every waiting job of the group, parked or not.
    pub waiting: i64,
    /// Those held by a parked group or a parked gate ([`crate::park_gate`]), by the one
    /// definition of "parked" (the `job_group_parking` view).
    pub parked: i64,
}

/// Counts group `group_id`'s [`Backlog`]: one ordered range of `jobs_group_idx` per state.
/// "Parked" is the `job_group_parking` view's (the group's flag or its gate's; see
/// `migrations/`), as for [`crate::parked_count_sql`] and [`crate::stats::queue_stats`].
pub async fn backlog(exec: impl PgExecutor<'_>, group_id: Uuid) -> Result<Backlog> {
    let row = sqlx::query!(
        r#"SELECT count(*) AS "waiting!",
                  count(*) FILTER (WHERE p.parked) AS "parked!"
         FROM jobs j
         JOIN job_group_parking p ON p.group_id = j.group_id
         WHERE j.group_id = $1 AND j.state IN ('available', 'scheduled')"#,
        group_id,
    )
    .fetch_one(exec)
    .await?;
    Ok(Backlog {
        waiting: row.waiting,
        parked: row.parked,
    })
}

/// Groups that are parked (the reconciler compares them with their owner's state).
pub async fn parked_groups(exec: impl PgExecutor<'_>) -> Result<Vec<Uuid>> {
    Ok(
        sqlx::query_scalar!("SELECT group_id FROM job_groups WHERE parked ORDER BY group_id")
            .fetch_all(exec)
            .await?,
    )
}

/// Makes group `group_id` a fifo group (`fifo`), creating its row if it has none, or a plain one
/// again. A fifo group runs one job at a time, in id order (the order of insertion): the fetch
/// serves it only while its oldest live job (`available`, `scheduled` or `executing`) is
/// available, and then takes that job and no other, so a job waiting for a retry or a snooze
/// blocks every later one until it completes or is discarded (see [`crate::fetch`]). Its cap is
/// 1 whatever its limits say.
///
/// Switching a group with a backlog: to fifo, its waiting jobs run from the next fetch on one
/// at a time in id order, while jobs already executing finish in parallel (the cap of 1 holds
/// the next job back until they have); back to plain, its waiting jobs are fetched in parallel
/// again at once (its queues are woken). Returns whether the flag changed.
pub async fn set_group_fifo(conn: &mut PgConnection, group_id: Uuid, fifo: bool) -> Result<bool> {
    let changed = sqlx::query!(
        "INSERT INTO job_groups (group_id, fifo) VALUES ($1, $2)
         ON CONFLICT (group_id) DO UPDATE SET fifo = EXCLUDED.fifo
         WHERE job_groups.fifo IS DISTINCT FROM EXCLUDED.fifo",
        group_id,
        fifo,
    )
    .execute(&mut *conn)
    .await?
    .rows_affected()
        > 0;
    if changed && !fifo {
        let moved = sqlx::query_as!(
            Moved,
            r#"SELECT queue AS "queue!", count(*) AS "n!" FROM jobs
             WHERE group_id = $1 AND state = 'available'
             GROUP BY queue"#,
            group_id,
        )
        .fetch_all(&mut *conn)
        .await?;
        notify_moved(&mut *conn, moved).await?;
    }
    Ok(changed)
}

/// Wakes exactly one waiting job of parked group `group_id` and `kind` as its probe: that job
/// becomes due now at `priority` (urgent), any other urgent waiting job of the group goes back
/// to normal priority, and the group gets one probe slot, so the fetch takes exactly one job of
/// it (the urgent one first). Returns the job's id and args, or `None` if the group has no
/// waiting job of that kind — the slot is granted anyway, so the next job that arrives for the
/// group is the one fetched.
///
/// `FOR UPDATE SKIP LOCKED` in the choice: two callers racing wake two different jobs, never
/// the same one twice; callers that need exactly one (a probe) hold their own fence.
pub async fn wake_one(
    conn: &mut PgConnection,
    group_id: Uuid,
    kind: &str,
    priority: i16,
) -> Result<Option<(i64, serde_json::Value)>> {
    let row = sqlx::query!(
        r#"
        WITH fifo AS (
            SELECT EXISTS (SELECT 1 FROM job_groups WHERE group_id = $1 AND fifo) AS yes
        ), plain AS (
            SELECT id FROM jobs
            WHERE group_id = $1 AND state IN ('available', 'scheduled') AND kind = $2
              AND NOT (SELECT yes FROM fifo)
            ORDER BY priority, scheduled_at, id
            LIMIT 1
            FOR UPDATE SKIP LOCKED
        ), head AS (
            -- A fifo group: only its head (oldest live job) may go, so that is the probe, and
            -- none while the head executes (the update below re-checks its state).
            SELECT f.id FROM (
                SELECT id, state, kind FROM jobs
                WHERE group_id = $1 AND state IN ('available', 'scheduled', 'executing')
                  AND attempt >= 0 AND (SELECT yes FROM fifo)
                ORDER BY id
                LIMIT 1) f
            WHERE f.state <> 'executing' AND f.kind = $2
        ), chosen AS (
            SELECT id FROM plain UNION ALL SELECT id FROM head
        ), demoted AS (
            UPDATE jobs SET priority = $4
            WHERE group_id = $1 AND state IN ('available', 'scheduled') AND priority <= $3
              AND id NOT IN (SELECT id FROM chosen)
        )
        UPDATE jobs j SET state = 'available', priority = $3, scheduled_at = now()
        FROM chosen WHERE j.id = chosen.id AND j.state IN ('available', 'scheduled')
        RETURNING j.id, j.args, j.queue
        "#,
        group_id,
        kind,
        priority,
        PRIORITY_NORMAL,
    )
    .fetch_optional(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO job_groups (group_id, parked, probe_slots) VALUES ($1, true, 1)
         ON CONFLICT (group_id) DO UPDATE SET probe_slots = 1",
        group_id,
    )
    .execute(&mut *conn)
    .await?;
    match row {
        Some(r) => {
            notify_queues(&mut *conn, &[r.queue]).await?;
            Ok(Some((r.id, r.args)))
        }
        None => Ok(None),
    }
}

/// What runs of a group's jobs say about the group's capacity (for [`adapt_limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// `runs` runs succeeded, in `latency` on average (one run: its own latency). A caller that
    /// records a batch of one group's successes passes them in one call; `runs: 0` is a no-op.
    Ok {
        /// The mean latency of the runs (from the request's start to its answer).
        latency: Duration,
        /// How many successful runs this reports.
        runs: u32,
    },
    /// A run failed in a way that suggests overload (a timeout, a refused connection, 429,
    /// 5xx).
    Overloaded,
    /// Says nothing about capacity (e.g. a 4xx answer).
    Neutral,
}

/// Moves group `group_id`'s adaptive concurrency limit by feedback from its runs: a gradient
/// rule that compares the group's recent latency with its own long-run baseline (as Netflix
/// concurrency-limits' Gradient2 and TCP Vegas do), so a steadily slow endpoint is no sign of
/// overload, only an endpoint getting slower is. With `L` the limit (clamped as the fetch does)
/// and the latencies in ms:
/// - [`Feedback::Ok`] first updates the estimates (kept on the group's row, `NULL` until its
///   first success, which sets both): `recent += w × (latency − recent)` with `w = 1 − (1 −
///   limits.latency_recent_weight)^runs` (each run weighs as one), then `baseline =
///   min(recent, baseline + b × (recent − baseline))` with `b` likewise from
///   `limits.latency_baseline_weight` (it falls at once, rises slowly). Then:
///   - if `recent ≤ limits.latency_tolerance × max(baseline, limits.latency_noise)` the
///     endpoint is keeping up: `L` grows by `runs`, up to the ceiling (the group's
///     `max_in_flight`, else `limits.ceiling`) — but only while the group actually uses at least
///     half of it (`in_flight ≥ L / 2`, these runs included), so an idle group does not build
///     up a limit it never tested. Growth by one per success multiplies the limit by up to 2 per
///     round trip while the group is busy (slow start; nearer 1.5 when its runs start and end
///     in waves, as the last runs of a wave see fewer in flight): a 1.2-s endpoint with a
///     backlog goes from 4 to 16 in about 5 s (`tests/e2e/limits.rs`);
///   - else the endpoint is slowing down under the load: `L` is multiplied by
///     `limits.decrease_factor`, down to the floor — at most once per recent latency (one round
///     trip) after the last cut, since the runs that end within it were sent under the old
///     limit and say nothing of the new one. In between, `L` stays.
/// - [`Feedback::Overloaded`] multiplies `L` by `limits.decrease_factor`, down to the floor
///   (`min(limits.floor, ceiling)`), every time, as a timeout or 5xx is a clear sign; the
///   estimates stay as they are, and a latency cut again waits a round trip after it.
/// - [`Feedback::Neutral`] (and `Ok` with `runs: 0`) does nothing.
///
/// One conditional UPDATE of the group's row: on every success (the estimates move), on
/// overload only when the limit changes. Every value is computed from the row as it is under the
/// row's lock (a correlated sub-select in the SET, no separate read), so two nodes recording
/// runs of one group at once serialise on the row and neither's feedback is lost. Nothing if the
/// group has no row. Call it in the transaction that records the runs, before the jobs' own
/// results (which release their slots).
pub async fn adapt_limit(
    exec: impl PgExecutor<'_>,
    group_id: Uuid,
    feedback: Feedback,
    limits: &GroupLimits,
) -> Result<()> {
    let Some(f) = Adaptation::of(feedback, limits) else {
        return Ok(());
    };
    // The rule is the SQL function `group_limit_adapted` (migration `20261208100000`), which
    // `finish_batch` calls too; the growth condition counts the group's jobs in flight now.
    sqlx::query!(
        r#"
        UPDATE job_groups g
        SET (concurrency_limit, latency_recent_ms, latency_baseline_ms, limit_cut_at) = (
            SELECT a.new_limit, a.new_recent_ms, a.new_baseline_ms, a.new_cut_at
            FROM group_limit_adapted(
                g.concurrency_limit, g.max_in_flight, g.in_flight::real,
                g.latency_recent_ms, g.latency_baseline_ms, g.limit_cut_at,
                $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) a)
        WHERE g.group_id = $1
          AND ($2::real IS NOT NULL
               OR group_limit(g.concurrency_limit, g.max_in_flight, $6, $7, $8)
                  > least($7, coalesce(g.max_in_flight, $8)::real))
        "#,
        group_id,
        f.latency_ms as Option<f32>,
        f.runs,
        f.recent_weight,
        f.baseline_weight,
        limits.initial as f32,
        limits.floor as f32,
        limits.ceiling as i32,
        limits.decrease_factor as f32,
        limits.latency_tolerance as f32,
        limits.latency_noise.as_secs_f64() as f32 * 1e3,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// One feedback as the SQL function `group_limit_adapted` takes it (its `f_*` arguments).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Adaptation {
    /// The runs' mean latency, ms; `None` for an overload.
    pub(crate) latency_ms: Option<f32>,
    /// How many successful runs (0 for an overload).
    pub(crate) runs: f32,
    /// The weight of these runs in the recent latency.
    pub(crate) recent_weight: f32,
    /// The weight of these runs in the baseline latency.
    pub(crate) baseline_weight: f32,
}

impl Adaptation {
    /// `feedback` as the rule takes it; `None` when it moves nothing ([`Feedback::Neutral`],
    /// `Ok` with `runs: 0`). The weight of `runs` successes at once is what `runs` single
    /// updates of the average would give them: exactly so for the recent latency (the runs'
    /// mean standing for each), nearly for the baseline (it drifts towards the recent latency
    /// after the batch, not after each run).
    pub(crate) fn of(feedback: Feedback, limits: &GroupLimits) -> Option<Self> {
        let weight =
            |w: f64, runs: u32| (1.0 - (1.0 - w).powi(runs.min(i32::MAX as u32) as i32)) as f32;
        match feedback {
            Feedback::Neutral | Feedback::Ok { runs: 0, .. } => None,
            Feedback::Ok { latency, runs } => Some(Self {
                latency_ms: Some((latency.as_secs_f64() * 1e3) as f32),
                runs: runs as f32,
                recent_weight: weight(limits.latency_recent_weight, runs),
                baseline_weight: weight(limits.latency_baseline_weight, runs),
            }),
            Feedback::Overloaded => Some(Self {
                latency_ms: None,
                runs: 0.0,
                recent_weight: weight(limits.latency_recent_weight, 0),
                baseline_weight: weight(limits.latency_baseline_weight, 0),
            }),
        }
    }
}

/// Makes group `group_id`'s `scheduled` jobs due no later than `until` (a database time) due
/// now, keeping their order (`scheduled_at` now, then id), and wakes their queues: for a caller
/// that ends a wait it had put on the whole group (a channel's `Retry-After` hold: its snoozed
/// jobs wait until just after the hold's end, or an earlier end of the same hold before it was
/// extended; a job whose own backoff ends before `until` would only have met the hold then).
/// Jobs due later keep their times. One ordered range of `jobs_group_idx`. Returns how many
/// moved.
pub async fn make_group_due_until(
    conn: &mut PgConnection,
    group_id: Uuid,
    until: chrono::DateTime<chrono::Utc>,
) -> Result<u64> {
    let moved = sqlx::query_as!(
        Moved,
        r#"WITH moved AS (
             UPDATE jobs SET state = 'available', scheduled_at = now()
             WHERE group_id = $1 AND state = 'scheduled' AND scheduled_at <= $2
             RETURNING queue)
         SELECT queue AS "queue!", count(*) AS "n!" FROM moved GROUP BY queue"#,
        group_id,
        until,
    )
    .fetch_all(&mut *conn)
    .await?;
    notify_moved(&mut *conn, moved).await
}

/// Makes the waiting (`scheduled`) jobs with these unique keys due now, keeping their order
/// (`scheduled_at` now, then id), and wakes their queues. Returns how many moved.
pub async fn make_due(conn: &mut PgConnection, unique_keys: &[String]) -> Result<u64> {
    if unique_keys.is_empty() {
        return Ok(0);
    }
    let moved = sqlx::query_as!(
        Moved,
        r#"WITH moved AS (
             UPDATE jobs SET state = 'available', scheduled_at = now()
             WHERE unique_key = ANY($1) AND state = 'scheduled'
             RETURNING queue)
         SELECT queue AS "queue!", count(*) AS "n!" FROM moved GROUP BY queue"#,
        unique_keys,
    )
    .fetch_all(&mut *conn)
    .await?;
    notify_moved(&mut *conn, moved).await
}
