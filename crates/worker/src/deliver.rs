//! One delivery job: admit (circuit gate), load, sign, send, classify, record — and move the
//! channel's circuit.
//!
//! The gate reads the channel row (joined with its host circuit, [`breakwater_core::hosts`])
//! before the delivery is loaded: a job of an open, paused or half-open (not the probe) channel,
//! or of an open or half-open (not the host probe) host, goes back at once — no payload read, no HTTP request, no
//! attempt of the job or the delivery used. (Such a job is rare: the channel's job group is
//! parked with its circuit, so the fetch does not hand out its jobs; only one claimed in the
//! instant before the transition gets here.)

use crate::handler::Worker;
use crate::http::is_blocked;
use breakwater_core::circuit::{self, Admission, AfterAttempt, AttemptResult};
use breakwater_core::deliveries::{self, AttemptRecord, Dispatch};
use breakwater_core::outcome::{
    classify, is_configuration_problem, is_redirect, redirect_note, Class, Observed,
};
use breakwater_core::ratelimit::{self, Budget, RateLimit};
use breakwater_core::{lifecycle, signing, targets, Result};
use breakwater_queue::{Feedback, Job, RetryOutcome};
use chrono::{DateTime, Utc};
use rand::Rng;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, Postgres};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// What one HTTP request observed.
#[derive(Debug)]
pub struct Sent {
    /// The observation, for [`classify`].
    pub observed: Observed,
    /// The start of the response body, if any (lossy UTF-8, no NULs).
    pub excerpt: Option<String>,
    /// Error text when the request failed without a status.
    pub error: Option<String>,
    /// The raw `Retry-After` header, if any.
    pub retry_after: Option<String>,
}

impl Sent {
    /// A request that failed before any response.
    pub fn failed(observed: Observed, error: String) -> Self {
        Sent {
            observed,
            excerpt: None,
            error: Some(error),
            retry_after: None,
        }
    }
}

/// A [`Sent`] for a request error (connect, timeout, blocked target, other). The error text
/// never contains the URL (its path or query may carry a token): reqwest's URL is stripped and
/// the endpoint named by its origin.
pub fn observe(e: reqwest::Error) -> Sent {
    Sent::failed(observe_error(&e), url_free_error(e))
}

/// The error chain of `e` without its URL, prefixed with the URL's origin.
fn url_free_error(e: reqwest::Error) -> String {
    let origin = e.url().map(|u| u.origin().ascii_serialization());
    let text = error_chain(&e.without_url());
    match origin {
        Some(o) => format!("{o}/…: {text}"),
        None => text,
    }
}

/// The JSON body sent for a delivery: the Standard Webhooks envelope
/// `{"type": <event type>, "timestamp": <accepted at, RFC 3339>, "data": <payload>}`, with the
/// payload spliced in as the exact JSON text the tenant sent (never re-encoded: numbers keep
/// their precision, keys their order).
pub fn body(d: &Dispatch) -> Vec<u8> {
    let event_type = serde_json::to_string(&d.event_type).expect("strings serialize");
    let timestamp = serde_json::to_string(&d.created_at).expect("timestamps serialize");
    format!(
        r#"{{"type":{event_type},"timestamp":{timestamp},"data":{}}}"#,
        d.payload
    )
    .into_bytes()
}

/// How long a job of a channel that is not taking requests waits before it may be looked at
/// again (plus up to 0.5 s of jitter). Its parked job group normally holds it far longer.
const PARK_RECHECK: Duration = Duration::from_secs(1);

/// A rate-limit turn due within this long is waited for in the handler rather than by a snooze,
/// which would add the promoter's lag to every request of a limited channel.
const RATE_SLEEP_MAX: Duration = Duration::from_millis(250);

