//! One delivery job: admit (circuit gate), load, sign, send, classify, record — and move the
//! channel's circuit.
//!
//! The gate reads the channel row (joined with its host circuit, [`breakwater_core::hosts`])
//! before the delivery is loaded: a job of an open, paused or half-open (not the probe) channel,
//! or of an open or half-open (not the host probe) host, goes back at once — no payload read, no HTTP request, no
//! attempt of the job or the delivery used. (Such a job is rare: the channel's job group is
//! parked with its circuit, so the fetch does not hand out its jobs; only one claimed in the
//! instant before the transition gets here.)

use crate::executor::{self, Outcome, Retries};
use crate::request::{describe, Sent};
use crate::worker::{args, Worker};
use breakwater_core::circuit::{self, Admission, AttemptResult, Begun};
use breakwater_core::deliveries::{self, Dispatch, Status};
use breakwater_core::jobs::DeliverArgs;
use breakwater_core::outcome::{is_configuration_problem, stall_excuses, Class};
use breakwater_core::ratelimit::{self, Budget, RateLimit};
use breakwater_core::{lifecycle, Result};
use breakwater_queue::Job;
use rand::Rng;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, Postgres};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long a job of a channel that is not taking requests waits before it may be looked at
/// again (plus up to 0.5 s of jitter). Its parked job group normally holds it far longer.
const PARK_RECHECK: Duration = Duration::from_secs(1);

/// A rate-limit turn due within this long is waited for in the handler rather than by a snooze,
/// which would add the promoter's lag to every request of a limited channel.
const RATE_SLEEP_MAX: Duration = Duration::from_millis(250);

/// One delivery job, in four named steps (a step that ends the job returns `None`, having ended
/// it with its [`Outcome`] through [`executor::finish`], in its own transaction where it has one):
/// [`admit`] (the circuit gate) → [`reserve`] (the channel's rate limit) → [`attempt`] (load,
/// send, classify; no connection held while the request is in flight) → [`record`] (one
/// transaction: the attempt, the circuits, the concurrency limit, the job; a plain success in
/// this node's next batch of results instead). A delivery of a plainly closed channel (no hold,
/// no rate limit, its host closed) takes the first three as two: admitted and loaded in one
/// statement ([`circuit::admit_and_begin`]), then sent ([`send`]).
pub(crate) async fn run(w: &Worker, job: Job) -> Result<()> {
    let Some(target) = target(w, &job).await? else {
        return Ok(());
    };
    // A plainly closed channel (the common case): admitted and begun in one statement.
    let begun = w
        .beginner
        .begin(&job.queue, target.channel_id, target.delivery_id)
        .await?;
    let mut conn = match begun {
        Begun::Send {
            dispatch,
            failures_before,
        } => {
            let admitted = Admitted {
                probe_generation: None,
                failures_before,
                rate: None,
                host_probe: None,
            };
            let attempted = send(w, &job, *dispatch).await;
            return record(w, &job, &admitted, attempted).await;
        }
        Begun::Final => {
            executor::finish_on(&w.pool, &job, Outcome::Complete).await?;
            return Ok(());
        }
        Begun::Other => w.pool.acquire().await?,
    };
    let Some(admitted) = admit(w, &job, &mut conn, target).await? else {
        return Ok(());
    };
    let Some(conn) = reserve(w, &job, conn, target, admitted.rate).await? else {
        return Ok(());
    };
    let Some(attempted) = attempt(w, &job, conn, target).await? else {
        return Ok(());
    };
    record(w, &job, &admitted, attempted).await
}

/// The delivery and channel a job is for.
#[derive(Debug, Clone, Copy)]
struct Target {
    delivery_id: Uuid,
    channel_id: Uuid,
}

/// What the gate let through: [`Admission::Send`]'s fields.
struct Admitted {
    /// The channel probe's generation, if this delivery is the probe.
    probe_generation: Option<i64>,
    /// The channel's consecutive failures before this attempt.
    failures_before: i32,
    /// The channel's rate limit, if any.
    rate: Option<RateLimit>,
    /// The host probe's generation, if this delivery is the host probe.
    host_probe: Option<i64>,
}

/// What one attempt sent and observed.
struct Attempted {
    /// The delivery as loaded by `begin_attempt`.
    d: Dispatch,
    /// The request's observation.
    sent: Sent,
    /// Its class.
    class: Class,
    /// How long the request took: this node's running time (monotonic clock), its own stalls
    /// ([`crate::stall`]) taken out — what the attempt row, the latency feedback and the
    /// circuits see.
    elapsed: Duration,
    /// Whether this node's own stall makes the failure inconclusive
    /// ([`breakwater_core::outcome::stall_excuses`]): then [`record`] records nothing but puts
    /// the job back ([`inconclusive`]).
    inconclusive: bool,
}

