//! Scenario `fairness`: two tenants of one tier. Tenant A enqueues a backlog of `count`
//! deliveries spread round-robin over `channels` channels whose endpoints answer 200 after
//! `a_latency`; `b_delay` after the last of A's batches is accepted, tenant B enqueues one
//! delivery to an endpoint that answers at once. How long B's delivery takes, and how many of A's
//! arrive before it, shows whether the tier's workers are shared between tenants or taken in
//! arrival order.
//!
//! A round: A's backlog through the batch API (delivery `i` to channel `i mod channels`, each
//! channel's share in batches of up to 1000, `concurrency` requests at once), the pause, B's
//! delivery, then the wait for B's arrival and for the whole of A's backlog. Each of `rounds`
//! rounds starts on a fresh backlog once the previous one has drained, and is reported on its
//! own: B's latency (accepted → arrival at its receiver, harness clock; and `delivered_at −
//! created_at` from the deliveries table, database clock), A's deliveries that arrived before
//! B's, A's drain time (first batch accepted → last arrival), and the most of A's requests in
//! flight at once, per endpoint and in all.
//!
//! The service's per-tenant ingress limit (`api.ingress_per_second`) is turned off for the run
//! unless `keep_ingress_limit`: the batch API takes one channel per request, so with 1000
//! channels A's backlog is 1000 requests, which the default 100 requests/s would stretch over
//! ten seconds while the workers drain it; B would then meet no backlog at all.

use crate::api::{Api, TenantKey};
use crate::clock::now_us;
use crate::isolation::ms_between;
use crate::receiver::{HealthyReceiver, InFlight, SlowReceiver, PHASE_FAIRNESS, PHASE_WARMUP};
use crate::service::{self, ServiceOptions};
use crate::{RunOptions, Stage};
use anyhow::Context;
use breakwater::config::Settings;
use breakwater_core::Tier;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Most deliveries in one batch request (the API's `max_batch_size` default).
const MAX_BATCH: u64 = 1000;

/// Options of the fairness scenario.
#[derive(Debug, Clone)]
pub struct Options {
    /// Tenant A's channels, each with its own endpoint on the slow receiver.
    pub channels: usize,
    /// How long A's endpoints take to answer 200.
    pub a_latency: Duration,
    /// Deliveries in A's backlog, per round.
    pub count: u64,
    /// From A's last accepted batch to B's delivery.
    pub b_delay: Duration,
    /// Rounds, each on a fresh backlog.
    pub rounds: u64,
    /// API requests in flight at once, for creating A's channels and enqueueing its batches.
    pub concurrency: usize,
    /// A round gives up waiting for its arrivals this long after B's delivery was accepted.
    pub timeout: Duration,
    /// Keep the service's per-tenant ingress limit instead of turning it off.
    pub keep_ingress_limit: bool,
    /// The service (its `tier` is both tenants').
    pub service: ServiceOptions,
    /// The run's database, `result.json` and progress log.
    pub run: RunOptions,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            channels: 5,
            a_latency: Duration::from_millis(200),
            count: 1000,
            b_delay: Duration::from_millis(1000),
            rounds: 1,
            concurrency: 16,
            timeout: Duration::from_secs(300),
            keep_ingress_limit: false,
            service: ServiceOptions::default(),
            run: RunOptions::default(),
        }
    }
}

