//! Host circuits (issue 13, part 1): a second circuit keyed on what channels actually share —
//! the endpoint's host (or its registrable domain) — kept in `host_circuits`.
//!
//! ```text
//!  closed ──(transient failures from ≥ failure_threshold DISTINCT channels within failure_window_ms)──▶ open
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
//! one channel's failures alone never open the host (that is the channel circuit's job). A
//! success of a channel that had failures (`consecutive_failures > 0`, known from the gate read:
//! no extra statement in the common case) deletes its row. Failures while the host is not closed
//! are not counted.
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
//! exactly one waiting delivery of the host as the probe. Any HTTP answer that is not a transient
//! failure (2xx, or a permanent 4xx: the host is up, the channel is wrong) closes the host; a
//! transient failure re-opens it with a doubled, capped cooldown. The probe is a real attempt of
//! its delivery, so its result *also* counts for its channel's circuit as any attempt does (a
//! success resets the channel's count; a failure is one of its consecutive failures).
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
//! group row first ([`record_result`]); the watcher and the operator routes take no group row.
//!
//! A delivery held by its host keeps its status (`pending`, or `failed` with a retry
//! scheduled): marking each one `paused` would turn the one-row park into a write per delivery;
//! the channel shows its host's state (`host_circuit_state`).

use crate::audit::{self, ACTOR_CIRCUIT_BREAKER};
use crate::circuit::{self, QUEUE_ALERTS, QUEUE_CIRCUIT};
use crate::outcome::Class;
use crate::{Error, Result, JOB_DELIVER};
use breakwater_queue::{NewJob, PRIORITY_URGENT};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use std::time::Duration;
use url::{Host, Url};
use uuid::Uuid;

/// Job kind of a host's probe watcher; args `{"host_key"}`, unique key `host_probe:<host>`, queue
/// [`QUEUE_CIRCUIT`].
pub const JOB_HOST_PROBE: &str = "host_probe";
/// The alert event of a host circuit that opened (re-opened, or was forced open).
pub const EVENT_OPENED: &str = "host.circuit_opened";
/// The alert event of a host circuit that closed.
pub const EVENT_CLOSED: &str = "host.circuit_closed";

/// How channels are grouped into host circuits (`[hosts] granularity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// The URL's host plus an explicit, non-default port.
    #[default]
    Host,
    /// The registrable domain (Public Suffix List); IPs and names without one use `Host`.
    Domain,
}

/// Default per-host cap (`hosts.max_in_flight`), deliveries in flight at once to one host,
/// cluster-wide. Below a node's default pool (200) on purpose: measured, 50 channels of 5
/// tenants on one host that hangs filled the whole pool for a request timeout (15 s) before any
/// circuit could open, and a healthy tenant on another host waited: p95 13 s (BENCHMARKS.md,
/// "Dead host"). With the cap the host holds at most this many slots.
pub const DEFAULT_HOST_MAX_IN_FLIGHT: i32 = 64;

/// Host circuit settings (`[hosts]` in `config/default.toml`; environment
/// `BREAKWATER_HOSTS__<FIELD>`). Threshold, cooldown and cap can be overridden per host.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostsConfig {
    /// `host` or `domain` (see the module doc).
    pub granularity: Granularity,
    /// Distinct channels with a transient failure within the window that open the host.
    pub failure_threshold: i32,
    /// The window of that count, ms.
    pub failure_window_ms: i64,
    /// Wait from opening to the first host probe, ms.
    pub cooldown_ms: i64,
    /// Largest cooldown while host probes keep failing (it doubles each time), ms.
    pub max_cooldown_ms: i64,
    /// How long a host probe may take before another may take over, ms (should exceed the
    /// request timeout).
    pub probe_lease_ms: i64,
    /// Default cluster-wide cap of deliveries in flight to one host, across all its channels;
    /// `None` (absent, the default): no default cap, a host is capped only by its own override
    /// (`PATCH /api/v1/admin/hosts/{host}`). Opt-in because of its cost: every result of a
    /// capped host's deliveries updates that host's one gate row, so its results serialize on
    /// it (see `breakwater_queue::fetch`). If set, ≥ 1.
    pub max_in_flight: Option<i32>,
}

impl Default for HostsConfig {
    fn default() -> Self {
        Self {
            granularity: Granularity::Host,
            failure_threshold: 3,
            failure_window_ms: 60_000,
            cooldown_ms: 30_000,
            max_cooldown_ms: 600_000,
            probe_lease_ms: 60_000,
            max_in_flight: Some(DEFAULT_HOST_MAX_IN_FLIGHT),
        }
    }
}

impl HostsConfig {
    /// The default per-host cap in force: `max_in_flight`, with 0 meaning none.
    pub fn default_cap(&self) -> Option<i32> {
        self.max_in_flight.filter(|&m| m > 0)
    }

    /// Checks the settings; the error names the key.
    pub fn validate(&self) -> std::result::Result<(), String> {
        for (name, v) in [
            ("hosts.failure_threshold", self.failure_threshold as i64),
            ("hosts.failure_window_ms", self.failure_window_ms),
            ("hosts.cooldown_ms", self.cooldown_ms),
            ("hosts.max_cooldown_ms", self.max_cooldown_ms),
            ("hosts.probe_lease_ms", self.probe_lease_ms),
        ] {
            if v <= 0 {
                return Err(format!("{name} must be greater than 0"));
            }
        }
        if self.max_in_flight.is_some_and(|m| m < 0) {
            return Err(
                "hosts.max_in_flight must not be negative (0: no default per-host cap)".into(),
            );
        }
        if self.failure_threshold < 2 {
            return Err("hosts.failure_threshold must be at least 2 (one channel's failures are the channel circuit's job)".into());
        }
        if self.max_cooldown_ms < self.cooldown_ms {
            return Err("hosts.max_cooldown_ms must be at least hosts.cooldown_ms".into());
        }
        Ok(())
    }
}