/// One delivery job, in four named steps (a step that ends the job returns `None`):
/// [`admit`] (the circuit gate) → [`reserve`] (the channel's rate limit) → [`attempt`] (load,
/// send, classify; no connection held while the request is in flight) → [`record`] (one
/// transaction: the attempt, the circuits, the concurrency limit, the job).
pub(crate) async fn run(w: &Worker, job: Job) -> Result<()> {
    let Some(target) = target(w, &job).await? else {
        return Ok(());
    };
    let mut conn = w.pool.acquire().await?;
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
    /// The channel's rate limit, the slot reserved earlier, and the database time of the read.
    rate: Option<(RateLimit, Option<DateTime<Utc>>, DateTime<Utc>)>,
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
    /// How long the request took (this node's monotonic clock).
    elapsed: Duration,
}

/// Reads the job's delivery and channel (and records them on the span); a job without them is
/// discarded (`None`).
async fn target(w: &Worker, job: &Job) -> Result<Option<Target>> {
    let (Some(delivery_id), Some(channel_id)) =
        (crate::handler::uuid_arg(job, "delivery_id"), job.group_id)
    else {
        breakwater_queue::discard(
            &w.pool,
            job.id,
            job.claim_token,
            "args lack a delivery_id or the job a group",
        )
        .await?;
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
            breakwater_queue::snooze(conn, job.id, job.claim_token, wait, None).await?;
        }
        // Retry-After: the whole channel waits; this job is snoozed, no attempt used.
        Admission::Wait(wait) => {
            let wait = snooze(wait, 250);
            breakwater_queue::snooze(conn, job.id, job.claim_token, wait, None).await?;
        }
        Admission::Gone => cancel_orphan(job, conn, t.delivery_id).await?,
        Admission::ClaimProbe(_) | Admission::ClaimHostProbe(_) => {
            breakwater_queue::complete(&mut *conn, job.id, job.claim_token).await?;
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
    if breakwater_queue::cancel(&mut *tx, job.id, job.claim_token, reason).await? {
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
    rate: Option<(RateLimit, Option<DateTime<Utc>>, DateTime<Utc>)>,
) -> Result<Option<PoolConnection<Postgres>>> {
    let Some((limit, mut reserved, _)) = rate else {
        return Ok(Some(conn));
    };
    let mut counted = false;
    loop {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        match ratelimit::take_slot(&mut tx, t.channel_id, t.delivery_id, reserved, limit).await? {
            Budget::Now => {
                tx.commit().await?;
                return Ok(Some(conn));
            }
            Budget::Wait { wait, queued, turn } if wait <= RATE_SLEEP_MAX => {
                tx.commit().await?;
                if queued && !counted {
                    crate::observe::rate_limited(job);
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
        breakwater_queue::complete(&mut *conn, job.id, job.claim_token).await?;
        return Ok(None);
    };
    // No connection is held while the request is in flight.
    drop(conn);
    let t0 = Instant::now();
    let sent = crate::observe::send(w, &d, job).await;
    let elapsed = t0.elapsed();
    let class = classify(sent.observed);
    if is_configuration_problem(sent.observed) {
        tracing::error!(
            channel_id = %d.channel_id, tenant_id = %d.tenant_id, delivery_id = %d.id,
            status = ?sent.observed,
            "channel endpoint rejects our requests (401/403): the channel is misconfigured"
        );
    }
    Ok(Some(Attempted {
        d,
        sent,
        class,
        elapsed,
    }))
}

/// Records the result in one transaction: the delivery and its attempt, the circuits
/// ([`circuit::after_attempt`]), the channel's adaptive concurrency limit, and last the job
/// (which releases its slot); then, once committed, the metrics. Locks are taken channel row
/// before job group row, as everywhere. If the job's claim was lost (this run was rescued), the
/// job update changes nothing and everything is rolled back.
async fn record(w: &Worker, job: &Job, a: &Admitted, at: Attempted) -> Result<()> {
    let Attempted {
        d,
        sent,
        class,
        elapsed,
    } = at;
    let error_text = describe(&sent);
    let new_status = new_status(class, job);
    let mut tx = w.pool.begin().await?;
    let attempt = attempt_record(w, a, &d, &sent, class, elapsed, &error_text, new_status);
    if !deliveries::record_attempt(&mut tx, &attempt).await? {
        return cancelled_in_flight(job, tx, class, attempt.duration_ms).await;
    }
    let result = AttemptResult {
        channel_id: d.channel_id,
        class,
        observed: sent.observed,
        probe_generation: a.probe_generation,
        host_probe: a.host_probe,
        failures_before: a.failures_before,
        error: &error_text,
        retry_after: sent.retry_after.as_deref(),
        rejected: d.rejected,
    };
    let after =
        circuit::after_attempt(&mut tx, &result, &w.circuit, &w.hosts, w.max_attempts).await?;
    let feedback = match class {
        Class::Success => Feedback::Ok(elapsed),
        Class::Transient => Feedback::Overloaded,
        Class::Permanent => Feedback::Neutral,
    };
    breakwater_queue::adapt_limit(&mut *tx, d.channel_id, feedback, &w.limits).await?;
    if !finish_job(w, job, &mut tx, class, new_status, &error_text, &after).await? {
        tracing::warn!(delivery_id = %d.id, job_id = job.id, "claim lost (job was rescued); result discarded");
        tx.rollback().await?;
        return Ok(());
    }
    tx.commit().await?;
    count_transitions(&after.transitions);
    crate::observe::attempt(job, &d, class, new_status, a.probe_generation);
    tracing::debug!(
        outcome = class.as_str(),
        duration_ms = attempt.duration_ms,
        new_status,
        probe = a.probe_generation.is_some(),
        "attempt recorded"
    );
    Ok(())
}

/// Counts circuit transitions in `breakwater.circuit.transitions`; called only after the
/// transaction that won them has committed.
pub(crate) fn count_transitions(transitions: &[breakwater_core::audit::Transitioned]) {
    for t in transitions {
        breakwater_telemetry::circuit_transition(t.from, t.to);
    }
}

/// The delivery's status after an attempt of class `class`.
fn new_status(class: Class, job: &Job) -> &'static str {
    match class {
        Class::Success => "delivered",
        Class::Permanent => "dead",
        Class::Transient if job.is_last_attempt() => "dead",
        Class::Transient => "failed",
    }
}

/// The attempt row of [`deliveries::record_attempt`]. The attempt's start is on the database
/// clock (read by `begin_attempt`), its duration on this node's monotonic clock.
#[allow(clippy::too_many_arguments)]
fn attempt_record<'a>(
    w: &'a Worker,
    a: &Admitted,
    d: &Dispatch,
    sent: &'a Sent,
    class: Class,
    elapsed: Duration,
    error_text: &'a str,
    new_status: &'a str,
) -> AttemptRecord<'a> {
    let (status_code, error_kind) = match sent.observed {
        Observed::Status(s) => (Some(i32::from(s)), None),
        Observed::Connect => (None, Some("connect")),
        Observed::Timeout => (None, Some("timeout")),
        Observed::Blocked => (None, Some("blocked")),
        Observed::Other => (None, Some("other")),
    };
    AttemptRecord {
        delivery_id: d.id,
        channel_id: d.channel_id,
        // A channel probe or a host probe.
        probe: a.probe_generation.is_some() || a.host_probe.is_some(),
        started_at: d.started_at,
        duration_ms: i32::try_from(elapsed.as_millis()).unwrap_or(i32::MAX),
        outcome: class.as_str(),
        status_code,
        error_kind,
        error: (class != Class::Success).then_some(error_text),
        response_excerpt: sent.excerpt.as_deref(),
        node_id: &w.node_id,
        new_status,
    }
}

/// Cancelled while in flight (by its tenant, or its channel was deleted): the attempt is logged,
/// and nothing else changes — no circuit, no concurrency feedback, no retry.
async fn cancelled_in_flight(
    job: &Job,
    mut tx: sqlx::Transaction<'_, Postgres>,
    class: Class,
    duration_ms: i32,
) -> Result<()> {
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
    Ok(())
}

/// Completes, discards or retries the job by class; a transient failure's retry waits the
/// backoff, or the `Retry-After` if longer. Returns whether the job's claim still held (and the
/// queue agreed with the delivery's new status); `false` means roll back.
async fn finish_job(
    w: &Worker,
    job: &Job,
    tx: &mut PgConnection,
    class: Class,
    new_status: &str,
    error_text: &str,
    after: &AfterAttempt,
) -> Result<bool> {
    Ok(match class {
        Class::Success => breakwater_queue::complete(&mut *tx, job.id, job.claim_token).await?,
        Class::Permanent => {
            breakwater_queue::discard(&mut *tx, job.id, job.claim_token, error_text).await?
        }
        Class::Transient => {
            // A Retry-After longer than the backoff decides when this delivery goes again.
            let delay = w
                .backoff
                .delay(job.attempt)
                .max(after.retry_after.unwrap_or_default());
            match breakwater_queue::retry(&mut *tx, job.id, job.claim_token, delay, error_text)
                .await?
            {
                Some(RetryOutcome::Retried(_)) => new_status == "failed",
                Some(RetryOutcome::Discarded) => new_status == "dead",
                None => false,
            }
        }
    })
}

/// Sends one signed request for `d` (signature and timestamp made now, at the attempt): its
/// `webhook-id` is `d.webhook_id` (the message id of a fan-out, else the delivery id), and its
/// `webhook-signature` carries `v1,<current>` and, during a secret rotation's grace period,
/// `v1,<previous>` after it. A redirect is not followed (the client's policy is `none`); the
/// answer is recorded with where it pointed ([`redirect_note`]).
pub(crate) async fn send(w: &Worker, d: &Dispatch) -> Sent {
    let body = body(d);
    let failed = |observed, error: String| Sent {
        observed,
        excerpt: None,
        error: Some(error),
        retry_after: None,
    };
    if !w.allow_private {
        // Literal IPs never reach the resolver: check them here.
        if let Err(e) = targets::parse_channel_url(&d.url, false) {
            return failed(Observed::Blocked, e);
        }
    }
    let secrets: Vec<&str> = std::iter::once(d.signing_secret.as_str())
        .chain(d.previous_signing_secret.as_deref())
        .collect();
    let headers = match signing::sign_all(
        &secrets,
        &d.webhook_id.to_string(),
        Utc::now().timestamp(),
        &body,
    ) {
        Ok(h) => h,
        Err(e) => return failed(Observed::Other, format!("signing failed: {e}")),
    };
    let req = w
        .client
        .post(&d.url)
        .header("content-type", "application/json")
        .header("webhook-id", &headers.id)
        .header("webhook-timestamp", headers.timestamp.to_string())
        .header("webhook-signature", &headers.signature)
        .body(body);
    let mut resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return observe(e),
    };
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let redirect = is_redirect(status).then(|| {
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        redirect_note(status, location.as_deref(), &d.url)
    });
    // Keep only the first bytes of the body; stop reading past the cap.
    let mut buf: Vec<u8> = Vec::new();
    let mut read_error = None;
    while buf.len() < w.excerpt_bytes {
        match resp.chunk().await {
            Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(e) => {
                read_error = Some(e);
                break;
            }
        }
    }
    buf.truncate(w.excerpt_bytes);
    let excerpt = (!buf.is_empty()).then(|| String::from_utf8_lossy(&buf).replace('\0', ""));
    match read_error {
        // A timeout while reading the body still fails the attempt: the total timeout is the
        // contract.
        Some(e) if e.is_timeout() => Sent {
            observed: Observed::Timeout,
            excerpt,
            error: Some(url_free_error(e)),
            retry_after,
        },
        _ => Sent {
            observed: Observed::Status(status),
            excerpt,
            error: redirect,
            retry_after,
        },
    }
}

fn observe_error(e: &reqwest::Error) -> Observed {
    if is_blocked(e) {
        Observed::Blocked
    } else if e.is_timeout() {
        Observed::Timeout
    } else if e.is_connect() {
        Observed::Connect
    } else {
        Observed::Other
    }
}

/// The error and its causes, joined (reqwest's top-level message alone hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

fn describe(s: &Sent) -> String {
    match (&s.observed, &s.error) {
        (_, Some(e)) => e.clone(),
        (Observed::Status(code), None) => format!("HTTP {code}"),
        (o, None) => format!("{o:?}"),
    }
}