/// What one round measured. Times are on the harness clock unless the name says `db`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RoundReport {
    /// Round number, from 0.
    pub round: u64,
    /// A's deliveries accepted.
    pub a_accepted: u64,
    /// A's batch requests.
    pub a_batch_requests: usize,
    /// First batch request sent → last batch accepted, ms.
    pub a_enqueue_ms: f64,
    /// A's deliveries received (distinct).
    pub a_received: u64,
    /// A's deliveries accepted but not received by the end of the round.
    pub a_lost: u64,
    /// A's deliveries not yet received when B's was accepted.
    pub a_waiting_at_b_accept: u64,
    /// A's deliveries received before B's.
    pub a_before_b: Option<u64>,
    /// A's deliveries whose `delivered_at` is before B's.
    pub a_before_b_db: Option<i64>,
    /// B's latency: its enqueue request answered 202 → arrival at B's receiver, ms.
    pub b_latency_ms: Option<f64>,
    /// B's latency from the moment its enqueue request was sent, ms.
    pub b_latency_from_send_ms: Option<f64>,
    /// B's `delivered_at − created_at` in the deliveries table, ms.
    pub b_db_latency_ms: Option<f64>,
    /// B's delivery was accepted but not received by the end of the round.
    pub b_lost: bool,
    /// A's first batch accepted → A's last arrival, s.
    pub a_drain_s: Option<f64>,
    /// A's first `created_at` → last `delivered_at` in the deliveries table, s.
    pub a_db_drain_s: Option<f64>,
    /// The most of A's requests in flight at once, all endpoints together.
    pub a_max_in_flight_total: u64,
    /// The most of A's requests in flight at once on any one endpoint.
    pub a_max_in_flight_per_endpoint: u64,
    /// How many endpoints reached each maximum (`{"4": 5}`: five endpoints peaked at 4).
    pub a_max_in_flight_per_endpoint_histogram: BTreeMap<u64, usize>,
}

/// Runs the scenario end to end (its own database, service and receivers, all cleaned up) and
/// returns the report that `result.json` holds.
pub async fn run(o: &Options) -> anyhow::Result<Value> {
    let tier = o.service.parse_tier()?;
    anyhow::ensure!(o.channels >= 1, "--channels must be at least 1");
    anyhow::ensure!(o.count >= 1, "--count must be at least 1");
    anyhow::ensure!(o.rounds >= 1, "--rounds must be at least 1");
    anyhow::ensure!(o.concurrency >= 1, "--concurrency must be at least 1");
    let mut settings = o.service.settings()?;
    if !o.keep_ingress_limit {
        settings.api.ingress_per_second = 0;
    }
    crate::on_service(&o.run, o.service.nodes, &settings, async |stage| {
        let a = SlowReceiver::start(o.channels, o.a_latency).await?;
        let pool = stage.db.pool(2).await?;
        let r = scenario(o, tier, &settings, stage, &a, &pool).await;
        // A's receiver before the nodes stop: its held requests are answered at once.
        a.stop().await;
        pool.close().await;
        r
    })
    .await
}

/// What every round works with.
struct Run<'a> {
    o: &'a Options,
    api: Api,
    ta: TenantKey,
    tb: TenantKey,
    a_channels: Arc<Vec<String>>,
    b_channel: String,
    a: &'a SlowReceiver,
    b: &'a HealthyReceiver,
}

impl Run<'_> {
    fn log(&self, s: String) {
        self.o.run.log(&s);
    }
}

/// A's batches of round `round` in sending order: the `j`-th delivery of channel `c` is
/// delivery `c + j × channels`; batch `k` of a channel holds its deliveries `j` in
/// `k·1000 .. (k+1)·1000`, and the batches go out `k` by `k`, channel by channel.
fn batches(count: u64, channels: usize) -> Vec<(usize, Vec<u64>)> {
    let n = channels as u64;
    let per_channel = count.div_ceil(n);
    let mut out = Vec::new();
    for k in 0..per_channel.div_ceil(MAX_BATCH) {
        for c in 0..channels {
            let seqs: Vec<u64> = (k * MAX_BATCH..(k + 1) * MAX_BATCH)
                .map(|j| c as u64 + j * n)
                .take_while(|&seq| seq < count)
                .collect();
            if !seqs.is_empty() {
                out.push((c, seqs));
            }
        }
    }
    out
}