/// The host key of channel URL `url` at granularity `g` (see the module doc), or a message for
/// the `url` field when it has no host.
pub fn host_key(url: &str, g: Granularity) -> std::result::Result<String, String> {
    let u = Url::parse(url).map_err(|e| format!("not a valid absolute URL ({e})"))?;
    let host = u.host().ok_or_else(|| "the URL has no host".to_string())?;
    // `Url::port` is None when the port is absent or the scheme's default.
    let with_port = |h: String| match u.port() {
        Some(p) => format!("{h}:{p}"),
        None => h,
    };
    Ok(match host {
        Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            match g {
                Granularity::Domain => match psl::domain_str(&d) {
                    Some(reg) => reg.to_string(),
                    None => with_port(d),
                },
                Granularity::Host => with_port(d),
            }
        }
        Host::Ipv4(a) => with_port(a.to_string()),
        Host::Ipv6(a) => with_port(format!("[{a}]")),
    })
}

/// A host circuit state (`host_circuits.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = HostCircuitState)]
pub enum State {
    /// Deliveries flow (each channel's own circuit still applies).
    Closed,
    /// The host is considered down: every channel on it is parked; a probe waits for the cooldown.
    Open,
    /// One host probe is testing the host.
    HalfOpen,
}

impl State {
    /// The column value.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
        }
    }

    /// Parses the column value.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "closed" => State::Closed,
            "open" => State::Open,
            "half_open" => State::HalfOpen,
            other => {
                return Err(Error::invalid(
                    "state",
                    format!("unknown host circuit state {other:?}"),
                ))
            }
        })
    }
}

/// What the host circuit says about one delivery (part of the gate read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostGate {
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
pub fn decide(
    state: Option<&str>,
    generation: Option<i64>,
    probe: Option<Uuid>,
    delivery_id: Uuid,
) -> HostGate {
    let generation = generation.unwrap_or(0);
    match state {
        None | Some("closed") => HostGate::Pass,
        Some("half_open") => match probe {
            Some(p) if p == delivery_id => HostGate::Probe(generation),
            None => HostGate::Claim(generation),
            Some(_) => HostGate::Park,
        },
        Some(_) => HostGate::Park,
    }
}

/// Claims the host probe role of `generation` for `delivery_id` of `channel_id` (one
/// conditional UPDATE on `probe_delivery_id IS NULL`, so exactly one delivery gets it). Returns
/// whether this delivery won.
pub async fn claim_probe(
    conn: &mut PgConnection,
    channel_id: Uuid,
    delivery_id: Uuid,
    generation: i64,
) -> Result<bool> {
    Ok(sqlx::query(
        "UPDATE host_circuits h SET probe_delivery_id = $2, probe_channel_id = $1, updated_at = now()
         FROM channels c
         WHERE c.id = $1 AND h.host_key = c.host_key
           AND h.state = 'half_open' AND h.generation = $3 AND h.probe_delivery_id IS NULL",
    )
    .bind(channel_id)
    .bind(delivery_id)
    .bind(generation)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1)
}

