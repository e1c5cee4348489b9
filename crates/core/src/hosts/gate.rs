//! The host part of the gate: the pure decision, the probe-role claim, and the assignment of
//! a channel to its host's gate.

use super::{set_probe, State};
use crate::Result;
use sqlx::PgConnection;
use uuid::Uuid;
/// What the host circuit says about one delivery (part of the gate read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostGate {
    /// Closed, or the channel has no host key: the host does not hold it.
    Pass,
    /// This delivery is the host probe of this generation.
    Probe(i64),
    /// Half-open with no probe chosen yet: this delivery may claim the role.
    Claim(i64),
    /// Open, or half-open and another delivery is the probe: park.
    Park,
}

/// The pure decision of the host part of the gate: `state`, `generation` and `probe` are the
/// host row's columns as joined into the gate read (`None` state: no host circuit).
pub(crate) fn decide(
    state: Option<State>,
    generation: Option<i64>,
    probe: Option<Uuid>,
    delivery_id: Uuid,
) -> HostGate {
    let generation = generation.unwrap_or(0);
    match state {
        None | Some(State::Closed) => HostGate::Pass,
        Some(State::HalfOpen) => match probe {
            Some(p) if p == delivery_id => HostGate::Probe(generation),
            None => HostGate::Claim(generation),
            Some(_) => HostGate::Park,
        },
        Some(State::Open) => HostGate::Park,
    }
}

/// Claims the host probe role of `generation` for `delivery_id` of `channel_id` (one
/// conditional UPDATE on `probe_delivery_id IS NULL`, so exactly one delivery gets it), its
/// channel recorded as the last tried (the turn of `wake_host_probe`). Returns whether this
/// delivery won.
pub(crate) async fn claim_probe(
    conn: &mut PgConnection,
    channel_id: Uuid,
    delivery_id: Uuid,
    generation: i64,
) -> Result<bool> {
    Ok(sqlx::query(concat!(
        "UPDATE host_circuits h SET probe_delivery_id = $2, probe_channel_id = $1, ",
        probe_turn_sql!("$1"),
        ", updated_at = now()
         FROM channels c
         WHERE c.id = $1 AND h.host_key = c.host_key
           AND h.state = 'half_open' AND h.generation = $3 AND h.probe_delivery_id IS NULL",
    ))
    .bind(channel_id)
    .bind(delivery_id)
    .bind(generation)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1)
}

/// Hands the host probe role of `generation` on from delivery `delivery_id` of channel
/// `channel_id`, which the admission will not send now (its channel is under a `Retry-After`
/// hold): if the delivery holds the role, or the role is still free (an unbound probe slot that
/// this delivery's fetch spent), the role is cleared and another waiting delivery of the host is
/// woken as the probe ([`set_probe`], which skips held channels; unbound again if none waits).
/// Otherwise nothing. In its own transaction, under the host row's lock (no group row: the
/// watcher's lock order). Returns whether the role was handed on.
pub(crate) async fn hand_on_probe(
    conn: &mut PgConnection,
    channel_id: Uuid,
    delivery_id: Uuid,
    generation: i64,
) -> Result<bool> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let key: Option<String> = sqlx::query_scalar(
        "SELECT h.host_key FROM channels c JOIN host_circuits h ON h.host_key = c.host_key
         WHERE c.id = $1",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(key) = key else {
        return Ok(false);
    };
    let handed = hand_on(
        &mut tx,
        &key,
        delivery_id,
        generation,
        "its channel is under a Retry-After hold",
    )
    .await?;
    tx.commit().await?;
    Ok(handed)
}

