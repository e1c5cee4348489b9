//! The gate: what the worker reads of a channel (and its host) before it touches a delivery,
//! the pure admission decision, and the probe-role claim of [`admit`].

use super::{schedule_probe, CircuitConfig, State};
use crate::ratelimit::RateLimit;
use crate::retry_policy::RetryPolicy;
use crate::Result;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use std::time::Duration;
use uuid::Uuid;

/// What the worker reads of a channel before it touches a delivery (no payload, no secret).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GateRow {
    /// Circuit state column.
    pub circuit_state: State,
    /// Generation.
    pub circuit_generation: i64,
    /// The delivery chosen as the half-open probe, if any.
    pub probe_delivery_id: Option<Uuid>,
    /// No request before this (Retry-After).
    pub retry_after_until: Option<DateTime<Utc>>,
    /// Consecutive failures counted so far.
    pub consecutive_failures: i32,
    /// The channel's rate limit text, if any.
    pub rate_limit: Option<String>,
    /// Database time of the read.
    pub now: DateTime<Utc>,
    /// The channel's host circuit state (joined in the same read; `None`: no host circuit).
    #[sqlx(default)]
    pub host_state: Option<crate::hosts::State>,
    /// Its generation.
    #[sqlx(default)]
    pub host_generation: Option<i64>,
    /// The delivery chosen as the host's half-open probe, if any.
    #[sqlx(default)]
    pub host_probe_delivery_id: Option<Uuid>,
}

/// What the worker should do with a delivery job it picked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Send it. `probe_generation` is set when this delivery is the half-open probe.
    Send {
        /// The generation the probe runs under, if this is the probe.
        probe_generation: Option<i64>,
        /// Consecutive failures before this attempt (a success resets them only if > 0).
        consecutive_failures: i32,
        /// The channel's rate limit (none for the probe: one request per cooldown).
        rate: Option<RateLimit>,
        /// The host circuit's generation when this delivery is the host probe
        /// ([`crate::hosts`]).
        host_probe: Option<i64>,
    },
    /// Park it again (open, paused, or half-open and not the probe); no request, no attempt.
    Park,
    /// The channel asked for a pause (Retry-After): snooze this long (database clock); no
    /// request, no attempt.
    Wait(Duration),
    /// A probe role is free: try to become the probe of the channel's half-open circuit, of its
    /// host's, or of both (a channel whose host is half-open too: one request tests both), the
    /// roles won together or not at all. Won: sent as [`Admission::Send`] with its roles, no
    /// rate limit; lost: parked.
    Claim {
        /// The channel circuit's probe role.
        channel: ProbeRole,
        /// The host circuit's probe role ([`crate::hosts`]).
        host: ProbeRole,
    },
    /// The channel no longer exists, or was deleted.
    Gone,
}

/// A delivery's part in one circuit's half-open test (the channel's or the host's), with the
/// generation the test runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeRole {
    /// Not the probe (the circuit is closed, or another delivery holds the role).
    None,
    /// This delivery already holds the role.
    Holds(i64),
    /// The role is free: this delivery claims it.
    Claims(i64),
}

impl ProbeRole {
    /// The generation of a role held or claimed.
    pub fn generation(self) -> Option<i64> {
        match self {
            ProbeRole::None => None,
            ProbeRole::Holds(g) | ProbeRole::Claims(g) => Some(g),
        }
    }
}

