//! Channels: a tenant's endpoints, each with its own circuit (table `channels`).
//!
//! A deleted channel ([`crate::lifecycle::delete_channel`]) keeps its row for history but is
//! not found by anything here.
//!
//! - this file: the channel row, creating and updating one;
//! - `validate`: the range and form checks of a channel's settings;
//! - `secret`: rotating a channel's signing secret;
//! - `read`: loading and listing channels (a tenant's and the operator's);
//! - [`crate::endpoint`] (re-exported here): the custom headers and endpoint auth added to
//!   every request of a channel.

mod read;
mod secret;
mod validate;

pub(crate) use crate::endpoint::{check_compatible, resolve_auth, resolve_headers, HeaderView};
pub use crate::endpoint::{Auth, AuthInput, Header, HeaderInput, HeaderSpec, Headers};
pub(crate) use read::enqueue_gate_sql;
pub use read::{
    backlog, check_owned, get, get_any, get_locked_for_enqueue, list, list_all, Backlog,
    OperatorChannel,
};
pub use secret::{rotate_secret, RotatedSecret, DEFAULT_ROTATION_GRACE_MS};
pub(crate) use validate::{canonical_event_types, matching_patterns};
use validate::{
    canonical_rate_limit, check_max_in_flight, check_name, check_overrides, check_replay_window,
};

use crate::{audit, endpoint, signing, Error, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use uuid::Uuid;

// The `channels.ordering` column; `create` and `update` mirror it into the channel's job group
// (`breakwater_queue::set_group_fifo`) in the same transaction.
/// How a channel's deliveries are ordered: `none` (in parallel) or `fifo` (one at a time, in
/// the order accepted).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[schema(as = ChannelOrdering)]
pub enum DeliveryOrdering {
    /// No order: deliveries run in parallel, up to the channel's adaptive concurrency limit,
    /// and a failing one is retried while later ones go on.
    #[default]
    None,
    /// First in, first out: one delivery at a time, in the order accepted; a delivery that
    /// fails blocks the ones behind it (its retries included) until it is delivered or dead,
    /// on every node. A resent or recovered delivery joins the back.
    Fifo,
}

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
    /// The event types the channel receives from `POST /api/v1/messages`: exact names or
    /// prefix wildcards such as `invoice.*` (see [`canonical_event_types`]); null = every type.
    pub event_types: Option<Vec<String>>,
    /// The channel's payload filter: a JSON Logic rule over `{"event_type", "payload"}`
    /// evaluated when a message fans out (see [`crate::filters`]); null = every message of a
    /// subscribed type.
    #[schema(value_type = Option<Object>, example = json!({"==": [{"var": "payload.status"}, "paid"]}))]
    pub filter: Option<serde_json::Value>,
    /// Until when the signing secret rotated out by the last [`rotate_secret`] still signs each
    /// request (a second signature); in the past once that grace period is over, null when the
    /// secret was never rotated or rotated without a grace period.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// The host circuit this channel shares with every channel on the same host (see
    /// [`crate::hosts::host_key`]), e.g. `api.example.com`; null before it was keyed.
    pub host_key: Option<String>,
    /// `closed` | `open` | `half_open` | `paused`.
    pub circuit_state: crate::circuit::State,
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
    /// `none` (deliveries in parallel) or `fifo` (one at a time, in the order accepted, a
    /// failing one blocking those behind it until it is delivered or dead).
    pub ordering: DeliveryOrdering,
    /// When the next probe may run, while open; while paused from open or half-open, the
    /// earliest its probe goes once resumed (a pause keeps it, a new URL makes it now).
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
    /// Custom headers added to every request of the channel: name → `{value, sensitive}`, a
    /// sensitive value shown as `********`; `{}` for none.
    #[sqlx(json(nullable))]
    #[serde(serialize_with = "endpoint::serialize_headers")]
    #[schema(value_type = BTreeMap<String, HeaderView>)]
    pub headers: Option<Headers>,
    /// The endpoint's authentication (`basic`, `bearer` or `oauth2_client_credentials`), its
    /// secret shown as `********`; null for none.
    #[sqlx(json(nullable))]
    #[serde(serialize_with = "endpoint::serialize_auth")]
    #[schema(value_type = Option<Auth>)]
    pub auth: Option<Auth>,
    /// The channel's own retry policy ([`crate::retry_policy`]: `max_attempts`, `backoff`,
    /// `request_timeout_ms`, each optional); null = none of its own.
    #[sqlx(json(nullable))]
    #[schema(value_type = Option<crate::retry_policy::RetryPolicy>)]
    pub retry_policy: Option<crate::retry_policy::RetryPolicy>,
    /// Whether an operator holds the circuit (an operator's pause or force-open): the tenant's
    /// pause and resume are refused (409) until an operator resumes or closes it, or a probe
    /// closes it ([`crate::circuit::apply_manual`]).
    pub operator_hold: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

impl Channel {
    /// The channel as an operator sees it: `url` cut to its origin (`https://hooks.example.com:8443`),
    /// since a receiver's path and query often carry its token (the rule of
    /// [`audit::url_summary`]); only the tenant's own views show the whole URL.
    pub fn for_operator(mut self) -> Self {
        self.url = audit::url_origin(&self.url);
        self
    }
}

const COLUMNS: &str = "id, tenant_id, name, url, host_key, rate_limit, event_types, filter, previous_secret_expires_at, \
    rate_limited_total, circuit_state, circuit_changed_at, \
    consecutive_failures, failure_threshold, cooldown_ms, close_after_successes, trial_successes, max_in_flight, ordering, next_probe_at, probe_failures, \
    circuit_generation, retry_after_until, replay_dead_letters_on_close, replay_window_ms, last_failure_at, last_failure_reason, headers, auth, retry_policy, operator_hold, created_at, updated_at";

/// A created channel with its signing secret, shown once.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CreatedChannel {
    /// The channel.
    #[serde(flatten)]
    pub channel: Channel,
    /// The Standard Webhooks secret (`whsec_…`) that signs every request to this channel.
    pub signing_secret: String,
}