/// Hands host `key`'s probe role of `generation` on from delivery `delivery_id`, whose answer
/// came from that host after its channel moved to another (a `PATCH` of the URL while the probe
/// was in flight): the answer no longer speaks for a channel of the host, so another waiting
/// delivery of the host is woken as the probe at once, instead of the host waiting for the
/// probe's lease (`hosts.probe_lease_ms`, 60 s by default) and its watcher. In the caller's
/// transaction (the attempt's, which holds the channel row): it takes channel `channel_id`'s
/// job group row first, then the host row and its gate row (the module's lock order: the
/// attempt's transaction goes on to finish the job, and the queue's slot-release trigger takes
/// the group row then; taken after the gate row, it could deadlock with another of the
/// channel's jobs finishing under the same gate). Returns whether the role was handed on.
pub(crate) async fn hand_on_stale_probe(
    tx: &mut PgConnection,
    channel_id: Uuid,
    key: &str,
    delivery_id: Uuid,
    generation: i64,
) -> Result<bool> {
    hand_on_after_attempt(
        tx,
        channel_id,
        key,
        delivery_id,
        generation,
        "its answer came after its channel moved to another host",
    )
    .await
}

/// Hands host `key`'s probe role of `generation` on from delivery `delivery_id`, whose attempt
/// was inconclusive: its node stood still during it ([`crate::outcome::stall_excuses`]), so it
/// says nothing about the host. Another waiting delivery of the host is woken as the probe at
/// once (not after the probe's lease). In the caller's transaction, which holds the channel row;
/// the locks as in [`hand_on_stale_probe`] (job group row, host row, gate row). Returns whether
/// the role was handed on.
pub(crate) async fn hand_on_inconclusive_probe(
    tx: &mut PgConnection,
    channel_id: Uuid,
    key: &str,
    delivery_id: Uuid,
    generation: i64,
) -> Result<bool> {
    hand_on_after_attempt(
        tx,
        channel_id,
        key,
        delivery_id,
        generation,
        "its attempt was inconclusive (its node stood still during it)",
    )
    .await
}

/// [`hand_on`] from inside an attempt's transaction: channel `channel_id`'s job group row first
/// (the lock order explained on [`hand_on_stale_probe`]), then the host and gate rows.
async fn hand_on_after_attempt(
    tx: &mut PgConnection,
    channel_id: Uuid,
    key: &str,
    delivery_id: Uuid,
    generation: i64,
    why: &str,
) -> Result<bool> {
    breakwater_queue::lock_group(&mut *tx, channel_id).await?;
    hand_on(tx, key, delivery_id, generation, why).await
}

/// The role hand-on of [`hand_on_probe`] and [`hand_on_stale_probe`]: one conditional UPDATE
/// of host `key`'s row (half-open, `generation`, the role free or held by `delivery_id`), then
/// [`set_probe`].
async fn hand_on(
    tx: &mut PgConnection,
    key: &str,
    delivery_id: Uuid,
    generation: i64,
    why: &str,
) -> Result<bool> {
    let cleared = sqlx::query(
        "UPDATE host_circuits SET probe_delivery_id = NULL, probe_channel_id = NULL,
             updated_at = now()
         WHERE host_key = $1 AND state = 'half_open' AND generation = $3
           AND (probe_delivery_id IS NULL OR probe_delivery_id = $2)",
    )
    .bind(key)
    .bind(delivery_id)
    .bind(generation)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !cleared {
        return Ok(false);
    }
    let woken = set_probe(tx, key, generation).await?;
    tracing::info!(host_key = %key, generation, from = %delivery_id, to = ?woken.map(|(d, _)| d),
        "host probe handed on: {why}");
    Ok(true)
}

/// Sets channel `channel_id`'s host key (computed by [`host_key`] when its URL was set), creates
/// the host's circuit row if it has none, and moves the channel's job group into the host's gate
/// ([`breakwater_queue::set_group_gate`]), so from the commit on the channel's jobs follow the
/// host's parked flag, probe slot and cap. In the caller's transaction, which holds the channel
/// row. A host key that does not change changes nothing.
pub(crate) async fn assign(conn: &mut PgConnection, channel_id: Uuid, key: &str) -> Result<()> {
    let changed = sqlx::query(
        "UPDATE channels SET host_key = $2 WHERE id = $1 AND host_key IS DISTINCT FROM $2",
    )
    .bind(channel_id)
    .bind(key)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    if !changed {
        return Ok(());
    }
    sqlx::query("INSERT INTO host_circuits (host_key) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(key)
        .execute(&mut *conn)
        .await?;
    breakwater_queue::set_group_gate(&mut *conn, channel_id, Some(key)).await?;
    Ok(())
}