/// The pure decision for delivery `delivery_id` given its channel's gate row: the channel's
/// circuit, then its host's ([`crate::hosts::decide`]); a delivery goes only if both let it.
pub(crate) fn decide(gate: Option<&GateRow>, delivery_id: Uuid) -> Admission {
    use crate::hosts::HostGate;
    let Some(g) = gate else {
        return Admission::Gone;
    };
    let host = crate::hosts::decide(
        g.host_state,
        g.host_generation,
        g.host_probe_delivery_id,
        delivery_id,
    );
    match (decide_channel(g, delivery_id), host) {
        (a, HostGate::Pass) => a,
        (Admission::Send { .. } | Admission::Claim { .. }, HostGate::Park) => Admission::Park,
        (
            Admission::Send {
                probe_generation,
                consecutive_failures,
                ..
            },
            HostGate::Probe(h),
        ) => {
            // The host probe: one request per host cooldown, no rate limit.
            Admission::Send {
                probe_generation,
                consecutive_failures,
                rate: None,
                host_probe: Some(h),
            }
        }
        (
            Admission::Send {
                probe_generation, ..
            },
            HostGate::Claim(h),
        ) => Admission::Claim {
            channel: probe_generation.map_or(ProbeRole::None, ProbeRole::Holds),
            host: ProbeRole::Claims(h),
        },
        // The channel's role is free and its host is half-open too: with no closed channel on
        // the host waiting, nothing else would ever test the host (its probe is chosen among
        // closed channels), so this delivery tests both.
        (Admission::Claim { channel, .. }, HostGate::Probe(h)) => Admission::Claim {
            channel,
            host: ProbeRole::Holds(h),
        },
        (Admission::Claim { channel, .. }, HostGate::Claim(h)) => Admission::Claim {
            channel,
            host: ProbeRole::Claims(h),
        },
        (other, _) => other,
    }
}

fn decide_channel(g: &GateRow, delivery_id: Uuid) -> Admission {
    match g.circuit_state {
        State::Closed => match g.retry_after_until {
            Some(until) if until > g.now => {
                Admission::Wait((until - g.now).to_std().unwrap_or(Duration::ZERO))
            }
            _ => Admission::Send {
                probe_generation: None,
                consecutive_failures: g.consecutive_failures,
                rate: g
                    .rate_limit
                    .as_deref()
                    .and_then(|r| RateLimit::parse(r).ok()),
                host_probe: None,
            },
        },
        State::HalfOpen => match g.probe_delivery_id {
            Some(p) if p == delivery_id => Admission::Send {
                probe_generation: Some(g.circuit_generation),
                consecutive_failures: g.consecutive_failures,
                rate: None,
                host_probe: None,
            },
            None => Admission::Claim {
                channel: ProbeRole::Claims(g.circuit_generation),
                host: ProbeRole::None,
            },
            Some(_) => Admission::Park,
        },
        State::Open | State::Paused => Admission::Park,
    }
}

