//! Scenario `isolation`: while tenant A's dead channel holds a backlog, tenant B's healthy
//! channel in the same tier gets a steady stream; the same stream without the backlog, earlier
//! in the same run, is the baseline.
//!
//! Order of a run: start the service, the receivers, two tenants and their channels; a short
//! warm-up (not reported); the **baseline** stream to B and its drain; the **backlog**: `N`
//! deliveries to A's dead channel in batches of up to 1000; at once after the last batch is
//! accepted, the **loaded** stream to B (same rate and duration) and its drain. The breaker
//! opens whenever the service gets to it: the harness does not wait for the backlog to be parked
//! before it measures.
//!
//! With `--dead-mode slow` the "dead" endpoint is only slow: it answers 200 after `--slow-ms`, so
//! its circuit never opens and the backlog drains at whatever concurrency the service grants the
//! channel. Whatever the mode, the report gives the most requests the dead endpoint held at once
//! (`dead_max_in_flight`) and how many it received (`dead_endpoint_requests`).
//!
//! **A dead host** (issue 13): with `--dead-channels K` and `--dead-tenants T` (defaults 1 and 1:
//! the one dead channel above, report unchanged) the backlog goes to K channels spread over T
//! tenants (channel `i` belongs to dead tenant `i mod T`), all on the same dead endpoint (one
//! port, paths `/dead/<i>`, so one host key), the backlog split evenly across them (at least 1
//! each). The report then also has `dead_host`: when the host circuit opened (audit `host.opened`
//! and the first 10-ms poll of `host_circuits` that saw it), the requests the host received
//! before that and in all, how many channel circuits opened, the probes, and the budget of
//! [`host_budget`].

use crate::chart::{self, Marker, Panel};
use crate::clock::{now_us, WallMap};
use crate::receiver::{
    DeadEndpoint, DeadMode, InFlight, Sink, PHASE_BASELINE, PHASE_LOADED, PHASE_WARMUP,
};
use crate::service::{self, ServiceOptions};
use crate::stats::{summarize, Summary};
use crate::stream::{stream, StreamResult};
use crate::{RunOptions, Stage};
use anyhow::Context;
use breakwater::config::Settings;
use breakwater_core::Tier;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Options of the isolation scenario.
#[derive(Debug, Clone)]
pub struct Options {
    /// Deliveries enqueued to the dead channel(s) before the measured stream (split evenly
    /// over `dead_channels`, at least 1 each).
    pub backlog: u64,
    /// Dead channels, all on the one dead endpoint (one host); 1 = the original scenario.
    pub dead_channels: usize,
    /// Tenants the dead channels are spread over (round robin); ≤ `dead_channels`.
    pub dead_tenants: usize,
    /// How the dead endpoint fails.
    pub dead_mode: DeadMode,
    /// With [`DeadMode::Slow`]: how long the dead endpoint takes to answer 200.
    pub slow: Duration,
    /// Healthy deliveries per second.
    pub rate: f64,
    /// Length of each stream (baseline and loaded).
    pub duration: Duration,
    /// After a stream, how long to wait for its deliveries to arrive.
    pub drain_timeout: Duration,
    /// Deliveries per backlog batch request (≤ 1000).
    pub backlog_batch: usize,
    /// Old finished deliveries (each with an attempt and a completed job) seeded before the
    /// baseline and pruned by the retention pruner while the loaded stream runs (0 = none); see
    /// [`crate::prune`].
    pub prune_rows: u64,
    /// The service (its `tier` is every tenant's).
    pub service: ServiceOptions,
    /// The run's database, `result.json` (and `latency.svg`) and progress log.
    pub run: RunOptions,
}

impl Options {
    /// Whether this is the dead-host variant (more than one dead channel or tenant).
    pub fn multi(&self) -> bool {
        self.dead_channels > 1 || self.dead_tenants > 1
    }

    /// The backlog of dead channel `i`: `backlog` split evenly (the first `backlog mod K` get
    /// one more), at least 1 each.
    pub fn share(&self, i: usize) -> u64 {
        let k = self.dead_channels.max(1) as u64;
        (self.backlog / k + u64::from((i as u64) < self.backlog % k)).max(1)
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            backlog: 10_000,
            dead_channels: 1,
            dead_tenants: 1,
            dead_mode: DeadMode::Timeout,
            slow: Duration::from_secs(2),
            rate: 50.0,
            duration: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(60),
            backlog_batch: 1000,
            prune_rows: 0,
            service: ServiceOptions::default(),
            run: RunOptions::default(),
        }
    }
}

/// Runs the scenario end to end (its own database, service and receivers, all cleaned up) and
/// returns the report that `result.json` holds.
pub async fn run(o: &Options) -> anyhow::Result<Value> {
    let tier = o.service.parse_tier()?;
    anyhow::ensure!(o.rate > 0.0, "--rate must be positive");
    anyhow::ensure!(
        (1..=1000).contains(&o.backlog_batch),
        "--backlog-batch must be 1..=1000"
    );
    anyhow::ensure!(o.dead_channels >= 1, "--dead-channels must be at least 1");
    anyhow::ensure!(
        (1..=o.dead_channels).contains(&o.dead_tenants),
        "--dead-tenants must be 1..=--dead-channels"
    );
    let mut settings = o.service.settings()?;
    if o.prune_rows > 0 {
        // The harness runs the pruner itself, once, when the loaded stream starts (with these
        // settings); the nodes' own pruner must not start before (its first run is one interval
        // after the start: push it past any run).
        settings.retention.interval_ms = 10 * 86_400_000;
        // Nor the queue's own job pruner (finished jobs after worker.job_retention_ms, 10 000
        // a minute), which would delete seeded jobs during the baseline too.
        settings.worker.job_retention_ms = 100 * 86_400_000;
        if settings.retention.deliveries_days == 0 {
            settings.retention.deliveries_days = 30;
        }
    }
    crate::on_service(&o.run, o.service.nodes, &settings, async |stage| {
        let dead = DeadEndpoint::start(o.dead_mode, o.slow).await?;
        // A dead host run has one more poller (the host circuit's state).
        let pool = stage.db.pool(if o.multi() { 3 } else { 2 }).await?;
        let r = scenario(o, tier, &settings, stage, &dead, &pool).await;
        // The dead endpoint before the nodes stop: its hanging requests are answered at once.
        dead.stop().await;
        pool.close().await;
        r
    })
    .await
}