/// Sets channel `channel_id`'s host key (computed by [`host_key`] when its URL was set), creates
/// the host's circuit row if it has none, and moves the channel's job group into the host's gate
/// ([`breakwater_queue::set_group_gate`]), so from the commit on the channel's jobs follow the
/// host's parked flag, probe slot and cap. In the caller's transaction, which holds the channel
/// row. A host key that does not change changes nothing.
pub async fn assign(conn: &mut PgConnection, channel_id: Uuid, key: &str) -> Result<()> {
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

#[derive(sqlx::FromRow)]
struct HostRow {
    host_key: String,
    generation: i64,
    next_probe_at: Option<DateTime<Utc>>,
    before: String,
}

/// Records the result of one attempt of `delivery_id` of channel `channel_id` for its host
/// circuit: the one call the worker makes, in the transaction that records the attempt, before
/// the channel circuit's calls (lock order: host row, then channel row, then job groups).
///
/// - the host probe (`host_probe` = its generation): a transient failure re-opens the host, any
///   other answer closes it;
/// - any other delivery: a transient failure is counted (distinct channels in the window, see
///   the module doc) and may open the host; a success of a channel that had failures
///   (`failures_before > 0`) removes its failure row (no write otherwise).
///
/// Returns the transition if this call made one.
pub async fn record_result(
    tx: &mut PgConnection,
    channel_id: Uuid,
    host_probe: Option<i64>,
    class: Class,
    failures_before: i32,
    reason: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    if host_probe.is_some() || class == Class::Transient {
        // Lock order group row → host row → gate row (the fetch and the slot-release trigger
        // take group rows before gate rows): take the channel's group row now, before a
        // transition here parks or releases the host's gate, so a fetch holding this group and
        // waiting for the gate cannot deadlock with us.
        sqlx::query("SELECT 1 FROM job_groups WHERE group_id = $1 FOR UPDATE")
            .bind(channel_id)
            .execute(&mut *tx)
            .await?;
    }
    match (host_probe, class) {
        (Some(generation), Class::Transient) => {
            probe_failed(tx, channel_id, generation, reason, cfg).await
        }
        (Some(generation), _) => probe_succeeded(tx, channel_id, generation).await,
        (None, Class::Transient) => record_failure(tx, channel_id, reason, cfg).await,
        (None, Class::Success) if failures_before > 0 => {
            sqlx::query(
                "DELETE FROM host_failures f USING channels c
                 WHERE c.id = $1 AND f.host_key = c.host_key AND f.channel_id = $1",
            )
            .bind(channel_id)
            .execute(&mut *tx)
            .await?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Counts one transient failure of channel `channel_id` against its host and opens the host
/// when distinct failing channels in the window reach the threshold.
async fn record_failure(
    tx: &mut PgConnection,
    channel_id: Uuid,
    reason: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    // The host row's lock serialises the counting of one host's failures (see the module doc);
    // a host that is not closed does not count.
    let host: Option<(String, i32)> = sqlx::query_as(
        "SELECT h.host_key, coalesce(h.failure_threshold, $2)
         FROM channels c JOIN host_circuits h ON h.host_key = c.host_key
         WHERE c.id = $1 AND h.state = 'closed'
         FOR UPDATE OF h",
    )
    .bind(channel_id)
    .bind(cfg.failure_threshold)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((key, threshold)) = host else {
        return Ok(None);
    };
    let distinct: i64 = sqlx::query_scalar(
        "WITH up AS (
             INSERT INTO host_failures (host_key, channel_id, failed_at) VALUES ($1, $2, now())
             ON CONFLICT (host_key, channel_id) DO UPDATE SET failed_at = now()
             RETURNING channel_id)
         SELECT 1 + count(*) FROM host_failures
         WHERE host_key = $1 AND channel_id <> $2
           AND failed_at > now() - ($3::float8 * interval '1 millisecond')",
    )
    .bind(&key)
    .bind(channel_id)
    .bind(cfg.failure_window_ms)
    .fetch_one(&mut *tx)
    .await?;
    if distinct < threshold as i64 {
        return Ok(None);
    }
    let why = format!(
        "transient failures from {distinct} distinct channels within {} ms (threshold {threshold}); last: {reason}",
        cfg.failure_window_ms
    );
    open(
        tx,
        &key,
        &["closed"],
        false,
        &why,
        ACTOR_CIRCUIT_BREAKER,
        cfg,
    )
    .await
}

/// Opens host `key` from one of `from` with one conditional UPDATE; `reopen` doubles the
/// cooldown (a failed probe). The winner parks the host's channels, schedules the watcher,
/// audits and alerts.
async fn open(
    tx: &mut PgConnection,
    key: &str,
    from: &[&str],
    reopen: bool,
    reason: &str,
    actor: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    let from: Vec<String> = from.iter().map(|s| s.to_string()).collect();
    let row: Option<HostRow> = sqlx::query_as(
        "WITH before AS (SELECT host_key, state FROM host_circuits WHERE host_key = $1 FOR UPDATE)
         UPDATE host_circuits h
         SET state = 'open', changed_at = now(), generation = h.generation + 1,
             probe_failures = CASE WHEN $3 THEN h.probe_failures + 1 ELSE 0 END,
             probe_delivery_id = NULL, probe_channel_id = NULL, probe_deadline = NULL,
             last_failure_at = now(), last_failure_reason = $6,
             next_probe_at = now() + (least(coalesce(h.cooldown_ms, $4)::float8
                 * power(2, CASE WHEN $3 THEN least(h.probe_failures + 1, 30) ELSE 0 END), $5::float8)
                 * interval '1 millisecond'),
             updated_at = now()
         FROM before
         WHERE h.host_key = before.host_key AND before.state = ANY($2)
         RETURNING h.host_key, h.generation, h.next_probe_at, before.state AS before",
    )
    .bind(key)
    .bind(&from)
    .bind(reopen)
    .bind(cfg.cooldown_ms)
    .bind(cfg.max_cooldown_ms)
    .bind(reason)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(r) = row else { return Ok(None) };
    let t = Transition {
        host_key: r.host_key,
        from: State::parse(&r.before)?,
        to: State::Open,
        generation: r.generation,
        next_probe_at: r.next_probe_at,
    };
    sqlx::query("DELETE FROM host_failures WHERE host_key = $1")
        .bind(key)
        .execute(&mut *tx)
        .await?;
    let parked = park_host_jobs(tx, key).await?;
    schedule_watcher(tx, key, t.next_probe_at).await?;
    let action = match (actor == ACTOR_CIRCUIT_BREAKER, reopen) {
        (false, _) => "host.forced_open",
        (true, true) => "host.reopened",
        (true, false) => "host.opened",
    };
    effects(tx, &t, action, actor, reason, EVENT_OPENED, parked).await?;
    tracing::warn!(host_key = %t.host_key, generation = t.generation, parked, reason, "host circuit opened");
    Ok(Some(t))
}

/// The winner's audit row and alerts of a transition. `jobs` is what was parked or released.
async fn effects(
    tx: &mut PgConnection,
    t: &Transition,
    action: &str,
    actor: &str,
    reason: &str,
    event: &str,
    jobs: u64,
) -> Result<()> {
    let (channels, tenants): (i64, Vec<Uuid>) = sqlx::query_as(
        "SELECT count(*), coalesce(array_agg(DISTINCT tenant_id), '{}') FROM channels
         WHERE host_key = $1 AND deleted_at IS NULL",
    )
    .bind(&t.host_key)
    .fetch_one(&mut *tx)
    .await?;
    audit::record(
        &mut *tx,
        &audit::Entry {
            actor,
            action,
            from_state: Some(t.from.as_str()),
            to_state: Some(t.to.as_str()),
            reason: Some(reason),
            details: serde_json::json!({
                "host_key": t.host_key,
                "generation": t.generation,
                "channels": channels,
                "tenants": tenants.len(),
                "jobs": jobs,
                "next_probe_at": t.next_probe_at,
            }),
            ..Default::default()
        },
    )
    .await?;
    // A failed host probe re-opening the host is audited but not alerted (as a channel's: the
    // tenants already heard it open, and a host that stays dead would page every tenant on it at
    // every probe).
    if actor == ACTOR_CIRCUIT_BREAKER && t.from == State::HalfOpen && t.to == State::Open {
        return Ok(());
    }
    // One alert per tenant with channels on the host and an alert URL, unique per (host,
    // generation, tenant, event): whichever node wins the transition, each is enqueued once.
    let with_url: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT t.id, count(*) FROM channels c JOIN tenants t ON t.id = c.tenant_id
         WHERE c.host_key = $1 AND c.deleted_at IS NULL AND t.alert_url IS NOT NULL
         GROUP BY t.id",
    )
    .bind(&t.host_key)
    .fetch_all(&mut *tx)
    .await?;
    let at: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut *tx)
        .await?;
    for (tenant_id, n) in with_url {
        let args = serde_json::json!({
            "id": Uuid::now_v7(),
            "event": event,
            "tenant_id": tenant_id,
            "channel_id": null,
            "host_key": t.host_key,
            "channels": n,
            "from_state": t.from.as_str(),
            "to_state": t.to.as_str(),
            "reason": reason,
            "generation": t.generation,
            "at": at,
        });
        let job = NewJob::new(QUEUE_ALERTS, circuit::JOB_ALERT, args)
            .unique_key(format!(
                "alert:host:{}:{}:{tenant_id}:{event}",
                t.host_key, t.generation
            ))
            .max_attempts(10);
        breakwater_queue::enqueue(&mut *tx, &job).await?;
    }
    Ok(())
}

/// Parks every job of the host: its gate's parked flag (one row update). Returns the waiting
/// jobs of the host.
async fn park_host_jobs(tx: &mut PgConnection, key: &str) -> Result<u64> {
    Ok(breakwater_queue::park_gate(&mut *tx, key).await?)
}

/// Releases the host's gate (one row update); channels whose own circuit is not closed stay
/// parked by their own group flag. Returns the waiting jobs of the host.
async fn release_host_jobs(tx: &mut PgConnection, key: &str) -> Result<u64> {
    Ok(breakwater_queue::release_gate(&mut *tx, key).await?)
}

/// Wakes exactly one waiting delivery of the host (among channels whose own circuit does not
/// park them) as its probe through the gate's one probe slot, and returns `(delivery, channel)`;
/// `None` when none waits: the slot then goes to the next delivery that arrives, which claims
/// the role in the admission.
async fn wake_host_probe(tx: &mut PgConnection, key: &str) -> Result<Option<(Uuid, Uuid)>> {
    let woken =
        breakwater_queue::wake_one_in_gate(&mut *tx, key, JOB_DELIVER, PRIORITY_URGENT).await?;
    Ok(woken.and_then(|(_, channel, args)| {
        let d = args.get("delivery_id")?.as_str()?.parse::<Uuid>().ok()?;
        Some((d, channel))
    }))
}

/// The unique key of host `key`'s probe watcher job.
pub fn watcher_key(key: &str) -> String {
    format!("host_probe:{key}")
}

/// Makes sure the host's probe watcher (unique per host) runs no later than `at`.
async fn schedule_watcher(
    tx: &mut PgConnection,
    key: &str,
    at: Option<DateTime<Utc>>,
) -> Result<()> {
    let mut job = NewJob::new(
        QUEUE_CIRCUIT,
        JOB_HOST_PROBE,
        serde_json::json!({ "host_key": key }),
    )
    .priority(PRIORITY_URGENT)
    .unique_key(watcher_key(key))
    .max_attempts(1_000);
    job.scheduled_at = at;
    breakwater_queue::schedule_unique(&mut *tx, &job).await?;
    Ok(())
}

/// What the watcher reads when there is nothing to claim: state, next probe time, probe
/// deadline, database now.
type WatchRow = (
    String,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
);

/// What the host probe watcher should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStep {
    /// The host is closed: the watcher is done.
    Done,
    /// Look again after this long (database clock).
    Wait(Duration),
}

