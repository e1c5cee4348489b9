//! Messages and their fan-out (table `messages`): one event sent to every channel of a tenant
//! that subscribes to its type, as one delivery per channel.
//!
//! **Subscriptions.** A channel's `event_types` filter lists the event types it receives: exact
//! names and prefix wildcards such as `invoice.*` (see
//! [`crate::channels::canonical_event_types`]); a channel without one receives every type. The
//! match is one array overlap with the entries that would take the message's type
//! ([`crate::channels::matching_patterns`]), so a wildcard costs the fan-out nothing more. A message may name `channels`: it then goes only to those of them that subscribe.
//!
//! **Payload filters.** A subscribed channel with a `filter` (a JSON Logic rule, see
//! [`crate::filters`]) gets the message only when the rule is truthy for `{"event_type",
//! "payload"}`. The filters are read by the same `SELECT … FOR SHARE` that finds the subscribed
//! channels and evaluated in Rust before the delivery insert, which stays one set-based
//! statement: a fan-out to 1000 filtered channels is still one request and one transaction
//! (the document is parsed once; each filter is compiled and evaluated once). A named channel
//! (`channels`) whose filter does not match gets nothing, like one that does not subscribe. The
//! per-channel enqueue (`POST /api/v1/channels/{id}/deliveries`) applies no filter: the tenant
//! addressed that channel itself, as it does past `event_types`. The evaluations of one message
//! have a time budget ([`crate::filters::FANOUT_BUDGET`]); past it the message is refused whole
//! ([`Error::Invalid`] on `payload`) and the caller's transaction is dropped.
//!
//! **One transaction, a bounded number of statements.** [`send`] writes the message, its
//! deliveries and their jobs with set-based statements whatever the number of channels: the
//! message row, one `SELECT … FOR SHARE` of the subscribed channels, one `INSERT … SELECT FROM
//! unnest(…)` of the deliveries and one of their jobs (plus the queue's wake-up). A message to
//! 1000 channels is one request, one transaction and about five statements, not 1000 round trips.
//!
//! **Payload stored once.** The message row holds the payload; its deliveries carry none of their
//! own (`deliveries.payload IS NULL`, `message_id` set) and read the message's when they are
//! sent or shown. A 256 KiB payload to 1000 channels is 256 KiB in the database, not 256 MiB.
//!
//! **`webhook-id`.** Every delivery of a message is sent with the *message id* as its
//! `webhook-id`: the same on every channel and on every attempt of each. That follows the
//! Standard Webhooks spec ("the unique message identifier for the webhook message … the same when
//! the same webhook is being resent") and what Svix does (its `msg_…` id on every endpoint): a
//! receiver that deduplicates on `webhook-id` sees one event once, even when two of its channels
//! subscribe to it. The delivery id (per channel) is in the API's answer and in
//! `GET /api/v1/messages/{id}`. A delivery enqueued to one channel directly keeps its own id as
//! its `webhook-id`.
//!
//! **Everything else is per delivery.** Each delivery has its own job in the tenant's tier queue,
//! in its channel's job group (so the channel's circuit, pause, concurrency limit and rate limit
//! apply to it exactly as to a delivery enqueued directly), its own status, attempts and replay.

use crate::deliveries::{self, delivery_job, RawJson, Status};
use crate::{Error, Result, Tier};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::value::RawValue;
use sqlx::PgConnection;
use uuid::Uuid;

/// Most channel ids a message may name in `channels`.
pub const MAX_CHANNELS: usize = 1000;

/// A message to send.
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// Event type, e.g. `invoice.paid` (see [`deliveries::check_event_type`]); matched against
    /// each channel's filter after trimming.
    pub event_type: String,
    /// The event's data, as the exact JSON text the tenant sent.
    pub payload: Box<RawValue>,
    /// Optional idempotency key, unique per tenant among messages (1–200 characters).
    pub idempotency_key: Option<String>,
    /// Only these channels (1–[`MAX_CHANNELS`] ids of the tenant's), of those that subscribe;
    /// `None` = every subscribed channel.
    pub channels: Option<Vec<Uuid>>,
}

