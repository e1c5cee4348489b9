//! One delivery job: admit (circuit gate), load, sign, send, classify, record — and move the
//! channel's circuit.
//!
//! The gate reads the channel row (joined with its host circuit, [`breakwater_core::hosts`])
//! before the delivery is loaded: a job of an open, paused or half-open (not the probe) channel,
//! or of an open or half-open (not the host probe) host, goes back at once — no payload read, no HTTP request, no
//! attempt of the job or the delivery used. (Such a job is rare: the channel's job group is
//! parked with its circuit, so the fetch does not hand out its jobs; only one claimed in the
//! instant before the transition gets here.)

use crate::request::describe;
use crate::worker::{args, Worker};
use breakwater_core::alerts;
use breakwater_core::circuit::{self, Admission};
use breakwater_core::deliveries::{self, AttemptRecord};
use breakwater_core::jobs::DeliverArgs;
use breakwater_core::outcome::{
    classify, honours_retry_after, is_configuration_problem, parse_retry_after, Class, Observed,
};
use breakwater_core::ratelimit::{self, Budget};
use breakwater_core::{hosts, lifecycle, Result};
use breakwater_queue::{Feedback, Job, RetryOutcome};
use rand::Rng;
use std::time::{Duration, Instant, SystemTime};

/// How long a job of a channel that is not taking requests waits before it may be looked at
/// again (plus up to 0.5 s of jitter). Its parked job group normally holds it far longer.
const PARK_RECHECK: Duration = Duration::from_secs(1);

/// A rate-limit turn due within this long is waited for in the handler rather than by a snooze,
/// which would add the promoter's lag to every request of a limited channel.
const RATE_SLEEP_MAX: Duration = Duration::from_millis(250);

