//! Channels: a tenant's endpoints, each with its own circuit (table `channels`).
//!
//! A deleted channel ([`crate::lifecycle::delete_channel`]) keeps its row for history but is
//! not found by anything here.

use crate::{audit, signing, Error, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// A channel as the API shows it. The signing secret is only shown at creation
/// ([`CreatedChannel`]).
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Channel {
    /// Channel id (also the `group_id` of its jobs).
    pub id: Uuid,
    /// Owning tenant.
    pub tenant_id: Uuid,
    /// Optional display name.
    pub name: Option<String>,
    /// The endpoint.
    pub url: String,
    /// Rate limit (`"80/s"`, `"1000/m"`, `"5000/h"`), null = unlimited.
    #[schema(example = "80/s")]
    pub rate_limit: Option<String>,
    /// The event types the channel receives from `POST /api/v1/messages` (exact match, see
    /// [`canonical_event_types`]); null = every type.
    pub event_types: Option<Vec<String>>,
    /// Until when the signing secret rotated out by the last [`rotate_secret`] still signs each
    /// request (a second signature); in the past once that grace period is over, null when the
    /// secret was never rotated or rotated without a grace period.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// The host circuit this channel shares with every channel on the same host (see
    /// [`crate::hosts::host_key`]), e.g. `api.example.com`; null before it was keyed.
    pub host_key: Option<String>,
    /// `closed` | `open` | `half_open` | `paused`.
    #[schema(value_type = crate::circuit::State)]
    pub circuit_state: String,
    /// When the circuit last changed state.
    pub circuit_changed_at: DateTime<Utc>,
    /// Consecutive transient failures counted while closed.
    pub consecutive_failures: i32,
    /// Per-channel override of the failure threshold (null = global default).
    pub failure_threshold: Option<i32>,
    /// Per-channel override of the probe cooldown in ms (null = global default).
    pub cooldown_ms: Option<i64>,
    /// Per-channel override of the consecutive successful probe deliveries (1–100) a half-open
    /// circuit needs before it closes (null = cluster default; see
    /// [`crate::circuit`], "Careful closing").
    pub close_after_successes: Option<i32>,
    /// Successful probe deliveries so far in the current half-open run (meaningful while
    /// `half_open`).
    pub trial_successes: i32,
    /// Per-channel ceiling of the adaptive concurrency limit: most deliveries in flight at once,
    /// cluster-wide (null = `worker.channel_concurrency_ceiling`).
    pub max_in_flight: Option<i32>,
    /// When the next probe may run, while open.
    pub next_probe_at: Option<DateTime<Utc>>,
    /// Failed probes in a row (the cooldown doubles with each).
    pub probe_failures: i32,
    /// Bumped by every transition.
    pub circuit_generation: i64,
    /// Nothing is sent before this (a `Retry-After` from the endpoint).
    pub retry_after_until: Option<DateTime<Utc>>,
    /// Deliveries held back by the rate limit so far.
    pub rate_limited_total: i64,
    /// Replay the channel's recent dead letters when a probe closes its circuit.
    pub replay_dead_letters_on_close: bool,
    /// How far back that replay reaches, ms.
    pub replay_window_ms: i64,
    /// Last transient failure.
    pub last_failure_at: Option<DateTime<Utc>>,
    /// What the last transient failure was.
    pub last_failure_reason: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, tenant_id, name, url, host_key, rate_limit, event_types, previous_secret_expires_at, \
    rate_limited_total, circuit_state, circuit_changed_at, \
    consecutive_failures, failure_threshold, cooldown_ms, close_after_successes, trial_successes, max_in_flight, next_probe_at, probe_failures, \
    circuit_generation, retry_after_until, replay_dead_letters_on_close, replay_window_ms, last_failure_at, last_failure_reason, created_at, updated_at";

/// A created channel with its signing secret, shown once.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CreatedChannel {
    /// The channel.
    #[serde(flatten)]
    pub channel: Channel,
    /// The Standard Webhooks secret (`whsec_…`) that signs every request to this channel.
    pub signing_secret: String,
}

/// Input of [`create`]; the URL is already checked (see [`crate::targets`]).
#[derive(Debug, Clone, Default)]
pub struct NewChannel {
    /// Endpoint URL.
    pub url: String,
    /// Display name (≤ 200 characters).
    pub name: Option<String>,
    /// Failure threshold override (> 0).
    pub failure_threshold: Option<i32>,
    /// Cooldown override in ms (> 0).
    pub cooldown_ms: Option<i64>,
    /// Consecutive successes to close override (1–100, [`crate::circuit::check_close_after_successes`]).
    pub close_after_successes: Option<i32>,
    /// Replay recent dead letters when a probe closes the circuit.
    pub replay_dead_letters_on_close: bool,
    /// Window of that replay, ms (default 1 h).
    pub replay_window_ms: Option<i64>,
    /// Rate limit (`"80/s"`, `"1000/m"`, `"5000/h"`), checked with
    /// [`crate::ratelimit::RateLimit::parse`]; `None` = unlimited.
    pub rate_limit: Option<String>,
    /// Ceiling of the adaptive concurrency limit (1–10000); `None` = the global ceiling.
    pub max_in_flight: Option<i32>,
    /// Event types the channel subscribes to ([`canonical_event_types`]); `None` = every type.
    pub event_types: Option<Vec<String>>,
    /// The URL's host key ([`crate::hosts::host_key`]); `None` = no host circuit.
    pub host_key: Option<String>,
}

/// Creates a channel for `tenant_id` with a fresh signing secret, its job group (in the
/// tenant's fair share, with its concurrency ceiling) and a `channel.created` audit row by
/// `actor`, in the caller's transaction.
pub async fn create(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    new: &NewChannel,
    actor: &str,
) -> Result<CreatedChannel> {
    check_name(new.name.as_deref())?;
    check_overrides(new.failure_threshold, new.cooldown_ms)?;
    crate::circuit::check_close_after_successes(new.close_after_successes)?;
    check_max_in_flight(new.max_in_flight)?;
    check_replay_window(new.replay_window_ms)?;
    let event_types = canonical_event_types(new.event_types.as_deref())?;
    let secret = signing::generate_secret();
    let channel: Channel = sqlx::query_as(&format!(
        "INSERT INTO channels (id, tenant_id, name, url, signing_secret, failure_threshold, cooldown_ms,
                               replay_dead_letters_on_close, replay_window_ms, rate_limit, max_in_flight,
                               event_types, close_after_successes)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, 3600000), $10, $11, $12, $13) RETURNING {COLUMNS}"
    ))
    .bind(Uuid::now_v7())
    .bind(tenant_id)
    .bind(&new.name)
    .bind(&new.url)
    .bind(&secret)
    .bind(new.failure_threshold)
    .bind(new.cooldown_ms)
    .bind(new.replay_dead_letters_on_close)
    .bind(new.replay_window_ms)
    .bind(canonical_rate_limit(new.rate_limit.as_deref())?)
    .bind(new.max_in_flight)
    .bind(event_types)
    .bind(new.close_after_successes)
    .fetch_one(&mut *conn)
    .await?;
    breakwater_queue::define_group(&mut *conn, channel.id, Some(tenant_id)).await?;
    let mut channel = channel;
    if let Some(key) = &new.host_key {
        crate::hosts::assign(&mut *conn, channel.id, key).await?;
        channel.host_key = Some(key.clone());
    }
    if new.max_in_flight.is_some() {
        breakwater_queue::set_max_in_flight(&mut *conn, channel.id, new.max_in_flight).await?;
    }
    audit::record(
        &mut *conn,
        &audit::Entry {
            tenant_id: Some(tenant_id),
            channel_id: Some(channel.id),
            actor,
            action: "channel.created",
            details: serde_json::json!({ "new": audited_settings(&channel) }),
            ..Default::default()
        },
    )
    .await?;
    Ok(CreatedChannel {
        channel,
        signing_secret: secret,
    })
}