/// One channel's delivery of a message.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, sqlx::FromRow, utoipa::ToSchema)]
pub struct FannedOut {
    /// The channel.
    pub channel_id: Uuid,
    /// The delivery id (for `GET /api/v1/deliveries/{id}`; its `webhook-id` is the message id).
    pub delivery_id: Uuid,
    /// The delivery's status: `pending`, or `paused` behind an open or paused circuit, when new;
    /// its current status on an idempotent replay.
    pub status: crate::deliveries::Status,
}

/// The result of [`send`].
#[derive(Debug, Clone, Serialize)]
pub struct Sent {
    /// The message id (also every delivery's `webhook-id`).
    pub id: Uuid,
    /// False when the idempotency key matched an earlier message, whose id and deliveries these
    /// are (nothing new was enqueued).
    pub created: bool,
    /// When the message was accepted (database time).
    pub created_at: DateTime<Utc>,
    /// One delivery per subscribed channel, ordered by channel id; empty when no channel
    /// subscribes.
    pub deliveries: Vec<FannedOut>,
}

/// Checks a message's fields; errors name the field.
pub fn validate(m: &NewMessage) -> Result<()> {
    deliveries::check_event_type(&m.event_type)?;
    if let Some(k) = &m.idempotency_key {
        deliveries::check_idempotency_key(k)?;
    }
    if let Some(ch) = &m.channels {
        if ch.is_empty() || ch.len() > MAX_CHANNELS {
            return Err(Error::invalid(
                "channels",
                format!(
                    "must hold 1 to {MAX_CHANNELS} channel ids, not {} (omit it for every \
                     subscribed channel)",
                    ch.len()
                ),
            ));
        }
    }
    Ok(())
}