pub(crate) async fn run(w: &Worker, job: Job) -> Result<()> {
    let (Some(delivery_id), Some(channel_id)) = (
        args::<DeliverArgs>(&job).map(|a| a.delivery_id),
        job.group_id,
    ) else {
        breakwater_queue::discard(
            &w.pool,
            job.id,
            job.claim_token,
            "args lack a delivery_id or the job a group",
        )
        .await?;
        return Ok(());
    };
    let span = tracing::Span::current();
    span.record("delivery_id", tracing::field::display(delivery_id));
    span.record("channel_id", tracing::field::display(channel_id));

    let mut conn = w.pool.acquire().await?;
    let admission = circuit::admit(&mut conn, channel_id, delivery_id, &w.circuit).await?;
    let (probe_generation, failures_before, rate, host_probe) = match admission {
        Admission::Send {
            probe_generation,
            consecutive_failures,
            rate,
            host_probe,
        } => (probe_generation, consecutive_failures, rate, host_probe),
        Admission::Park => {
            // Back to waiting, no attempt used; the parked job group keeps the fetch from handing
            // it out again until the circuit closes. The delay only bounds the cost should the
            // group not be parked yet (the reconciler repairs that within seconds).
            let jitter = Duration::from_millis(rand::thread_rng().gen_range(0..500));
            breakwater_queue::snooze(
                &mut conn,
                job.id,
                job.claim_token,
                PARK_RECHECK + jitter,
                None,
            )
            .await?;
            return Ok(());
        }
        Admission::Wait(wait) => {
            // Retry-After: the whole channel waits; this job is snoozed, no attempt used.
            let jitter = Duration::from_millis(rand::thread_rng().gen_range(0..250));
            breakwater_queue::snooze(&mut conn, job.id, job.claim_token, wait + jitter, None)
                .await?;
            return Ok(());
        }
        Admission::Gone => {
            // The channel was deleted (this job outlived the deletion: a retry recorded by an
            // attempt that was in flight then). No request: the delivery and the job end
            // cancelled, together.
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            deliveries::cancel_orphan(&mut *tx, delivery_id, lifecycle::REASON_CHANNEL_DELETED)
                .await?;
            if breakwater_queue::cancel(
                &mut *tx,
                job.id,
                job.claim_token,
                lifecycle::REASON_CHANNEL_DELETED,
            )
            .await?
            {
                tx.commit().await?;
            }
            return Ok(());
        }
        Admission::ClaimProbe(_) | Admission::ClaimHostProbe(_) => {
            breakwater_queue::complete(&mut *conn, job.id, job.claim_token).await?;
            return Ok(());
        }
    };

    // Cluster-wide rate limit: take a send slot, or wait for the reserved one (no attempt). A
    // turn due within RATE_SLEEP_MAX is waited for here (no connection held), so requests leave
    // on time; a later one snoozes the job until its turn.
    if let Some((limit, mut reserved, _)) = rate {
        let mut counted = false;
        loop {
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            match ratelimit::take_slot(&mut tx, channel_id, delivery_id, reserved, limit).await? {
                Budget::Now => {
                    tx.commit().await?;
                    break;
                }
                Budget::Wait { wait, queued, turn } if wait <= RATE_SLEEP_MAX => {
                    tx.commit().await?;
                    if queued && !counted {
                        crate::observe::rate_limited(&job);
                        counted = true;
                    }
                    reserved = Some(turn);
                    drop(conn);
                    tokio::time::sleep(wait).await;
                    conn = w.pool.acquire().await?;
                }
                Budget::Wait { wait, queued, .. } => {
                    let jitter = Duration::from_micros(rand::thread_rng().gen_range(0..2_000));
                    breakwater_queue::snooze(&mut tx, job.id, job.claim_token, wait + jitter, None)
                        .await?;
                    tx.commit().await?;
                    if queued && !counted {
                        crate::observe::rate_limited(&job);
                    }
                    return Ok(());
                }
            }
        }
    }

    let Some(d) = deliveries::begin_attempt(&mut *conn, delivery_id).await? else {
        // Deleted, or already final (delivered, dead, cancelled): nothing to send.
        breakwater_queue::complete(&mut *conn, job.id, job.claim_token).await?;
        return Ok(());
    };
    // No connection is held while the request is in flight.
    drop(conn);

    // The attempt's start on the database clock (read by begin_attempt just now); its duration
    // on this node's monotonic clock.
    let started_at = d.started_at;
    let t0 = Instant::now();
    let sent = crate::observe::send(w, &d, &job).await;
    let t0_elapsed = t0.elapsed();
    let duration_ms = i32::try_from(t0_elapsed.as_millis()).unwrap_or(i32::MAX);
    let class = classify(sent.observed);
    if is_configuration_problem(sent.observed) {
        tracing::error!(
            channel_id = %d.channel_id, tenant_id = %d.tenant_id, delivery_id = %d.id,
            status = ?sent.observed,
            "channel endpoint rejects our requests (401/403): the channel is misconfigured"
        );
    }

    // Record the result in one transaction: the delivery and its attempt, the circuit, the
    // channel's adaptive concurrency limit, and last the job (which releases its slot). Locks
    // are taken channel row before job group row, as everywhere. If the job's claim was lost
    // (this run was rescued), the job update changes nothing and everything is rolled back.
    let mut tx = w.pool.begin().await?;
    // A Retry-After HTTP-date is turned into a wait against the database's clock (this
    // transaction's now(), which set_retry_after adds the wait to), never this node's.
    let retry_after = match sent
        .retry_after
        .as_deref()
        .filter(|_| honours_retry_after(sent.observed))
    {
        Some(v) => parse_retry_after(
            v,
            SystemTime::from(breakwater_core::clock::db_now(&mut *tx).await?),
            Duration::from_millis(w.circuit.retry_after_cap_ms as u64),
        ),
        None => None,
    };
    let error_text = describe(&sent);
    let new_status = match class {
        Class::Success => "delivered",
        Class::Permanent => "dead",
        Class::Transient if job.is_last_attempt() => "dead",
        Class::Transient => "failed",
    };
    let (status_code, error_kind) = match sent.observed {
        Observed::Status(s) => (Some(i32::from(s)), None),
        Observed::Connect => (None, Some("connect")),
        Observed::Timeout => (None, Some("timeout")),
        Observed::Blocked => (None, Some("blocked")),
        Observed::Other => (None, Some("other")),
    };
    let applied = deliveries::record_attempt(
        &mut tx,
        &AttemptRecord {
            delivery_id: d.id,
            channel_id: d.channel_id,
            // A channel probe or a host probe.
            probe: probe_generation.is_some() || host_probe.is_some(),
            started_at,
            duration_ms,
            outcome: class.as_str(),
            status_code,
            error_kind,
            error: (class != Class::Success).then_some(error_text.as_str()),
            response_excerpt: sent.excerpt.as_deref(),
            node_id: &w.node_id,
            new_status,
        },
    )
    .await?;
    if !applied {
        // Cancelled while in flight (by its tenant, or its channel was deleted): the attempt is
        // logged, and nothing else changes — no circuit, no concurrency feedback, no retry.
        if breakwater_queue::cancel(
            &mut *tx,
            job.id,
            job.claim_token,
            "cancelled while in flight",
        )
        .await?
        {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        tracing::debug!(
            outcome = class.as_str(),
            duration_ms,
            "attempt of a cancelled delivery recorded; nothing else changes"
        );
        return Ok(());
    }

    // The host circuit first (lock order: host row, channel row, job groups), then the
    // channel's. Each call is a conditional UPDATE; only a winner parks, releases, audits.
    hosts::record_result(
        &mut tx,
        d.channel_id,
        host_probe,
        class,
        failures_before,
        &error_text,
        &w.hosts,
    )
    .await?;
    if let Some(wait) = retry_after {
        circuit::set_retry_after(&mut *tx, d.channel_id, wait).await?;
    }
    match (class, probe_generation) {
        (Class::Success, Some(generation)) => {
            circuit::probe_succeeded(
                &mut tx,
                d.channel_id,
                generation,
                w.max_attempts,
                &w.circuit,
            )
            .await?;
        }
        (Class::Success, None) if failures_before > 0 => {
            circuit::record_success(&mut *tx, d.channel_id).await?;
        }
        (Class::Transient, Some(generation)) => {
            circuit::probe_failed(&mut tx, d.channel_id, generation, &error_text, &w.circuit)
                .await?;
        }
        (Class::Transient, None) => {
            circuit::record_failure(&mut tx, d.channel_id, &error_text, &w.circuit).await?;
        }
        // Permanent failures never move the circuit; a probe's passes the role on at once.
        (Class::Permanent, Some(generation)) => {
            circuit::probe_inconclusive(&mut tx, d.channel_id, generation, &w.circuit).await?;
        }
        (Class::Success, None) | (Class::Permanent, None) => {}
    }
    // An endpoint that rejects us (401/403): recorded on the channel; the first of a streak is
    // audited and alerted once (alerts.rs); the next success ends the streak.
    match (class, sent.observed) {
        (Class::Permanent, Observed::Status(status)) if is_configuration_problem(sent.observed) => {
            alerts::endpoint_rejected(&mut tx, d.channel_id, status, &error_text).await?;
        }
        (Class::Success, _) if d.rejected => {
            alerts::rejection_cleared(&mut *tx, d.channel_id).await?;
        }
        _ => {}
    }
    let feedback = match class {
        Class::Success => Feedback::Ok(t0_elapsed),
        Class::Transient => Feedback::Overloaded,
        Class::Permanent => Feedback::Neutral,
    };
    breakwater_queue::adapt_limit(&mut *tx, d.channel_id, feedback, &w.limits).await?;

    let held = match class {
        Class::Success => breakwater_queue::complete(&mut *tx, job.id, job.claim_token).await?,
        Class::Permanent => {
            breakwater_queue::discard(&mut *tx, job.id, job.claim_token, &error_text).await?
        }
        Class::Transient => {
            // A Retry-After longer than the backoff decides when this delivery goes again.
            let delay = w
                .backoff
                .delay(job.attempt)
                .max(retry_after.unwrap_or_default());
            match breakwater_queue::retry(&mut *tx, job.id, job.claim_token, delay, &error_text)
                .await?
            {
                Some(RetryOutcome::Retried(_)) => new_status == "failed",
                Some(RetryOutcome::Discarded) => new_status == "dead",
                None => false,
            }
        }
    };
    if !held {
        tracing::warn!(delivery_id = %d.id, job_id = job.id, "claim lost (job was rescued); result discarded");
        tx.rollback().await?;
        return Ok(());
    }
    tx.commit().await?;
    crate::observe::attempt(&job, &d, class, new_status, probe_generation);
    tracing::debug!(
        outcome = class.as_str(),
        duration_ms,
        new_status,
        probe = probe_generation.is_some(),
        "attempt recorded"
    );
    Ok(())
}