/// A new channel: the body of `POST /api/v1/channels` (deserialized as it is, unknown fields
/// refused) and the input of [`create`]. The caller checks `url` ([`crate::targets`]) and sets
/// `host_key` ([`crate::hosts::host_key`]) before [`create`], which checks the rest. The field
/// docs are the API's (they are its OpenAPI descriptions).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateChannel, description = "Body of `POST /api/v1/channels`.")]
pub struct NewChannel {
    /// The endpoint: an absolute `http` or `https` URL without credentials, at most 2048
    /// characters, whose host resolves to public addresses only (unless
    /// `allow_private_targets`).
    #[schema(
        format = "uri",
        max_length = 2048,
        example = "https://example.com/hooks"
    )]
    pub url: String,
    /// Display name, 1 to 200 characters (trimmed) without control, bidirectional
    /// formatting or invisible characters (absent or null: none).
    #[schema(min_length = 1, max_length = 200)]
    pub name: Option<String>,
    /// Consecutive transient failures that open the circuit (null = the cluster default).
    #[schema(minimum = 1, maximum = 10000)]
    pub failure_threshold: Option<i32>,
    /// First cooldown of an open circuit before a probe, ms (null = the cluster default).
    #[schema(minimum = 1, maximum = 86400000)]
    pub cooldown_ms: Option<i64>,
    /// Consecutive successful probe deliveries before a half-open circuit closes: the probe,
    /// then this many minus one trial deliveries, one at a time (null = the cluster default).
    #[schema(minimum = 1, maximum = 100)]
    pub close_after_successes: Option<i32>,
    /// Replay the channel's recent dead letters when a probe closes its circuit.
    #[serde(default)]
    pub replay_dead_letters_on_close: bool,
    /// How far back that replay reaches, ms (default 1 h, at most 30 days).
    #[schema(minimum = 1, maximum = 2592000000_i64)]
    pub replay_window_ms: Option<i64>,
    /// Strict cluster-wide rate limit: `N/s`, `N/m` or `N/h` with N from 1 to 1 000 000
    /// (null = none).
    #[schema(example = "80/s")]
    pub rate_limit: Option<String>,
    /// Ceiling of the channel's adaptive concurrency, cluster-wide (null = the global one).
    #[schema(minimum = 1, maximum = 10000)]
    pub max_in_flight: Option<i32>,
    /// `none` (the default: deliveries in parallel) or `fifo`: one delivery at a time, in the
    /// order accepted; a delivery that fails blocks the ones behind it until it is delivered or
    /// dead (the circuit, pause and rate limit apply as usual; `max_in_flight` is then 1).
    #[serde(default)]
    pub ordering: DeliveryOrdering,
    /// Event types the channel receives from `POST /api/v1/messages` (1 to 100): exact names,
    /// or prefix wildcards such as `invoice.*` (every type under `invoice.`); absent/null =
    /// every type.
    #[schema(value_type = Option<Vec<EventTypeFilter>>, min_items = 1, max_items = 100)]
    pub event_types: Option<Vec<String>>,
    /// Custom headers sent with every request of the channel: name → value, a value being a
    /// string or `{"value": "…", "sensitive": true}` (a secret: never shown again, never
    /// logged, audited as changed only). At most 20 headers and 4096 bytes of names and values;
    /// names are RFC 9110 tokens other than hop-by-hop, framing, `Proxy-*`, `Content-Type` and
    /// the Standard Webhooks headers; values without CR, LF or NUL.
    #[schema(
        example = json!({"X-Tenant": "acme", "X-Api-Key": {"value": "k-123", "sensitive": true}})
    )]
    pub headers: Option<BTreeMap<String, HeaderInput>>,
    /// Endpoint authentication added to every request: HTTP Basic, a Bearer token, or OAuth2
    /// client credentials (a token fetched from `token_url`, cached until it expires).
    pub auth: Option<AuthInput>,
    /// Payload filter: a [JSON Logic](https://jsonlogic.com) rule over `{"event_type": …,
    /// "payload": …}`; the channel gets a message from `POST /api/v1/messages` only when the
    /// rule is truthy for it (not applied to `POST /api/v1/channels/{id}/deliveries`, which
    /// names the channel). At most 4096 bytes, 256 values, 16 levels; the operators of the JSON
    /// Logic reference that test (`var`, `missing`, `missing_some`, `if`, `==`, `===`, `!=`,
    /// `!==`, `!`, `!!`, `or`, `and`, `>`, `>=`, `<`, `<=`, `max`, `min`, `+`, `-`, `*`, `/`,
    /// `%`, `all`, `some`, `none`, `in`, `substr`), iteration not nested. Absent/null = none.
    #[schema(value_type = Option<Object>, example = json!({"==": [{"var": "payload.status"}, "paid"]}))]
    pub filter: Option<serde_json::Value>,
    /// The channel's own retry policy: any of `max_attempts` (1–100), `backoff` (`{"kind":
    /// "exponential", "base_ms", "factor", "cap_ms"}` or `{"kind": "schedule", "delays_ms":
    /// [...]}`) and `request_timeout_ms` (100–120000); a field left out comes from the tenant's
    /// default, else the service configuration. Applies to deliveries accepted after it is set.
    pub retry_policy: Option<crate::retry_policy::RetryPolicy>,
    /// The URL's host key ([`crate::hosts::host_key`]); `None` = no host circuit. Set by the
    /// caller, never read from a body.
    #[serde(skip)]
    pub host_key: Option<String>,
}

