//! One attempt from the worker's side: what it reads before sending ([`begin_attempt`]) and
//! what it records afterwards ([`record_attempt`]), and the end of a delivery whose channel is
//! gone.

use super::Status;
use crate::outcome::Class;
use crate::Result;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// Everything a worker needs to send one delivery.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Dispatch {
    /// Delivery id.
    pub id: Uuid,
    /// The `webhook-id` header: the message id for a delivery of a message (the same on every
    /// channel it fans out to), else the delivery id; the same on every attempt either way
    /// (Standard Webhooks: "the same when the same webhook is being resent").
    pub webhook_id: Uuid,
    /// Tenant.
    pub tenant_id: Uuid,
    /// Channel.
    pub channel_id: Uuid,
    /// Event type.
    pub event_type: String,
    /// Event data.
    pub payload: String,
    /// Accepted at.
    pub created_at: DateTime<Utc>,
    /// Attempts made before this one.
    pub attempts: i32,
    /// Endpoint.
    pub url: String,
    /// The endpoint's host key ([`crate::hosts::host_key`]) at this read: with `url`, what
    /// [`record_attempt`] compares with the channel's at the end ([`Endpoint`]).
    pub host_key: Option<String>,
    /// Channel secret (`whsec_…`); never log it.
    pub signing_secret: String,
    /// The channel's previous secret while its rotation's grace period lasts (database time),
    /// else `None`: the request then carries a second signature made with it. Never log it.
    pub previous_signing_secret: Option<String>,
    /// Whether the endpoint is in a rejection streak (401/403, `channels.rejected_since` set):
    /// a success then ends it ([`crate::alerts::rejection_cleared`]); otherwise a success costs
    /// no extra statement.
    pub rejected: bool,
    /// The channel's custom headers ([`crate::endpoint::Headers`]), `None` for none; some values
    /// are secrets: never log them.
    pub headers: Option<Json<crate::endpoint::Headers>>,
    /// The channel's endpoint auth ([`crate::endpoint::Auth`]), `None` for none; never log it.
    pub auth: Option<Json<crate::endpoint::Auth>>,
    /// The retry policy the delivery was accepted with (`deliveries.retry_policy`, see
    /// [`crate::retry_policy`]): its request timeout and, after a failure, its backoff; `None`
    /// for the service configuration's.
    pub retry_policy: Option<Json<crate::retry_policy::RetryPolicy>>,
    /// The database's time of this read, just before the request: the attempt's `started_at`
    /// (compared with `now()` and `circuit_changed_at` by the health check, so on the database
    /// clock, see [`crate::clock`]).
    pub started_at: DateTime<Utc>,
}

/// Marks the delivery `delivering` and loads what the worker needs, in one statement. `None` if
/// the delivery is gone or already final (delivered, dead or cancelled): the job then has
/// nothing to do. A delivery of a message reads the message's payload (stored once for all its
/// channels).
pub async fn begin_attempt(
    exec: impl PgExecutor<'_>,
    delivery_id: Uuid,
) -> Result<Option<Dispatch>> {
    Ok(sqlx::query_as!(
        Dispatch,
        r#"
        UPDATE deliveries d SET status = 'delivering', rate_slot_at = NULL, updated_at = now()
        FROM channels c
        WHERE d.id = $1 AND c.id = d.channel_id AND d.status NOT IN ('delivered', 'dead', 'cancelled')
        RETURNING d.id, coalesce(d.message_id, d.id) AS "webhook_id!", d.tenant_id, d.channel_id,
                  d.event_type,
                  coalesce(d.payload, (SELECT m.payload FROM messages m WHERE m.id = d.message_id))
                      AS "payload!",
                  d.created_at, d.attempts, c.url, c.host_key AS "host_key?", c.signing_secret,
                  CASE WHEN c.previous_secret_expires_at > now() THEN c.previous_signing_secret END
                      AS "previous_signing_secret?",
                  c.rejected_since IS NOT NULL AS "rejected!",
                  c.headers AS "headers?: Json<crate::channels::Headers>",
                  c.auth AS "auth?: Json<crate::channels::Auth>",
                  d.retry_policy AS "retry_policy?: Json<crate::retry_policy::RetryPolicy>",
                  now() AS "started_at!"
        "#,
        delivery_id,
    )
    .fetch_optional(exec)
    .await?)
}