/// action, at, from_state, to_state, details.parked.
type AuditRow = (
    String,
    DateTime<Utc>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

/// A host circuit's audit row: action, at, from_state, to_state, details.jobs, details.channels,
/// details.tenants.
type HostAuditRow = (
    String,
    DateTime<Utc>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// One monitor sample of the queue.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Sample {
    t_s: f64,
    dead_available: i64,
    dead_executing: i64,
    dead_scheduled: i64,
    healthy_available: i64,
    healthy_executing: i64,
}

async fn monitor(
    pool: PgPool,
    dead: Vec<Uuid>,
    healthy: Uuid,
    origin_us: u64,
    stop: CancellationToken,
) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Bounded: at most one hour of samples.
    for _ in 0..3600 {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let t_s = (now_us() as f64 - origin_us as f64) / 1e6;
        let r: Result<(i64, i64, i64, i64, i64), _> = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE group_id = ANY($1) AND state = 'available'),
                    count(*) FILTER (WHERE group_id = ANY($1) AND state = 'executing'),
                    count(*) FILTER (WHERE group_id = ANY($1) AND state = 'scheduled'),
                    count(*) FILTER (WHERE group_id = $2 AND state = 'available'),
                    count(*) FILTER (WHERE group_id = $2 AND state = 'executing')
             FROM jobs WHERE (group_id = ANY($1) OR group_id = $2)
               AND state IN ('available', 'executing', 'scheduled')",
        )
        .bind(&dead)
        .bind(healthy)
        .fetch_one(&pool)
        .await;
        if let Ok((a, e, s, ha, he)) = r {
            out.push(Sample {
                t_s: (t_s * 10.0).round() / 10.0,
                dead_available: a,
                dead_executing: e,
                dead_scheduled: s,
                healthy_available: ha,
                healthy_executing: he,
            });
        }
    }
    out
}

