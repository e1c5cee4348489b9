//! `breakwater demo`: the service on real input, end to end, on one machine.
//!
//! Starts (or connects to) Postgres, a node with the API and workers, and a receiver on
//! loopback with a healthy endpoint (verifies every signature) and a failing one (503). Creates
//! two tenants and three channels through the HTTP API, enqueues deliveries in batches, waits,
//! and prints per channel: delivered / retrying / dead, signature failures, latency p50/p95
//! (enqueue → received, same monotonic clock).

use crate::config::{Secret, Settings};
use crate::receiver::{Behavior, Receiver};
use crate::throwaway::TempPostgres;
use anyhow::{bail, Context};
use breakwater_core::deliveries::{self, Status};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

struct DemoChannel {
    label: &'static str,
    endpoint: &'static str,
    healthy: bool,
    id: Uuid,
    tenant_key: String,
}

/// Runs the demo; returns whether every healthy delivery arrived with a valid signature. With
/// `keep_running`, the service stays up after the summary until Ctrl-C (to look at `/admin` and
/// `/metrics`).
pub async fn run(
    mut settings: Settings,
    per_channel: usize,
    timeout: Duration,
    keep_running: bool,
) -> anyhow::Result<bool> {
    let _temp; // keeps a throwaway server alive until the end
    let url = match settings.database_url.clone() {
        Some(u) => {
            println!("database: DATABASE_URL");
            u.0
        }
        None => {
            println!("database: DATABASE_URL is unset; starting a throwaway PostgreSQL…");
            let t = TempPostgres::start().await?;
            let url = t.url.clone();
            _temp = t;
            println!("database: throwaway PostgreSQL at {url}");
            url
        }
    };
    let pool = crate::connect(&url, settings.database.max_connections).await?;
    crate::migrate(&pool).await?;

    // The receiver is on loopback, so the demo must allow private targets; it also shortens the
    // retry schedule so that the failing endpoint's deliveries reach the dead letter state
    // within the demo (4 attempts, 0.5 s, 1 s, 2 s apart).
    settings.listen = "127.0.0.1:0".parse()?;
    settings.allow_private_targets = true;
    let operator_key = format!("demo-operator-{}", Uuid::new_v4().simple());
    settings.operator_key = Some(Secret(operator_key.clone()));
    settings.worker.max_attempts = 4;
    settings.worker.backoff_base_ms = 500;
    settings.worker.backoff_factor = 2.0;
    settings.worker.backoff_cap_ms = 2_000;
    println!("demo settings: private targets allowed (loopback receiver); retries: 4 attempts, 0.5 s → 2 s backoff");

    let shutdown = CancellationToken::new();
    let node =
        crate::start_node(&settings, pool.clone(), crate::Role::All, shutdown.clone()).await?;
    let api = format!("http://{}", node.api_addr.context("API address")?);
    let receiver = Receiver::start().await?;
    println!("service: {api}   receiver: http://{}", receiver.addr);

    let http = reqwest::Client::new();
    let post = |path: String, key: String, body: Value| {
        let http = http.clone();
        let api = api.clone();
        async move {
            let resp = http
                .post(format!("{api}{path}"))
                .bearer_auth(key)
                .json(&body)
                .send()
                .await?;
            let status = resp.status();
            let v: Value = resp.json().await?;
            if !status.is_success() {
                bail!("POST {path} → {status}: {v}");
            }
            Ok::<Value, anyhow::Error>(v)
        }
    };

    // Two tenants; acme has one healthy channel, globex a healthy and a failing one.
    let mut channels = Vec::new();
    for (tenant, tier, chans) in [
        (
            "acme",
            "default",
            vec![("acme/orders", "acme-orders", true)],
        ),
        (
            "globex",
            "high",
            vec![
                ("globex/billing", "globex-billing", true),
                ("globex/legacy", "globex-legacy", false),
            ],
        ),
    ] {
        let t = post(
            "/api/v1/tenants".into(),
            operator_key.clone(),
            json!({ "name": tenant, "tier": tier }),
        )
        .await?;
        let key = t["api_key"].as_str().context("api_key")?.to_string();
        for (label, endpoint, healthy) in chans {
            let behavior = if healthy {
                Behavior::Status(200, None)
            } else {
                Behavior::Status(503, None)
            };
            receiver.set(endpoint, behavior);
            let c = post(
                "/api/v1/channels".into(),
                key.clone(),
                json!({ "url": receiver.url(endpoint), "name": label }),
            )
            .await?;
            receiver.set_secret(
                endpoint,
                c["signing_secret"].as_str().context("signing_secret")?,
            );
            let id: Uuid = c["id"].as_str().context("id")?.parse()?;
            channels.push(DemoChannel {
                label,
                endpoint,
                healthy,
                id,
                tenant_key: key.clone(),
            });
        }
    }

    let start = Instant::now();
    let mut expected: Vec<(Uuid, usize)> = Vec::new();
    for c in &channels {
        let mut sent = 0;
        while sent < per_channel {
            let n = (per_channel - sent).min(50);
            let items: Vec<Value> = (0..n)
                .map(|i| {
                    json!({
                        "event_type": "demo.event",
                        "payload": { "channel": c.label, "n": sent + i, "sent_at_us": start.elapsed().as_micros() as u64 },
                    })
                })
                .collect();
            post(
                format!("/api/v1/channels/{}/deliveries/batch", c.id),
                c.tenant_key.clone(),
                json!({ "deliveries": items }),
            )
            .await?;
            sent += n;
        }
        expected.push((c.id, per_channel));
    }
    println!(
        "enqueued {} deliveries to {} channels through the API",
        per_channel * channels.len(),
        channels.len()
    );

    // Wait until every delivery is settled — delivered, dead, or parked behind an open circuit —
    // or the timeout.
    let deadline = Instant::now() + timeout;
    loop {
        let counts = deliveries::status_counts(&pool).await?;
        let open = counts.total() - counts.sum(&[Status::Delivered, Status::Dead, Status::Paused]);
        if open == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Summary.
    println!();
    println!(
        "{:<16} {:<15} {:>8} {:>9} {:>8} {:>6} {:>5} {:>9} {:>8} {:>8}  circuit",
        "channel",
        "endpoint",
        "enqueued",
        "delivered",
        "retrying",
        "parked",
        "dead",
        "sig fails",
        "p50 ms",
        "p95 ms"
    );
    let mut all_ok = true;
    for c in &channels {
        let counts = deliveries::channel_status_counts(&pool, c.id).await?;
        let delivered = counts.get(Status::Delivered);
        let dead = counts.get(Status::Dead);
        let retrying = counts.sum(&[Status::Pending, Status::Failed, Status::Delivering]);
        let parked = counts.get(Status::Paused);
        let circuit = breakwater_core::channels::get_any(&pool, c.id)
            .await?
            .circuit_state
            .as_str();
        let mut hist = Histogram::<u64>::new(3)?;
        let mut sig_fails = 0;
        let mut ids = std::collections::HashSet::new();
        for r in receiver.received(c.endpoint) {
            let body = serde_json::from_slice::<Value>(&r.body).unwrap_or(Value::Null);
            if r.signature_ok != Some(true) {
                sig_fails += 1;
            }
            if let Some(id) = r.webhook_id {
                ids.insert(id);
            }
            if let Some(us) = body["data"]["sent_at_us"].as_u64() {
                let sent_at = start + Duration::from_micros(us);
                hist.record(r.at.saturating_duration_since(sent_at).as_millis() as u64)?;
            }
        }
        let (p50, p95) = if c.healthy {
            (
                format!("{}", hist.value_at_quantile(0.5)),
                format!("{}", hist.value_at_quantile(0.95)),
            )
        } else {
            ("-".into(), "-".into())
        };
        println!(
            "{:<16} {:<15} {:>8} {:>9} {:>8} {:>6} {:>5} {:>9} {:>8} {:>8}  {circuit}",
            c.label,
            c.endpoint,
            per_channel,
            delivered,
            retrying,
            parked,
            dead,
            sig_fails,
            p50,
            p95
        );
        if c.healthy
            && (delivered as usize != per_channel || ids.len() != per_channel || sig_fails > 0)
        {
            all_ok = false;
        }
        if sig_fails > 0 {
            all_ok = false;
        }
    }
    println!();
    println!(
        "failing endpoint: {} requests received (503 each). Its circuit opened after {} consecutive \
         failures; the rest of its backlog is parked (no requests, no attempts used) until a probe \
         finds the endpoint healthy again.",
        receiver.count("globex-legacy"),
        settings.circuit.failure_threshold
    );
    println!("took {:.1} s", start.elapsed().as_secs_f64());
    println!(
        "{}",
        if all_ok {
            "RESULT: OK — every healthy delivery arrived once per id with a valid signature"
        } else {
            "RESULT: FAILED"
        }
    );

    if keep_running {
        println!();
        println!("still running (Ctrl-C to stop):");
        println!("  admin page:   {api}/admin   (operator key: {operator_key})");
        println!("  metrics:      {api}/metrics");
        tokio::signal::ctrl_c().await?;
    }

    shutdown.cancel();
    receiver.stop();
    node.wait().await?;
    pool.close().await;
    Ok(all_ok)
}