/// One finished HTTP attempt to record.
#[derive(Debug, Clone)]
pub(crate) struct AttemptRecord<'a> {
    /// Delivery.
    pub delivery_id: Uuid,
    /// Its channel.
    pub channel_id: Uuid,
    /// Whether this attempt was the channel's half-open probe.
    pub probe: bool,
    /// When the request started.
    pub started_at: DateTime<Utc>,
    /// How long it took, ms.
    pub duration_ms: i32,
    /// The answer's class ([`crate::outcome::classify`]): recorded as the attempt's `outcome`
    /// (`success` | `transient` | `permanent`), and with the two fields below it decides the
    /// delivery's status ([`status_after`]).
    pub class: Class,
    /// Whether this was the delivery's last attempt (its job's `attempt >= max_attempts`).
    pub last_attempt: bool,
    /// Whether the channel holds its retries parked: its circuit is open or paused
    /// ([`crate::circuit::State::parks_new_deliveries`]), read under the channel row's lock.
    pub channel_parked: bool,
    /// HTTP status, if any.
    pub status_code: Option<i32>,
    /// `connect` | `timeout` | `blocked` | `other`, when no status.
    pub error_kind: Option<&'a str>,
    /// Error text, if failed.
    pub error: Option<&'a str>,
    /// The first bytes of the response body.
    pub response_excerpt: Option<&'a str>,
    /// Node that made it.
    pub node_id: &'a str,
    /// The URL the request went to ([`Dispatch::url`]).
    pub url: &'a str,
    /// Its host key ([`Dispatch::host_key`]).
    pub host_key: Option<&'a str>,
}

/// The delivery's status after an attempt of class `class`, as `(same, moved)`: `same` if the
/// channel still has the URL the request went to, `moved` if its URL changed while the request
/// was in flight ([`Endpoint::url_changed`]).
///
/// - a success is [`Status::Delivered`]; a permanent failure (a `4xx`) is [`Status::Dead`];
///   a transient one is retried, or dead on the last attempt;
/// - a retry is [`Status::Failed`], or [`Status::Paused`] when the channel holds its retries
///   parked (`channel_parked`): its job then waits in the parked group as every other parked
///   delivery's, and the API lists it so (as `failed`, a delivery in flight when its channel
///   was paused would be missing from `?status=paused`);
/// - a permanent failure of a URL the channel has left (a `404` of an endpoint the tenant moved
///   away from) is retried at the new one unless this was the last attempt (else it would be
///   dead though its new endpoint was never tried).
pub(crate) fn status_after(
    class: Class,
    last_attempt: bool,
    channel_parked: bool,
) -> (Status, Status) {
    let retry = if channel_parked {
        Status::Paused
    } else {
        Status::Failed
    };
    let same = match class {
        Class::Success => Status::Delivered,
        Class::Permanent => Status::Dead,
        Class::Transient if last_attempt => Status::Dead,
        Class::Transient => retry,
    };
    let moved = match class {
        Class::Permanent if !last_attempt => retry,
        _ => same,
    };
    (same, moved)
}

/// Whether a channel's endpoint is still the one an attempt was sent to, when the attempt is
/// recorded: a `PATCH` of the URL may commit while the request is in flight (up to the request
/// timeout, `worker.request_timeout_ms`, 15 s by default). A design decision after a new-user
/// trial: a late `429` from the old URL set a `Retry-After` hold on the new one, and late `503`s
/// of three moved channels opened the host they moved to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// The channel's URL is another now: the answer does not speak for its endpoint.
    pub url_changed: bool,
    /// The channel's host key is another now (a new host, or the same URL keyed again): the
    /// answer does not speak for its host.
    pub host_changed: bool,
}