/// One entry of a channel's `event_types` filter, 1 to 100 characters: an exact event type
/// (ASCII letters, digits, `.`, `_`, `-`, `:` and `/`), or a prefix wildcard: such a name
/// followed by `.*` (`invoice.*` takes `invoice.paid`, not `invoice` nor `invoices.paid`); see
/// `breakwater_core::channels::canonical_event_types`. Documentation only: the filter is read
/// as strings and checked by core.
#[derive(utoipa::ToSchema)]
#[schema(
    pattern = r"^(?:[A-Za-z0-9._:/-]{1,100}|[A-Za-z0-9._:/-]{1,98}\.\*)$",
    example = "invoice.*"
)]
#[allow(dead_code)] // Never built: only its schema is used.
pub(crate) struct EventTypeFilter(String);

/// Creates a channel for `tenant_id` with a fresh signing secret, its job group (in the
/// tenant's fair share, with its concurrency ceiling) and a `channel.created` audit row by
/// `actor`, in the caller's transaction. A missing or deleted tenant is [`Error::NotFound`].
///
/// The tenant's row is held `FOR SHARE` until the caller commits: a tenant deletion (which
/// updates that row) either comes first, and this creation finds the tenant deleted, or waits
/// for this channel and deletes it with the others. (The foreign key alone takes `FOR KEY
/// SHARE`, which the deletion's update does not wait for: channels created during a deletion
/// were left live.)
pub async fn create(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    new: &NewChannel,
    actor: &str,
) -> Result<CreatedChannel> {
    let name = check_name(new.name.as_deref())?;
    check_overrides(new.failure_threshold, new.cooldown_ms)?;
    let retry_policy = match &new.retry_policy {
        Some(p) => p.clone().checked()?,
        None => None,
    };
    crate::circuit::check_close_after_successes(new.close_after_successes)?;
    check_max_in_flight(new.max_in_flight)?;
    check_replay_window(new.replay_window_ms)?;
    let event_types = canonical_event_types(new.event_types.as_deref())?;
    let headers = match &new.headers {
        Some(h) => resolve_headers(h, None)?,
        None => None,
    };
    let auth = match &new.auth {
        Some(a) => Some(resolve_auth(a, None)?),
        None => None,
    };
    check_compatible(headers.as_ref(), auth.as_ref())?;
    if let Some(f) = &new.filter {
        crate::filters::check(f)?;
    }
    crate::tenants::hold_live(&mut *conn, tenant_id, crate::tenants::Hold::Share).await?;
    let secret = signing::generate_secret();
    let channel: Channel = sqlx::query_as(&format!(
        "INSERT INTO channels (id, tenant_id, name, url, signing_secret, failure_threshold, cooldown_ms,
                               replay_dead_letters_on_close, replay_window_ms, rate_limit, max_in_flight,
                               event_types, close_after_successes, headers, auth, filter, retry_policy,
                               ordering)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, 3600000), $10, $11, $12, $13, $14, $15, $16, $17, $18)
         RETURNING {COLUMNS}"
    ))
    .bind(Uuid::now_v7())
    .bind(tenant_id)
    .bind(&name)
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
    .bind(headers.map(Json))
    .bind(auth.map(Json))
    .bind(&new.filter)
    .bind(retry_policy.map(Json))
    .bind(new.ordering)
    .fetch_one(&mut *conn)
    .await?;
    breakwater_queue::define_group(&mut *conn, channel.id, Some(tenant_id)).await?;
    if new.ordering == DeliveryOrdering::Fifo {
        breakwater_queue::set_group_fifo(&mut *conn, channel.id, true).await?;
    }
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
            details: serde_json::json!({ "new": audited_settings(&channel, None) }),
            ..audit::Entry::channel(tenant_id, channel.id, actor, "channel.created")
        },
    )
    .await?;
    Ok(CreatedChannel {
        channel,
        signing_secret: secret,
    })
}

