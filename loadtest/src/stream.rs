//! The open-loop load generator: one enqueue request every `1/rate` seconds, each on its own
//! task, so a slow API does not slow the schedule down (no coordinated omission). In-flight
//! requests are capped; a tick that finds the cap reached is counted as `skipped`.

use crate::api::{Api, TenantKey};
use crate::clock::now_us;
use crate::stats::new_hist;
use hdrhistogram::Histogram;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// Most enqueue requests in flight at once.
pub const MAX_IN_FLIGHT: usize = 1024;

/// What a stream did.
#[derive(Debug)]
pub struct StreamResult {
    /// Ticks in the schedule.
    pub scheduled: u64,
    /// Sequence numbers the API accepted (202), sorted.
    pub accepted: Vec<u64>,
    /// Harness times (µs) at which those 202s were read, sorted.
    pub accepted_us: Vec<u64>,
    /// Requests that failed or were refused.
    pub errors: u64,
    /// Those requests by cause: the API's status (`"HTTP 503"`) or the client's error.
    pub error_causes: BTreeMap<String, u64>,
    /// Ticks skipped because `MAX_IN_FLIGHT` requests were already waiting.
    pub skipped: u64,
    /// Enqueue request latency (send → 202 read), µs.
    pub api_hist: Histogram<u64>,
    /// Harness time of the first tick, µs.
    pub start_us: u64,
    /// Harness time the last request finished, µs.
    pub end_us: u64,
}

/// Sends `rate × duration` single enqueues of phase `phase` to `channel`, evenly spaced, and
/// waits for every request to finish (each bounded by the client timeout).
pub async fn stream(
    api: &Api,
    tenant: &TenantKey,
    channel: &str,
    phase: u8,
    rate: f64,
    duration: Duration,
) -> StreamResult {
    let n = (rate * duration.as_secs_f64()).round().max(0.0) as u64;
    stream_n(
        api,
        &[(tenant.clone(), channel.to_string())],
        phase,
        rate,
        n,
    )
    .await
}

/// Sends `n` single enqueues of phase `phase`, one every `1/rate` s, the `seq`-th to
/// `targets[seq mod len]` (tenant, channel), and waits for every request to finish (each
/// bounded by the client timeout). `targets` must not be empty.
pub async fn stream_n(
    api: &Api,
    targets: &[(TenantKey, String)],
    phase: u8,
    rate: f64,
    n: u64,
) -> StreamResult {
    assert!(!targets.is_empty(), "a stream needs a channel");
    let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let accepted = Arc::new(Mutex::new(Vec::with_capacity(n as usize)));
    let accepted_us = Arc::new(Mutex::new(Vec::with_capacity(n as usize)));
    let hist = Arc::new(Mutex::new(new_hist()));
    let errors = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
    let mut skipped = 0;
    let mut tasks = tokio::task::JoinSet::new();
    let start = tokio::time::Instant::now();
    let start_us = now_us();
    for seq in 0..n {
        tokio::time::sleep_until(start + period.mul_f64(seq as f64)).await;
        while tasks.try_join_next().is_some() {}
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            skipped += 1;
            continue;
        };
        let (tenant, channel) = &targets[(seq % targets.len() as u64) as usize];
        let (api, tenant, channel) = (api.clone(), tenant.clone(), channel.clone());
        let (accepted, accepted_us, hist, errors) = (
            accepted.clone(),
            accepted_us.clone(),
            hist.clone(),
            errors.clone(),
        );
        tasks.spawn(async move {
            let sent = now_us();
            let payload = json!({"phase": phase, "seq": seq, "sent_us": sent});
            let cause = match api.enqueue_status(&tenant, &channel, &payload).await {
                Ok(reqwest::StatusCode::ACCEPTED) => {
                    let done = now_us();
                    hist.lock()
                        .unwrap()
                        .saturating_record(done.saturating_sub(sent).max(1));
                    accepted.lock().unwrap().push(seq);
                    accepted_us.lock().unwrap().push(done);
                    None
                }
                Ok(status) => Some(format!("HTTP {}", status.as_u16())),
                Err(e) => Some(format!("{e:#}")),
            };
            if let Some(cause) = cause {
                *errors.lock().unwrap().entry(cause).or_default() += 1;
            }
            drop(permit);
        });
    }
    while tasks.join_next().await.is_some() {}
    let mut accepted = std::mem::take(&mut *accepted.lock().unwrap());
    accepted.sort_unstable();
    let mut accepted_us = std::mem::take(&mut *accepted_us.lock().unwrap());
    accepted_us.sort_unstable();
    let api_hist = hist.lock().unwrap().clone();
    let error_causes = std::mem::take(&mut *errors.lock().unwrap());
    StreamResult {
        scheduled: n,
        accepted,
        accepted_us,
        errors: error_causes.values().sum(),
        error_causes,
        skipped,
        api_hist,
        start_us,
        end_us: now_us(),
    }
}