/// Sends a message of `tenant_id` (tier `tier`, whose queue gets the jobs): stores it and fans it
/// out to every subscribed channel, in the caller's transaction, with a bounded number of
/// statements whatever the number of channels (see the module docs).
///
/// Errors: [`Error::Invalid`] for a bad field, or when `channels` names an id that is not one of
/// the tenant's channels (field `channels`; another tenant's id reads exactly like a missing one:
/// the request itself is fine, one of the ids it refers to is not, so it is 422 rather than
/// 404). A repeated idempotency key returns the earlier message (`created: false`) and enqueues
/// nothing, unless it was used for another event type, payload or channel selection:
/// [`Error::Conflict`].
///
/// Concurrency: the subscribed channels' rows are held `FOR SHARE` (in id order) until the caller
/// commits, by the enqueue gate that also holds a per-channel enqueue's one channel
/// ([`crate::channels::enqueue_gate_sql`]): a circuit transition waits for this insert, so a
/// delivery to an open or paused channel starts `paused` (its job held by the channel's parked
/// job group) and a release never misses it. Two
/// requests with one idempotency key are serialised by the unique index on
/// `messages (tenant_id, idempotency_key)`: the second waits for the first, then replays it.
pub async fn send(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    tier: Tier,
    m: &NewMessage,
    max_attempts: i32,
) -> Result<Sent> {
    validate(m)?;
    let event_type = m.event_type.as_str();
    let payload = m.payload.get();
    let wanted: Option<Vec<Uuid>> = m.channels.as_ref().map(|c| {
        let mut c = c.clone();
        c.sort();
        c.dedup();
        c
    });
    let id = Uuid::now_v7();

    // 1. The message. ON CONFLICT on the partial unique index: a repeated key inserts nothing,
    //    even when two requests race (the second waits for the first to commit).
    let inserted: Option<(DateTime<Utc>,)> = sqlx::query_as(
        "INSERT INTO messages (id, tenant_id, event_type, payload, idempotency_key, channel_ids)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING created_at",
    )
    .bind(id)
    .bind(tenant_id)
    .bind(event_type)
    .bind(payload)
    .bind(&m.idempotency_key)
    .bind(&wanted)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((created_at,)) = inserted else {
        let key = m
            .idempotency_key
            .as_deref()
            .expect("only keyed rows conflict");
        return replayed(tx, tenant_id, key, event_type, payload, wanted.as_deref()).await;
    };

    // 2. The channels: the named ones of the tenant (to tell a foreign or missing id), or every
    //    subscribed one; through the enqueue gate (locked FOR SHARE in id order, see above, and
    //    `crate::channels::enqueue_gate_sql`), with their circuit state.
    //    A channel subscribes when its filter holds the type or a wildcard over it. Their
    //    payload filters come with them, under the same lock: a filter changed by a PATCH that
    //    commits after this read applies from the next message on. (As text: it is compiled
    //    from its text, never needed as a tree here.)
    let patterns = crate::channels::matching_patterns(event_type);
    static CHANNELS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        crate::channels::enqueue_gate_sql(
            "c.id, c.circuit_state, (c.event_types IS NULL OR c.event_types && $3) AS subscribed,
             c.filter::text",
            "",
            "c.tenant_id = $1
             AND ($2::uuid[] IS NULL OR c.id = ANY ($2))
             AND ($2::uuid[] IS NOT NULL OR c.event_types IS NULL OR c.event_types && $3)",
        )
    });
    let rows: Vec<(Uuid, crate::circuit::State, bool, Option<String>)> = sqlx::query_as(&CHANNELS)
        .bind(tenant_id)
        .bind(&wanted)
        .bind(&patterns)
        .fetch_all(&mut *tx)
        .await?;
    if let Some(wanted) = &wanted {
        if rows.len() != wanted.len() {
            let found: std::collections::HashSet<Uuid> = rows.iter().map(|r| r.0).collect();
            let missing = wanted
                .iter()
                .find(|c| !found.contains(c))
                .expect("fewer rows than distinct ids");
            return Err(Error::invalid(
                "channels",
                format!("channel {missing} not found"),
            ));
        }
    }
    // The filters of the subscribed channels, evaluated against one parse of the document.
    let filters: Vec<Option<crate::filters::Filter>> = rows
        .iter()
        .map(|(_, _, subscribed, rule)| match rule {
            Some(rule) if *subscribed => Some(crate::filters::Filter::stored(rule)),
            _ => None,
        })
        .collect();
    let matched: Vec<bool> = if filters.iter().any(Option::is_some) {
        let filters: Vec<Option<&crate::filters::Filter>> =
            filters.iter().map(Option::as_ref).collect();
        crate::filters::Document::new(Some(event_type), payload)
            .evaluate_within(&filters, Some(crate::filters::FANOUT_BUDGET))
            .ok_or_else(|| {
                Error::invalid(
                    "payload",
                    format!(
                        "the channels' filters took longer than {} ms to evaluate on this \
                         payload; nothing was sent (try a smaller payload or simpler filters)",
                        crate::filters::FANOUT_BUDGET.as_millis()
                    ),
                )
            })?
            .iter()
            .map(crate::filters::Outcome::matches)
            .collect()
    } else {
        vec![true; rows.len()]
    };
    let targets: Vec<(Uuid, Status)> = rows
        .iter()
        .zip(matched)
        .filter(|((_, _, subscribed, _), matched)| *subscribed && *matched)
        .map(|((channel, state, _, _), _)| {
            let status = if state.parks_new_deliveries() {
                Status::Paused
            } else {
                Status::Pending
            };
            (*channel, status)
        })
        .collect();
    if targets.is_empty() {
        return Ok(Sent {
            id,
            created: true,
            created_at,
            deliveries: Vec::new(),
        });
    }

    // 3. The deliveries, one statement. No payload of their own: they read the message's.
    let ids: Vec<Uuid> = targets.iter().map(|_| Uuid::now_v7()).collect();
    let channel_ids: Vec<Uuid> = targets.iter().map(|t| t.0).collect();
    let statuses: Vec<&str> = targets.iter().map(|t| t.1.as_str()).collect();
    //    Each copies its retry policy from the tenant's default and its channel's own (the
    //    channel's fields win, [`crate::retry_policy`]): a change applies to later messages.
    let own_attempts: std::collections::HashMap<Uuid, Option<i32>> = sqlx::query!(
        r#"INSERT INTO deliveries (id, tenant_id, channel_id, message_id, event_type, payload, status,
                                 retry_policy)
         SELECT t.id, $2, t.channel_id, $3, $4, NULL, t.status,
                nullif(coalesce(tn.retry_policy, '{}') || coalesce(c.retry_policy, '{}'), '{}'::jsonb)
         FROM unnest($1::uuid[], $5::uuid[], $6::text[]) AS t(id, channel_id, status)
         LEFT JOIN channels c ON c.id = t.channel_id
         LEFT JOIN tenants tn ON tn.id = $2
         RETURNING id, (retry_policy->>'max_attempts')::int AS max_attempts"#,
        &ids,
        tenant_id,
        id,
        event_type,
        &channel_ids,
        &statuses as &[&str],
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|r| (r.id, r.max_attempts))
    .collect();

    // 4. Their jobs, one statement (plus the wake-up): tier queue, channel group, unique key;
    //    the policy's attempts, else `max_attempts`.
    let jobs: Vec<_> = ids
        .iter()
        .zip(&channel_ids)
        .map(|(d, c)| {
            let attempts = own_attempts.get(d).copied().flatten();
            delivery_job(tier, *c, *d, attempts.unwrap_or(max_attempts))
        })
        .collect();
    breakwater_queue::enqueue_many(&mut *tx, &jobs).await?;

    let deliveries = ids
        .into_iter()
        .zip(targets)
        .map(|(delivery_id, (channel_id, status))| FannedOut {
            channel_id,
            delivery_id,
            status,
        })
        .collect();
    Ok(Sent {
        id,
        created: true,
        created_at,
        deliveries,
    })
}