/// Changes to a channel: the body of `PATCH /api/v1/channels/{id}` (unknown fields refused) and
/// the input of [`update`]. `None` leaves a field alone; for the overrides, `Some(None)` (a
/// `null`) clears them back to the cluster default. The caller checks `url` and sets `host_key`
/// with it, as for [`NewChannel`]. The field docs are the API's.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = PatchChannel,
    description = "Body of `PATCH /api/v1/channels/{id}`: every field optional; `null` clears an override."
)]
pub struct ChannelPatch {
    /// Display name, 1 to 200 characters (trimmed) without control, bidirectional
    /// formatting or invisible characters (null removes it).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
    pub name: Option<Option<String>>,
    /// The endpoint (same rules as at creation; not null).
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = String, format = "uri", max_length = 2048)]
    pub url: Option<String>,
    /// Failure threshold override (null = the cluster default).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 10000)]
    pub failure_threshold: Option<Option<i32>>,
    /// Cooldown override, ms (null = the cluster default).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400000)]
    pub cooldown_ms: Option<Option<i64>>,
    /// Consecutive successful probe deliveries before a half-open circuit closes (null = the
    /// cluster default).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 100)]
    pub close_after_successes: Option<Option<i32>>,
    /// Replay recent dead letters when a probe closes the circuit (not null).
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = bool)]
    pub replay_dead_letters_on_close: Option<bool>,
    /// How far back that replay reaches, ms (not null).
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = i64, minimum = 1, maximum = 2592000000_i64)]
    pub replay_window_ms: Option<i64>,
    /// Rate limit `N/s`, `N/m` or `N/h` (null removes it; applies at once to waiting
    /// deliveries).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<String>, example = "80/s")]
    pub rate_limit: Option<Option<String>>,
    /// Concurrency ceiling (null = the global one).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 10000)]
    pub max_in_flight: Option<Option<i32>>,
    /// `none` or `fifo` (not null). Switching a channel with waiting deliveries to `fifo`: they
    /// go one at a time, in the order accepted, from then on; deliveries already being sent
    /// finish first (none starts until they have). Back to `none`: they go in parallel again
    /// at once.
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = DeliveryOrdering)]
    pub ordering: Option<DeliveryOrdering>,
    /// Event types the channel receives from `POST /api/v1/messages` (1 to 100; exact match);
    /// `null` clears the filter (every type).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<Vec<EventTypeFilter>>, min_items = 1, max_items = 100)]
    pub event_types: Option<Option<Vec<String>>>,
    /// Custom headers (same rules as at creation), replacing all of them; `{}` or `null` removes
    /// them. `{"sensitive": true}` without a `value` keeps a header's stored value.
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<BTreeMap<String, HeaderInput>>)]
    pub headers: Option<Option<BTreeMap<String, HeaderInput>>>,
    /// Endpoint authentication (same shapes as at creation), replacing it; `null` removes it. A
    /// secret left out keeps the stored one (same type, and for OAuth2 the same `token_url`).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<AuthInput>)]
    pub auth: Option<Option<AuthInput>>,
    /// Payload filter (same rules as at creation); `null` removes it.
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<Object>, example = json!({"==": [{"var": "event_type"}, "invoice.paid"]}))]
    pub filter: Option<Option<serde_json::Value>>,
    /// The channel's own retry policy (same rules as at creation), replacing it whole; `null`
    /// removes it (the tenant's default, else the service configuration, then applies). Applies
    /// to deliveries accepted after the change.
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<crate::retry_policy::RetryPolicy>)]
    pub retry_policy: Option<Option<crate::retry_policy::RetryPolicy>>,
    /// The new URL's host key ([`crate::hosts::host_key`]), set by the caller with `url`; never
    /// read from a body.
    #[serde(skip)]
    pub host_key: Option<String>,
}