/// Reads the job's delivery and channel (and records them on the span); a job without them is
/// discarded (`None`).
async fn target(w: &Worker, job: &Job) -> Result<Option<Target>> {
    let (Some(delivery_id), Some(channel_id)) = (
        args::<DeliverArgs>(job).map(|a| a.delivery_id),
        job.group_id,
    ) else {
        let error = "args lack a delivery_id or the job a group";
        executor::finish_on(&w.pool, job, Outcome::Discard { error }).await?;
        return Ok(None);
    };
    let span = tracing::Span::current();
    span.record("delivery_id", tracing::field::display(delivery_id));
    span.record("channel_id", tracing::field::display(channel_id));
    Ok(Some(Target {
        delivery_id,
        channel_id,
    }))
}

/// The circuit gate ([`circuit::admit`]): `Some` to send; otherwise the job is snoozed (parked
/// channel or host, Retry-After), cancelled with its delivery (deleted channel) or completed,
/// and `None` is returned. No attempt is used in any of those cases.
async fn admit(
    w: &Worker,
    job: &Job,
    conn: &mut PgConnection,
    t: Target,
) -> Result<Option<Admitted>> {
    let snooze = |wait: Duration, jitter_ms: u64| {
        let jitter = Duration::from_millis(rand::thread_rng().gen_range(0..jitter_ms));
        wait + jitter
    };
    match circuit::admit(conn, t.channel_id, t.delivery_id, &w.circuit).await? {
        Admission::Send {
            probe_generation,
            consecutive_failures,
            rate,
            host_probe,
        } => {
            return Ok(Some(Admitted {
                probe_generation,
                failures_before: consecutive_failures,
                rate,
                host_probe,
            }))
        }
        // Back to waiting, no attempt used; the parked job group keeps the fetch from handing it
        // out again until the circuit closes. The delay only bounds the cost should the group not
        // be parked yet (the reconciler repairs that within seconds).
        Admission::Park => {
            let wait = snooze(PARK_RECHECK, 500);
            executor::finish(conn, job, Outcome::Snooze { wait }).await?;
        }
        // Retry-After: the whole channel waits; this job is snoozed until the hold's end (read
        // again under the channel row's lock, held until the snooze commits, so a hold dropped
        // meanwhile does not hold it: [`circuit::hold_left`]), no attempt used.
        Admission::Wait(_) => {
            let jitter = snooze(Duration::ZERO, 250);
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let wait = circuit::hold_left(&mut tx, t.channel_id)
                .await?
                .map_or(Duration::ZERO, |left| left + jitter);
            executor::finish(&mut tx, job, Outcome::Snooze { wait }).await?;
            tx.commit().await?;
        }
        Admission::Gone => cancel_orphan(job, conn, t.delivery_id).await?,
        Admission::Claim { .. } => {
            executor::finish(conn, job, Outcome::Complete).await?;
        }
    }
    Ok(None)
}

/// The channel was deleted (this job outlived the deletion: a retry recorded by an attempt that
/// was in flight then). No request: the delivery and the job end cancelled, together.
async fn cancel_orphan(job: &Job, conn: &mut PgConnection, delivery_id: Uuid) -> Result<()> {
    let reason = lifecycle::REASON_CHANNEL_DELETED;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    deliveries::cancel_orphan(&mut *tx, delivery_id, reason).await?;
    if executor::finish(&mut tx, job, Outcome::Cancel { reason }).await? {
        tx.commit().await?;
    }
    Ok(())
}

/// Cluster-wide rate limit: take a send slot, or wait for the reserved one (no attempt). A turn
/// due within [`RATE_SLEEP_MAX`] is waited for here (no connection held), so requests leave on
/// time; a later one snoozes the job until its turn (`None`). Gives back a connection.
async fn reserve(
    w: &Worker,
    job: &Job,
    mut conn: PoolConnection<Postgres>,
    t: Target,
    rate: Option<RateLimit>,
) -> Result<Option<PoolConnection<Postgres>>> {
    let Some(limit) = rate else {
        return Ok(Some(conn));
    };
    let mut counted = false;
    loop {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        match ratelimit::take_slot(&mut tx, t.channel_id, t.delivery_id, limit).await? {
            Budget::Now => {
                tx.commit().await?;
                return Ok(Some(conn));
            }
            Budget::Wait { wait, queued } if wait <= RATE_SLEEP_MAX => {
                tx.commit().await?;
                if queued && !counted {
                    crate::observe::rate_limited(job);
                    counted = true;
                }
                drop(conn);
                tokio::time::sleep(wait).await;
                conn = w.pool.acquire().await?;
            }
            Budget::Wait { wait, queued } => {
                let jitter = Duration::from_micros(rand::thread_rng().gen_range(0..2_000));
                let wait = wait + jitter;
                executor::finish(&mut tx, job, Outcome::Snooze { wait }).await?;
                tx.commit().await?;
                if queued && !counted {
                    crate::observe::rate_limited(job);
                }
                return Ok(None);
            }
        }
    }
}