/// Changes to a channel (`PATCH`). `None` leaves a field alone; for the overrides,
/// `Some(None)` clears them back to the global default.
#[derive(Debug, Clone, Default)]
pub struct ChannelPatch {
    /// New display name (`Some(None)` clears it).
    pub name: Option<Option<String>>,
    /// New URL, already checked.
    pub url: Option<String>,
    /// Failure threshold override.
    pub failure_threshold: Option<Option<i32>>,
    /// Cooldown override, ms.
    pub cooldown_ms: Option<Option<i64>>,
    /// Consecutive-successes-to-close override (`Some(None)` clears it).
    pub close_after_successes: Option<Option<i32>>,
    /// Replay dead letters on close.
    pub replay_dead_letters_on_close: Option<bool>,
    /// Replay window, ms.
    pub replay_window_ms: Option<i64>,
    /// Rate limit (`Some(None)` removes it).
    pub rate_limit: Option<Option<String>>,
    /// Concurrency ceiling (`Some(None)` clears it back to the global ceiling).
    pub max_in_flight: Option<Option<i32>>,
    /// Event-type filter (`Some(None)` clears it: the channel then receives every type).
    pub event_types: Option<Option<Vec<String>>>,
    /// The new URL's host key ([`crate::hosts::host_key`]), given with `url`.
    pub host_key: Option<String>,
}