/// The host probe watcher's step (in the caller's transaction):
/// - `open` and the cooldown is over → `half_open` (one conditional UPDATE: generation + 1, a
///   lease), audited once, and one waiting delivery is woken as the probe (or the role waits
///   for the next delivery that arrives);
/// - `half_open`, lease expired, a probe was chosen → a new probe takes over (a transition,
///   audited once);
/// - `half_open`, lease expired, no probe ever chosen → no transition and no audit (see the
///   module doc's lease rule): look for a waiting delivery again, extend the lease;
/// - otherwise wait until the next moment, or stop when closed.
pub async fn watch_step(tx: &mut PgConnection, key: &str, cfg: &HostsConfig) -> Result<WatchStep> {
    let lease = Duration::from_millis(cfg.probe_lease_ms as u64);
    // A lease over with no probe ever chosen: extend it quietly, try to wake one again.
    let idle: Option<i64> = sqlx::query_scalar(
        "UPDATE host_circuits
         SET probe_deadline = now() + ($2::float8 * interval '1 millisecond')
         WHERE host_key = $1 AND state = 'half_open' AND probe_delivery_id IS NULL
           AND probe_deadline <= now()
         RETURNING generation",
    )
    .bind(key)
    .bind(cfg.probe_lease_ms)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(generation) = idle {
        set_probe(tx, key, generation).await?;
        return Ok(WatchStep::Wait(lease));
    }
    let claimed: Option<HostRow> = sqlx::query_as(
        "WITH before AS (SELECT host_key, state FROM host_circuits WHERE host_key = $1 FOR UPDATE)
         UPDATE host_circuits h
         SET state = 'half_open', changed_at = now(), generation = h.generation + 1,
             probe_delivery_id = NULL, probe_channel_id = NULL,
             probe_deadline = now() + ($2::float8 * interval '1 millisecond'), updated_at = now()
         FROM before
         WHERE h.host_key = before.host_key
           AND ((h.state = 'open' AND h.next_probe_at <= now())
             OR (h.state = 'half_open' AND h.probe_deadline <= now()))
         RETURNING h.host_key, h.generation, h.next_probe_at, before.state AS before",
    )
    .bind(key)
    .bind(cfg.probe_lease_ms)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(r) = claimed else {
        let row: Option<WatchRow> =
            sqlx::query_as(
                "SELECT state, next_probe_at, probe_deadline, now() FROM host_circuits WHERE host_key = $1",
            )
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
        let until = |at: DateTime<Utc>, now: DateTime<Utc>| {
            WatchStep::Wait((at - now).to_std().unwrap_or(Duration::ZERO))
        };
        return Ok(match row {
            Some((s, Some(next), _, now)) if s == "open" => until(next, now),
            Some((s, _, Some(deadline), now)) if s == "half_open" => until(deadline, now),
            _ => WatchStep::Done,
        });
    };
    let probe = set_probe(tx, key, r.generation).await?;
    let t = Transition {
        host_key: r.host_key,
        from: State::parse(&r.before)?,
        to: State::HalfOpen,
        generation: r.generation,
        next_probe_at: None,
    };
    let reason = if t.from == State::HalfOpen {
        "the host probe's lease expired; another probe takes over"
    } else {
        "cooldown over; probing the host"
    };
    audit::record(
        &mut *tx,
        &audit::Entry {
            actor: ACTOR_CIRCUIT_BREAKER,
            action: "host.probe_started",
            from_state: Some(t.from.as_str()),
            to_state: Some("half_open"),
            reason: Some(reason),
            channel_id: probe.map(|(_, c)| c),
            details: serde_json::json!({
                "host_key": t.host_key,
                "generation": t.generation,
                "probe_delivery_id": probe.map(|(d, _)| d),
            }),
            ..Default::default()
        },
    )
    .await?;
    tracing::info!(host_key = %t.host_key, generation = t.generation, probe = ?probe, "host probe started");
    Ok(WatchStep::Wait(lease))
}

