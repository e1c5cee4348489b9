//! The registry of Breakwater's queues and job kinds, and each kind's typed args.
//!
//! Every queue a node runs a pool on and every job kind it enqueues is named here once; code
//! that recognises a queue (is it a tier queue? which tier?) asks [`tier_of_queue`] rather than
//! comparing names. Each kind's args are a struct ([`DeliverArgs`], [`ProbeArgs`],
//! [`HostProbeArgs`], [`FlappingWatchArgs`], [`AlertArgs`]) that serializes to the JSON object
//! stored in `jobs.args` (`jsonb`) — the same field names as the rows already in the database —
//! and that the worker parses back with serde ([`JobArgs::from_json`]); a job whose args do not
//! parse is discarded with a reason.
//!
//! | Queue | Job kinds |
//! |---|---|
//! | [`QUEUE_DELIVERIES_HIGH`], [`QUEUE_DELIVERIES`], [`QUEUE_DELIVERIES_BULK`] (one per [`Tier`]) | [`JOB_DELIVER`] |
//! | [`QUEUE_CIRCUIT`] | [`JOB_PROBE`], [`JOB_HOST_PROBE`] |
//! | [`QUEUE_ALERTS`] | [`JOB_ALERT`], [`JOB_FLAPPING_WATCH`], [`JOB_ALERT_EVENTS_WATCH`] |
//!
//! **Every job kind a tenant can cause runs in a job group of that tenant**,
//! so the fair fetch shares each queue out by tenant and one tenant's jobs cost no other tenant
//! anything: a delivery in its channel's group (share: the tenant), an alert in the tenant's
//! alert group, a flapping timer in the tenant's timer group, a channel's probe watcher in the
//! tenant's watcher group ([`TenantGroup`], share: the tenant). Only a host's probe watcher
//! ([`JOB_HOST_PROBE`]) has no group: a host is shared by tenants, its watcher is one job per
//! host, and it is a short transaction that sends nothing.

use crate::Tier;
use breakwater_queue::{NewJob, PRIORITY_URGENT};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

/// Queue of the `high` tier's deliveries.
pub(crate) const QUEUE_DELIVERIES_HIGH: &str = "deliveries_high";
/// Queue of the `default` tier's deliveries.
pub(crate) const QUEUE_DELIVERIES: &str = "deliveries";
/// Queue of the `bulk` tier's deliveries.
pub(crate) const QUEUE_DELIVERIES_BULK: &str = "deliveries_bulk";
/// Queue of circuit jobs (channel and host probe watchers); each node runs a small pool on it.
pub const QUEUE_CIRCUIT: &str = "circuit";
/// Queue of alert webhooks and of the flapping timers.
pub const QUEUE_ALERTS: &str = "alerts";

/// Every queue Breakwater runs: the tier queues (highest tier first), then [`QUEUE_CIRCUIT`] and
/// [`QUEUE_ALERTS`].
pub(crate) const QUEUES: [&str; 5] = [
    QUEUE_DELIVERIES_HIGH,
    QUEUE_DELIVERIES,
    QUEUE_DELIVERIES_BULK,
    QUEUE_CIRCUIT,
    QUEUE_ALERTS,
];

impl Tier {
    /// The queue this tier's deliveries run on. Defined here, with the queues, so that the
    /// registry depends on the tier and not the other way round.
    pub fn queue(self) -> &'static str {
        match self {
            Tier::High => QUEUE_DELIVERIES_HIGH,
            Tier::Default => QUEUE_DELIVERIES,
            Tier::Bulk => QUEUE_DELIVERIES_BULK,
        }
    }
}

/// The tier whose deliveries run on `queue`, if it is a tier queue (see [`Tier::queue`]).
pub fn tier_of_queue(queue: &str) -> Option<Tier> {
    Tier::ALL.into_iter().find(|t| t.queue() == queue)
}

/// Whether `queue` is a delivery (tier) queue.
#[cfg(test)]
pub(crate) fn is_delivery_queue(queue: &str) -> bool {
    tier_of_queue(queue).is_some()
}