/// Reads the gate under a `FOR SHARE` lock, in the caller's transaction: a transition of this
/// channel (which updates the row) waits for the caller to commit, and the caller, if it came
/// second, sees the transition's committed state. Parking on pickup uses it so that a job cannot
/// park itself just after a closing transition released the backlog. `None` for a missing or
/// deleted channel (a deletion that commits while the caller waits for the lock included).
pub async fn lock_gate(tx: &mut PgConnection, channel_id: Uuid) -> Result<Option<GateRow>> {
    Ok(sqlx::query_as(
        "SELECT circuit_state, circuit_generation, probe_delivery_id, retry_after_until,
                consecutive_failures, NULL::text AS rate_limit,
                now() AS now
         FROM channels WHERE id = $1 AND deleted_at IS NULL FOR SHARE",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?)
}

/// What [`admit_and_begin`] found.
#[derive(Debug, Clone)]
pub enum Begun {
    /// The channel and its host are plainly closed (no `Retry-After` hold, no rate limit) and
    /// the delivery is now `delivering`: send it ([`Admission::Send`] with no probe role and no
    /// rate limit). `failures_before`: the channel's consecutive failures read with it.
    Send {
        /// The delivery, loaded as [`crate::deliveries::begin_attempt`] loads it.
        dispatch: Box<crate::deliveries::Dispatch>,
        /// The channel's consecutive failures before this attempt.
        failures_before: i32,
    },
    /// The channel is plainly closed but the delivery is gone or already final (delivered,
    /// dead or cancelled): nothing to send, its job is done.
    Final,
    /// Anything else (a circuit not closed, a hold, a rate limit, a host not closed, a channel
    /// gone): nothing was written; decide with [`admit`] and begin with
    /// [`crate::deliveries::begin_attempt`].
    Other,
}

/// The common case of [`admit`] and [`crate::deliveries::begin_attempt`] in one statement: when
/// delivery `delivery_id`'s channel `channel_id` is closed with no `Retry-After` hold and no rate
/// limit, and its host circuit (if any) is closed, the delivery is marked `delivering` and loaded
/// ([`Begun::Send`]); [`admit`] would have said [`Admission::Send`] with no probe role and no
/// rate limit from the same row (unit test `a_plainly_closed_gate_is_a_plain_send`). Any other
/// gate writes nothing and answers [`Begun::Other`]: the caller then takes the full path, which
/// reads the gate again. One round trip instead of two for every delivery of a healthy channel.
///
/// [`admit_and_begin_many`] for one delivery; see it for the commit.
#[cfg(feature = "testing")]
pub async fn admit_and_begin(
    conn: &mut PgConnection,
    channel_id: Uuid,
    delivery_id: Uuid,
) -> Result<Begun> {
    let mut begun = admit_and_begin_many(conn, &[(channel_id, delivery_id)]).await?;
    Ok(begun.pop().unwrap_or(Begun::Other))
}

/// [`admit_and_begin`] for many deliveries in one statement: `pairs` are `(channel_id,
/// delivery_id)`, and the answer has one [`Begun`] per pair, in the same order, each decided
/// and written as [`admit_and_begin`] would alone (one delivery's gate never changes another's
/// answer). A worker begins the deliveries its pools claimed together this way (the worker's
/// begin batcher), so that a burst of claims costs one round trip and one commit, not one each.
/// A pair twice gets the same answer twice.
///
/// **Its commit does not wait for the disk** (`synchronous_commit = off` for this statement's
/// own transaction: run it outside a transaction). What it writes is the deliveries'
/// `delivering` mark and `updated_at`, which no guarantee rests on: the job's claim (made by
/// the fetch, committed durably) is what fences and rescues the attempt, and the attempt's
/// record sets the delivery's status again. If the database crashes before the mark reaches the
/// disk, the delivery reads `pending` until its job is rescued or recorded, as a delivery
/// waiting for its request does. Measured: without it, every delivery waited here for a WAL
/// flush of its own (BENCHMARKS.md, "Batched results").
pub async fn admit_and_begin_many(
    conn: &mut PgConnection,
    pairs: &[(Uuid, Uuid)],
) -> Result<Vec<Begun>> {
    let (channels, deliveries): (Vec<Uuid>, Vec<Uuid>) = pairs.iter().copied().unzip();
    let rows = sqlx::query!(
        r#"
        WITH no_flush AS (
            -- This statement's commit does not wait for its WAL to reach the disk (see below).
            SELECT set_config('synchronous_commit', 'off', true) AS set
        ), input AS (
            SELECT DISTINCT i.channel_id, i.delivery_id
            FROM unnest($1::uuid[], $2::uuid[]) AS i(channel_id, delivery_id)
        ), gate AS (
            SELECT i.channel_id, i.delivery_id, c.consecutive_failures,
                   (c.circuit_state = 'closed'
                    AND (c.retry_after_until IS NULL OR c.retry_after_until <= now())
                    AND c.rate_limit IS NULL
                    AND coalesce(h.state, 'closed') = 'closed') AS plain
            FROM input i
            JOIN channels c ON c.id = i.channel_id AND c.deleted_at IS NULL
            LEFT JOIN host_circuits h ON h.host_key = c.host_key
        ), begun AS (
            UPDATE deliveries d SET status = 'delivering', rate_slot_at = NULL, updated_at = now()
            FROM gate g JOIN channels c ON c.id = g.channel_id
            WHERE d.id = g.delivery_id AND d.channel_id = g.channel_id AND g.plain
              AND d.status NOT IN ('delivered', 'dead', 'cancelled')
              AND (SELECT set FROM no_flush) IS NOT NULL
            RETURNING d.id, coalesce(d.message_id, d.id) AS webhook_id, d.tenant_id, d.channel_id,
                      d.event_type,
                      coalesce(d.payload, (SELECT m.payload FROM messages m WHERE m.id = d.message_id))
                          AS payload,
                      d.created_at, d.attempts, c.url, c.host_key, c.signing_secret,
                      CASE WHEN c.previous_secret_expires_at > now() THEN c.previous_signing_secret END
                          AS previous_signing_secret,
                      c.rejected_since IS NOT NULL AS rejected,
                      c.headers, c.auth, d.retry_policy,
                      now() AS started_at
        )
        SELECT g.channel_id AS "channel_id!", g.delivery_id AS "delivery_id!",
               g.plain AS "plain!", g.consecutive_failures AS "consecutive_failures!",
               b.id AS "id?", b.webhook_id AS "webhook_id?", b.tenant_id AS "tenant_id?",
               b.event_type AS "event_type?", b.payload AS "payload?",
               b.created_at AS "created_at?", b.attempts AS "attempts?", b.url AS "url?",
               b.host_key AS "host_key?", b.signing_secret AS "signing_secret?",
               b.previous_signing_secret AS "previous_signing_secret?",
               b.rejected AS "rejected?", b.started_at AS "started_at?",
               b.headers AS "headers?: sqlx::types::Json<crate::channels::Headers>",
               b.auth AS "auth?: sqlx::types::Json<crate::channels::Auth>",
               b.retry_policy AS "retry_policy?: sqlx::types::Json<RetryPolicy>"
        FROM gate g LEFT JOIN begun b ON b.id = g.delivery_id
        "#,
        &channels,
        &deliveries,
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut answers: std::collections::HashMap<(Uuid, Uuid), Begun> =
        std::collections::HashMap::with_capacity(rows.len());
    for r in rows {
        let key = (r.channel_id, r.delivery_id);
        let begun = if !r.plain {
            Begun::Other
        } else if let Some(id) = r.id {
            // The delivery's columns are NOT NULL (its payload, or its message's): all there
            // when it was begun, all absent when it was not (gone or final).
            let Some(payload) = r.payload else {
                return Err(sqlx::Error::Decode(
                    format!("delivery {id} has no payload (nor its message)").into(),
                )
                .into());
            };
            Begun::Send {
                dispatch: Box::new(crate::deliveries::Dispatch {
                    id,
                    webhook_id: r.webhook_id.unwrap_or(id),
                    tenant_id: r.tenant_id.unwrap_or_default(),
                    channel_id: r.channel_id,
                    event_type: r.event_type.unwrap_or_default(),
                    payload,
                    created_at: r.created_at.unwrap_or_default(),
                    attempts: r.attempts.unwrap_or_default(),
                    url: r.url.unwrap_or_default(),
                    host_key: r.host_key,
                    signing_secret: r.signing_secret.unwrap_or_default(),
                    previous_signing_secret: r.previous_signing_secret,
                    rejected: r.rejected.unwrap_or_default(),
                    headers: r.headers,
                    auth: r.auth,
                    retry_policy: r.retry_policy,
                    started_at: r.started_at.unwrap_or_default(),
                }),
                failures_before: r.consecutive_failures,
            }
        } else {
            Begun::Final
        };
        answers.insert(key, begun);
    }
    // A channel gone (or deleted) has no gate row: the full path decides.
    Ok(pairs
        .iter()
        .map(|k| answers.get(k).cloned().unwrap_or(Begun::Other))
        .collect())
}

/// Reads the gate (the channel row joined with its host circuit row: one read) and decides;
/// when half-open without a probe (the channel's, or the host's), claims the probe role for
/// this delivery with one conditional UPDATE (`probe_delivery_id IS NULL`), so only one delivery
/// becomes the probe. A channel probe's claim starts its lease (`cfg.probe_lease_ms`, database
/// clock) and schedules the probe watcher for its end, in one transaction: a claimed probe whose
/// node dies is taken over (module doc, "The probe role with nothing waiting"). A delivery that
/// claims both its channel's role and its host's wins both or neither. Never returns
/// [`Admission::Claim`].
pub async fn admit(
    conn: &mut PgConnection,
    channel_id: Uuid,
    delivery_id: Uuid,
    cfg: &CircuitConfig,
) -> Result<Admission> {
    let gate: Option<GateRow> = sqlx::query_as(
        "SELECT c.circuit_state, c.circuit_generation, c.probe_delivery_id, c.retry_after_until,
                c.consecutive_failures, c.rate_limit, now() AS now,
                h.state AS host_state, h.generation AS host_generation,
                h.probe_delivery_id AS host_probe_delivery_id
         FROM channels c LEFT JOIN host_circuits h ON h.host_key = c.host_key
         WHERE c.id = $1 AND c.deleted_at IS NULL",
    )
    .bind(channel_id)
    .bind(delivery_id)
    .fetch_optional(&mut *conn)
    .await?;
    match decide(gate.as_ref(), delivery_id) {
        Admission::Claim { channel, host } => {
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let mut won = true;
            let mut deadline = None;
            if let ProbeRole::Claims(generation) = channel {
                deadline = sqlx::query_scalar(
                    "UPDATE channels
                     SET probe_delivery_id = $2,
                         probe_deadline = now() + ($4::float8 * interval '1 millisecond')
                     WHERE id = $1 AND circuit_state = 'half_open' AND circuit_generation = $3
                       AND probe_delivery_id IS NULL AND deleted_at IS NULL
                     RETURNING probe_deadline",
                )
                .bind(channel_id)
                .bind(delivery_id)
                .bind(generation)
                .bind(cfg.probe_lease_ms)
                .fetch_optional(&mut *tx)
                .await?;
                won = deadline.is_some();
            }
            if let (true, ProbeRole::Claims(generation)) = (won, host) {
                won =
                    crate::hosts::claim_probe(&mut tx, channel_id, delivery_id, generation).await?;
            }
            if !won {
                // Both roles or neither: a channel role won here is given back with the rest.
                tx.rollback().await?;
                return Ok(Admission::Park);
            }
            if deadline.is_some() {
                schedule_probe(&mut tx, channel_id, deadline).await?;
            }
            tx.commit().await?;
            Ok(Admission::Send {
                probe_generation: channel.generation(),
                consecutive_failures: gate.map_or(0, |g| g.consecutive_failures),
                rate: None,
                host_probe: host.generation(),
            })
        }
        Admission::Wait(wait) => {
            // A delivery that is (or may become) its host's probe but will not be sent before
            // its channel's Retry-After hold ends hands the role on at once: else the whole host
            // would wait for the hold, up to `retry_after_cap_ms`.
            if let Some(g) = &gate {
                if let crate::hosts::HostGate::Probe(generation)
                | crate::hosts::HostGate::Claim(generation) = crate::hosts::decide(
                    g.host_state,
                    g.host_generation,
                    g.host_probe_delivery_id,
                    delivery_id,
                ) {
                    crate::hosts::hand_on_probe(conn, channel_id, delivery_id, generation).await?;
                }
            }
            Ok(Admission::Wait(wait))
        }
        other => Ok(other),
    }
}

/// The rest of channel `channel_id`'s `Retry-After` hold, for a claimed job of it that met the
/// hold in its admission ([`Admission::Wait`]): read again under the channel row's share lock,
/// `None` when the hold ended or was dropped meanwhile (the job is then due now). The caller
/// snoozes the job for it (plus jitter) **in the same transaction `tx`**, before committing, so
/// the lock spans the snooze: a job that read the hold just before [`drop_retry_after`] (which
/// holds the row while it moves the held jobs) is not left waiting out a hold that is gone —
/// whichever commits first, the other sees it. No attempt is used. The queue call stays the
/// worker's (its one executor of job outcomes); only the read under the lock is the circuit's.
pub async fn hold_left(tx: &mut PgConnection, channel_id: Uuid) -> Result<Option<Duration>> {
    let left_ms: Option<f64> = sqlx::query_scalar(
        "SELECT greatest(extract(epoch FROM retry_after_until - now()) * 1000, 0)::float8
         FROM channels WHERE id = $1 FOR SHARE",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?
    .flatten();
    Ok(match left_ms {
        Some(ms) if ms > 0.0 => Some(Duration::from_millis(ms.ceil() as u64)),
        _ => None,
    })
}

/// The one park-or-not decision of an enqueue to channel `channel_id`: locks its gate row
/// ([`lock_gate`], `FOR SHARE`, held until the caller commits, so a transition waits for the
/// insert and a release never misses the new deliveries) and says whether deliveries enqueued
/// in this transaction start parked (`paused`, [`State::parks_new_deliveries`]: open or paused).
/// `None` for a missing or deleted channel (a deletion that commits while the caller waits for
/// the lock included). A fan-out locks its channels in one statement and applies the same
/// [`State::parks_new_deliveries`] ([`crate::messages`]); a replay calls this too
/// ([`crate::deliveries::replay`]).
pub async fn enqueue_parked(tx: &mut PgConnection, channel_id: Uuid) -> Result<Option<bool>> {
    Ok(lock_gate(tx, channel_id)
        .await?
        .map(|g| g.circuit_state.parks_new_deliveries()))
}