/// Wakes one waiting delivery of the host and records it as the probe of `generation` (if the
/// role is still free).
async fn set_probe(
    tx: &mut PgConnection,
    key: &str,
    generation: i64,
) -> Result<Option<(Uuid, Uuid)>> {
    let woken = wake_host_probe(tx, key).await?;
    if let Some((d, c)) = woken {
        sqlx::query(
            "UPDATE host_circuits SET probe_delivery_id = $2, probe_channel_id = $3
             WHERE host_key = $1 AND generation = $4 AND probe_delivery_id IS NULL",
        )
        .bind(key)
        .bind(d)
        .bind(c)
        .bind(generation)
        .execute(&mut *tx)
        .await?;
    }
    Ok(woken)
}

/// The host probe of `generation` answered: closes the host (conditional on `half_open` and
/// the generation) and, for the winner, releases its channels, audits and alerts.
async fn probe_succeeded(
    tx: &mut PgConnection,
    channel_id: Uuid,
    generation: i64,
) -> Result<Option<Transition>> {
    let key: Option<String> = sqlx::query_scalar("SELECT host_key FROM channels WHERE id = $1")
        .bind(channel_id)
        .fetch_optional(&mut *tx)
        .await?
        .flatten();
    let Some(key) = key else { return Ok(None) };
    close(
        tx,
        &key,
        &["half_open"],
        Some(generation),
        "host probe answered",
        ACTOR_CIRCUIT_BREAKER,
    )
    .await
}

async fn probe_failed(
    tx: &mut PgConnection,
    channel_id: Uuid,
    generation: i64,
    reason: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    let key: Option<String> = sqlx::query_scalar(
        "SELECT h.host_key FROM channels c JOIN host_circuits h ON h.host_key = c.host_key
         WHERE c.id = $1 AND h.state = 'half_open' AND h.generation = $2",
    )
    .bind(channel_id)
    .bind(generation)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(key) = key else { return Ok(None) };
    // Conditional on the generation too: `open` re-checks the state under the row lock; a
    // takeover in between bumped the generation, checked here first.
    let still: Option<i64> = sqlx::query_scalar(
        "SELECT generation FROM host_circuits WHERE host_key = $1 AND state = 'half_open' AND generation = $2 FOR UPDATE",
    )
    .bind(&key)
    .bind(generation)
    .fetch_optional(&mut *tx)
    .await?;
    if still.is_none() {
        return Ok(None);
    }
    let why = format!("host probe failed: {reason}");
    open(
        tx,
        &key,
        &["half_open"],
        true,
        &why,
        ACTOR_CIRCUIT_BREAKER,
        cfg,
    )
    .await
}