/// Most event types in one channel's filter.
pub const MAX_EVENT_TYPES: usize = 100;
/// Longest event type in a channel's filter, in characters.
pub const MAX_FILTER_EVENT_TYPE_LEN: usize = 100;

/// The canonical form of a channel's event-type filter (sorted, without repeats), or the field
/// error. `None` (no filter: every type) stays `None`. Each entry is 1–100 characters of ASCII
/// letters, digits and `.` `_` `-` `:` `/` (e.g. `invoice.paid`, `orders/v2:created`); there
/// are 1–100 entries (an empty list would receive nothing: send `null` for every type). A
/// message matches a channel when its event type equals one of the entries exactly (no
/// wildcards), as with Svix's `filterTypes`.
pub fn canonical_event_types(types: Option<&[String]>) -> Result<Option<Vec<String>>> {
    let Some(types) = types else {
        return Ok(None);
    };
    if types.is_empty() || types.len() > MAX_EVENT_TYPES {
        return Err(Error::invalid(
            "event_types",
            format!(
                "must hold 1 to {MAX_EVENT_TYPES} event types, not {} (null receives every type)",
                types.len()
            ),
        ));
    }
    for (i, t) in types.iter().enumerate() {
        let ok_char =
            |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/');
        if t.is_empty() || t.len() > MAX_FILTER_EVENT_TYPE_LEN || !t.chars().all(ok_char) {
            return Err(Error::invalid(
                "event_types",
                format!(
                    "event_types[{i}] must be 1 to {MAX_FILTER_EVENT_TYPE_LEN} characters of \
                     ASCII letters, digits, '.', '_', '-', ':' and '/'"
                ),
            ));
        }
    }
    let mut v = types.to_vec();
    v.sort();
    v.dedup();
    Ok(Some(v))
}

fn check_max_in_flight(m: Option<i32>) -> Result<()> {
    if m.is_some_and(|m| !(1..=10_000).contains(&m)) {
        return Err(Error::invalid(
            "max_in_flight",
            "must be between 1 and 10000",
        ));
    }
    Ok(())
}

/// The canonical form of a rate limit, or the field error.
fn canonical_rate_limit(r: Option<&str>) -> Result<Option<String>> {
    r.map(|r| crate::ratelimit::RateLimit::parse(r).map(|l| l.to_text()))
        .transpose()
}

fn check_replay_window(w: Option<i64>) -> Result<()> {
    if w.is_some_and(|w| !(1..=30 * 86_400_000).contains(&w)) {
        return Err(Error::invalid(
            "replay_window_ms",
            "must be between 1 and 2592000000 (30 days)",
        ));
    }
    Ok(())
}

fn check_overrides(failure_threshold: Option<i32>, cooldown_ms: Option<i64>) -> Result<()> {
    if failure_threshold.is_some_and(|t| !(1..=10_000).contains(&t)) {
        return Err(Error::invalid(
            "failure_threshold",
            "must be between 1 and 10000",
        ));
    }
    if cooldown_ms.is_some_and(|c| !(1..=86_400_000).contains(&c)) {
        return Err(Error::invalid(
            "cooldown_ms",
            "must be between 1 and 86400000 (24 h)",
        ));
    }
    Ok(())
}

