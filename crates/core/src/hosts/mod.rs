//! Host circuits: a second circuit keyed on what channels actually share —
//! the endpoint's host (or its registrable domain) — kept in `host_circuits`.
//!
//! ```text
//!  closed ──(transient failures from ≥ failure_threshold DISTINCT channels within failure_window_ms,
//!           of ≥ 2 tenants when several use the host)──▶ open
//!  open ──(host probe watcher, after the cooldown)──▶ half_open ──(host probe answers)──▶ closed
//!                                                     half_open ──(host probe fails)──▶ open (cooldown ×2, capped)
//!  operator: force open (from closed / half_open), force close (from open / half_open)
//! ```
//!
//! **Keying** ([`host_key`]): `host` granularity is the URL's host, lower-case (IDNA as the `url`
//! crate gives it), plus `:port` when the port is explicit and not the scheme's default —
//! `api.example.com`, `127.0.0.1:41234`. One port is one service (one process, one listener, one
//! connection pool on the far side), so two receivers on different ports of one address fail
//! independently and get separate circuits. `domain` granularity is the registrable domain from
//! the Public Suffix List (`psl` crate): `a.b.example.co.uk` → `example.co.uk`; IP literals and
//! names without a registrable domain (`localhost`) fall back to the `host` rule.
//!
//! **Counting.** Each transient failure of a non-probe delivery upserts `(host, channel,
//! failed_at = now())` into `host_failures` under the host row's lock (`FOR UPDATE`: failures of
//! one host are counted one at a time, so of several racing on the threshold exactly one sees it
//! crossed), then counts the host's rows newer than `failure_window_ms`: distinct channels, so
//! one channel's failures alone never open the host (that is the channel circuit's job); and on
//! a host several tenants use, the failing channels must belong to at least two tenants, so one
//! tenant's failing endpoints never park the other tenants on a host that answers them. A
//! success of a channel that had failures (`consecutive_failures > 0`, known from the gate read:
//! no extra statement in the common case) deletes its row. Failures while the host is not closed
//! are not counted. What counts is the answer's host class ([`crate::outcome::host_class`]): a
//! 429 is an answer of a live host that limits one endpoint, not a host failure.
//!
//! **Excused channels.** When the host closes (its probe answered, or an operator closed it),
//! the count starts again with every channel still in a failure streak excused: such a channel
//! keeps failing while its host is proven up, so it fails for itself (a bad path, a rejecting
//! receiver), and its failures count nothing towards re-opening the host until it succeeds once
//! (a failure that starts a new streak also clears the excuse). Without it, two tenants' failing
//! paths re-opened a host the moment its probe closed it, every cooldown, and a third tenant's
//! healthy channel on the host waited a cooldown each time. Their own channel
//! circuits deal with such channels.
//!
//! **Transitions** are one conditional UPDATE each (`… WHERE state = …`, probe results also `AND
//! generation = …`), so one caller wins; the winner parks or releases the host's channels, audits
//! (system actor, channel null, details with host key, generation, channels and tenants
//! affected) and enqueues one alert per tenant with channels on the host and an alert URL, unique
//! per (host, generation, tenant, event), in the same transaction.
//!
//! **The admission** joins the host row into the channel gate read ([`crate::circuit::admit`]):
//! no extra round trip. A delivery goes only if both circuits let it; host open, or half-open
//! and this delivery is not the host probe → park (no request, no attempt).
//!
//! **The host probe and its result.** The host probe watcher (one job per host, unique key
//! `host_probe:<host>`, queue `circuit`) moves `open` to `half_open` after the cooldown and wakes
//! exactly one waiting delivery of the host as the probe: the channels take the role in turn
//! since the host last closed (those not tried yet first, the fewest consecutive failures first;
//! then the one tried longest ago), never a channel under a `Retry-After` hold (a held delivery
//! that still meets the role in the admission hands it on, [`hand_on_probe`]). Any HTTP answer
//! that is not a transient failure (2xx, or a permanent 4xx: the host is up, the channel is
//! wrong) closes the host; a transient failure re-opens it with a doubled, capped cooldown. The
//! probe is a real attempt of its delivery, so its result *also* counts for its channel's
//! circuit as any attempt does (a success resets the channel's count; a failure is one of its
//! consecutive failures).
//!
//! **A host that opens with nothing waiting** still resolves: on `half_open` the watcher grants
//! the probe role to the next delivery of the host that arrives (the first to claim it with a
//! conditional UPDATE on `probe_delivery_id IS NULL` in the admission). **Lease rule:** when the
//! lease (`probe_lease_ms`) expires and *no probe was ever chosen*, nothing happened, so the
//! watcher writes nothing — no generation bump, no audit row, no alert — it only looks again for
//! a waiting delivery and extends the lease; when a chosen probe's lease expires (its node died),
//! a new probe takes over: that is a transition (generation + 1) and is audited once.
//!
//! **Parking and the cap** use the queue's *gates*: every channel's job group is in the gate
//! named by its host key ([`assign`], in the transaction that sets the URL), so parking or
//! releasing a whole host is one row update ([`breakwater_queue::park_gate`] /
//! [`breakwater_queue::release_gate`]), whatever the number of channels and jobs; a channel's own
//! circuit keeps its own group flag, and a job runs only if both let it. The host probe is the
//! gate's one probe slot ([`breakwater_queue::wake_one_in_gate`]). The gate's cluster-wide cap
//! is the per-host concurrency cap: `max_in_flight` overridden per host, else
//! `hosts.max_in_flight` (default [`DEFAULT_HOST_MAX_IN_FLIGHT`]; the pools'
//! `GroupLimits::gate_ceiling`), which can be removed; a host with neither
//! is not capped, and its gate row is not written by claims and results. The reconciler
//! ([`reconcile_gates`]) repairs a gate whose parked flag disagrees with its host circuit.
//!
//! **Lock order**: a channel's job group row, then its host row, then the host's gate row (the
//! fetch and the queue's slot-release trigger take group rows before gate rows, and the fetch
//! *waits* for a gate row). A result that may make a host transition therefore takes its own
//! group row first ([`record_result`]), and so does a stale host probe's hand-on in an
//! attempt's transaction ([`hand_on_stale_probe`]: that transaction then finishes its job,
//! whose slot-release trigger takes the group row); the watcher and the operator routes take
//! no group row and finish no job. A channel row, where one is locked too, comes before all
//! three: a pause or a `PATCH` locks it first, and an attempt's transaction locks it
//! (`FOR NO KEY UPDATE`) before it records the attempt ([`crate::circuit::after_attempt`]; the
//! `KEY SHARE` of the attempt row's foreign key does not order against a `PATCH`'s
//! `FOR NO KEY UPDATE`).
//!
//! A delivery held by its host keeps its status (`pending`, or `failed` with a retry
//! scheduled): marking each one `paused` would turn the one-row park into a write per delivery;
//! the channel shows its host's state (`host_circuit_state`).