/// Polls the channels' circuit states every 10 ms until one leaves `closed` (or `stop`, or an
/// hour): the harness time at which the opening became visible, i.e. committed. The audit row's
/// `at` is the opening transaction's start (`now()`), which can be much earlier.
async fn watch_open(pool: PgPool, channels: Vec<Uuid>, stop: CancellationToken) -> Option<u64> {
    for _ in 0..360_000 {
        let open: Result<bool, _> = sqlx::query_scalar(
            "SELECT coalesce(bool_or(circuit_state <> 'closed'), false) FROM channels WHERE id = ANY($1)",
        )
        .bind(&channels)
        .fetch_one(&pool)
        .await;
        let at = now_us();
        if open.is_ok_and(|o| o) {
            return Some(at);
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    }
    None
}

/// Polls the host circuit `host_key` every 10 ms until it leaves `closed` (or `stop`, or an
/// hour): the harness time (µs) at which the opening became visible (committed), and the
/// requests the dead endpoint held at that moment (`None` for `refuse`: nothing listens).
async fn watch_host(
    pool: PgPool,
    host_key: String,
    gauge: Option<std::sync::Arc<InFlight>>,
    stop: CancellationToken,
) -> Option<(u64, Option<u64>)> {
    for _ in 0..360_000 {
        let state: Result<Option<String>, _> =
            sqlx::query_scalar("SELECT state FROM host_circuits WHERE host_key = $1")
                .bind(&host_key)
                .fetch_optional(&pool)
                .await;
        let at = now_us();
        if state.is_ok_and(|s| s.is_some_and(|s| s != "closed")) {
            return Some((at, gauge.as_ref().map(|g| g.current())));
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    }
    None
}

/// The dead host's request budget (issue 13), from the code (`crates/core/src/hosts.rs`, the
/// fetch's gate cap): `threshold` distinct channels' failures open the host; every request
/// admitted before the opening committed may still be sent, and at most `in_flight_cap` are in
/// flight at once (the host gate's cluster-wide cap, `hosts.max_in_flight`, and never more than
/// the tier's pools); after the opening, the host is parked and only host probes go, at most
/// `host_probes` (one per cooldown, doubling). Channel probes wait while the host holds.
///
/// This is the "threshold + in flight" with the in-flight part at its cap, **not a hard
/// bound**: failures are counted one at a time under the host row's lock, so more than
/// `threshold` requests can finish before the opening commits (a burst of timeouts), and each
/// slot they free can be refilled by the fetch until the park commits. The report gives the
/// parts (`attempts_completed_before_host_open`, `in_flight_at_host_open_by_attempt_times`) so
/// an excess can be read off.
pub fn host_budget(threshold: u64, in_flight_cap: u64, host_probes: u64) -> u64 {
    threshold + in_flight_cap + host_probes
}

/// Accepted but never received, for one stream.
fn lost(sink: &Sink, phase: u8, s: &StreamResult) -> (u64, u64) {
    sink.with(phase, |p| {
        let lost = s
            .accepted
            .iter()
            .filter(|&&seq| p.seen.get(seq as usize).copied().unwrap_or(0) == 0)
            .count() as u64;
        (lost, p.duplicates)
    })
}

fn panel(sink: &Sink, phase: u8, s: &StreamResult, title: String) -> Panel {
    let points = sink.with(phase, |p| {
        p.timeline
            .iter()
            .map(|&(at, lat)| {
                (
                    (at as f64 - lat as f64 - s.start_us as f64) / 1e6,
                    (lat as f64 / 1000.0).max(0.01),
                )
            })
            .collect::<Vec<_>>()
    });
    let x_max = points.iter().map(|p| p.0).fold(0.0f64, f64::max).ceil() + 1.0;
    Panel {
        title,
        points,
        x_max,
        ..Panel::default()
    }
}

/// How many deliveries of a stream took over 100 ms and over 1 s, and the enqueue time (s since
/// the stream started) of the last one over 100 ms: how long the disturbance lasted.
fn slow(sink: &Sink, phase: u8, s: &StreamResult) -> Value {
    sink.with(phase, |p| {
        let over = |ms: u64| p.timeline.iter().filter(|t| t.1 > ms * 1000).count();
        let last = p
            .timeline
            .iter()
            .filter(|t| t.1 > 100_000)
            .map(|&(at, lat)| (at - lat) as f64 - s.start_us as f64)
            .fold(f64::NAN, f64::max);
        json!({
            "over_100ms": over(100),
            "over_1s": over(1000),
            "last_over_100ms_enqueued_at_s": (!last.is_nan()).then(|| (last / 1e5).round() / 10.0),
        })
    })
}

/// Milliseconds from `from_us` to `to_us` (harness-clock µs), rounded to 0.1 ms.
pub(crate) fn ms_between(from_us: i64, to_us: i64) -> f64 {
    ((to_us - from_us) as f64 / 100.0).round() / 10.0
}

/// The number of probe times (cooldown, then doubling, capped) that fall within `span_ms` of
/// the opening: each may cost the dead endpoint one request.
pub fn probes_allowed(span_ms: f64, cooldown_ms: i64, max_cooldown_ms: i64) -> u64 {
    let mut t = 0.0;
    let mut c = cooldown_ms.max(1) as f64;
    let mut n = 0;
    while n < 10_000 {
        t += c;
        if t > span_ms {
            break;
        }
        n += 1;
        c = (c * 2.0).min(max_cooldown_ms.max(1) as f64);
    }
    n
}

async fn scenario(
    o: &Options,
    tier: Tier,
    settings: &Settings,
    stage: &Stage<'_>,
    dead: &DeadEndpoint,
    pool: &PgPool,
) -> anyhow::Result<Value> {
    let (api, healthy) = (&stage.api, stage.healthy);
    let multi = o.multi();
    let mut dead_tenants = vec![api.create_tenant("lt-dead-tenant", tier.as_str()).await?];
    for j in 1..o.dead_tenants {
        dead_tenants.push(
            api.create_tenant(&format!("lt-dead-tenant-{j}"), tier.as_str())
                .await?,
        );
    }
    let ta = &dead_tenants[0];
    let tb = api
        .create_tenant("lt-healthy-tenant", tier.as_str())
        .await?;
    // Dead channel `i` belongs to dead tenant `i mod T`; with one channel, as before.
    let mut dead_chs: Vec<String> = Vec::with_capacity(o.dead_channels);
    for i in 0..o.dead_channels {
        let (name, url) = if multi {
            (format!("dead-{i}"), dead.url_for(i))
        } else {
            ("dead".to_string(), dead.url.clone())
        };
        dead_chs.push(
            api.create_channel(&dead_tenants[i % o.dead_tenants], &name, &url)
                .await?,
        );
    }
    let dead_ch = &dead_chs[0];
    let healthy_ch = api
        .create_channel(&tb, "healthy", &healthy.url("healthy"))
        .await?;
    let sink = &healthy.sink;
    let prune_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with((*pool.connect_options()).clone())
        .await?;
    let mut seed_s = 0.0;
    if o.prune_rows > 0 {
        let tc = api.create_tenant("lt-old-tenant", tier.as_str()).await?;
        let old_ch = api.create_channel(&tc, "old", &healthy.url("old")).await?;
        eprintln!(
            "[{:>7.1}s] seeding {} old finished deliveries (with attempts and jobs)",
            now_us() as f64 / 1e6,
            o.prune_rows
        );
        seed_s = crate::prune::seed_old(pool, tc.id.parse()?, old_ch.parse()?, o.prune_rows)
            .await
            .context("seeding old rows")?;
    }
    let log = |s: String| o.run.log(&s);

    // Warm-up: connections and caches, not reported.
    let warm = stream(
        api,
        &tb,
        &healthy_ch,
        PHASE_WARMUP,
        20.0,
        Duration::from_secs(1),
    )
    .await;
    sink.wait_for(
        PHASE_WARMUP,
        warm.accepted.len() as u64,
        Duration::from_secs(30),
    )
    .await;

    log(format!(
        "baseline: {} deliveries/s for {} s, no backlog",
        o.rate,
        o.duration.as_secs_f64()
    ));
    let base = stream(api, &tb, &healthy_ch, PHASE_BASELINE, o.rate, o.duration).await;
    sink.wait_for(PHASE_BASELINE, base.accepted.len() as u64, o.drain_timeout)
        .await;

    log(format!(
        "backlog: {} deliveries to the dead channel ({})",
        o.backlog,
        o.dead_mode.as_str()
    ));
    let dead_uuids: Vec<Uuid> = dead_chs
        .iter()
        .map(|c| c.parse())
        .collect::<Result<_, _>>()?;
    let healthy_uuid: Uuid = healthy_ch.parse()?;
    // The dead host's key, as the service computed it (one port: one key for every channel).
    let host_keys: Vec<Option<String>> =
        sqlx::query_scalar("SELECT DISTINCT host_key FROM channels WHERE id = ANY($1)")
            .bind(&dead_uuids)
            .fetch_all(pool)
            .await?;
    let host_key = host_keys.first().cloned().flatten();
    if multi {
        anyhow::ensure!(
            host_keys.len() == 1 && host_key.is_some(),
            "the dead channels do not share one host key: {host_keys:?}"
        );
    }
    let stop_watch = CancellationToken::new();
    let watch = tokio::spawn(watch_open(
        pool.clone(),
        dead_uuids.clone(),
        stop_watch.clone(),
    ));
    let host_watch = match (&host_key, multi) {
        (Some(k), true) => Some(tokio::spawn(watch_host(
            pool.clone(),
            k.clone(),
            dead.gauge(),
            stop_watch.clone(),
        ))),
        _ => None,
    };
    let wall = WallMap::now();
    let backlog_start_us = now_us();
    let mut enqueued = 0u64;
    let mut seq = 0u64;
    for (i, ch) in dead_chs.iter().enumerate() {
        let tenant = &dead_tenants[i % o.dead_tenants];
        let end = seq + o.share(i);
        while seq < end {
            let n = (end - seq).min(o.backlog_batch as u64);
            let payloads: Vec<Value> = (seq..seq + n).map(|i| json!({"backlog": i})).collect();
            enqueued += api
                .enqueue_batch(tenant, ch, &payloads)
                .await
                .context("enqueueing the backlog")? as u64;
            seq += n;
        }
    }
    let backlog_end_us = now_us();
    log(format!(
        "backlog enqueued in {:.0} ms; loaded stream: {} deliveries/s for {} s",
        (backlog_end_us - backlog_start_us) as f64 / 1000.0,
        o.rate,
        o.duration.as_secs_f64()
    ));

    let stop_monitor = CancellationToken::new();
    let mon = tokio::spawn(monitor(
        pool.clone(),
        dead_uuids.clone(),
        healthy_uuid,
        backlog_start_us,
        stop_monitor.clone(),
    ));
    let pruner = (o.prune_rows > 0).then(|| {
        tokio::spawn(crate::prune::run(
            prune_pool.clone(),
            settings.retention.clone(),
        ))
    });
    let loaded = stream(api, &tb, &healthy_ch, PHASE_LOADED, o.rate, o.duration).await;
    let loaded_end_us = now_us();
    sink.wait_for(PHASE_LOADED, loaded.accepted.len() as u64, o.drain_timeout)
        .await;
    let end_us = now_us();
    let prune_run = match pruner {
        Some(h) => Some(h.await.context("the pruner panicked")??),
        None => None,
    };
    prune_pool.close().await;
    stop_monitor.cancel();
    stop_watch.cancel();
    let samples = mon.await.unwrap_or_default();
    let open_seen_us = watch.await.ok().flatten();
    let host_seen = match host_watch {
        Some(h) => h.await.ok().flatten(),
        None => None,
    };
    log("measured; collecting".into());

    // What the database saw.
    let audit: Vec<AuditRow> = sqlx::query_as(
        "SELECT action, at, from_state, to_state, (details->>'parked')::int8
         FROM audit_log WHERE channel_id = ANY($1) ORDER BY at, id",
    )
    .bind(&dead_uuids)
    .fetch_all(pool)
    .await?;
    let attempts: Vec<(DateTime<Utc>, i32, bool, Uuid)> = sqlx::query_as(
        "SELECT started_at, duration_ms, probe, channel_id FROM delivery_attempts
         WHERE channel_id = ANY($1) ORDER BY started_at",
    )
    .bind(&dead_uuids)
    .fetch_all(pool)
    .await?;
    let statuses: Vec<(String, i64)> = sqlx::query_as(
        "SELECT status, count(*) FROM deliveries WHERE channel_id = ANY($1) GROUP BY status ORDER BY status",
    )
    .bind(&dead_uuids)
    .fetch_all(pool)
    .await?;
    let healthy_attempts: (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE outcome <> 'success') FROM delivery_attempts WHERE channel_id = $1",
    )
    .bind(healthy_uuid)
    .fetch_one(pool)
    .await?;
    let circuit_end = api
        .channel(ta, dead_ch)
        .await
        .map(|v| v["circuit"].clone())
        .unwrap_or(Value::Null);

    // Latency.
    let healthy_sum = sink.with(PHASE_LOADED, |p| summarize(&p.hist));
    let baseline_sum = sink.with(PHASE_BASELINE, |p| summarize(&p.hist));
    let (lost_base, dup_base) = lost(sink, PHASE_BASELINE, &base);
    let (lost_loaded, dup_loaded) = lost(sink, PHASE_LOADED, &loaded);

    // The breaker.
    let opened_at = audit
        .iter()
        .find(|a| a.0 == "circuit.opened")
        .map(|a| wall.to_us(a.1));
    let first_attempt_us = attempts.first().map(|a| wall.to_us(a.0));
    let breaker_opened_after_ms = opened_at.map(|t| ms_between(backlog_start_us as i64, t));
    let arrivals = dead.arrivals();
    let (dead_requests, source) = match dead.in_flight() {
        None => (attempts.len() as u64, "delivery_attempts (nothing listens)"),
        Some(g) => (g.total(), "dead receiver"),
    };
    let dead_max_in_flight = dead.in_flight().map(InFlight::max);
    // The budget: `threshold` failures, then whatever was in flight when the breaker opened
    // (a worker that was admitted before the opening committed sends once, then blocks on the
    // channel row; so at most one per worker of the tier, cluster-wide), then one request per
    // probe, and probes come at most once per cooldown (doubling).
    let threshold = u64::try_from(settings.circuit.failure_threshold).unwrap_or(0);
    let probe_requests = audit
        .iter()
        .filter(|a| a.0 == "circuit.probe_started")
        .count() as u64;
    let non_probe_requests = dead_requests.saturating_sub(probe_requests);
    let in_flight_at_open = non_probe_requests.saturating_sub(threshold);
    let in_flight_cap = service::tier_pool(settings, tier) as u64 * o.service.nodes as u64;
    let span_ms = opened_at.map_or(0.0, |o| ms_between(o, end_us as i64));
    let probes_budget = probes_allowed(
        span_ms,
        settings.circuit.cooldown_ms,
        settings.circuit.max_cooldown_ms,
    );
    let budget = threshold + in_flight_at_open.min(in_flight_cap) + probes_budget;
    // A slow endpoint never fails, so its circuit never opens and no budget applies.
    let within_budget = (o.dead_mode != DeadMode::Slow).then_some(dead_requests <= budget);
    // When the dead endpoint saw its last non-probe request, relative to the opening.
    let probe_starts: Vec<DateTime<Utc>> = attempts.iter().filter(|a| a.2).map(|a| a.0).collect();
    let last_non_probe_us = match o.dead_mode {
        DeadMode::Refuse => attempts
            .iter()
            .filter(|a| !a.2)
            .map(|a| wall.to_us(a.0))
            .max(),
        _ => arrivals
            .iter()
            .filter(|&&t| {
                !probe_starts
                    .iter()
                    .any(|p| (wall.to_us(*p) - t as i64).abs() < 50_000)
            })
            .map(|&t| t as i64)
            .max(),
    };
    let in_flight_db = attempts
        .iter()
        .filter(|(s, d, p, _)| {
            let s = wall.to_us(*s);
            !*p && opened_at.is_some_and(|o| s <= o && s + i64::from(*d) * 1000 > o)
        })
        .count();

    let lost_total = lost_base + lost_loaded;
    let ratio = if baseline_sum.p95_ms > 0.0 {
        Some((healthy_sum.p95_ms / baseline_sum.p95_ms * 100.0).round() / 100.0)
    } else {
        None
    };
    let all_parked_s = samples
        .iter()
        .find(|s| s.dead_available == 0 && s.dead_scheduled > 0)
        .map(|s| s.t_s);

    let transitions: Vec<Value> = audit
        .iter()
        .map(|(action, at, from, to, parked)| {
            json!({
                "action": action,
                "from": from,
                "to": to,
                "parked_in_bulk": parked,
                "after_backlog_start_ms": ms_between(backlog_start_us as i64, wall.to_us(*at)),
                "after_loaded_stream_start_ms": ms_between(loaded.start_us as i64, wall.to_us(*at)),
            })
        })
        .collect();

    // The dead host (issue 13): only with several dead channels or tenants.
    let host_audit: Vec<HostAuditRow> = match (&host_key, multi) {
        (Some(k), true) => {
            sqlx::query_as(
                "SELECT action, at, from_state, to_state, (details->>'jobs')::int8,
                        (details->>'channels')::int8, (details->>'tenants')::int8
                 FROM audit_log WHERE action LIKE 'host.%' AND details->>'host_key' = $1
                 ORDER BY at, id",
            )
            .bind(k)
            .fetch_all(pool)
            .await?
        }
        _ => Vec::new(),
    };
    let dead_host = multi.then(|| {
        let hs = &settings.hosts;
        let host_open_at = host_audit
            .iter()
            .find(|a| a.0 == "host.opened")
            .map(|a| wall.to_us(a.1));
        let host_seen_us = host_seen.map(|h| h.0 as i64);
        // "Before the opening": before the first poll that saw it committed (else its
        // transaction's start).
        let boundary = host_seen_us.or(host_open_at);
        let request_times: Vec<i64> = match o.dead_mode {
            DeadMode::Refuse => attempts.iter().map(|a| wall.to_us(a.0)).collect(),
            _ => arrivals.iter().map(|&t| t as i64).collect(),
        };
        let before = boundary.map(|b| request_times.iter().filter(|&&t| t < b).count() as u64);
        let after = before.map(|b| dead_requests.saturating_sub(b));
        // By the attempts' times (database clock), against the opening transaction's start.
        let ends = |a: &(DateTime<Utc>, i32, bool, Uuid)| wall.to_us(a.0) + i64::from(a.1) * 1000;
        let completed_before = host_open_at.map(|o| attempts.iter().filter(|a| ends(a) <= o).count());
        let in_flight_at_open_db = host_open_at.map(|o| {
            attempts
                .iter()
                .filter(|a| wall.to_us(a.0) <= o && ends(a) > o)
                .count()
        });
        let channels_before = boundary.map(|b| {
            attempts
                .iter()
                .filter(|a| wall.to_us(a.0) < b)
                .map(|a| a.3)
                .collect::<std::collections::HashSet<_>>()
                .len()
        });
        let channels_hit = attempts
            .iter()
            .map(|a| a.3)
            .collect::<std::collections::HashSet<_>>()
            .len();
        let count = |rows: &[AuditRow], action: &str| rows.iter().filter(|a| a.0 == action).count();
        let host_count = |action: &str| host_audit.iter().filter(|a| a.0 == action).count();
        let host_probes = host_count("host.probe_started") as u64;
        let probe_attempts = attempts.iter().filter(|a| a.2).count() as u64;
        let threshold = u64::try_from(hs.failure_threshold).unwrap_or(0);
        // No per-host cap (the default): what the pools can hold at once.
        let cap = hs
            .max_in_flight
            .and_then(|m| u64::try_from(m).ok())
            .map_or(in_flight_cap, |c| c.min(in_flight_cap));
        let host_span_ms = host_open_at.map_or(0.0, |o| ms_between(o, end_us as i64));
        let host_probes_allowed = probes_allowed(host_span_ms, hs.cooldown_ms, hs.max_cooldown_ms);
        let budget = host_budget(threshold, cap, host_probes_allowed);
        let within = (o.dead_mode != DeadMode::Slow).then_some(dead_requests <= budget);
        let host_transitions: Vec<Value> = host_audit
            .iter()
            .map(|(action, at, from, to, jobs, channels, tenants)| {
                json!({
                    "action": action,
                    "from": from,
                    "to": to,
                    "jobs": jobs,
                    "channels": channels,
                    "tenants": tenants,
                    "after_backlog_start_ms": ms_between(backlog_start_us as i64, wall.to_us(*at)),
                })
            })
            .collect();
        json!({
            "host_key": host_key,
            "channels": o.dead_channels,
            "tenants": o.dead_tenants,
            "backlog_per_channel": {"min": o.share(o.dead_channels - 1), "max": o.share(0)},
            "host_opened_after_ms": host_seen_us.map(|t| ms_between(backlog_start_us as i64, t)),
            "host_opened_definition": "from the first backlog batch request to the first 10-ms poll of host_circuits that saw the host leave closed (the opening committed)",
            "host_open_tx_started_after_ms": host_open_at.map(|t| ms_between(backlog_start_us as i64, t)),
            "host_opened_after_first_request_ms": host_open_at.zip(request_times.iter().min()).map(|(o, f)| ms_between(*f, o)),
            "requests_total": dead_requests,
            "requests_before_host_open": before,
            "requests_after_host_open": after,
            "requests_before_definition": "received by the dead endpoint (refuse: attempts started) before the first poll that saw the host open",
            "in_flight_at_host_open": host_seen.and_then(|h| h.1),
            "in_flight_at_host_open_definition": "requests the dead endpoint held when the poll saw the host open (null for refuse)",
            "in_flight_at_host_open_by_attempt_times": in_flight_at_open_db,
            "attempts_completed_before_host_open": completed_before,
            "channels_with_requests_before_host_open": channels_before,
            "channels_with_requests": channels_hit,
            "channel_circuits_opened": count(&audit, "circuit.opened"),
            "channel_probes_started": count(&audit, "circuit.probe_started"),
            "host_probes_started": host_probes,
            "probe_attempts": probe_attempts,
            "host_transitions_by_action": {
                "host.opened": host_count("host.opened"),
                "host.reopened": host_count("host.reopened"),
                "host.probe_started": host_probes,
                "host.closed": host_count("host.closed"),
            },
            "budget": {
                "host_failure_threshold": threshold,
                "in_flight_cap": cap,
                "in_flight_cap_definition": "min(hosts.max_in_flight, the tier's pool × nodes): the host gate's cluster-wide cap",
                "host_probes_allowed": host_probes_allowed,
                "budget": budget,
                "within": within,
                "without_host_circuit": o.dead_channels as u64 * u64::try_from(settings.circuit.failure_threshold).unwrap_or(0),
                "without_host_circuit_definition": "dead channels × circuit.failure_threshold: what the channels' own circuits alone would cost at the least",
            },
            "transitions": host_transitions,
            "host_settings": {
                "failure_threshold": hs.failure_threshold,
                "failure_window_ms": hs.failure_window_ms,
                "cooldown_ms": hs.cooldown_ms,
                "max_cooldown_ms": hs.max_cooldown_ms,
                "max_in_flight": hs.max_in_flight,
            },
        })
    });

    let mut report = json!({
        "scenario": "isolation",
        "backlog": o.backlog,
        "dead_mode": o.dead_mode.as_str(),
        "nodes": o.service.nodes,
        "tier": tier.as_str(),
        "rate_per_s": o.rate,
        "duration_s": o.duration.as_secs_f64(),
        "healthy": healthy_sum,
        "baseline": baseline_sum,
        "healthy_p95_over_baseline_p95": ratio,
        "slow": {
            "baseline": slow(sink, PHASE_BASELINE, &base),
            "healthy": slow(sink, PHASE_LOADED, &loaded),
        },
        "latency_definition": "harness clock at the enqueue request's send (in the payload) → harness clock at the receiver; includes the API request",
        "api_enqueue": {
            "baseline": summarize(&base.api_hist),
            "healthy": summarize(&loaded.api_hist),
        },
        "dead_slow_ms": (o.dead_mode == DeadMode::Slow).then_some(o.slow.as_millis() as u64),
        "dead_endpoint_requests": dead_requests,
        "dead_endpoint_requests_source": source,
        "dead_max_in_flight": dead_max_in_flight,
        "dead_max_in_flight_definition": "the most requests the dead endpoint held at once (counted from arrival until its answer or the connection's close); null for refuse",
        "dead_endpoint_attempts_recorded": attempts.len(),
        "dead_endpoint_budget": {
            "failure_threshold": threshold,
            "in_flight_at_open": in_flight_at_open,
            "in_flight_at_open_cap": in_flight_cap,
            "in_flight_at_open_by_attempt_times": in_flight_db,
            "probes_allowed": probes_budget,
            "probe_requests": probe_requests,
            "budget": budget,
            "within": within_budget,
            "last_non_probe_request_after_open_ms": opened_at.zip(last_non_probe_us).map(|(o, l)| ms_between(o, l)),
        },
        "breaker_opened_after_ms": open_seen_us.map(|t| ms_between(backlog_start_us as i64, t as i64)),
        "breaker_opened_definition": "from the first backlog batch request to the first 10-ms poll that saw the channel's circuit_state leave closed (the opening committed)",
        "breaker_open_tx_started_after_ms": breaker_opened_after_ms,
        "breaker_opened_after_first_attempt_ms": opened_at.zip(first_attempt_us).map(|(o, f)| ms_between(f, o)),
        "backlog_all_parked_after_s": all_parked_s,
        "transitions": transitions,
        "circuit_at_end": circuit_end,
        "prune": prune_run.map(|run| {
            crate::prune::report(
                o.prune_rows,
                seed_s,
                &settings.retention,
                &run,
                loaded_end_us,
                sink,
                baseline_sum,
            )
        }),
        "lost": lost_total,
        "lost_detail": {"baseline": lost_base, "healthy": lost_loaded},
        "duplicates": dup_base + dup_loaded,
        "enqueue_errors": base.errors + loaded.errors,
        "generator_skipped": base.skipped + loaded.skipped,
        "healthy_attempts": {"total": healthy_attempts.0, "failed": healthy_attempts.1},
        "backlog_enqueued": enqueued,
        "backlog_enqueue_ms": ms_between(backlog_start_us as i64, backlog_end_us as i64),
        "backlog_status": statuses.iter().map(|(s, n)| (s.clone(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "backlog_accounted": statuses.iter().map(|s| s.1).sum::<i64>() as u64 == enqueued,
        "queue_samples": samples,
        "throughput_per_s": Value::Null,
        "goals": {
            "required_p95_under_1s": healthy_sum.p95_ms < 1000.0,
            "goal_p95_under_100ms": healthy_sum.p95_ms < 100.0,
            "goal_p95_within_1_5x_baseline": ratio.is_some_and(|r| r <= 1.5),
            "lost_zero": lost_total == 0,
            "dead_requests_within_budget": within_budget,
        },
        "service_settings": {
            "pool_high": settings.worker.pool_high,
            "pool_default": settings.worker.pool_default,
            "pool_bulk": settings.worker.pool_bulk,
            "connect_timeout_ms": settings.worker.connect_timeout_ms,
            "request_timeout_ms": settings.worker.request_timeout_ms,
            "promote_interval_ms": settings.worker.promote_interval_ms,
            "poll_interval_ms": settings.worker.poll_interval_ms,
            "max_connections_per_node": settings.database.max_connections,
            "failure_threshold": settings.circuit.failure_threshold,
            "cooldown_ms": settings.circuit.cooldown_ms,
            "max_cooldown_ms": settings.circuit.max_cooldown_ms,
        },
    });

    if let Some(h) = &dead_host {
        report["dead_channels"] = json!(o.dead_channels);
        report["dead_tenants"] = json!(o.dead_tenants);
        // With a dead host, the budget that applies is the host's (the channel budget above
        // assumes one channel).
        report["goals"]["dead_requests_within_budget"] = h["budget"]["within"].clone();
        report["dead_host"] = h.clone();
    }

    if let Some(dir) = &o.run.out {
        std::fs::create_dir_all(dir)?;
        let base_panel = panel(
            sink,
            PHASE_BASELINE,
            &base,
            format!("baseline (no backlog): p95 {:.1} ms", baseline_sum.p95_ms),
        );
        let mut loaded_panel = panel(
            sink,
            PHASE_LOADED,
            &loaded,
            format!(
                "with {} dead-channel backlog ({}): p95 {:.1} ms",
                o.backlog,
                o.dead_mode.as_str(),
                healthy_sum.p95_ms
            ),
        );
        let rel = |us: i64| (us - loaded.start_us as i64) as f64 / 1e6;
        loaded_panel.markers = vec![
            Marker {
                t_s: rel(backlog_start_us as i64),
                label: "backlog.enqueue_started".into(),
            },
            Marker {
                t_s: rel(backlog_end_us as i64),
                label: "backlog.enqueued".into(),
            },
        ];
        if let Some(t) = open_seen_us {
            loaded_panel.markers.push(Marker {
                t_s: rel(t as i64),
                label: "circuit.open_seen".into(),
            });
        }
        if multi {
            // Dozens of channel transitions would bury the chart: the host's only.
            if let Some((t, _)) = host_seen {
                loaded_panel.markers.push(Marker {
                    t_s: rel(t as i64),
                    label: "host.open_seen".into(),
                });
            }
            loaded_panel
                .markers
                .extend(host_audit.iter().map(|a| Marker {
                    t_s: rel(wall.to_us(a.1)),
                    label: a.0.clone(),
                }));
        } else {
            loaded_panel.markers.extend(audit.iter().map(|a| Marker {
                t_s: rel(wall.to_us(a.1)),
                label: a.0.clone(),
            }));
        }
        loaded_panel.x_min = rel(backlog_start_us as i64).floor().min(0.0);
        loaded_panel.dead_requests = match o.dead_mode {
            DeadMode::Refuse => attempts.iter().map(|a| rel(wall.to_us(a.0))).collect(),
            _ => arrivals.iter().map(|&a| rel(a as i64)).collect(),
        };
        let x_max = base_panel.x_max.max(loaded_panel.x_max);
        let mut panels = [base_panel, loaded_panel];
        for p in &mut panels {
            p.x_max = x_max;
        }
        chart::latency_svg(
            &dir.join("latency.svg"),
            &format!(
                "Healthy channel latency, {} /s, {} node(s); the dead channel's backlog and breaker transitions marked (t < 0: before the stream)",
                o.rate, o.service.nodes
            ),
            &panels,
        )?;
    }
    Ok(report)
}

/// Prints the human summary of an isolation report (`run`'s) to stdout.
pub fn print_summary(r: &Value) {
    let s = |k: &str| -> Summary { serde_json::from_value(r[k].clone()).unwrap_or_default() };
    println!(
        "isolation: backlog {} ({}), {} node(s), {} /s for {} s",
        r["backlog"],
        r["dead_mode"].as_str().unwrap_or("?"),
        r["nodes"],
        r["rate_per_s"],
        r["duration_s"]
    );
    println!("  baseline  {}", s("baseline"));
    println!("  healthy   {}", s("healthy"));
    println!(
        "  p95 ratio to baseline: {}   breaker opened after {} ms (from the backlog's first enqueue)",
        r["healthy_p95_over_baseline_p95"], r["breaker_opened_after_ms"]
    );
    println!(
        "  healthy over 100 ms: {}, over 1 s: {}, the last one over 100 ms was enqueued at {} s",
        r["slow"]["healthy"]["over_100ms"],
        r["slow"]["healthy"]["over_1s"],
        r["slow"]["healthy"]["last_over_100ms_enqueued_at_s"]
    );
    // A slow endpoint never fails: no breaker, so no budget.
    let budget = if r["dead_endpoint_budget"]["within"].is_null() {
        String::new()
    } else {
        format!(
            " (budget {}: threshold {} + in flight at open {} + probes {})",
            r["dead_endpoint_budget"]["budget"],
            r["dead_endpoint_budget"]["failure_threshold"],
            r["dead_endpoint_budget"]["in_flight_at_open"],
            r["dead_endpoint_budget"]["probes_allowed"]
        )
    };
    println!(
        "  dead endpoint: {} requests, at most {} in flight at once{budget}",
        r["dead_endpoint_requests"], r["dead_max_in_flight"],
    );
    if !r["dead_host"].is_null() {
        let h = &r["dead_host"];
        println!(
            "  dead host {}: {} channels of {} tenants; host opened after {} ms; requests {} before it opened, {} in all (budget {}: host threshold {} + in-flight cap {} + host probes {}; without host circuit ≥ {})",
            h["host_key"].as_str().unwrap_or("?"),
            h["channels"],
            h["tenants"],
            h["host_opened_after_ms"],
            h["requests_before_host_open"],
            h["requests_total"],
            h["budget"]["budget"],
            h["budget"]["host_failure_threshold"],
            h["budget"]["in_flight_cap"],
            h["budget"]["host_probes_allowed"],
            h["budget"]["without_host_circuit"],
        );
        println!(
            "  in flight at host open {}; channel circuits opened {}; host probes {}; channel probes {}",
            h["in_flight_at_host_open"],
            h["channel_circuits_opened"],
            h["host_probes_started"],
            h["channel_probes_started"],
        );
    }
    println!(
        "  lost {}  duplicates {}  enqueue errors {}  backlog accounted {}",
        r["lost"], r["duplicates"], r["enqueue_errors"], r["backlog_accounted"]
    );
    if !r["prune"].is_null() {
        let p = &r["prune"];
        println!(
            "  pruned {} deliveries + {} attempts + {} jobs in {} s ({} rows/s, {} batches); finished within the stream: {}",
            p["deliveries_deleted"],
            p["attempts_deleted"],
            p["jobs_deleted"],
            p["seconds"],
            p["rows_per_s"],
            p["batches"],
            p["finished_before_loaded_stream_ended"]
        );
        let during: Summary =
            serde_json::from_value(p["healthy_while_pruning"].clone()).unwrap_or_default();
        println!(
            "  healthy while pruning {during}  p95 ratio to baseline: {}",
            p["healthy_while_pruning_p95_over_baseline_p95"]
        );
        let after: Summary =
            serde_json::from_value(p["healthy_after_pruning"].clone()).unwrap_or_default();
        println!(
            "  healthy after pruning {after}  while ÷ after p95: {}",
            p["healthy_while_pruning_p95_over_after_p95"]
        );
    }
    println!("  goals: {}", r["goals"]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_budget_follows_the_doubling_cooldown() {
        assert_eq!(probes_allowed(10_000.0, 30_000, 600_000), 0);
        assert_eq!(probes_allowed(30_000.0, 30_000, 600_000), 1);
        assert_eq!(probes_allowed(89_000.0, 30_000, 600_000), 1);
        assert_eq!(probes_allowed(90_000.0, 30_000, 600_000), 2);
        // Capped: 1 s, 2 s, 2 s, 2 s …
        assert_eq!(probes_allowed(7_000.0, 1_000, 2_000), 4);
    }

    #[test]
    fn the_backlog_is_split_evenly_over_the_dead_channels_at_least_one_each() {
        let o = |backlog, k| Options {
            backlog,
            dead_channels: k,
            ..Options::default()
        };
        // The default: one channel takes it all.
        assert!(!o(10_000, 1).multi());
        assert_eq!(o(10_000, 1).share(0), 10_000);
        let x = o(10_000, 50);
        assert!(x.multi());
        assert_eq!((0..50).map(|i| x.share(i)).sum::<u64>(), 10_000);
        assert!((0..50).all(|i| x.share(i) == 200));
        // Uneven: the first `backlog mod K` get one more.
        let x = o(103, 5);
        assert_eq!(
            (0..5).map(|i| x.share(i)).collect::<Vec<_>>(),
            [21, 21, 21, 20, 20]
        );
        // Fewer deliveries than channels: one each anyway.
        let x = o(3, 10);
        assert!((0..10).all(|i| x.share(i) == 1));
        // Several tenants alone make it a dead-host run too.
        let t = Options {
            dead_tenants: 2,
            dead_channels: 2,
            ..Options::default()
        };
        assert!(t.multi());
        assert_eq!(host_budget(3, 128, 1), 132);
    }
}