/// A channel's settings as the audit log shows them: every field a tenant sets, the URL as
/// [`audit::url_summary`] (never its path or query), never the signing secret, and the headers
/// and auth without their secrets ([`endpoint::audit_view`]: `"(secret)"`, or `"(secret,
/// changed)"` when `old`, the channel before a change, held another one).
pub(crate) fn audited_settings(c: &Channel, old: Option<&Channel>) -> serde_json::Value {
    let (headers, auth) = endpoint::audit_view(
        c.headers.as_ref(),
        c.auth.as_ref(),
        old.map(|o| (o.headers.as_ref(), o.auth.as_ref())),
    );
    serde_json::json!({
        "headers": headers,
        "auth": auth,
        "name": c.name,
        "url": audit::url_summary(&c.url),
        "rate_limit": c.rate_limit,
        "failure_threshold": c.failure_threshold,
        "cooldown_ms": c.cooldown_ms,
        "close_after_successes": c.close_after_successes,
        "max_in_flight": c.max_in_flight,
        "ordering": c.ordering,
        "event_types": c.event_types,
        "filter": c.filter,
        "replay_dead_letters_on_close": c.replay_dead_letters_on_close,
        "replay_window_ms": c.replay_window_ms,
        "retry_policy": c.retry_policy,
    })
}

