//! Scenario `throughput`: `count` deliveries to fast (200 at once) endpoints across `channels`
//! channels of `tenants` tenants in one tier, enqueued through the batch API as fast as the API
//! takes them (`enqueue_concurrency` requests in flight) while the workers deliver. Reports
//! deliveries/s end to end (first enqueue → last arrival), the rate in the steady middle (10 % →
//! 90 % of arrivals), the enqueue rate, and the largest backlog seen.
//!
//! With `rate` (`--rate R`) the load is an open loop instead: one single enqueue every `1/R` s
//! (round robin over the channels), `count` in all, each request on its own task so that a
//! slow answer does not delay the next ([`crate::stream::stream_n`]); the report then also has
//! `open_loop`, and `latency` (enqueue request sent → received, p50/p95/p99) is the latency at
//! that rate rather than under a burst.
//!
//! Either way the report has `cpu`: the service's and Postgres's CPU seconds per 1 000
//! deliveries over the run (phase `run`: from the first enqueue to the last arrival), see
//! [`crate::cpu`].

use crate::api::TenantKey;
use crate::chart;
use crate::clock::now_us;
use crate::cpu;
use crate::receiver::PHASE_THROUGHPUT;
use crate::service::{self, ServiceOptions};
use crate::stats::{new_hist, summarize};
use crate::stream::{stream_n, StreamResult};
use crate::{RunOptions, Stage};
use breakwater::config::Settings;
use breakwater_core::Tier;
use hdrhistogram::Histogram;
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
    /// Open loop: single enqueues at this many per second (`count` in all) instead of the
    /// closed-loop burst of batches; `None`: the burst.
    pub rate: Option<f64>,
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
            rate: None,
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
    if let Some(rate) = o.rate {
        anyhow::ensure!(rate > 0.0 && rate.is_finite(), "--rate must be positive");
        anyhow::ensure!(
            o.count as f64 / rate < o.timeout.as_secs_f64(),
            "--count / --rate ({:.0} s) must be under --timeout ({} s)",
            o.count as f64 / rate,
            o.timeout.as_secs()
        );
    }
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
    let ol = &report["open_loop"];
    if !ol.is_null() {
        println!(
            "  open loop: {} enqueues/s offered for {} s, {} scheduled, {} accepted, {} skipped (in-flight cap), {} errors; enqueue request p50 {} ms, p99 {} ms",
            ol["rate_per_s"],
            ol["schedule_s"],
            ol["scheduled"],
            ol["accepted"],
            ol["skipped"],
            ol["errors"],
            report["api_batch_request"]["p50_ms"],
            report["api_batch_request"]["p99_ms"],
        );
    }
    for line in crate::phases::summary_lines(&report["latency_phases"], &[("null", "where")]) {
        println!("{line}");
    }
    for line in cpu::summary_lines(report) {
        println!("{line}");
    }
    println!("  goals: {}", crate::goals_line(&report["goals"]));
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
    let pool = stage.db.pool(1).await?;
    let probe = cpu::Probe::new(&pool).await;
    let cpu_start = probe.start(&pool).await?;
    let enq = match o.rate {
        Some(rate) => open_loop(o, api, &tenants, &channels, rate).await,
        None => burst(o, api, &tenants, &channels).await,
    };
    let (t0, enqueue_end) = (enq.t0, enq.end);
    let accepted: u64 = enq.accepted_at.iter().map(|a| a.1).sum();
    let left = o
        .timeout
        .saturating_sub(Duration::from_micros(enqueue_end - t0));
    let got = sink.wait_for(PHASE_THROUGHPUT, accepted, left).await;
    // The last arrivals' attempts are committed just after the receiver saw them.
    let cost = match probe
        .wait_recorded(&pool, &cpu_start, got, Duration::from_secs(5))
        .await
    {
        Ok(_) => probe.finish(&pool, &cpu_start).await,
        Err(e) => Err(e),
    };
    // Where the latency went (the payload carries no phase here: one `null` phase).
    let ids: Vec<uuid::Uuid> = channels.iter().filter_map(|c| c.1.parse().ok()).collect();
    let phases = crate::phases::split(&pool, &ids).await;
    pool.close().await;
    let cost = cost?;
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
    let mut acc = enq.accepted_at.clone();
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
                "{} deliveries to {} channels, {} node(s){}: {} /s end to end",
                o.count,
                o.channels,
                o.service.nodes,
                o.rate
                    .map_or(String::new(), |r| format!(", open loop {r} /s")),
                throughput
            ),
            &received_ps,
            &enqueued_ps,
        )?;
    }
    let tier_pool = service::tier_pool(settings, tier);
    let mut cpu_report = cpu::report(&[("run", &cost)]);
    cpu_report["phases_definition"] = json!({"run": "from just before the first enqueue request to the last arrival (or the timeout) and its attempt recorded (at most 5 s more)"});
    let (batch, enqueue_concurrency, load) = match o.rate {
        Some(_) => (
            1,
            Value::Null,
            "open loop: one single enqueue every 1/rate_per_s s, not waiting for earlier ones",
        ),
        None => (
            o.batch,
            json!(o.enqueue_concurrency),
            "closed loop: batches of `batch`, `enqueue_concurrency` requests in flight, as fast as the API answers",
        ),
    };
    Ok(json!({
        "scenario": "throughput",
        "count": o.count,
        "channels": o.channels,
        "tenants": o.tenants,
        "batch": batch,
        "enqueue_concurrency": enqueue_concurrency,
        "load": load,
        "rate_per_s": o.rate,
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
        "enqueue_errors": enq.errors,
        "peak_backlog": peak,
        "elapsed_s": (secs(t0, last) * 10.0).round() / 10.0,
        "enqueue_s": (secs(t0, enqueue_end) * 10.0).round() / 10.0,
        "latency": latency,
        "latency_phases": phases,
        "api_batch_request": summarize(&enq.api_hist),
        "open_loop": enq.open.as_ref().map(|s| json!({
            "rate_per_s": o.rate,
            "schedule_s": (o.count as f64 / o.rate.unwrap_or(1.0) * 10.0).round() / 10.0,
            "scheduled": s.scheduled,
            "accepted": s.accepted.len(),
            "skipped": s.skipped,
            "skipped_definition": "ticks that found stream::MAX_IN_FLIGHT requests still waiting (not sent)",
            "errors": s.errors,
            "error_causes": s.error_causes,
            "latency": latency,
            "latency_definition": "harness clock at the enqueue request's send (in the payload) → harness clock at the receiver; includes the API request",
            "enqueue_request": summarize(&s.api_hist),
        })),
        "cpu": cpu_report,
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

/// What the enqueue side did, closed loop or open.
struct Enqueued {
    /// Harness time of the first send, µs.
    t0: u64,
    /// Harness time the last request finished, µs.
    end: u64,
    /// (harness time of the 202, deliveries it accepted), per accepted request.
    accepted_at: Vec<(u64, u64)>,
    /// Deliveries whose request failed or was refused.
    errors: u64,
    /// Enqueue request latency (send → 202 read), µs.
    api_hist: Histogram<u64>,
    /// The open loop's own result (with `--rate`).
    open: Option<StreamResult>,
}

/// The closed-loop burst: batches of `o.batch` round robin over the channels,
/// `o.enqueue_concurrency` requests in flight, until `o.count` are sent or the timeout.
async fn burst(
    o: &Options,
    api: &crate::api::Api,
    tenants: &[TenantKey],
    channels: &[(usize, String)],
) -> Enqueued {
    let batches = o.count.div_ceil(o.batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let accepted_at: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let errors = Arc::new(AtomicU64::new(0));
    let api_hist = Arc::new(Mutex::new(new_hist()));
    let t0 = now_us();
    let deadline = Instant::now() + o.timeout;
    let (tenants, channels) = (Arc::new(tenants.to_vec()), Arc::new(channels.to_vec()));
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
    let end = now_us();
    let accepted_at = std::mem::take(&mut *accepted_at.lock().unwrap());
    let api_hist = api_hist.lock().unwrap().clone();
    Enqueued {
        t0,
        end,
        accepted_at,
        errors: errors.load(Ordering::Relaxed),
        api_hist,
        open: None,
    }
}

/// The open loop: `o.count` single enqueues, one every `1/rate` s, round robin over the
/// channels (see [`stream_n`]).
async fn open_loop(
    o: &Options,
    api: &crate::api::Api,
    tenants: &[TenantKey],
    channels: &[(usize, String)],
    rate: f64,
) -> Enqueued {
    let targets: Vec<(TenantKey, String)> = channels
        .iter()
        .map(|(t, ch)| (tenants[*t].clone(), ch.clone()))
        .collect();
    let s = stream_n(api, &targets, PHASE_THROUGHPUT, rate, o.count).await;
    Enqueued {
        t0: s.start_us,
        end: s.end_us,
        accepted_at: s.accepted_us.iter().map(|&t| (t, 1)).collect(),
        errors: s.errors,
        api_hist: s.api_hist.clone(),
        open: Some(s),
    }
}