/// Records channel `$channel` (a bind parameter such as `"$3"`) as the last to take its host's
/// probe, as a `SET` item of an UPDATE of `host_circuits`: moved to the end of
/// `probed_channels`, one entry per channel (the turn `wake_host_probe` reads). The one copy of
/// this rule, for both ways a probe is chosen (`set_probe`, `claim_probe`); expands to a string
/// literal for `concat!`.
macro_rules! probe_turn_sql {
    ($channel:literal) => {
        concat!(
            "probed_channels = array_append(array_remove(probed_channels, ",
            $channel,
            "), ",
            $channel,
            ")"
        )
    };
}

pub(crate) mod config;
mod gate;
mod operator;
pub(crate) mod results;
#[cfg(test)]
mod tests;
mod transitions;
mod watch;

pub use config::{host_key, Granularity, HostsConfig};
pub(crate) use gate::{assign, claim_probe, decide, hand_on_probe, HostGate};
pub(crate) use gate::{hand_on_inconclusive_probe, hand_on_stale_probe};
pub use operator::{
    apply_manual, get, list, reconcile_gates, rekey_missing, set_overrides, state_of, HostCircuit,
    Manual, Overrides,
};
pub(crate) use results::record_result;
use transitions::{close, open, park_host_jobs, release_host_jobs, wake_host_probe};
use watch::{probe_failed, probe_succeeded, set_probe};
pub use watch::{watch, watch_step, WatchStep};