/// Closes host `key` from one of `from` (and, for a probe result, `generation`): one
/// conditional UPDATE; the winner releases the host's channels, audits and alerts.
async fn close(
    tx: &mut PgConnection,
    key: &str,
    from: &[&str],
    generation: Option<i64>,
    reason: &str,
    actor: &str,
) -> Result<Option<Transition>> {
    let from: Vec<String> = from.iter().map(|s| s.to_string()).collect();
    let row: Option<HostRow> = sqlx::query_as(
        "WITH before AS (SELECT host_key, state, generation FROM host_circuits WHERE host_key = $1 FOR UPDATE)
         UPDATE host_circuits h
         SET state = 'closed', changed_at = now(), generation = h.generation + 1,
             probe_failures = 0, next_probe_at = NULL, probe_deadline = NULL,
             probe_delivery_id = NULL, probe_channel_id = NULL, updated_at = now()
         FROM before
         WHERE h.host_key = before.host_key AND before.state = ANY($2)
           AND ($3::int8 IS NULL OR before.generation = $3)
         RETURNING h.host_key, h.generation, h.next_probe_at, before.state AS before",
    )
    .bind(key)
    .bind(&from)
    .bind(generation)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(r) = row else { return Ok(None) };
    let t = Transition {
        host_key: r.host_key,
        from: State::parse(&r.before)?,
        to: State::Closed,
        generation: r.generation,
        next_probe_at: None,
    };
    sqlx::query("DELETE FROM host_failures WHERE host_key = $1")
        .bind(key)
        .execute(&mut *tx)
        .await?;
    let released = release_host_jobs(tx, key).await?;
    let action = if actor == ACTOR_CIRCUIT_BREAKER {
        "host.closed"
    } else {
        "host.forced_closed"
    };
    effects(tx, &t, action, actor, reason, EVENT_CLOSED, released).await?;
    tracing::info!(host_key = %t.host_key, generation = t.generation, released, "host circuit closed");
    Ok(Some(t))
}

/// An operator's change of a host circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manual {
    /// Open now (park every channel on the host; a probe follows after the cooldown). From
    /// `closed` or `half_open`.
    ForceOpen,
    /// Close now and release every channel on the host. From `open` or `half_open`.
    ForceClose,
}

/// Applies an operator's change with one conditional UPDATE; `None` when the host is already
/// where the change would put it (nothing written, no audit row) or does not exist.
pub async fn apply_manual(
    tx: &mut PgConnection,
    key: &str,
    change: Manual,
    actor: &str,
    reason: &str,
    cfg: &HostsConfig,
) -> Result<Option<Transition>> {
    match change {
        Manual::ForceOpen => {
            open(tx, key, &["closed", "half_open"], false, reason, actor, cfg).await
        }
        Manual::ForceClose => close(tx, key, &["open", "half_open"], None, reason, actor).await,
    }
}

/// A host circuit as the operator sees it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct HostCircuit {
    /// The host key (see [`host_key`]).
    pub host_key: String,
    /// `closed` | `open` | `half_open`.
    #[schema(value_type = State)]
    pub state: String,
    /// Bumped by every transition.
    pub generation: i64,
    /// When the state last changed.
    pub changed_at: DateTime<Utc>,
    /// When the next probe may run, while open.
    pub next_probe_at: Option<DateTime<Utc>>,
    /// Failed host probes in a row (the cooldown doubles with each).
    pub probe_failures: i32,
    /// The delivery that is the half-open probe, once chosen.
    pub probe_delivery_id: Option<Uuid>,
    /// Last failure that opened or re-opened the host.
    pub last_failure_at: Option<DateTime<Utc>>,
    /// Its reason.
    pub last_failure_reason: Option<String>,
    /// Operator override of the threshold (distinct failing channels); null = configuration.
    pub failure_threshold: Option<i32>,
    /// Operator override of the first cooldown, ms; null = configuration.
    pub cooldown_ms: Option<i64>,
    /// Operator override of the cap of deliveries in flight to the host; null = configuration.
    pub max_in_flight: Option<i32>,
    /// Live channels on the host.
    pub channels: i64,
    /// Waiting jobs of those channels held by the host (0 while the host's gate is not parked).
    pub parked: i64,
    /// Deliveries of those channels in flight now, cluster-wide.
    pub in_flight: i64,
    /// The cap in force: the override or `hosts.max_in_flight`; null = not capped.
    pub cap: Option<i32>,
}

const HOST_SELECT: &str = "SELECT h.host_key, h.state, h.generation, h.changed_at, h.next_probe_at,
        h.probe_failures, h.probe_delivery_id, h.last_failure_at, h.last_failure_reason,
        h.failure_threshold, h.cooldown_ms, h.max_in_flight,
        (SELECT count(*) FROM channels c WHERE c.host_key = h.host_key AND c.deleted_at IS NULL) AS channels,
        CASE WHEN x.parked THEN
            (SELECT count(*) FROM job_groups g
               JOIN jobs j ON j.group_id = g.group_id AND j.state IN ('available', 'scheduled')
             WHERE g.gate_key = h.host_key)
        ELSE 0 END AS parked,
        (SELECT coalesce(sum(g.in_flight), 0) FROM job_groups g WHERE g.gate_key = h.host_key)::int8 AS in_flight,
        coalesce(x.max_in_flight, h.max_in_flight, $1) AS cap
     FROM host_circuits h LEFT JOIN job_gates x ON x.gate_key = h.host_key";

