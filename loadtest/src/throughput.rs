//! Scenario `throughput`: `count` deliveries to fast (200 at once) endpoints across `channels`
//! channels of `tenants` tenants in one tier, enqueued through the batch API as fast as the API
//! takes them (`enqueue_concurrency` requests in flight) while the workers deliver. Reports
//! deliveries/s end to end (first enqueue → last arrival), the rate in the steady middle (10 % →
//! 90 % of arrivals), the enqueue rate, and the largest backlog seen.

use crate::api::TenantKey;
use crate::chart;
use crate::clock::now_us;
use crate::receiver::PHASE_THROUGHPUT;
use crate::service::{self, ServiceOptions};
use crate::stats::{new_hist, summarize};
use crate::{RunOptions, Stage};
use breakwater::config::Settings;
use breakwater_core::Tier;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Options of the throughput scenario.
#[derive(Debug, Clone)]
pub struct Options {
    /// Deliveries in all.
    pub count: u64,
    /// Channels (each its own endpoint path on the receiver).
    pub channels: usize,
    /// Tenants the channels are spread over.
    pub tenants: usize,
    /// Deliveries per batch request (≤ 1000).
    pub batch: usize,
    /// Batch requests in flight at once.
    pub enqueue_concurrency: usize,
    /// Give up waiting for arrivals after this long (from the first enqueue).
    pub timeout: Duration,
    /// The service (its `tier` is every tenant's).
    pub service: ServiceOptions,
    /// The run's database, `result.json` (and `throughput.svg`) and progress log.
    pub run: RunOptions,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            count: 20_000,
            channels: 50,
            tenants: 5,
            batch: 100,
            enqueue_concurrency: 4,
            timeout: Duration::from_secs(300),
            service: ServiceOptions::default(),
            run: RunOptions::default(),
        }
    }
}

/// Runs the scenario and returns the report (`result.json`).
pub async fn run(o: &Options) -> anyhow::Result<Value> {
    let tier = o.service.parse_tier()?;
    anyhow::ensure!(
        o.channels >= 1 && o.tenants >= 1,
        "need at least one channel and tenant"
    );
    anyhow::ensure!((1..=1000).contains(&o.batch), "--batch must be 1..=1000");
    let settings = o.service.settings()?;
    crate::on_service(&o.run, o.service.nodes, &settings, async |stage| {
        scenario(o, tier, &settings, stage).await
    })
    .await
}

/// Prints the human summary of a throughput report (`run`'s) to stdout.
pub fn print_summary(report: &Value) {
    println!(
        "throughput: {} deliveries, {} channels, {} node(s): {} deliveries/s end to end ({} /s steady, enqueue {} /s), lost {}",
        report["count"], report["channels"], report["nodes"], report["throughput_per_s"],
        report["steady_per_s"], report["enqueue_per_s"], report["lost"]
    );
    println!(
        "  latency (enqueue request sent → received): {}",
        serde_json::from_value::<crate::stats::Summary>(report["latency"].clone())
            .unwrap_or_default()
    );
}

/// Counts per 1-s bucket of harness times (µs) relative to `origin_us`.
fn per_second(times: impl Iterator<Item = u64>, origin_us: u64) -> Vec<(f64, f64)> {
    let mut buckets: Vec<u64> = Vec::new();
    for t in times {
        let s = (t.saturating_sub(origin_us) / 1_000_000) as usize;
        if s < 100_000 {
            if buckets.len() <= s {
                buckets.resize(s + 1, 0);
            }
            buckets[s] += 1;
        }
    }
    buckets
        .into_iter()
        .enumerate()
        .map(|(i, n)| (i as f64 + 0.5, n as f64))
        .collect()
}