/// The earlier message under `key`, if the request is the same one; else a conflict.
async fn replayed(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    key: &str,
    event_type: &str,
    payload: &str,
    wanted: Option<&[Uuid]>,
) -> Result<Sent> {
    let (id, existing_type, existing_payload, existing_channels, created_at): (
        Uuid,
        String,
        String,
        Option<Vec<Uuid>>,
        DateTime<Utc>,
    ) = sqlx::query_as(
        "SELECT id, event_type, payload, channel_ids, created_at FROM messages
         WHERE tenant_id = $1 AND idempotency_key = $2",
    )
    .bind(tenant_id)
    .bind(key)
    .fetch_one(&mut *tx)
    .await?;
    // A retried request must be the same request: a reused key with another event would
    // silently drop that event.
    if existing_type != event_type
        || existing_payload != payload
        || existing_channels.as_deref() != wanted
    {
        return Err(Error::Conflict(format!(
            "idempotency key {key:?} was already used for a message with a different event \
             type, payload or channels"
        )));
    }
    Ok(Sent {
        id,
        created: false,
        created_at,
        deliveries: fanned_out(&mut *tx, id).await?,
    })
}

async fn fanned_out(exec: impl sqlx::PgExecutor<'_>, message_id: Uuid) -> Result<Vec<FannedOut>> {
    Ok(sqlx::query_as!(
        FannedOut,
        r#"SELECT channel_id, id AS delivery_id, status AS "status: Status" FROM deliveries
         WHERE message_id = $1 ORDER BY channel_id"#,
        message_id,
    )
    .fetch_all(exec)
    .await?)
}

/// One channel's delivery of a message, as `GET /api/v1/messages/{id}` shows it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
#[schema(as = MessageDelivery)]
pub struct DeliveryStatus {
    /// The channel.
    pub channel_id: Uuid,
    /// The delivery id.
    pub delivery_id: Uuid,
    /// `pending` | `delivering` | `paused` | `delivered` | `failed` (retry scheduled) | `dead` |
    /// `cancelled`.
    pub status: crate::deliveries::Status,
    /// HTTP attempts made.
    pub attempts: i32,
    /// Last error, if any.
    pub last_error: Option<String>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// Delivered at.
    pub delivered_at: Option<DateTime<Utc>>,
}