/// A page of host circuits by host key, optionally only those in `state`.
pub async fn list(
    conn: &mut PgConnection,
    state: Option<&str>,
    cfg: &HostsConfig,
    page: &crate::page::Keyset<String>,
) -> Result<Vec<HostCircuit>> {
    let sql = format!(
        "{HOST_SELECT} WHERE ($2::text IS NULL OR h.state = $2){}{} LIMIT $3",
        page.seek("h.host_key", 4),
        page.order_by("h.host_key"),
    );
    let mut q = sqlx::query_as(&sql)
        .bind(cfg.default_cap())
        .bind(state)
        .bind(page.limit);
    if let Some(after) = &page.after {
        q = q.bind(after.clone());
    }
    Ok(q.fetch_all(&mut *conn).await?)
}

/// One host circuit, or [`Error::NotFound`].
pub async fn get(conn: &mut PgConnection, key: &str, cfg: &HostsConfig) -> Result<HostCircuit> {
    sqlx::query_as(&format!("{HOST_SELECT} WHERE h.host_key = $2"))
        .bind(cfg.default_cap())
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(Error::NotFound("host"))
}

/// Operator overrides of one host (`PATCH`): `None` leaves a field alone, `Some(None)` returns
/// it to the configuration's.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Distinct failing channels that open the host (1–10000).
    pub failure_threshold: Option<Option<i32>>,
    /// First cooldown, ms (1–86400000).
    pub cooldown_ms: Option<Option<i64>>,
    /// Cap of deliveries in flight to the host (1–100000).
    pub max_in_flight: Option<Option<i32>>,
}

/// Applies `o` to host `key` (checked: errors name the field) and writes one
/// `host.settings_changed` audit row by `actor` with the old and new values of what changed
/// (none when nothing did). [`Error::NotFound`] for an unknown host.
pub async fn set_overrides(
    tx: &mut PgConnection,
    key: &str,
    o: &Overrides,
    actor: &str,
) -> Result<()> {
    let in_range = |field: &'static str, v: Option<i64>, min: i64, max: i64, unit: &str| match v {
        Some(v) if !(min..=max).contains(&v) => Err(Error::invalid(
            field,
            format!("must be between {min} and {max}{unit}"),
        )),
        _ => Ok(()),
    };
    // At least 2 distinct channels: one channel's failures alone are its own circuit's job.
    in_range(
        "failure_threshold",
        o.failure_threshold.flatten().map(i64::from),
        2,
        10_000,
        " (distinct failing channels; one channel alone is its own circuit's job)",
    )?;
    in_range(
        "cooldown_ms",
        o.cooldown_ms.flatten(),
        1,
        86_400_000,
        " (24 h)",
    )?;
    in_range(
        "max_in_flight",
        o.max_in_flight.flatten().map(i64::from),
        1,
        100_000,
        "",
    )?;
    type Vals = (Option<i32>, Option<i64>, Option<i32>);
    let old: Vals = sqlx::query_as(
        "SELECT failure_threshold, cooldown_ms, max_in_flight FROM host_circuits WHERE host_key = $1 FOR UPDATE",
    )
    .bind(key)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound("host"))?;
    let new: Vals = (
        o.failure_threshold.unwrap_or(old.0),
        o.cooldown_ms.unwrap_or(old.1),
        o.max_in_flight.unwrap_or(old.2),
    );
    if new == old {
        return Ok(());
    }
    sqlx::query(
        "UPDATE host_circuits SET failure_threshold = $2, cooldown_ms = $3, max_in_flight = $4,
             updated_at = now() WHERE host_key = $1",
    )
    .bind(key)
    .bind(new.0)
    .bind(new.1)
    .bind(new.2)
    .execute(&mut *tx)
    .await?;
    if new.2 != old.2 {
        breakwater_queue::set_gate_max_in_flight(&mut *tx, key, new.2).await?;
    }
    let as_json = |v: &Vals| serde_json::json!({ "failure_threshold": v.0, "cooldown_ms": v.1, "max_in_flight": v.2 });
    let details =
        audit::changes(&as_json(&old), &as_json(&new)).unwrap_or_else(|| serde_json::json!({}));
    let mut details = details;
    details["host_key"] = serde_json::json!(key);
    audit::record(
        &mut *tx,
        &audit::Entry {
            actor,
            action: "host.settings_changed",
            details,
            ..Default::default()
        },
    )
    .await?;
    Ok(())
}

/// What [`reconcile_gates`] repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Closed hosts whose gate was still parked: released.
    pub released: u64,
    /// Open or half-open hosts whose gate was not parked: parked.
    pub parked: u64,
}

/// The safety net for a missed park or release of a host (the host part of the parking
/// reconciler, run beside [`crate::circuit::reconcile_parking`]): compares every host circuit
/// with its gate's parked flag and repairs a mismatch with the same one-row park or release,
/// each in its own transaction under the host row's lock, re-checked there. Reads the parked
/// gates and the hosts that are not closed (two partial indexes), never a job.
pub async fn reconcile_gates(conn: &mut PgConnection) -> Result<Reconciled> {
    let parked = breakwater_queue::parked_gates(&mut *conn).await?;
    let to_release: Vec<String> = sqlx::query_scalar(
        "SELECT k FROM unnest($1::text[]) k
         WHERE NOT EXISTS (SELECT 1 FROM host_circuits h WHERE h.host_key = k AND h.state <> 'closed')
           AND EXISTS (SELECT 1 FROM host_circuits h WHERE h.host_key = k)",
    )
    .bind(&parked)
    .fetch_all(&mut *conn)
    .await?;
    let to_park: Vec<String> = sqlx::query_scalar(
        "SELECT host_key FROM host_circuits WHERE state <> 'closed' AND NOT (host_key = ANY($1))",
    )
    .bind(&parked)
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Reconciled::default();
    for (keys, park) in [(to_release, false), (to_park, true)] {
        for key in keys {
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let state: Option<String> = sqlx::query_scalar(
                "SELECT state FROM host_circuits WHERE host_key = $1 FOR UPDATE",
            )
            .bind(&key)
            .fetch_optional(&mut *tx)
            .await?;
            let gate_parked = breakwater_queue::gate_state(&mut *tx, &key)
                .await?
                .is_some_and(|g| g.parked);
            let needs = match state.as_deref() {
                Some("closed") => !park && gate_parked,
                Some(_) => park && !gate_parked,
                None => false,
            };
            if needs {
                let jobs = if park {
                    out.parked += 1;
                    park_host_jobs(&mut tx, &key).await?
                } else {
                    out.released += 1;
                    release_host_jobs(&mut tx, &key).await?
                };
                tracing::warn!(host_key = %key, jobs, park, "reconciler: repaired a missed host park or release");
            }
            tx.commit().await?;
        }
    }
    Ok(out)
}