use crate::audit;
use crate::Result;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

/// The alert event of a host circuit that opened (re-opened, or was forced open).
pub(crate) const EVENT_OPENED: &str = "host.circuit_opened";
/// The alert event of a host circuit that closed.
pub(crate) const EVENT_CLOSED: &str = "host.circuit_closed";

/// A host circuit state (`host_circuits.state`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[schema(as = HostCircuitState)]
pub enum State {
    /// Deliveries flow (each channel's own circuit still applies).
    Closed,
    /// The host is considered down: every channel on it is parked; a probe waits for the cooldown.
    Open,
    /// One host probe is testing the host.
    HalfOpen,
}

column_text!(State, field "state", what "host circuit state", {
    Closed => "closed",
    Open => "open",
    HalfOpen => "half_open",
});

/// A host transition (returned to its winner only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The host key.
    pub host_key: String,
    /// State before.
    pub from: State,
    /// State after.
    pub to: State,
    /// Generation after.
    pub generation: i64,
    /// When the next probe may run (open only).
    pub next_probe_at: Option<DateTime<Utc>>,
}

impl Transition {
    /// The transition as counted in the metrics ([`audit::Transitioned`]).
    pub fn counted(&self) -> audit::Transitioned {
        audit::Transitioned {
            from: self.from.as_str(),
            to: self.to.as_str(),
        }
    }
}

#[derive(sqlx::FromRow)]
struct HostRow {
    host_key: String,
    generation: i64,
    next_probe_at: Option<DateTime<Utc>>,
    before: State,
}

impl HostRow {
    /// The transition this row (returned by a transition's UPDATE) made into `to`: the next probe
    /// time is kept for `open` only (a claim of `half_open` returns the old one; `closed` has
    /// none).
    fn into_transition(self, to: State) -> Transition {
        Transition {
            host_key: self.host_key,
            from: self.before,
            to,
            generation: self.generation,
            next_probe_at: self.next_probe_at.filter(|_| to == State::Open),
        }
    }
}

/// Forgets the failures counted against host `key` (every channel's): a transition into `open`
/// starts the count again.
async fn forget_failures(tx: &mut PgConnection, key: &str) -> Result<()> {
    sqlx::query("DELETE FROM host_failures WHERE host_key = $1")
        .bind(key)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Starts the count of host `key` again on closing, with every channel still failing on its own
/// excused: a channel of the host in a failure streak (`consecutive_failures > 0`, or its own
/// circuit open or half-open), other than `except` (the host probe's channel, which just
/// answered), gets an excused failure row, so its failures do not count towards re-opening the
/// host until it succeeds once ([`record_result`]). The host has just been proven up (its probe
/// answered, or an operator closed it), so such a channel is failing for itself, not for its
/// host. Without it, two tenants' failing paths re-open a host at once after every successful
/// probe, holding a third tenant's healthy channel on it for one cooldown each time.
async fn excuse_failing_channels(
    tx: &mut PgConnection,
    key: &str,
    except: Option<Uuid>,
) -> Result<u64> {
    forget_failures(tx, key).await?;
    Ok(sqlx::query(
        "INSERT INTO host_failures (host_key, channel_id, failed_at, excused)
         SELECT $1, id, now(), true FROM channels
         WHERE host_key = $1 AND deleted_at IS NULL AND id IS DISTINCT FROM $2
           AND (consecutive_failures > 0 OR circuit_state IN ('open', 'half_open'))",
    )
    .bind(key)
    .bind(except)
    .execute(&mut *tx)
    .await?
    .rows_affected())
}