async fn scenario(
    o: &Options,
    tier: Tier,
    settings: &Settings,
    stage: &Stage<'_>,
    a: &SlowReceiver,
    pool: &PgPool,
) -> anyhow::Result<Value> {
    let (api, b) = (stage.api.clone(), stage.healthy);
    let ta = api.create_tenant("lt-fair-a", tier.as_str()).await?;
    let tb = api.create_tenant("lt-fair-b", tier.as_str()).await?;
    let created = Instant::now();
    let specs: Vec<(String, String)> = (0..o.channels)
        .map(|i| (format!("a-{i}"), a.url(i)))
        .collect();
    let a_channels = api.create_channels(&ta, &specs, o.concurrency).await?;
    let b_channel = api.create_channel(&tb, "b", &b.url("b")).await?;
    let channels_s = created.elapsed().as_secs_f64();
    let run = Run {
        o,
        api,
        ta,
        tb,
        a_channels: Arc::new(a_channels),
        b_channel,
        a,
        b,
    };
    run.log(format!(
        "{} channels of tenant A created in {channels_s:.1} s",
        o.channels
    ));

    // Warm-up: B's path (connections, caches), not reported.
    let sent = now_us();
    let warm = json!({"phase": PHASE_WARMUP, "seq": 0, "sent_us": sent});
    let ok = run.api.enqueue(&run.tb, &run.b_channel, &warm).await?;
    anyhow::ensure!(ok, "the warm-up delivery was not accepted");
    b.sink
        .wait_for(PHASE_WARMUP, 1, Duration::from_secs(30))
        .await;

    let probe = crate::cpu::Probe::new(pool).await;
    let cpu_start = probe.start(pool).await?;
    let mut rounds = Vec::new();
    for r in 0..o.rounds {
        let mut rep = round(&run, r).await?;
        db_figures(pool, &run, &mut rep).await?;
        run.log(format!(
            "round {r}: B {} ms, {} of A's before it",
            json!(rep.b_latency_ms),
            json!(rep.a_before_b)
        ));
        rounds.push(rep);
    }
    // A's last arrivals were seen as they started: their attempts are recorded once A's
    // endpoints answer (`a_latency` later).
    let received: u64 = rounds
        .iter()
        .map(|r| r.a_accepted.saturating_sub(r.a_lost) + u64::from(!r.b_lost))
        .sum();
    probe
        .wait_recorded(
            pool,
            &cpu_start,
            received,
            o.a_latency + Duration::from_secs(5),
        )
        .await?;
    let cpu_rounds = probe.finish(pool, &cpu_start).await?;
    let mut cpu_report = crate::cpu::report(&[("rounds", &cpu_rounds)]);
    cpu_report["phases_definition"] = json!({"rounds": "the first round's first batch → the last round's end (every round, with B's delay and the waits) and every received delivery's attempt recorded"});

    let lost: u64 = rounds.iter().map(|r| r.a_lost + u64::from(r.b_lost)).sum();
    let duplicates = a.with(|rec| rec.duplicates) + b.sink.with(PHASE_FAIRNESS, |p| p.duplicates);
    Ok(json!({
        "scenario": "fairness",
        "channels": o.channels,
        "count": o.count,
        "a_latency_ms": o.a_latency.as_millis() as u64,
        "b_delay_ms": o.b_delay.as_millis() as u64,
        "rounds": o.rounds,
        "nodes": o.service.nodes,
        "tier": tier.as_str(),
        "b_latency_ms": rounds.iter().map(|r| r.b_latency_ms).collect::<Vec<_>>(),
        "b_db_latency_ms": rounds.iter().map(|r| r.b_db_latency_ms).collect::<Vec<_>>(),
        "a_before_b": rounds.iter().map(|r| r.a_before_b).collect::<Vec<_>>(),
        "a_drain_s": rounds.iter().map(|r| r.a_drain_s).collect::<Vec<_>>(),
        "a_max_in_flight_total": rounds.iter().map(|r| r.a_max_in_flight_total).max(),
        "a_max_in_flight_per_endpoint": rounds.iter().map(|r| r.a_max_in_flight_per_endpoint).max(),
        "results": rounds,
        "definitions": {
            "b_latency_ms": "harness clock: B's enqueue request answered 202 → its arrival at B's receiver",
            "b_db_latency_ms": "database clock: the delivery's delivered_at − created_at",
            "a_before_b": "A's deliveries of the round that arrived at A's receiver before B's arrived at B's",
            "a_drain_s": "harness clock: A's first batch answered 202 → A's last arrival",
            "a_max_in_flight": "requests an A endpoint held at once, from arrival until its 200 (or the connection's close)",
        },
        "channel_create_s": (channels_s * 10.0).round() / 10.0,
        "cpu": cpu_report,
        "lost": lost,
        "duplicates": duplicates,
        "a_unparsed": a.with(|rec| rec.unparsed),
        "service_settings": {
            "pool_high": settings.worker.pool_high,
            "pool_default": settings.worker.pool_default,
            "pool_bulk": settings.worker.pool_bulk,
            "tier_pool_per_node": service::tier_pool(settings, tier),
            "request_timeout_ms": settings.worker.request_timeout_ms,
            "poll_interval_ms": settings.worker.poll_interval_ms,
            "max_connections_per_node": settings.database.max_connections,
            "ingress_per_second": settings.api.ingress_per_second,
            "ingress_limit_kept": o.keep_ingress_limit,
        },
    }))
}