fn check_name(name: Option<&str>) -> Result<()> {
    if name.is_some_and(|n| n.chars().count() > 200) {
        return Err(Error::invalid("name", "must be at most 200 characters"));
    }
    Ok(())
}

/// A channel's settings as the audit log shows them: every field a tenant sets, the URL as
/// [`audit::url_summary`] (never its path or query), never the signing secret.
pub fn audited_settings(c: &Channel) -> serde_json::Value {
    serde_json::json!({
        "name": c.name,
        "url": audit::url_summary(&c.url),
        "rate_limit": c.rate_limit,
        "failure_threshold": c.failure_threshold,
        "cooldown_ms": c.cooldown_ms,
        "close_after_successes": c.close_after_successes,
        "max_in_flight": c.max_in_flight,
        "event_types": c.event_types,
        "replay_dead_letters_on_close": c.replay_dead_letters_on_close,
        "replay_window_ms": c.replay_window_ms,
    })
}

/// Applies `patch` to `tenant_id`'s channel `id` and returns it ([`Error::NotFound`] for another
/// tenant's), writing one `channel.updated` audit row by `actor` with the old and new values of
/// what changed (none when nothing did). The row is read under its lock first, so the old values
/// are exact. The circuit state is not touched here; a new `max_in_flight` reaches the channel's
/// job group in the same transaction.
pub async fn update(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    id: Uuid,
    patch: &ChannelPatch,
    actor: &str,
) -> Result<Channel> {
    check_name(patch.name.as_ref().and_then(|n| n.as_deref()))?;
    check_overrides(
        patch.failure_threshold.flatten(),
        patch.cooldown_ms.flatten(),
    )?;
    check_replay_window(patch.replay_window_ms)?;
    check_max_in_flight(patch.max_in_flight.flatten())?;
    crate::circuit::check_close_after_successes(patch.close_after_successes.flatten())?;
    let event_types = canonical_event_types(patch.event_types.clone().flatten().as_deref())?;
    let old: Channel = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM channels WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL FOR NO KEY UPDATE"
    ))
    .bind(id)
    .bind(tenant_id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(Error::NotFound("channel"))?;
    let channel: Channel = sqlx::query_as(&format!(
        "UPDATE channels SET
            name = CASE WHEN $3 THEN $4 ELSE name END,
            url = coalesce($5, url),
            failure_threshold = CASE WHEN $6 THEN $7 ELSE failure_threshold END,
            cooldown_ms = CASE WHEN $8 THEN $9 ELSE cooldown_ms END,
            replay_dead_letters_on_close = coalesce($10, replay_dead_letters_on_close),
            replay_window_ms = coalesce($11, replay_window_ms),
            rate_limit = CASE WHEN $12 THEN $13 ELSE rate_limit END,
            rate_tat = CASE WHEN $12 THEN NULL ELSE rate_tat END,
            rate_queue_tat = CASE WHEN $12 THEN NULL ELSE rate_queue_tat END,
            max_in_flight = CASE WHEN $14 THEN $15 ELSE max_in_flight END,
            event_types = CASE WHEN $16 THEN $17 ELSE event_types END,
            close_after_successes = CASE WHEN $18 THEN $19 ELSE close_after_successes END,
            updated_at = now()
         WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(tenant_id)
    .bind(patch.name.is_some())
    .bind(patch.name.clone().flatten())
    .bind(&patch.url)
    .bind(patch.failure_threshold.is_some())
    .bind(patch.failure_threshold.flatten())
    .bind(patch.cooldown_ms.is_some())
    .bind(patch.cooldown_ms.flatten())
    .bind(patch.replay_dead_letters_on_close)
    .bind(patch.replay_window_ms)
    .bind(patch.rate_limit.is_some())
    .bind(canonical_rate_limit(
        patch.rate_limit.clone().flatten().as_deref(),
    )?)
    .bind(patch.max_in_flight.is_some())
    .bind(patch.max_in_flight.flatten())
    .bind(patch.event_types.is_some())
    .bind(event_types)
    .bind(patch.close_after_successes.is_some())
    .bind(patch.close_after_successes.flatten())
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(Error::NotFound("channel"))?;
    let mut channel = channel;
    if let Some(key) = &patch.host_key {
        crate::hosts::assign(&mut *conn, channel.id, key).await?;
        channel.host_key = Some(key.clone());
    }
    if let Some(m) = patch.max_in_flight {
        breakwater_queue::set_max_in_flight(&mut *conn, channel.id, m).await?;
    }
    if patch.rate_limit.is_some() {
        retime_rate_limited(conn, channel.id).await?;
    }
    if let Some(details) = audit::changes(&audited_settings(&old), &audited_settings(&channel)) {
        audit::record(
            &mut *conn,
            &audit::Entry {
                tenant_id: Some(tenant_id),
                channel_id: Some(id),
                actor,
                action: "channel.updated",
                details,
                ..Default::default()
            },
        )
        .await?;
    }
    Ok(channel)
}

/// A changed (or removed) rate limit applies at once to every delivery waiting for a turn under
/// the old one: their turns are dropped and their jobs made due now, so they take new turns at
/// the new rate, oldest first (or all go at once when the limit is removed). Deliveries waiting
/// for a retry backoff keep their time (their turn, if any, is in the past).
async fn retime_rate_limited(conn: &mut PgConnection, channel_id: Uuid) -> Result<u64> {
    let keys: Vec<String> = sqlx::query_scalar(
        "UPDATE deliveries SET rate_slot_at = NULL
         WHERE channel_id = $1 AND rate_slot_at > now() AND status IN ('pending', 'failed')
         RETURNING 'delivery:' || id",
    )
    .bind(channel_id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(breakwater_queue::make_due(conn, &keys).await?)
}

/// Default grace period of a secret rotation: 24 h, in ms (as Svix).
pub const DEFAULT_ROTATION_GRACE_MS: i64 = 86_400_000;
/// Longest grace period of a secret rotation: 7 days, in ms.
pub const MAX_ROTATION_GRACE_MS: i64 = 7 * 86_400_000;

/// The result of [`rotate_secret`]: the new secret, shown once.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RotatedSecret {
    /// The channel.
    pub channel_id: Uuid,
    /// The new Standard Webhooks secret (`whsec_…`), which signs every request from now on.
    pub signing_secret: String,
    /// Until when requests also carry a signature made with the old secret (database time);
    /// `None` with a zero grace period (the old secret stops at once).
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
}

/// Rotates `tenant_id`'s channel `id` to a fresh signing secret ([`Error::NotFound`] for another
/// tenant's). For `grace_ms` (0 to [`MAX_ROTATION_GRACE_MS`], else [`Error::Invalid`] naming
/// `grace_ms`) the old secret keeps signing too: each request's `webhook-signature` carries
/// `v1,<new> v1,<old>` (Standard Webhooks allows several space-separated signatures, and its
/// verifiers accept a request if any one verifies), so receivers can switch at their own pace.
/// After it, only `v1,<new>`. The period is measured on the database clock.
///
/// Only one old secret is kept: rotating again within a grace period drops the oldest at once
/// (the secret being replaced becomes the old one). Writes one `channel.secret_rotated` audit row
/// by `actor` with the grace period and its end, never a secret; in the caller's transaction.
/// An attempt already in flight was signed before the rotation and still verifies with the old
/// secret; one that starts later signs with both.
pub async fn rotate_secret(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    id: Uuid,
    grace_ms: i64,
    actor: &str,
) -> Result<RotatedSecret> {
    if !(0..=MAX_ROTATION_GRACE_MS).contains(&grace_ms) {
        return Err(Error::invalid(
            "grace_ms",
            format!("must be between 0 and {MAX_ROTATION_GRACE_MS} (7 days)"),
        ));
    }
    let secret = signing::generate_secret();
    // One conditional UPDATE: the row lock orders it with any concurrent rotation, so two
    // rotations at once each keep the secret they replaced, never a lost one.
    let expires: Option<(Option<DateTime<Utc>>,)> = sqlx::query_as(
        "UPDATE channels SET
            previous_signing_secret = CASE WHEN $3 > 0 THEN signing_secret END,
            previous_secret_expires_at = CASE WHEN $3 > 0
                THEN now() + $3 * interval '1 millisecond' END,
            signing_secret = $4,
            updated_at = now()
         WHERE id = $1 AND tenant_id = $2
         RETURNING previous_secret_expires_at",
    )
    .bind(id)
    .bind(tenant_id)
    .bind(grace_ms)
    .bind(&secret)
    .fetch_optional(&mut *conn)
    .await?;
    let (expires,) = expires.ok_or(Error::NotFound("channel"))?;
    audit::record(
        &mut *conn,
        &audit::Entry {
            tenant_id: Some(tenant_id),
            channel_id: Some(id),
            actor,
            action: "channel.secret_rotated",
            details: serde_json::json!({
                "grace_ms": grace_ms,
                "previous_secret_expires_at": expires,
            }),
            ..Default::default()
        },
    )
    .await?;
    Ok(RotatedSecret {
        channel_id: id,
        signing_secret: secret,
        previous_secret_expires_at: expires,
    })
}

/// Jobs of the channel held by its parked job group (open, half-open or paused circuit).
pub async fn parked_count(exec: impl PgExecutor<'_>, id: Uuid) -> Result<i64> {
    Ok(breakwater_queue::parked_count(exec, id).await?)
}

/// Loads `tenant_id`'s channel `id`. Another tenant's channel is [`Error::NotFound`], exactly
/// like a missing one.
pub async fn get(exec: impl PgExecutor<'_>, tenant_id: Uuid, id: Uuid) -> Result<Channel> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM channels WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL"
    ))
    .bind(id)
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?
    .ok_or(Error::NotFound("channel"))
}