/// Applies `patch` to `tenant_id`'s channel `id` and returns it ([`Error::NotFound`] for another
/// tenant's), writing one `channel.updated` audit row by `actor` with the old and new values of
/// what changed (none when nothing did). The row is read under its lock first, so the old values
/// are exact. The circuit state is not touched here, but a new URL of an open channel brings its
/// probe forward to now ([`crate::circuit::probe_new_endpoint`]); a new `max_in_flight` or
/// `ordering` reaches the channel's job group in the same transaction.
pub async fn update(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    id: Uuid,
    patch: &ChannelPatch,
    actor: &str,
) -> Result<Channel> {
    let name = check_name(patch.name.as_ref().and_then(|n| n.as_deref()))?;
    check_overrides(
        patch.failure_threshold.flatten(),
        patch.cooldown_ms.flatten(),
    )?;
    check_replay_window(patch.replay_window_ms)?;
    check_max_in_flight(patch.max_in_flight.flatten())?;
    crate::circuit::check_close_after_successes(patch.close_after_successes.flatten())?;
    let event_types = canonical_event_types(patch.event_types.clone().flatten().as_deref())?;
    if let Some(Some(f)) = &patch.filter {
        crate::filters::check(f)?;
    }
    let retry_policy = match &patch.retry_policy {
        Some(Some(p)) => p.clone().checked()?,
        _ => None,
    };
    let old: Channel = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM channels WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL FOR NO KEY UPDATE"
    ))
    .bind(id)
    .bind(tenant_id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(Error::NotFound("channel"))?;
    let headers = match &patch.headers {
        Some(Some(h)) => resolve_headers(h, old.headers.as_ref())?,
        Some(None) => None,
        None => old.headers.clone(),
    };
    let auth = match &patch.auth {
        Some(Some(a)) => Some(resolve_auth(a, old.auth.as_ref())?),
        Some(None) => None,
        None => old.auth.clone(),
    };
    check_compatible(headers.as_ref(), auth.as_ref())?;
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
            rate_front_tat = CASE WHEN $12 THEN NULL ELSE rate_front_tat END,
            max_in_flight = CASE WHEN $14 THEN $15 ELSE max_in_flight END,
            event_types = CASE WHEN $16 THEN $17 ELSE event_types END,
            close_after_successes = CASE WHEN $18 THEN $19 ELSE close_after_successes END,
            headers = $20,
            auth = $21,
            filter = CASE WHEN $22 THEN $23 ELSE filter END,
            retry_policy = CASE WHEN $24 THEN $25 ELSE retry_policy END,
            ordering = coalesce($26, ordering),
            updated_at = now()
         WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(tenant_id)
    .bind(patch.name.is_some())
    .bind(name)
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
    .bind(headers.map(Json))
    .bind(auth.map(Json))
    .bind(patch.filter.is_some())
    .bind(patch.filter.clone().flatten())
    .bind(patch.retry_policy.is_some())
    .bind(retry_policy.map(Json))
    .bind(patch.ordering)
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
    if channel.ordering != old.ordering {
        let fifo = channel.ordering == DeliveryOrdering::Fifo;
        breakwater_queue::set_group_fifo(&mut *conn, channel.id, fifo).await?;
    }
    if patch.rate_limit.is_some() {
        retime_rate_limited(conn, channel.id).await?;
    }
    if channel.url != old.url {
        // The old endpoint's Retry-After hold says nothing about the new one (in any state).
        crate::circuit::drop_retry_after(&mut *conn, channel.id).await?;
        channel.retry_after_until = None;
        if let Some(at) = crate::circuit::probe_new_endpoint(&mut *conn, channel.id).await? {
            channel.next_probe_at = Some(at);
            channel.probe_failures = 0;
        }
    }
    if let Some(details) = audit::changes(
        &audited_settings(&old, None),
        &audited_settings(&channel, Some(&old)),
    ) {
        audit::record(
            &mut *conn,
            &audit::Entry {
                details,
                ..audit::Entry::channel(tenant_id, id, actor, "channel.updated")
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
    let keys: Vec<String> = sqlx::query_scalar!(
        r#"UPDATE deliveries d SET rate_slot_at = NULL
         FROM channels c
         WHERE c.id = $1 AND d.channel_id = $1 AND d.status IN ('pending', 'failed')
           AND d.rate_slot_at + (c.rate_shift_us - coalesce(d.rate_slot_shift, c.rate_shift_us))
                                * interval '1 microsecond' > now()
         RETURNING 'delivery:' || d.id AS "key!""#,
        channel_id,
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(breakwater_queue::make_due(conn, &keys).await?)
}