/// Gives every live channel without a host key its key at granularity `g` (channels created
/// before host circuits existed, or a granularity change on a restart is *not* re-applied: keys
/// are set when a URL is set). One transaction per channel. Returns how many were keyed.
pub async fn rekey_missing(conn: &mut PgConnection, g: Granularity) -> Result<u64> {
    let rows: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT id, url FROM channels WHERE host_key IS NULL AND deleted_at IS NULL ORDER BY id LIMIT 10000",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut n = 0;
    for (id, url) in rows {
        let Ok(key) = host_key(&url, g) else { continue };
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        sqlx::query("SELECT 1 FROM channels WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        assign(&mut tx, id, &key).await?;
        tx.commit().await?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_granularity_keeps_explicit_non_default_ports() {
        let k = |u| host_key(u, Granularity::Host).unwrap();
        assert_eq!(k("https://API.Example.com/hooks?x=1"), "api.example.com");
        assert_eq!(k("https://api.example.com:443/a"), "api.example.com");
        assert_eq!(k("http://api.example.com:80/a"), "api.example.com");
        assert_eq!(k("https://api.example.com:8443/a"), "api.example.com:8443");
        assert_eq!(k("http://127.0.0.1:41234/ep-1"), "127.0.0.1:41234");
        assert_ne!(k("http://127.0.0.1:41234/a"), k("http://127.0.0.1:41235/a"));
        assert_eq!(k("http://127.0.0.1:41234/a"), k("http://127.0.0.1:41234/b"));
        assert_eq!(k("http://[::1]:8080/a"), "[::1]:8080");
        assert_eq!(k("https://example.com./a"), "example.com");
        // IDNA: the url crate gives the punycode form.
        assert_eq!(k("https://bücher.example/a"), "xn--bcher-kva.example");
    }

    #[test]
    fn domain_granularity_uses_the_public_suffix_list() {
        let k = |u| host_key(u, Granularity::Domain).unwrap();
        assert_eq!(k("https://a.b.example.co.uk/x"), "example.co.uk");
        assert_eq!(k("https://hooks.slack.com/services/T/B"), "slack.com");
        assert_eq!(k("https://maxime.medium.com:8443/feed"), "medium.com");
        assert_eq!(k("https://foo.github.io/x"), "foo.github.io");
        // IP literals and names without a registrable domain fall back to the host rule.
        assert_eq!(k("http://127.0.0.1:41234/x"), "127.0.0.1:41234");
        assert_eq!(k("http://localhost:8080/x"), "localhost:8080");
        assert_eq!(k("https://co.uk/x"), "co.uk");
    }

    #[test]
    fn a_url_without_a_host_has_no_key() {
        assert!(host_key("mailto:a@example.com", Granularity::Host).is_err());
        assert!(host_key("not a url", Granularity::Host).is_err());
    }

    #[test]
    fn the_host_gate_passes_closed_parks_open_and_hands_out_one_probe() {
        let d = Uuid::new_v4();
        let other = Uuid::new_v4();
        assert_eq!(decide(None, None, None, d), HostGate::Pass);
        assert_eq!(decide(Some("closed"), Some(3), None, d), HostGate::Pass);
        assert_eq!(decide(Some("open"), Some(3), None, d), HostGate::Park);
        assert_eq!(
            decide(Some("half_open"), Some(4), Some(d), d),
            HostGate::Probe(4)
        );
        assert_eq!(
            decide(Some("half_open"), Some(4), Some(other), d),
            HostGate::Park
        );
        assert_eq!(
            decide(Some("half_open"), Some(4), None, d),
            HostGate::Claim(4)
        );
    }

    #[test]
    fn default_config_is_valid_and_bad_values_are_named() {
        assert!(HostsConfig::default().validate().is_ok());
        let c = HostsConfig {
            failure_threshold: 1,
            ..Default::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .contains("hosts.failure_threshold"));
        let c = HostsConfig {
            max_cooldown_ms: 1,
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().contains("hosts.max_cooldown_ms"));
        let c = HostsConfig {
            max_in_flight: Some(-1),
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().contains("hosts.max_in_flight"));
        // 0 is allowed: no default per-host cap.
        let c = HostsConfig {
            max_in_flight: Some(0),
            ..HostsConfig::default()
        };
        assert!(c.validate().is_ok());
        assert_eq!(c.default_cap(), None);
        assert_eq!(
            HostsConfig::default().default_cap(),
            Some(DEFAULT_HOST_MAX_IN_FLIGHT)
        );
    }
}