/// Lists a page of `tenant_id`'s channels by id (ids are time-ordered UUIDv7, so oldest first
/// is creation order); see [`crate::page`].
pub async fn list(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    page: &crate::page::Keyset<Uuid>,
) -> Result<Vec<Channel>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM channels WHERE tenant_id = $1 AND deleted_at IS NULL{}{} LIMIT $2",
        page.seek("id", 3),
        page.order_by("id"),
    );
    let mut q = sqlx::query_as(&sql).bind(tenant_id).bind(page.limit);
    if let Some(after) = page.after {
        q = q.bind(after);
    }
    Ok(q.fetch_all(exec).await?)
}

/// A channel as the operator lists it: with its tenant, tier and parked count.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct OperatorChannel {
    /// The channel.
    #[sqlx(flatten)]
    #[serde(flatten)]
    pub channel: Channel,
    /// Tenant name.
    pub tenant_name: String,
    /// Tenant tier.
    #[schema(value_type = crate::Tier)]
    pub tier: String,
    /// Jobs parked by the circuit.
    pub parked: i64,
}

/// A page of every tenant's channels (operator view) by id, optionally filtered by circuit
/// state and tenant; see [`crate::page`].
pub async fn list_all(
    exec: impl PgExecutor<'_>,
    state: Option<&str>,
    tenant_id: Option<Uuid>,
    page: &crate::page::Keyset<Uuid>,
) -> Result<Vec<OperatorChannel>> {
    let cols: String = COLUMNS
        .split(", ")
        .map(|c| format!("c.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT {cols}, t.name AS tenant_name, t.tier,
                CASE WHEN c.circuit_state = 'closed' THEN 0
                     ELSE {waiting} END AS parked
         FROM channels c JOIN tenants t ON t.id = c.tenant_id
         WHERE c.deleted_at IS NULL AND ($1::text IS NULL OR c.circuit_state = $1)
           AND ($2::uuid IS NULL OR c.tenant_id = $2){}{}
         LIMIT $3",
        page.seek("c.id", 4),
        page.order_by("c.id"),
        waiting = breakwater_queue::waiting_count_sql("c.id"),
    );
    let mut q = sqlx::query_as(&sql)
        .bind(state)
        .bind(tenant_id)
        .bind(page.limit);
    if let Some(after) = page.after {
        q = q.bind(after);
    }
    Ok(q.fetch_all(exec).await?)
}

/// Loads any channel by id (operator), or [`Error::NotFound`].
pub async fn get_any(exec: impl PgExecutor<'_>, id: Uuid) -> Result<Channel> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM channels WHERE id = $1 AND deleted_at IS NULL"
    ))
    .bind(id)
    .fetch_optional(exec)
    .await?
    .ok_or(Error::NotFound("channel"))
}