/// What [`record_attempt`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// The attempt is logged and the delivery has `status` ([`status_after`]); `endpoint`
    /// compares the attempt's URL and host with the channel's now.
    Applied {
        /// The attempt's endpoint against the channel's now.
        endpoint: Endpoint,
        /// The delivery's status now: delivered, failed or paused (a retry), or dead.
        status: Status,
    },
    /// The delivery was cancelled while the attempt was in flight (by its tenant, or its channel
    /// was deleted), or no longer exists: the attempt is still logged (if the delivery exists),
    /// the delivery stays `cancelled`, and the caller must let the result change nothing else
    /// (no circuit, no retry).
    Cancelled,
}

/// Records an attempt row and moves the delivery to its new status, in the caller's
/// transaction, and compares the attempt's endpoint with the channel's now ([`Endpoint`]). The
/// comparison is exact when the caller locked the channel row first
/// (as [`crate::circuit::after_attempt`] does for every failure, every
/// probe's answer and every success that writes the channel): a URL change then committed
/// before this statement or waits for the transaction. Unlocked (any other success), a change
/// committing after this statement is not seen, and the answer counts as the channel's. The
/// delivery's new status is [`status_after`]'s, the one for a moved URL chosen in the same
/// statement as the comparison, so the status and the returned [`Endpoint`] agree. The attempt
/// number is the delivery's `attempts + 1`.
///
/// [`Recorded::Cancelled`] when the delivery was cancelled while the attempt was in flight or
/// no longer exists. The delivery's row lock makes this exact: a cancel either committed before
/// (seen here) or waits for this transaction and then finds the delivery final (a channel
/// deletion skips a locked row instead, see [`crate::lifecycle`]).
pub(crate) async fn record_attempt(
    tx: &mut PgConnection,
    r: &AttemptRecord<'_>,
) -> Result<Recorded> {
    let (same, moved) = status_after(r.class, r.last_attempt, r.channel_parked);
    let row = sqlx::query!(
        r#"
        WITH ch AS (
            SELECT url IS DISTINCT FROM $13 AS new_url, host_key IS DISTINCT FROM $14 AS new_host
            FROM channels WHERE id = $11
        ), target AS (
            SELECT CASE WHEN coalesce((SELECT new_url FROM ch), true) THEN $15 ELSE $9 END
                       AS status
        ), d AS (
            UPDATE deliveries
            SET attempts = attempts + 1,
                status = CASE WHEN deliveries.status = 'cancelled' THEN deliveries.status
                              ELSE target.status END,
                last_error = CASE WHEN deliveries.status = 'cancelled' THEN last_error ELSE $7 END,
                updated_at = CASE WHEN deliveries.status = 'cancelled' THEN updated_at ELSE now() END,
                delivered_at = CASE WHEN deliveries.status <> 'cancelled'
                                         AND target.status = 'delivered' THEN now()
                                    ELSE delivered_at END
            FROM target
            WHERE id = $1
            RETURNING attempts, deliveries.status
        ), logged AS (
            INSERT INTO delivery_attempts (delivery_id, attempt, started_at, duration_ms, outcome,
                                           status_code, error_kind, error, response_excerpt, node_id,
                                           channel_id, probe)
            SELECT $1, d.attempts, $2, $3, $4, $5, $6, $7, $8, $10, $11, $12 FROM d
        )
        SELECT d.status AS "status!: Status",
               coalesce(ch.new_url, true) AS "new_url!",
               coalesce(ch.new_host, true) AS "new_host!"
        FROM d LEFT JOIN ch ON true
        "#,
        r.delivery_id,
        r.started_at,
        r.duration_ms,
        r.class.as_str(),
        r.status_code,
        r.error_kind,
        r.error,
        r.response_excerpt,
        same.as_str(),
        r.node_id,
        r.channel_id,
        r.probe,
        r.url,
        r.host_key,
        moved.as_str(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(match row {
        Some(row) if row.status != Status::Cancelled => Recorded::Applied {
            endpoint: Endpoint {
                url_changed: row.new_url,
                host_changed: row.new_host,
            },
            status: row.status,
        },
        _ => Recorded::Cancelled,
    })
}

/// One plain success to record in a batch ([`record_successes`]): an attempt that got a 2xx,
/// was no probe, and found its channel with no failures and no rejection streak, so it moves no
/// circuit (see [`crate::circuit::AttemptResult::moves_nothing`]).
#[derive(Debug, Clone)]
pub struct Success<'a> {
    /// The delivery as loaded for the attempt.
    pub dispatch: &'a Dispatch,
    /// Its job and the claim the attempt ran under: the fence of the record.
    pub job_id: i64,
    /// The job's claim token ([`breakwater_queue::Job::claim_token`]).
    pub claim_token: Uuid,
    /// How long the request took, ms.
    pub duration_ms: i32,
    /// The answer's status code.
    pub status_code: i32,
    /// The first bytes of the response body.
    pub response_excerpt: Option<&'a str>,
}

/// What [`record_successes`] did with one [`Success`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuccessRecorded {
    /// The delivery.
    pub delivery_id: Uuid,
    /// [`Status::Delivered`], or [`Status::Cancelled`] if it was cancelled while the request was
    /// in flight (the attempt is logged; its job is to be cancelled, not completed).
    pub status: Status,
    /// The channel's URL is no longer the one the request went to ([`Endpoint::url_changed`],
    /// compared without the channel's lock, as for any success that writes nothing of the
    /// channel): the answer says nothing of its endpoint's capacity.
    pub url_changed: bool,
}