/// One round on the harness clock: A's backlog, the pause, B's delivery, the waits.
async fn round(run: &Run<'_>, r: u64) -> anyhow::Result<RoundReport> {
    let o = run.o;
    run.a.reset_max();
    let batches = Arc::new(batches(o.count, run.a_channels.len()));
    run.log(format!(
        "round {r}: {} deliveries of A in {} batch requests",
        o.count,
        batches.len()
    ));
    let start_us = now_us();
    let accepted = crate::join_bounded(batches.len(), o.concurrency, |k| {
        let (api, ta) = (run.api.clone(), run.ta.clone());
        let (channels, batches) = (run.a_channels.clone(), batches.clone());
        async move {
            let (c, seqs) = &batches[k];
            let payloads: Vec<Value> = seqs
                .iter()
                .map(|&seq| json!({"round": r, "seq": seq}))
                .collect();
            let n = api
                .enqueue_batch(&ta, &channels[*c], &payloads)
                .await
                .with_context(|| format!("enqueueing A's batch {k} (channel a-{c})"))?;
            anyhow::Ok((n as u64, now_us()))
        }
    })
    .await?;
    let a_accepted: u64 = accepted.iter().map(|a| a.0).sum();
    let first_accept = accepted.iter().map(|a| a.1).min().unwrap_or(start_us);
    let last_accept = accepted.iter().map(|a| a.1).max().unwrap_or(start_us);

    tokio::time::sleep(o.b_delay).await;
    let b_sent = now_us();
    let payload = json!({"phase": PHASE_FAIRNESS, "seq": r, "sent_us": b_sent});
    let ok = run
        .api
        .enqueue(&run.tb, &run.b_channel, &payload)
        .await
        .context("enqueueing B's delivery")?;
    let b_accepted = now_us();
    anyhow::ensure!(ok, "B's delivery of round {r} was not accepted");

    let deadline = tokio::time::Instant::now() + o.timeout;
    run.b.sink.wait_for(PHASE_FAIRNESS, r + 1, o.timeout).await;
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let a_received = run.a.wait_for(r, a_accepted, left).await;

    // B's arrival: the timeline entry whose arrival − latency is this round's send time.
    let b_arrival = run.b.sink.with(PHASE_FAIRNESS, |p| {
        p.timeline
            .iter()
            .find(|&&(at, lat)| at.saturating_sub(lat) == b_sent)
            .map(|&(at, _)| at)
    });
    let a_times: Vec<u64> = run.a.with(|rec| {
        rec.arrivals
            .iter()
            .filter(|x| x.round == r)
            .map(|x| x.at_us)
            .collect()
    });
    let arrived_by = |t: u64| a_times.iter().filter(|&&x| x < t).count() as u64;
    let per_endpoint: Vec<u64> = run.a.endpoints().iter().map(InFlight::max).collect();
    let mut histogram = BTreeMap::new();
    for m in &per_endpoint {
        *histogram.entry(*m).or_insert(0) += 1;
    }
    Ok(RoundReport {
        round: r,
        a_accepted,
        a_batch_requests: batches.len(),
        a_enqueue_ms: ms_between(start_us as i64, last_accept as i64),
        a_received,
        a_lost: a_accepted.saturating_sub(a_received),
        a_waiting_at_b_accept: a_accepted.saturating_sub(arrived_by(b_accepted)),
        a_before_b: b_arrival.map(arrived_by),
        b_latency_ms: b_arrival.map(|t| ms_between(b_accepted as i64, t as i64)),
        b_latency_from_send_ms: b_arrival.map(|t| ms_between(b_sent as i64, t as i64)),
        b_lost: b_arrival.is_none(),
        a_drain_s: a_times
            .iter()
            .max()
            .map(|&l| (ms_between(first_accept as i64, l as i64) / 100.0).round() / 10.0),
        a_max_in_flight_total: run.a.total().max(),
        a_max_in_flight_per_endpoint: per_endpoint.iter().copied().max().unwrap_or(0),
        a_max_in_flight_per_endpoint_histogram: histogram,
        ..RoundReport::default()
    })
}