async fn scenario(
    o: &Options,
    tier: Tier,
    settings: &Settings,
    stage: &Stage<'_>,
) -> anyhow::Result<Value> {
    let (api, healthy) = (&stage.api, stage.healthy);
    let mut tenants: Vec<TenantKey> = Vec::new();
    for i in 0..o.tenants {
        tenants.push(
            api.create_tenant(&format!("lt-tp-{i}"), tier.as_str())
                .await?,
        );
    }
    let mut channels: Vec<(usize, String)> = Vec::new();
    for c in 0..o.channels {
        let t = c % o.tenants;
        let id = api
            .create_channel(
                &tenants[t],
                &format!("tp-{c}"),
                &healthy.url(&format!("tp{c}")),
            )
            .await?;
        channels.push((t, id));
    }
    let sink = healthy.sink.clone();
    let batches = o.count.div_ceil(o.batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let accepted_at: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let errors = Arc::new(AtomicU64::new(0));
    let api_hist = Arc::new(Mutex::new(new_hist()));
    let t0 = now_us();
    let deadline = Instant::now() + o.timeout;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..o.enqueue_concurrency.max(1) {
        let (api, tenants, channels) = (api.clone(), tenants.clone(), channels.clone());
        let (next, accepted_at, errors, api_hist) = (
            next.clone(),
            accepted_at.clone(),
            errors.clone(),
            api_hist.clone(),
        );
        let (count, batch) = (o.count, o.batch as u64);
        tasks.spawn(async move {
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= batches || Instant::now() >= deadline {
                    return;
                }
                let (t, ch) = &channels[(b % channels.len() as u64) as usize];
                let first = b * batch;
                let last = (first + batch).min(count);
                let sent = now_us();
                let payloads: Vec<Value> = (first..last)
                    .map(|seq| json!({"phase": PHASE_THROUGHPUT, "seq": seq, "sent_us": sent}))
                    .collect();
                match api.enqueue_batch(&tenants[*t], ch, &payloads).await {
                    Ok(n) if n as u64 == last - first => {
                        let done = now_us();
                        api_hist
                            .lock()
                            .unwrap()
                            .saturating_record(done.saturating_sub(sent).max(1));
                        accepted_at.lock().unwrap().push((done, n as u64));
                    }
                    _ => {
                        errors.fetch_add(last - first, Ordering::Relaxed);
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let enqueue_end = now_us();
    let accepted: u64 = accepted_at.lock().unwrap().iter().map(|a| a.1).sum();
    let left = o
        .timeout
        .saturating_sub(Duration::from_micros(enqueue_end - t0));
    sink.wait_for(PHASE_THROUGHPUT, accepted, left).await;
    let received_at: Vec<u64> = sink.with(PHASE_THROUGHPUT, |p| {
        let mut v: Vec<u64> = p.timeline.iter().map(|t| t.0).collect();
        v.sort_unstable();
        v
    });
    let (unique, duplicates, latency) = sink.with(PHASE_THROUGHPUT, |p| {
        (p.unique, p.duplicates, summarize(&p.hist))
    });
    let lost = accepted.saturating_sub(unique);
    let last = received_at.last().copied().unwrap_or(t0);
    let secs = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / 1e6;
    let rate = |n: f64, s: f64| if s > 0.0 { (n / s).round() } else { 0.0 };
    let throughput = rate(received_at.len() as f64, secs(t0, last));
    let steady = if received_at.len() >= 10 {
        let a = received_at.len() / 10;
        let b = received_at.len() * 9 / 10;
        rate((b - a) as f64, secs(received_at[a], received_at[b]))
    } else {
        0.0
    };
    let enqueue_rate = rate(accepted as f64, secs(t0, enqueue_end));
    // Largest backlog: accepted so far − received so far, at each acceptance.
    let mut acc = accepted_at.lock().unwrap().clone();
    acc.sort_unstable();
    let mut peak = 0i64;
    let mut sum = 0u64;
    for (t, n) in &acc {
        sum += n;
        let got = received_at.partition_point(|r| r <= t) as u64;
        peak = peak.max(sum as i64 - got as i64);
    }
    let received_ps = per_second(received_at.iter().copied(), t0);
    let enqueued_ps = {
        let mut v = Vec::new();
        for (t, n) in &acc {
            for _ in 0..*n {
                v.push(*t);
            }
        }
        per_second(v.into_iter(), t0)
    };
    if let Some(dir) = &o.run.out {
        std::fs::create_dir_all(dir)?;
        chart::rate_svg(
            &dir.join("throughput.svg"),
            &format!(
                "{} deliveries to {} channels, {} node(s): {} /s end to end",
                o.count, o.channels, o.service.nodes, throughput
            ),
            &received_ps,
            &enqueued_ps,
        )?;
    }
    let tier_pool = service::tier_pool(settings, tier);
    Ok(json!({
        "scenario": "throughput",
        "count": o.count,
        "channels": o.channels,
        "tenants": o.tenants,
        "batch": o.batch,
        "enqueue_concurrency": o.enqueue_concurrency,
        "nodes": o.service.nodes,
        "tier": tier.as_str(),
        "workers_per_node": tier_pool,
        "backlog": Value::Null,
        "dead_mode": Value::Null,
        "throughput_per_s": throughput,
        "throughput_definition": "arrivals / (last arrival − first enqueue request sent)",
        "steady_per_s": steady,
        "enqueue_per_s": enqueue_rate,
        "accepted": accepted,
        "received": unique,
        "lost": lost,
        "duplicates": duplicates,
        "enqueue_errors": errors.load(Ordering::Relaxed),
        "peak_backlog": peak,
        "elapsed_s": (secs(t0, last) * 10.0).round() / 10.0,
        "enqueue_s": (secs(t0, enqueue_end) * 10.0).round() / 10.0,
        "latency": latency,
        "api_batch_request": summarize(&api_hist.lock().unwrap()),
        "received_per_s": received_ps.iter().map(|p| p.1).collect::<Vec<_>>(),
        "goals": { "goal_2000_per_s": throughput >= 2000.0, "lost_zero": lost == 0 },
        "service_settings": {
            "pool_default": settings.worker.pool_default,
            "pool_high": settings.worker.pool_high,
            "pool_bulk": settings.worker.pool_bulk,
            "max_connections_per_node": settings.database.max_connections,
        },
    }))
}