/// Job kind of a delivery attempt: args [`DeliverArgs`], group = channel id, unique key
/// `delivery:<delivery>`, on its tenant's tier queue.
pub(crate) const JOB_DELIVER: &str = "deliver";
/// Job kind of a channel's probe watcher: args [`ProbeArgs`], unique key `probe:<channel>`, on
/// [`QUEUE_CIRCUIT`].
pub(crate) const JOB_PROBE: &str = "probe";
/// Job kind of a host's probe watcher: args [`HostProbeArgs`], unique key `host_probe:<host>`, on
/// [`QUEUE_CIRCUIT`].
pub(crate) const JOB_HOST_PROBE: &str = "host_probe";
/// Job kind of an alert webhook: args [`AlertArgs`] (the alert itself), on [`QUEUE_ALERTS`].
pub(crate) const JOB_ALERT: &str = "alert";
/// Job kind of a channel's flapping timer: args [`FlappingWatchArgs`], unique key
/// `flapping:<channel>`, on [`QUEUE_ALERTS`].
pub(crate) const JOB_FLAPPING_WATCH: &str = "flapping_watch";
/// Job kind of a channel's delivery-event timer (storm summaries, the end of a failing streak,
/// [`crate::alerts::events`]): args [`AlertEventsWatchArgs`], unique key
/// `alert-events:<channel>`, on [`QUEUE_ALERTS`].
pub(crate) const JOB_ALERT_EVENTS_WATCH: &str = "alert_events_watch";

/// A job kind (the `jobs.kind` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// [`JOB_DELIVER`].
    Deliver,
    /// [`JOB_PROBE`].
    Probe,
    /// [`JOB_HOST_PROBE`].
    HostProbe,
    /// [`JOB_ALERT`].
    Alert,
    /// [`JOB_FLAPPING_WATCH`].
    FlappingWatch,
    /// [`JOB_ALERT_EVENTS_WATCH`].
    AlertEventsWatch,
}

impl JobKind {
    /// Every kind.
    pub const ALL: [JobKind; 6] = [
        JobKind::Deliver,
        JobKind::Probe,
        JobKind::HostProbe,
        JobKind::Alert,
        JobKind::FlappingWatch,
        JobKind::AlertEventsWatch,
    ];

    /// The `jobs.kind` value.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Deliver => JOB_DELIVER,
            JobKind::Probe => JOB_PROBE,
            JobKind::HostProbe => JOB_HOST_PROBE,
            JobKind::Alert => JOB_ALERT,
            JobKind::FlappingWatch => JOB_FLAPPING_WATCH,
            JobKind::AlertEventsWatch => JOB_ALERT_EVENTS_WATCH,
        }
    }

    /// The kind named `kind`, or `None` for a kind Breakwater does not know.
    pub fn parse(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

/// The args of one job kind: serialized into `jobs.args` at enqueue, parsed back by the worker.
pub trait JobArgs: Serialize + DeserializeOwned {
    /// The kind these args belong to.
    const KIND: JobKind;

    /// The `jobs.args` value.
    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("job args serialize")
    }

    /// Parses a job's `args`. Fields not named by the struct are ignored.
    ///
    /// Errors if a field is missing or has another type.
    fn from_json(args: &serde_json::Value) -> Result<Self, serde_json::Error> {
        Self::deserialize(args)
    }
}

/// Args of a [`JOB_DELIVER`] job: `{"delivery_id": uuid}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliverArgs {
    /// The delivery this job attempts.
    pub delivery_id: Uuid,
}

impl JobArgs for DeliverArgs {
    const KIND: JobKind = JobKind::Deliver;
}

/// Args of a [`JOB_PROBE`] job: `{"channel_id": uuid}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeArgs {
    /// The channel whose circuit the watcher moves.
    pub channel_id: Uuid,
}

impl JobArgs for ProbeArgs {
    const KIND: JobKind = JobKind::Probe;
}

/// Args of a [`JOB_HOST_PROBE`] job: `{"host_key": text}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostProbeArgs {
    /// The host circuit the watcher moves (see [`crate::hosts`]).
    pub host_key: String,
}

impl JobArgs for HostProbeArgs {
    const KIND: JobKind = JobKind::HostProbe;
}

/// Args of a [`JOB_FLAPPING_WATCH`] job: `{"channel_id": uuid}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlappingWatchArgs {
    /// The channel whose flapping the timer ends.
    pub channel_id: Uuid,
}

impl JobArgs for FlappingWatchArgs {
    const KIND: JobKind = JobKind::FlappingWatch;
}