/// Fills in round `rep`'s figures from the deliveries table (database clock).
async fn db_figures(pool: &PgPool, run: &Run<'_>, rep: &mut RoundReport) -> anyhow::Result<()> {
    let b_channel: Uuid = run.b_channel.parse().context("B's channel id")?;
    let a_tenant: Uuid = run.ta.id.parse().context("A's tenant id")?;
    let round = rep.round.to_string();
    let b: Option<(Option<DateTime<Utc>>, Option<f64>)> = sqlx::query_as(
        "SELECT delivered_at, extract(epoch FROM delivered_at - created_at)::float8 * 1000
         FROM deliveries
         WHERE channel_id = $1 AND payload::jsonb->>'phase' = $2 AND payload::jsonb->>'seq' = $3",
    )
    .bind(b_channel)
    .bind(PHASE_FAIRNESS.to_string())
    .bind(&round)
    .fetch_optional(pool)
    .await?;
    let (b_delivered_at, b_ms) = b.unwrap_or((None, None));
    let (before, drain_s): (i64, Option<f64>) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE delivered_at < $3),
                extract(epoch FROM max(delivered_at) - min(created_at))::float8
         FROM deliveries
         WHERE tenant_id = $1 AND payload::jsonb->>'round' = $2",
    )
    .bind(a_tenant)
    .bind(&round)
    .bind(b_delivered_at)
    .fetch_one(pool)
    .await?;
    rep.b_db_latency_ms = b_ms.map(|ms| (ms * 10.0).round() / 10.0);
    rep.a_before_b_db = b_delivered_at.map(|_| before);
    rep.a_db_drain_s = drain_s.map(|s| (s * 10.0).round() / 10.0);
    Ok(())
}

/// Prints the human summary of a fairness report (`run`'s) to stdout.
pub fn print_summary(r: &Value) {
    println!(
        "fairness: tenant A {} deliveries over {} channel(s) answering after {} ms, tenant B 1 delivery {} ms after A's last batch; {} node(s), tier {}",
        r["count"],
        r["channels"],
        r["a_latency_ms"],
        r["b_delay_ms"],
        r["nodes"],
        r["tier"].as_str().unwrap_or("?")
    );
    for x in r["results"].as_array().into_iter().flatten() {
        println!(
            "  round {}: B latency {} ms (db {} ms); A before B {}/{} (db {}), A waiting at B's accept {}; A drained in {} s (db {} s); A in flight at most {} in all, {} per endpoint; lost {}",
            x["round"],
            x["b_latency_ms"],
            x["b_db_latency_ms"],
            x["a_before_b"],
            x["a_accepted"],
            x["a_before_b_db"],
            x["a_waiting_at_b_accept"],
            x["a_drain_s"],
            x["a_db_drain_s"],
            x["a_max_in_flight_total"],
            x["a_max_in_flight_per_endpoint"],
            u64::from(x["b_lost"].as_bool().unwrap_or(false)) + x["a_lost"].as_u64().unwrap_or(0)
        );
    }
    for line in crate::cpu::summary_lines(r) {
        println!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_spread_round_robin_in_chunks_of_1000() {
        let b = batches(7, 3);
        assert_eq!(
            b,
            vec![(0, vec![0, 3, 6]), (1, vec![1, 4]), (2, vec![2, 5])]
        );
        // Two channels of 1500 each: chunk 0 of both, then chunk 1 of both.
        let b = batches(3000, 2);
        assert_eq!(
            b.iter().map(|(c, s)| (*c, s.len())).collect::<Vec<_>>(),
            vec![(0, 1000), (1, 1000), (0, 500), (1, 500)]
        );
        assert_eq!(b[2].1[0], 2000);
        // More channels than deliveries: the extra channels get none.
        assert_eq!(batches(2, 5).len(), 2);
    }
}
