//! Telemetry of the workers: the span of each HTTP delivery attempt, the metrics of each
//! finished attempt, rate-limited snoozes, and the jobs in flight per pool.
//!
//! Spans and metrics carry ids and outcomes only: never the payload, the signing secret, the
//! request headers or the endpoint's path and query (a URL can embed a token); the endpoint is
//! named by its host alone, and request errors name it by its origin alone.

use crate::request::{self, Sent};
use crate::worker::Worker;
use breakwater_core::deliveries::Dispatch;
use breakwater_core::deliveries::Status;
use breakwater_core::jobs::tier_of_queue;
use breakwater_core::outcome::{classify, Class};
use breakwater_queue::Job;
use chrono::Utc;
use std::time::Instant;
use tracing::field::{display, Empty};
use tracing::Instrument;

/// The `tier` attribute of a job's queue (the queue's name if it is not a tier queue).
fn tier(queue: &str) -> &str {
    tier_of_queue(queue).map_or(queue, |t| t.as_str())
}

/// Sends one attempt of `d` ([`request::send`]) inside a `webhook.attempt` span (OpenTelemetry
/// kind `client`) with the delivery, channel and tenant ids, the attempt number and the target
/// host, and records on it the response status, the outcome class, the error kind and the
/// duration. Also records the tenant id on the enclosing `job` span, and the attempt's duration
/// in `breakwater.attempt.duration` (measured here, to the microsecond, by `job`'s tier and the
/// outcome class; the node's own stalls left out, [`crate::stall`]). Returns the observation
/// with its class ([`classify`]'s, computed once here for the whole attempt).
pub(crate) async fn send(w: &Worker, d: &Dispatch, job: &Job) -> (Sent, Class) {
    tracing::Span::current().record("tenant_id", display(d.tenant_id));
    let host = url::Url::parse(&d.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let span = tracing::info_span!(
        "webhook.attempt",
        otel.kind = "client",
        delivery_id = %d.id,
        channel_id = %d.channel_id,
        tenant_id = %d.tenant_id,
        attempt = d.attempts + 1,
        http.request.method = "POST",
        server.address = %host,
        http.response.status_code = Empty,
        outcome = Empty,
        error.kind = Empty,
        duration_ms = Empty,
        otel.status_code = Empty,
    );
    let t0 = Instant::now();
    let sent = request::send(w, d).instrument(span.clone()).await;
    // The node's running time: its own stalls are not the endpoint's latency.
    let elapsed = t0.elapsed().saturating_sub(w.stall.stalled_since(t0));
    let class = classify(sent.observed);
    breakwater_telemetry::attempt_duration(tier(&job.queue), class.as_str(), elapsed);
    span.record("duration_ms", elapsed.as_millis() as u64);
    span.record("outcome", class.as_str());
    if let Some(code) = sent.observed.status_code() {
        span.record("http.response.status_code", code);
    }
    if let Some(kind) = sent.observed.error_kind() {
        span.record("error.kind", display(kind));
    }
    if class != Class::Success {
        span.record("otel.status_code", "error");
    }
    (sent, class)
}

/// Records a finished, recorded attempt of delivery `d` (run by `job`): attempts by outcome
/// class, the status it left the delivery in (`delivered`, `failed`, `dead`),
/// the end-to-end latency when delivered (from `d.created_at`, the API's acceptance), the probe
/// result when it was the half-open probe (`probe_generation` set); and the outcome and status
/// on the `job` span.
pub(crate) fn attempt(
    job: &Job,
    d: &Dispatch,
    class: Class,
    new_status: Status,
    probe_generation: Option<i64>,
) {
    let latency = (new_status == Status::Delivered)
        .then(|| (Utc::now() - d.created_at).to_std().unwrap_or_default());
    breakwater_telemetry::attempt(
        tier(&job.queue),
        class.as_str(),
        new_status.as_str(),
        latency,
        probe_generation.is_some(),
    );
    let span = tracing::Span::current();
    span.record("outcome", class.as_str());
    span.record("status", new_status.as_str());
}

/// Counts a delivery job snoozed by its channel's rate limit
/// (`breakwater.deliveries.rate_limited`).
pub(crate) fn rate_limited(job: &Job) {
    breakwater_telemetry::rate_limited(tier(&job.queue));
}

/// One job running in this node's pool on its queue (`breakwater.pool.in_flight`); the count
/// drops when the guard does, however the handler ends (return, error or panic).
pub(crate) struct InFlight(String);

impl InFlight {
    /// Counts `job` as in flight until the guard is dropped.
    pub(crate) fn start(job: &Job) -> Self {
        breakwater_telemetry::pool_in_flight(&job.queue, 1);
        InFlight(job.queue.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        breakwater_telemetry::pool_in_flight(&self.0, -1);
    }
}