/// Args of a [`JOB_ALERT_EVENTS_WATCH`] job: `{"channel_id": uuid}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertEventsWatchArgs {
    /// The channel whose delivery events the timer summarises and ends.
    pub channel_id: Uuid,
}

impl JobArgs for AlertEventsWatchArgs {
    const KIND: JobKind = JobKind::AlertEventsWatch;
}

/// A channel's host circuit as an alert names it: `{"host_key", "state"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertHost {
    /// The host key (see [`crate::hosts`]).
    pub host_key: String,
    /// The host circuit's state (`closed` when it has no row yet).
    pub state: String,
}

/// Args of a [`JOB_ALERT`] job: the alert, decided and written by [`crate::alerts`] (channel
/// transitions, flapping, endpoint rejections) and [`crate::hosts`] (host circuits). The worker
/// sends them as the alert body `{"type": event, "timestamp": at, "data": {…}}`.
///
/// Fields a kind of alert does not have are absent from the JSON (host alerts have no
/// `failure_count`, `transition_count`, `flapping_window_ms` or `host`; only some alerts have
/// `suppressed`, `status`, `flapping_since`, `host_key`, `channels`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AlertArgs {
    /// The alert's id: its `webhook-id` (stable across retries, for the receiver's dedup).
    pub id: Uuid,
    /// The alert event, e.g. `channel.circuit_opened`, `host.circuit_closed`.
    pub event: String,
    /// The tenant alerted (its alert URL and secret are read when it is sent).
    pub tenant_id: Uuid,
    /// The channel; `null` on a host circuit's alert.
    pub channel_id: Option<Uuid>,
    /// The circuit's state before; `null` on `channel.flapping_ended`.
    pub from_state: Option<String>,
    /// The circuit's state after (on `channel.flapping_ended`: its state when it ended).
    pub to_state: String,
    /// Why (never a URL path or a secret).
    pub reason: String,
    /// Consecutive failures at the event (channel alerts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_count: Option<i32>,
    /// The circuit's generation after the event.
    pub generation: i64,
    /// The circuit's alerting transitions within the flapping window, this one included
    /// (channel alerts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition_count: Option<i32>,
    /// The flapping window, ms (channel alerts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flapping_window_ms: Option<i64>,
    /// The database time of the event.
    pub at: DateTime<Utc>,
    /// The channel's host circuit (channel alerts): absent, or `null` for a channel without a
    /// host key.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub host: Option<Option<AlertHost>>,
    /// Transitions not alerted one by one (`channel.flapping`, `channel.flapping_ended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<i32>,
    /// The HTTP status the endpoint answered (`channel.endpoint_rejected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// When the flapping started (`channel.flapping_ended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flapping_since: Option<DateTime<Utc>>,
    /// The host circuit (host alerts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key: Option<String>,
    /// The tenant's channels on the host (host alerts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<i64>,
    /// The dead delivery (`delivery.dead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<Uuid>,
    /// Its event type (`delivery.dead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Its message, if it was fanned out from one (`delivery.dead`; `null` in the body
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<Uuid>,
    /// Its attempts (`delivery.dead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<i32>,
    /// Its last error (`delivery.dead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Deaths summarised (`deliveries.dead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// The first of the summarised deliveries' ids (`deliveries.dead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_ids: Option<Vec<Uuid>>,
    /// When the summarised window began (`deliveries.dead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start: Option<DateTime<Utc>>,
    /// The window, ms (`deliveries.dead`, `channel.failing`, `channel.recovered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<i64>,
    /// Failed attempts counted in the window (`channel.failing`, `channel.recovered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i64>,
    /// Attempts counted in the window (`channel.failing`, `channel.recovered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts_in_window: Option<i64>,
    /// The failing threshold, percent (`channel.failing`, `channel.recovered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold_percent: Option<i32>,
    /// When the failing streak began (`channel.recovered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<DateTime<Utc>>,
}

impl JobArgs for AlertArgs {
    const KIND: JobKind = JobKind::Alert;
}

