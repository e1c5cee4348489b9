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
//! **A dead host**: with `--dead-channels K` and `--dead-tenants T` (defaults 1 and 1:
//! the one dead channel above, report unchanged) the backlog goes to K channels spread over T
//! tenants (channel `i` belongs to dead tenant `i mod T`), all on the same dead endpoint (one
//! port, paths `/dead/<i>`, so one host key), the backlog split evenly across them (at least 1
//! each). The report then also has `dead_host`: when the host circuit opened (audit `host.opened`
//! and the first 10-ms poll of `host_circuits` that saw it), the requests the host received
//! before that and in all, how many channel circuits opened, the probes, and the budget of
//! [`host_budget`].

mod cast;
mod dead_host;
mod latency_chart;
mod options;
mod report;
mod seen;
mod summary;
mod watch;

pub use dead_host::{failures_to_open, host_budget};
pub use options::{DeadOrdering, Options};
pub(crate) use seen::ms_between;
pub use seen::probes_allowed;
pub use summary::print_summary;

use crate::clock::{now_us, WallMap};
use crate::cpu::{PhaseCost, Probe};
use crate::prune::PruneRun;
use crate::receiver::{DeadEndpoint, PHASE_BASELINE, PHASE_LOADED, PHASE_WARMUP};
use crate::stream::{stream, StreamResult};
use crate::Stage;
use anyhow::Context;
use breakwater::config::Settings;
use breakwater_core::Tier;
use cast::Cast;
use seen::Seen;
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;
use watch::{monitor, watch_host, watch_open, Sample};

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

/// The scenario on a running service: the cast, the measured run, what was seen after it, and
/// the report built from them.
async fn scenario(
    o: &Options,
    tier: Tier,
    settings: &Settings,
    stage: &Stage<'_>,
    dead: &DeadEndpoint,
    pool: &PgPool,
) -> anyhow::Result<Value> {
    let cast = Cast::create(o, tier, stage, dead, pool).await?;
    let m = measure(o, settings, stage, dead, pool, &cast).await?;
    let seen = Seen::read(pool, &stage.api, &cast, &m, dead).await?;
    report::build(o, tier, settings, &stage.healthy.sink, dead, &m, &seen)
}

/// What the measured run did (harness-clock times in µs).
struct Measured {
    /// Whether this is a dead-host run ([`Options::multi`]).
    multi: bool,
    /// The baseline stream.
    base: StreamResult,
    /// The loaded stream.
    loaded: StreamResult,
    /// Wall clock → harness clock, taken when the backlog's enqueue started.
    wall: WallMap,
    /// The first backlog batch request's send.
    backlog_start_us: u64,
    /// The last backlog batch request's answer.
    backlog_end_us: u64,
    /// The loaded stream's end (its last enqueue request answered).
    loaded_end_us: u64,
    /// The loaded stream's drain's end.
    end_us: u64,
    /// Backlog deliveries the API accepted.
    enqueued: u64,
    /// The queue monitor's samples (one a second from the backlog's end).
    samples: Vec<Sample>,
    /// When a poll first saw a dead channel's circuit open.
    open_seen_us: Option<u64>,
    /// When a poll first saw the host circuit open, and the requests the dead endpoint held
    /// then (a dead-host run only).
    host_seen: Option<(u64, Option<u64>)>,
    /// The harness's retention pass (with `--prune-rows`).
    prune_run: Option<PruneRun>,
    /// How long the seeding of the old rows took, s.
    seed_s: f64,
    /// The dead channels' ids.
    dead_uuids: Vec<Uuid>,
    /// The healthy channel's id.
    healthy_uuid: Uuid,
    /// The dead host's key, as the service computed it (the first dead channel's).
    host_key: Option<String>,
    /// CPU of the baseline phase (its stream's start → its drain's end).
    cpu_baseline: PhaseCost,
    /// CPU of the loaded phase (the backlog's first batch → the loaded stream's drain's end).
    cpu_loaded: PhaseCost,
}

/// The measured run: the warm-up, the baseline stream and its drain, the backlog, the loaded
/// stream and its drain (with the pruner, with `--prune-rows`), with the monitor and the
/// watchers beside them.
async fn measure(
    o: &Options,
    settings: &Settings,
    stage: &Stage<'_>,
    dead: &DeadEndpoint,
    pool: &PgPool,
    cast: &Cast,
) -> anyhow::Result<Measured> {
    let api = &stage.api;
    let sink = &stage.healthy.sink;
    let multi = o.multi();
    let Cast {
        ref dead_tenants,
        healthy_tenant: ref tb,
        ref dead_chs,
        ref healthy_ch,
        ref prune_pool,
        seed_s,
    } = *cast;
    let log = |s: String| o.run.log(&s);

    // Warm-up: connections and caches, not reported.
    let warm = stream(
        api,
        tb,
        healthy_ch,
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
    let probe = Probe::new(pool).await;
    let cpu_start = probe.start(pool).await?;
    let base = stream(api, tb, healthy_ch, PHASE_BASELINE, o.rate, o.duration).await;
    sink.wait_for(PHASE_BASELINE, base.accepted.len() as u64, o.drain_timeout)
        .await;
    let cpu_baseline = probe.finish(pool, &cpu_start).await?;

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
    let cpu_start = probe.start(pool).await?;
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
        dead.gauge(),
        backlog_start_us,
        matches!(o.dead_mode, crate::receiver::DeadMode::Slow),
        stop_monitor.clone(),
    ));
    let pruner = (o.prune_rows > 0).then(|| {
        tokio::spawn(crate::prune::run(
            prune_pool.clone(),
            settings.retention.clone(),
        ))
    });
    let loaded = stream(api, tb, healthy_ch, PHASE_LOADED, o.rate, o.duration).await;
    let loaded_end_us = now_us();
    sink.wait_for(PHASE_LOADED, loaded.accepted.len() as u64, o.drain_timeout)
        .await;
    let end_us = now_us();
    let cpu_loaded = probe.finish(pool, &cpu_start).await?;
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
    Ok(Measured {
        multi,
        base,
        loaded,
        wall,
        backlog_start_us,
        backlog_end_us,
        loaded_end_us,
        end_us,
        enqueued,
        samples,
        open_seen_us,
        host_seen,
        prune_run,
        seed_s,
        dead_uuids,
        healthy_uuid,
        host_key,
        cpu_baseline,
        cpu_loaded,
    })
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
        // 50 channels of 5 tenants: up to 10 of one tenant, then one of another.
        assert_eq!(failures_to_open(3, 50, 5), 11);
        assert_eq!(failures_to_open(3, 50, 1), 3);
        assert_eq!(failures_to_open(3, 4, 2), 3);
    }
}