/// Records many plain successes in one statement, in the caller's transaction: an attempt row
/// each and the delivery `delivered` (a cancelled one stays `cancelled`), as
/// [`record_attempt`] does for one. Fenced per row: a success whose job no longer holds the
/// claim it ran under (rescued, or handed back) records nothing and is absent from the result;
/// the caller must end exactly the returned ones' jobs ([`breakwater_queue::finish_batch`]).
/// Takes the delivery rows' locks (in the order of the input), then nothing else: a success of
/// this kind locks no channel row ([`crate::circuit::locks_channel`]). `node_id` made them all.
pub async fn record_successes(
    tx: &mut PgConnection,
    node_id: &str,
    batch: &[Success<'_>],
) -> Result<Vec<SuccessRecorded>> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let col = |f: fn(&Success<'_>) -> Uuid| batch.iter().map(f).collect::<Vec<Uuid>>();
    let deliveries = col(|s| s.dispatch.id);
    let channels = col(|s| s.dispatch.channel_id);
    let tokens = col(|s| s.claim_token);
    let jobs: Vec<i64> = batch.iter().map(|s| s.job_id).collect();
    let started: Vec<DateTime<Utc>> = batch.iter().map(|s| s.dispatch.started_at).collect();
    let durations: Vec<i32> = batch.iter().map(|s| s.duration_ms).collect();
    let codes: Vec<i32> = batch.iter().map(|s| s.status_code).collect();
    let excerpts: Vec<Option<&str>> = batch.iter().map(|s| s.response_excerpt).collect();
    let urls: Vec<&str> = batch.iter().map(|s| s.dispatch.url.as_str()).collect();
    let rows = sqlx::query!(
        r#"
        WITH i AS (
            SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int8[], $4::uuid[], $5::timestamptz[],
                                 $6::int4[], $7::int4[], $8::text[], $9::text[])
                AS i(delivery_id, channel_id, job_id, token, started_at, duration_ms, status_code,
                     excerpt, url)
        ), live AS (
            -- The fence: only results whose job still holds the claim they ran under.
            SELECT i.* FROM i
            JOIN jobs j ON j.id = i.job_id AND j.claim_token = i.token AND j.state = 'executing'
        ), d AS (
            UPDATE deliveries
            SET attempts = attempts + 1,
                status = CASE WHEN deliveries.status = 'cancelled' THEN deliveries.status
                              ELSE 'delivered' END,
                last_error = CASE WHEN deliveries.status = 'cancelled' THEN last_error END,
                updated_at = CASE WHEN deliveries.status = 'cancelled' THEN updated_at ELSE now() END,
                delivered_at = CASE WHEN deliveries.status = 'cancelled' THEN delivered_at
                                    ELSE now() END
            FROM live
            WHERE deliveries.id = live.delivery_id
            RETURNING deliveries.id, deliveries.attempts, deliveries.status
        ), logged AS (
            INSERT INTO delivery_attempts (delivery_id, attempt, started_at, duration_ms, outcome,
                                           status_code, error_kind, error, response_excerpt, node_id,
                                           channel_id, probe)
            SELECT live.delivery_id, d.attempts, live.started_at, live.duration_ms, 'success',
                   live.status_code, NULL, NULL, live.excerpt, $10, live.channel_id, false
            FROM live JOIN d ON d.id = live.delivery_id
        )
        SELECT d.id AS "id!", d.status AS "status!: Status",
               coalesce(c.url IS DISTINCT FROM live.url, true) AS "url_changed!"
        FROM d
        JOIN live ON live.delivery_id = d.id
        LEFT JOIN channels c ON c.id = live.channel_id
        "#,
        &deliveries,
        &channels,
        &jobs,
        &tokens,
        &started,
        &durations,
        &codes,
        &excerpts as &[Option<&str>],
        &urls as &[&str],
        node_id,
    )
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| SuccessRecorded {
            delivery_id: r.id,
            status: r.status,
            url_changed: r.url_changed,
        })
        .collect())
}