/// A field that is present (even as `null`) deserializes to `Some`; an absent one takes the
/// field's default, `None`.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// A tenant's job group for one kind of its own non-delivery jobs. Jobs
/// without a group are fetched oldest first across all tenants, so one tenant's many alerts to a
/// hanging endpoint (each holding a worker for the request timeout) or many probe watchers made
/// everyone else's wait behind them; in a group of the tenant, in the tenant's share, the fair
/// fetch serves the tenant with the fewest jobs in flight first, and the group's cap (the
/// queue's limits, see `breakwater_worker`'s `WorkerConfig::alert_concurrency_per_tenant`) bounds
/// how many workers the tenant holds at once, cluster-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TenantGroup {
    /// Its alert webhooks ([`JOB_ALERT`] on [`QUEUE_ALERTS`]).
    Alerts,
    /// Its channels' flapping timers ([`JOB_FLAPPING_WATCH`] on [`QUEUE_ALERTS`]): a group of
    /// their own, so a hanging alert endpoint does not hold the tenant's timers either.
    AlertTimers,
    /// Its channels' probe watchers ([`JOB_PROBE`] on [`QUEUE_CIRCUIT`]).
    ProbeWatchers,
}

impl TenantGroup {
    /// The group id: the tenant id with its bits flipped by a fixed mask per kind, so it is
    /// computed without a read, differs from the tenant's other groups and, like every random
    /// id, from any channel's (a channel's id is its delivery group's).
    pub fn id(self, tenant_id: Uuid) -> Uuid {
        let mask: u128 = match self {
            TenantGroup::Alerts => 0x616c_6572_7473_0000_0000_0000_0000_0001,
            TenantGroup::AlertTimers => 0x616c_6572_7474_0000_0000_0000_0000_0002,
            TenantGroup::ProbeWatchers => 0x7072_6f62_6573_0000_0000_0000_0000_0003,
        };
        Uuid::from_u128(tenant_id.as_u128() ^ mask)
    }

    /// Puts `job` in `tenant_id`'s group of this kind, creating the group's row in the tenant's
    /// share if it has none (in the caller's transaction, without locking an existing row:
    /// [`breakwater_queue::ensure_group`]).
    pub(crate) async fn assign(
        self,
        tx: &mut PgConnection,
        tenant_id: Uuid,
        job: NewJob,
    ) -> crate::Result<NewJob> {
        let group = self.id(tenant_id);
        breakwater_queue::ensure_group(&mut *tx, group, Some(tenant_id)).await?;
        Ok(job.group(group))
    }
}

/// Enqueues one alert webhook job: `args` on [`QUEUE_ALERTS`], unique key `unique_key` (an alert
/// already enqueued under it is not enqueued again), up to 10 attempts, in its tenant's alert
/// group ([`TenantGroup::Alerts`], share: the tenant). The one place an alert job is made (channel
/// transitions, flapping, endpoint rejections, host circuits), so every alert is scheduled fairly
/// per tenant: a tenant whose alert endpoint hangs holds at most its group's cap of alert workers
/// (`worker.alert_concurrency_per_tenant`, cluster-wide), and every other tenant's alerts are
/// fetched before its next one. In the caller's transaction.
pub(crate) async fn enqueue_alert_job(
    tx: &mut PgConnection,
    args: &AlertArgs,
    unique_key: String,
) -> crate::Result<()> {
    let job = NewJob::new(QUEUE_ALERTS, JOB_ALERT, args.to_json())
        .unique_key(unique_key)
        .max_attempts(10);
    let job = TenantGroup::Alerts
        .assign(&mut *tx, args.tenant_id, job)
        .await?;
    breakwater_queue::enqueue(&mut *tx, &job).await?;
    Ok(())
}