/// A message with each channel's delivery.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct Message {
    /// Message id (= the `webhook-id` of all its deliveries).
    pub id: Uuid,
    /// Event type.
    pub event_type: String,
    /// Event data, as sent.
    #[sqlx(try_from = "String")]
    #[schema(value_type = serde_json::Value)]
    pub payload: RawJson,
    /// Idempotency key, if one was given.
    pub idempotency_key: Option<String>,
    /// The channels the sender named, if any (sorted, without repeats).
    #[sqlx(rename = "channel_ids")]
    pub channels: Option<Vec<Uuid>>,
    /// Accepted at.
    pub created_at: DateTime<Utc>,
    /// One per channel it was fanned out to, ordered by channel id.
    #[sqlx(skip)]
    pub deliveries: Vec<DeliveryStatus>,
}

/// Loads `tenant_id`'s message `id` with each channel's delivery ([`Error::NotFound`] for another
/// tenant's, exactly like a missing one). Two statements, whatever the number of channels.
pub async fn get(conn: &mut PgConnection, tenant_id: Uuid, id: Uuid) -> Result<Message> {
    let mut message: Message = sqlx::query_as(
        "SELECT id, event_type, payload, idempotency_key, channel_ids, created_at
         FROM messages WHERE id = $1 AND tenant_id = $2",
    )
    .bind(id)
    .bind(tenant_id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(Error::NotFound("message"))?;
    message.deliveries = sqlx::query_as!(
        DeliveryStatus,
        r#"SELECT channel_id, id AS delivery_id, status AS "status: Status", attempts, last_error,
                  updated_at, delivered_at
           FROM deliveries WHERE message_id = $1 ORDER BY channel_id"#,
        id,
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(channels: Option<Vec<Uuid>>) -> NewMessage {
        NewMessage {
            event_type: "invoice.paid".into(),
            payload: RawValue::from_string("{}".into()).unwrap(),
            idempotency_key: None,
            channels,
        }
    }

    #[test]
    fn channels_must_be_absent_or_hold_1_to_1000_ids() {
        assert!(validate(&msg(None)).is_ok());
        assert!(validate(&msg(Some(vec![Uuid::nil()]))).is_ok());
        for bad in [vec![], vec![Uuid::nil(); MAX_CHANNELS + 1]] {
            match validate(&msg(Some(bad))) {
                Err(Error::Invalid { field, .. }) => assert_eq!(field, "channels"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn filters_are_sorted_deduplicated_and_checked() {
        use crate::channels::canonical_event_types;
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(canonical_event_types(None).unwrap(), None);
        assert_eq!(
            canonical_event_types(Some(&v(&["b.x", "a:y/z-1_2", "b.x"]))).unwrap(),
            Some(v(&["a:y/z-1_2", "b.x"]))
        );
        let long = "a".repeat(101);
        let too_many: Vec<String> = (0..101).map(|i| format!("e{i}")).collect();
        for bad in [
            v(&[]),
            v(&[""]),
            v(&["has space"]),
            v(&["*.wild"]),
            v(&["wild.*.x"]),
            v(&["é"]),
            v(&[&long]),
            too_many,
        ] {
            match canonical_event_types(Some(&bad)) {
                Err(Error::Invalid { field, .. }) => assert_eq!(field, "event_types"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert!(canonical_event_types(Some(&v(&[&"a".repeat(100)]))).is_ok());
    }

    #[test]
    fn event_type_and_key_are_checked_like_a_delivery() {
        let mut m = msg(None);
        m.event_type = "  ".into();
        assert!(matches!(
            validate(&m),
            Err(Error::Invalid {
                field: "event_type",
                ..
            })
        ));
        let mut m = msg(None);
        m.idempotency_key = Some(String::new());
        assert!(matches!(
            validate(&m),
            Err(Error::Invalid {
                field: "idempotency_key",
                ..
            })
        ));
    }
}