/// Ends a delivery whose channel is gone (deleted while its job waited or ran): `cancelled`
/// with `reason` in `last_error`, unless it is already final. Returns whether it changed. For
/// the worker, which then ends the job itself.
pub async fn cancel_orphan(
    exec: impl PgExecutor<'_>,
    delivery_id: Uuid,
    reason: &str,
) -> Result<bool> {
    let r = sqlx::query!(
        "UPDATE deliveries SET status = 'cancelled', last_error = $2, updated_at = now()
         WHERE id = $1 AND status NOT IN ('delivered', 'dead', 'cancelled')",
        delivery_id,
        reason,
    )
    .execute(exec)
    .await?;
    Ok(r.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::{Dead, Delivered, Failed, Paused};

    #[test]
    fn a_permanent_failure_of_a_moved_url_is_retried_unless_it_was_the_last_attempt() {
        let (first, last) = (false, true);
        assert_eq!(status_after(Class::Permanent, first, false), (Dead, Failed));
        assert_eq!(status_after(Class::Permanent, last, false), (Dead, Dead));
        assert_eq!(
            status_after(Class::Transient, first, false),
            (Failed, Failed)
        );
        assert_eq!(status_after(Class::Transient, last, false), (Dead, Dead));
        assert_eq!(
            status_after(Class::Success, last, false),
            (Delivered, Delivered)
        );
    }

    #[test]
    fn a_retry_of_a_parked_channel_is_paused_and_nothing_else_changes() {
        for last in [false, true] {
            for class in [Class::Success, Class::Transient, Class::Permanent] {
                let (same, moved) = status_after(class, last, false);
                let parked = |s: Status| if s == Failed { Paused } else { s };
                assert_eq!(
                    status_after(class, last, true),
                    (parked(same), parked(moved)),
                    "{class:?}, last attempt {last}"
                );
            }
        }
        assert_eq!(
            status_after(Class::Transient, false, true),
            (Paused, Paused)
        );
    }
}