/// Makes sure the circuit watcher job `args` (a channel's probe watcher, or a host's) with
/// unique key `unique_key` runs no later than `at` (`None`: now): one live job per key on
/// [`QUEUE_CIRCUIT`], at urgent priority, up to 1 000 attempts; a waiting job's time only moves
/// earlier ([`breakwater_queue::schedule_unique`]). A channel's watcher passes its `tenant`: a
/// new job goes in the tenant's [`TenantGroup::ProbeWatchers`] group; a host's passes `None`
/// (no group: see the module doc).
pub(crate) async fn schedule_watcher<A: JobArgs>(
    tx: &mut PgConnection,
    args: &A,
    unique_key: String,
    at: Option<DateTime<Utc>>,
    tenant: Option<Uuid>,
) -> crate::Result<()> {
    let mut job = NewJob::new(QUEUE_CIRCUIT, A::KIND.as_str(), args.to_json())
        .priority(PRIORITY_URGENT)
        .unique_key(unique_key)
        .max_attempts(1_000);
    if let Some(tenant_id) = tenant {
        job = TenantGroup::ProbeWatchers
            .assign(&mut *tx, tenant_id, job)
            .await?;
    }
    job.scheduled_at = at;
    breakwater_queue::schedule_unique(&mut *tx, &job).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn queues_are_the_tier_queues_then_circuit_and_alerts() {
        let tiers: Vec<&str> = Tier::ALL.iter().map(|t| t.queue()).collect();
        assert_eq!(QUEUES[..3], tiers[..]);
        assert_eq!(
            QUEUES,
            [
                "deliveries_high",
                "deliveries",
                "deliveries_bulk",
                "circuit",
                "alerts"
            ]
        );
        assert_eq!(tier_of_queue("deliveries_bulk"), Some(Tier::Bulk));
        assert_eq!(tier_of_queue("circuit"), None);
        assert!(is_delivery_queue("deliveries") && !is_delivery_queue("deliveries_x"));
    }

    #[test]
    fn kinds_round_trip_through_their_names() {
        for k in JobKind::ALL {
            assert_eq!(JobKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(JobKind::parse("bench"), None);
        assert_eq!(
            [DeliverArgs::KIND, ProbeArgs::KIND, HostProbeArgs::KIND],
            [JobKind::Deliver, JobKind::Probe, JobKind::HostProbe]
        );
    }

    #[test]
    fn args_keep_the_json_shape_of_the_rows_in_the_database() {
        let id = Uuid::now_v7();
        assert_eq!(
            DeliverArgs { delivery_id: id }.to_json(),
            json!({ "delivery_id": id })
        );
        assert_eq!(
            ProbeArgs { channel_id: id }.to_json(),
            json!({ "channel_id": id })
        );
        assert_eq!(
            FlappingWatchArgs { channel_id: id }.to_json(),
            json!({ "channel_id": id })
        );
        assert_eq!(
            HostProbeArgs {
                host_key: "example.com".into()
            }
            .to_json(),
            json!({ "host_key": "example.com" })
        );
        assert!(DeliverArgs::from_json(&json!({ "delivery_id": "nope" })).is_err());
        assert!(ProbeArgs::from_json(&json!({})).is_err());
    }

    #[test]
    fn alert_args_round_trip_every_shape_and_keep_a_null_host() {
        let at = "2026-11-30T10:00:00.123456Z";
        let channel = json!({
            "id": Uuid::now_v7(), "event": "channel.circuit_opened", "tenant_id": Uuid::now_v7(),
            "channel_id": Uuid::now_v7(), "host": null, "from_state": "closed",
            "to_state": "open", "reason": "3 failures", "failure_count": 3, "generation": 2,
            "transition_count": 1, "flapping_window_ms": 600000, "at": at,
        });
        let ended = json!({
            "id": Uuid::now_v7(), "event": "channel.flapping_ended", "tenant_id": Uuid::now_v7(),
            "channel_id": Uuid::now_v7(), "host": { "host_key": "h", "state": "closed" },
            "from_state": null, "to_state": "closed", "reason": "stable", "failure_count": 0,
            "generation": 9, "transition_count": 0, "flapping_window_ms": 1000,
            "suppressed": 4, "flapping_since": "2026-11-30T09:59:00Z", "at": at,
        });
        let rejected = json!({
            "id": Uuid::now_v7(), "event": "channel.endpoint_rejected",
            "tenant_id": Uuid::now_v7(), "channel_id": Uuid::now_v7(), "host": null,
            "from_state": "closed", "to_state": "closed", "reason": "HTTP 401", "status": 401,
            "failure_count": 0, "generation": 1, "transition_count": 0,
            "flapping_window_ms": 1000, "at": at,
        });
        let host = json!({
            "id": Uuid::now_v7(), "event": "host.circuit_opened", "tenant_id": Uuid::now_v7(),
            "channel_id": null, "host_key": "example.com", "channels": 2,
            "from_state": "closed", "to_state": "open", "reason": "down", "generation": 3,
            "at": at,
        });
        for v in [channel, ended, rejected, host] {
            let a = AlertArgs::from_json(&v).unwrap();
            assert_eq!(a.to_json(), v);
        }
        assert!(AlertArgs::from_json(&json!({ "id": "x" })).is_err());
    }
}