/// Loads the delivery for its attempt ([`deliveries::begin_attempt`]; a deleted or final one
/// completes the job: `None`), releases the connection, sends the request and classifies the
/// answer.
async fn attempt(
    w: &Worker,
    job: &Job,
    mut conn: PoolConnection<Postgres>,
    t: Target,
) -> Result<Option<Attempted>> {
    let Some(d) = deliveries::begin_attempt(&mut *conn, t.delivery_id).await? else {
        // Deleted, or already final (delivered, dead, cancelled): nothing to send.
        executor::finish(&mut conn, job, Outcome::Complete).await?;
        return Ok(None);
    };
    // No connection is held while the request is in flight.
    drop(conn);
    Ok(Some(send(w, job, d).await))
}

/// Sends the loaded delivery `d` (no connection held), takes the answer's class (the one
/// [`crate::observe::send`] computed, which the circuits read too) and judges the answer against
/// this node's own stalls during the request ([`stall_excuses`]).
async fn send(w: &Worker, job: &Job, d: Dispatch) -> Attempted {
    let t0 = Instant::now();
    let (sent, class) = crate::observe::send(w, &d, job).await;
    let wall = t0.elapsed();
    let stalled = w.stall.stalled_since(t0);
    let elapsed = wall.saturating_sub(stalled);
    let inconclusive =
        class != Class::Success && stall_excuses(sent.observed, wall, stalled, sent.limit);
    if is_configuration_problem(sent.observed) {
        tracing::error!(
            channel_id = %d.channel_id, tenant_id = %d.tenant_id, delivery_id = %d.id,
            status = ?sent.observed,
            "channel endpoint rejects our requests (401/403): the channel is misconfigured"
        );
    }
    Attempted {
        d,
        sent,
        class,
        elapsed,
        inconclusive,
    }
}

/// Records the attempt's result ([`record_once`]), kept and tried again while the database
/// cannot take it ([`crate::keep::until_recorded`]): the endpoint has answered, so
/// the job must not run again for want of a write.
async fn record(w: &Worker, job: &Job, a: &Admitted, at: Attempted) -> Result<()> {
    crate::keep::until_recorded("the attempt's result", || record_once(w, job, a, &at)).await
}

/// Records the result in one transaction: the attempt, the delivery's status and the circuits
/// ([`circuit::after_attempt`], which takes the locks in their order and returns every effect,
/// the concurrency feedback included), then the channel's adaptive concurrency limit and last
/// the job (which releases its slot), by the outcome the delivery's status gives
/// ([`Outcome::of_attempt`], [`executor::finish_attempt`]); then, once committed, the metrics.
/// If the job's claim was lost (this run was rescued), the job update changes nothing and
/// everything is rolled back.
async fn record_once(w: &Worker, job: &Job, a: &Admitted, at: &Attempted) -> Result<()> {
    let error_text = describe(&at.sent);
    let result = AttemptResult {
        dispatch: &at.d,
        observed: at.sent.observed,
        class: at.class,
        duration: at.elapsed,
        probe_generation: a.probe_generation,
        host_probe: a.host_probe,
        failures_before: a.failures_before,
        error: &error_text,
        response_excerpt: at.sent.excerpt.as_deref(),
        retry_after: at.sent.retry_after.as_deref(),
        node_id: &w.node_id,
        last_attempt: job.is_last_attempt(),
        token_failure: at.sent.token_failure,
    };
    if at.inconclusive {
        return inconclusive(w, job, &result).await;
    }
    if result.moves_nothing() {
        return record_in_batch(w, job, at, &result).await;
    }
    let mut tx = w.pool.begin().await?;
    let after = circuit::after_attempt(&mut tx, &result, &w.circuit, &w.hosts, w.max_attempts);
    let Some(after) = after.await? else {
        return cancelled_in_flight(job, tx, at.class).await;
    };
    let retries = Retries {
        backoff: &w.backoff,
        policy: at.d.retry_policy.as_ref().map(|p| &p.0),
    };
    let outcome = Outcome::of_attempt(&after, retries, job.attempt, &error_text);
    let (group, feedback) = (at.d.channel_id, after.feedback);
    if !executor::finish_attempt(&mut tx, job, group, feedback, &w.limits, outcome).await? {
        tracing::warn!(delivery_id = %at.d.id, job_id = job.id, "claim lost (job was rescued); result discarded");
        tx.rollback().await?;
        return Ok(());
    }
    tx.commit().await?;
    count_transitions(&after.transitions);
    crate::observe::attempt(job, &at.d, at.class, after.status, a.probe_generation);
    tracing::debug!(
        outcome = at.class.as_str(),
        duration_ms = at.elapsed.as_millis(),
        new_status = after.status.as_str(),
        probe = a.probe_generation.is_some(),
        "attempt recorded"
    );
    Ok(())
}

/// How soon an inconclusive attempt ([`inconclusive`]) is tried again: at once, spread over up
/// to this long (the node just woke with all its requests in flight at once).
const INCONCLUSIVE_RETRY_JITTER_MS: u64 = 500;

/// An attempt whose failure this node's own stall explains: nothing is
/// recorded against the endpoint — no attempt row, no failure of the channel's or the host's
/// circuit, no `Retry-After` hold, no concurrency feedback — and the job is snoozed to run again
/// at once ([`INCONCLUSIVE_RETRY_JITTER_MS`]) **without using an attempt** (the delivery goes
/// back to `pending`): the endpoint was never given a fair try, so it must not bring the
/// delivery nearer to dead either. A probe's role passes on
/// ([`circuit::attempt_inconclusive`]). In one transaction fenced by the job's claim.
async fn inconclusive(w: &Worker, job: &Job, result: &AttemptResult<'_>) -> Result<()> {
    let mut tx = w.pool.begin().await?;
    circuit::attempt_inconclusive(&mut tx, result, &w.circuit).await?;
    let wait = Duration::from_millis(rand::thread_rng().gen_range(0..INCONCLUSIVE_RETRY_JITTER_MS));
    if !executor::finish(&mut tx, job, Outcome::Snooze { wait }).await? {
        tracing::warn!(delivery_id = %result.dispatch.id, job_id = job.id, "claim lost (job was rescued); result discarded");
        tx.rollback().await?;
        return Ok(());
    }
    tx.commit().await?;
    tracing::warn!(
        delivery_id = %result.dispatch.id,
        observed = ?result.observed,
        error = result.error,
        "attempt inconclusive: this node stood still during it; tried again, nothing counted against the endpoint"
    );
    Ok(())
}

/// Records a plain success ([`AttemptResult::moves_nothing`]) in this node's next batch of
/// results ([`crate::batch`]) and waits until it is committed: the attempt, the delivery
/// `delivered`, the job completed and its slot released, the channel's limit fed back. The same
/// writes as [`record`]'s transaction makes for such a result, many deliveries at a time.
async fn record_in_batch(
    w: &Worker,
    job: &Job,
    at: &Attempted,
    result: &AttemptResult<'_>,
) -> Result<()> {
    match w.recorder.record(result, job.id, job.claim_token).await? {
        None => {
            tracing::warn!(delivery_id = %at.d.id, job_id = job.id, "claim lost (job was rescued); result discarded");
        }
        Some(r) if r.status == Status::Cancelled => {
            tracing::debug!(
                outcome = at.class.as_str(),
                "attempt of a cancelled delivery recorded; nothing else changes"
            );
        }
        Some(r) => {
            // A batched result is never a probe's (`moves_nothing`).
            crate::observe::attempt(job, &at.d, at.class, r.status, None);
            tracing::debug!(
                outcome = at.class.as_str(),
                duration_ms = at.elapsed.as_millis(),
                new_status = r.status.as_str(),
                batched = true,
                "attempt recorded"
            );
        }
    }
    Ok(())
}

/// Counts circuit transitions in `breakwater.circuit.transitions`; called only after the
/// transaction that won them has committed.
pub(crate) fn count_transitions(transitions: &[breakwater_core::audit::Transitioned]) {
    for t in transitions {
        breakwater_telemetry::circuit_transition(t.from, t.to);
    }
}

/// Cancelled while in flight (by its tenant, or its channel was deleted): the attempt is logged,
/// and nothing else changes — no circuit, no concurrency feedback, no retry.
async fn cancelled_in_flight(
    job: &Job,
    mut tx: sqlx::Transaction<'_, Postgres>,
    class: Class,
) -> Result<()> {
    let reason = crate::batch::CANCELLED_IN_FLIGHT;
    if executor::finish(&mut tx, job, Outcome::Cancel { reason }).await? {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    tracing::debug!(
        outcome = class.as_str(),
        "attempt of a cancelled delivery recorded; nothing else changes"
    );
    Ok(())
}
