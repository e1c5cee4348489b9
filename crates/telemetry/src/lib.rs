//! Breakwater's metrics (docs/design.md, "Telemetry").
//!
//! One process-wide OpenTelemetry SDK [`SdkMeterProvider`] carries every instrument. It always
//! has a Prometheus reader (the `opentelemetry-prometheus` exporter over a private
//! [`prometheus::Registry`]), rendered as Prometheus text by [`render`] for `GET /metrics`; the
//! binary may add an OTLP periodic reader when it calls [`install`] at start-up. Code that
//! records before [`install`] (tests, tools) gets the Prometheus-only provider, built on first
//! use, so an instrument can never end up bound to a no-op provider.
//!
//! Names follow the OpenTelemetry semantic-convention style (`breakwater.<thing>.<measure>`,
//! units in the metadata); the Prometheus exporter turns them into `breakwater_<…>` with a
//! `_seconds` / `_total` suffix where the unit and kind call for one. Attributes are
//! low-cardinality only (`tier`, `queue`, `outcome`, `status`, `state`, `from`, `to`): tenant,
//! channel and delivery ids go into traces and logs, never into metrics.
//!
//! | instrument | kind | unit | attributes |
//! |---|---|---|---|
//! | `breakwater.circuit.transitions` | counter | `{transition}` | `from`, `to` |
//! | `breakwater.circuit.channels` | gauge (scrape time) | `{channel}` | `state` |
//! | `breakwater.deliveries.parked` | gauge (scrape time) | `{delivery}` | `tier` |
//! | `breakwater.deliveries.rate_limited` | counter | `{snooze}` | `tier` |
//! | `breakwater.deliveries` | counter | `{delivery}` | `tier`, `status` = delivered / failed / dead |
//! | `breakwater.attempts` | counter | `{attempt}` | `tier`, `outcome` = success / transient / permanent |
//! | `breakwater.delivery.latency` | histogram | `s` | `tier` (accepted → delivered) |
//! | `breakwater.attempt.duration` | histogram | `s` | `tier`, `outcome` |
//! | `breakwater.probe.results` | counter | `{probe}` | `outcome` |
//! | `breakwater.queue.depth` | gauge (scrape time) | `{job}` | `queue` (available jobs) |
//! | `breakwater.queue.scheduled` | gauge (scrape time) | `{job}` | `queue` |
//! | `breakwater.queue.executing` | gauge (scrape time) | `{job}` | `queue` (in flight, all nodes) |
//! | `breakwater.queue.oldest_available.age` | gauge (scrape time) | `s` | `queue` |
//! | `breakwater.pool.in_flight` | up-down counter | `{job}` | `queue` (this node) |
//!
//! "Scrape time" gauges are cluster-wide facts read from Postgres ([`set_snapshot`] just before
//! a collection), so every node reports the same value and they are right however many nodes
//! run; counters, histograms and `breakwater.pool.in_flight` are this process's own.

use opentelemetry::metrics::{
    Counter, Histogram, Meter, MeterProvider as _, ObservableGauge, UpDownCounter,
};
use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::{MeterProviderBuilder, SdkMeterProvider};
use opentelemetry_sdk::Resource;
use std::sync::{OnceLock, RwLock};
use std::time::Duration;

/// The instrumentation scope of every Breakwater instrument.
pub const SCOPE: &str = "breakwater";

/// `Content-Type` of [`render`]'s output (Prometheus text exposition 0.0.4).
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Bucket boundaries of `breakwater.attempt.duration`, seconds: 5 ms … 30 s (the request
/// timeout is 15 s by default).
const ATTEMPT_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
];

/// Bucket boundaries of `breakwater.delivery.latency`, seconds: 10 ms … 2 days (a delivery that
/// needs retries can take the whole retry schedule).
const LATENCY_BUCKETS: [f64; 20] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0,
    3600.0, 7200.0, 21600.0, 86400.0, 172800.0,
];

/// One queue's numbers at the last [`set_snapshot`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueGauge {
    /// Queue name.
    pub queue: String,
    /// Jobs due now and fetchable (`available`).
    pub available: i64,
    /// Jobs waiting for their time: backoff, snooze, parked (`scheduled`).
    pub scheduled: i64,
    /// Jobs claimed by a worker on any node (`executing`).
    pub executing: i64,
    /// How long the oldest available job has been due, seconds (0 when none is).
    pub oldest_available_age_s: f64,
}

/// The cluster-wide facts read from Postgres at scrape time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Channels per circuit state (`closed`, `open`, `half_open`, `paused`).
    pub channels_by_state: Vec<(String, i64)>,
    /// Delivery jobs parked by a circuit or a pause, per tier (`high`, `default`, `bulk`).
    pub parked_by_tier: Vec<(String, i64)>,
    /// Every known queue.
    pub queues: Vec<QueueGauge>,
}

struct Instruments {
    transitions: Counter<u64>,
    rate_limited: Counter<u64>,
    deliveries: Counter<u64>,
    attempts: Counter<u64>,
    latency: Histogram<f64>,
    attempt_duration: Histogram<f64>,
    probes: Counter<u64>,
    in_flight: UpDownCounter<i64>,
    // Kept so the callbacks live as long as the provider.
    _gauges: Vec<ObservableGauge<i64>>,
    _age: ObservableGauge<f64>,
}

struct Telemetry {
    provider: SdkMeterProvider,
    registry: prometheus::Registry,
    instruments: Instruments,
}

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();
static SNAPSHOT: RwLock<Option<Snapshot>> = RwLock::new(None);

/// The [`install`] was too late: the provider had already been built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadyInstalled;

impl std::fmt::Display for AlreadyInstalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the metrics provider was already built; install() must run before anything records a metric")
    }
}

impl std::error::Error for AlreadyInstalled {}

/// The resource every Breakwater provider reports: the SDK's detectors (including
/// `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`), with `service.name = breakwater` unless
/// `OTEL_SERVICE_NAME` says otherwise.
pub fn resource() -> Resource {
    let b = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_some_and(|v| !v.is_empty()) {
        b.build()
    } else {
        b.with_service_name("breakwater").build()
    }
}

/// Builds the process's meter provider with the Prometheus reader plus whatever `customize`
/// adds (e.g. an OTLP periodic reader). Call once at start-up, before anything is recorded;
/// afterwards it returns [`AlreadyInstalled`] and changes nothing.
pub fn install(
    customize: impl FnOnce(MeterProviderBuilder) -> MeterProviderBuilder,
) -> Result<(), AlreadyInstalled> {
    let mut built = false;
    TELEMETRY.get_or_init(|| {
        built = true;
        build(customize)
    });
    if built {
        Ok(())
    } else {
        Err(AlreadyInstalled)
    }
}

/// The process's meter provider (to flush or shut down OTLP readers at exit).
pub fn provider() -> SdkMeterProvider {
    get().provider.clone()
}

fn get() -> &'static Telemetry {
    TELEMETRY.get_or_init(|| build(|b| b))
}

fn build(customize: impl FnOnce(MeterProviderBuilder) -> MeterProviderBuilder) -> Telemetry {
    let registry = prometheus::Registry::new();
    let exporter = opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        // `otel_scope_*` labels on every series add nothing: there is one scope.
        .scope_info_enabled(false)
        .build()
        .expect("a fresh registry accepts the exporter's collector");
    let builder = SdkMeterProvider::builder()
        .with_resource(resource())
        .with_reader(exporter);
    let provider = customize(builder).build();
    let meter = provider.meter(SCOPE);
    let instruments = instruments(&meter);
    Telemetry {
        provider,
        registry,
        instruments,
    }
}

fn instruments(m: &Meter) -> Instruments {
    let gauge = |name: &'static str,
                 unit: &'static str,
                 desc: &'static str,
                 read: fn(&Snapshot) -> Vec<(&'static str, String, i64)>| {
        m.i64_observable_gauge(name)
            .with_unit(unit)
            .with_description(desc)
            .with_callback(move |o| {
                let snap = SNAPSHOT.read().unwrap_or_else(|e| e.into_inner());
                if let Some(s) = snap.as_ref() {
                    for (key, value, n) in read(s) {
                        o.observe(n, &[KeyValue::new(key, value)]);
                    }
                }
            })
            .build()
    };
    let gauges = vec![
        gauge(
            "breakwater.circuit.channels",
            "{channel}",
            "Channels per circuit state, across the cluster (read from Postgres at collection)",
            |s| {
                s.channels_by_state
                    .iter()
                    .map(|(k, n)| ("state", k.clone(), *n))
                    .collect()
            },
        ),
        gauge(
            "breakwater.deliveries.parked",
            "{delivery}",
            "Delivery jobs parked by an open circuit or a pause, per tier, across the cluster",
            |s| {
                s.parked_by_tier
                    .iter()
                    .map(|(k, n)| ("tier", k.clone(), *n))
                    .collect()
            },
        ),
        gauge(
            "breakwater.queue.depth",
            "{job}",
            "Jobs due now and waiting for a worker (state available), per queue",
            |s| {
                s.queues
                    .iter()
                    .map(|q| ("queue", q.queue.clone(), q.available))
                    .collect()
            },
        ),
        gauge(
            "breakwater.queue.scheduled",
            "{job}",
            "Jobs waiting for their time (backoff, snooze, parked), per queue",
            |s| {
                s.queues
                    .iter()
                    .map(|q| ("queue", q.queue.clone(), q.scheduled))
                    .collect()
            },
        ),
        gauge(
            "breakwater.queue.executing",
            "{job}",
            "Jobs being run by a worker on any node, per queue",
            |s| {
                s.queues
                    .iter()
                    .map(|q| ("queue", q.queue.clone(), q.executing))
                    .collect()
            },
        ),
    ];
    let age = m
        .f64_observable_gauge("breakwater.queue.oldest_available.age")
        .with_unit("s")
        .with_description(
            "How long the oldest available job of the queue has been due (0 when none is)",
        )
        .with_callback(|o| {
            let snap = SNAPSHOT.read().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = snap.as_ref() {
                for q in &s.queues {
                    o.observe(
                        q.oldest_available_age_s,
                        &[KeyValue::new("queue", q.queue.clone())],
                    );
                }
            }
        })
        .build();
    Instruments {
        transitions: m
            .u64_counter("breakwater.circuit.transitions")
            .with_unit("{transition}")
            .with_description("Circuit transitions made (by their winner), by from and to state")
            .build(),
        rate_limited: m
            .u64_counter("breakwater.deliveries.rate_limited")
            .with_unit("{snooze}")
            .with_description("Delivery jobs snoozed by their channel's rate limit, per tier")
            .build(),
        deliveries: m
            .u64_counter("breakwater.deliveries")
            .with_unit("{delivery}")
            .with_description("Delivery attempt results by the status they left the delivery in: delivered, failed (will retry), dead")
            .build(),
        attempts: m
            .u64_counter("breakwater.attempts")
            .with_unit("{attempt}")
            .with_description("HTTP delivery attempts by outcome class: success, transient, permanent")
            .build(),
        latency: m
            .f64_histogram("breakwater.delivery.latency")
            .with_unit("s")
            .with_description("End-to-end delivery latency: from acceptance by the API to the successful attempt's end")
            .with_boundaries(LATENCY_BUCKETS.to_vec())
            .build(),
        attempt_duration: m
            .f64_histogram("breakwater.attempt.duration")
            .with_unit("s")
            .with_description("Duration of one HTTP delivery attempt (request and response excerpt)")
            .with_boundaries(ATTEMPT_BUCKETS.to_vec())
            .build(),
        probes: m
            .u64_counter("breakwater.probe.results")
            .with_unit("{probe}")
            .with_description("Half-open probe deliveries by outcome class")
            .build(),
        in_flight: m
            .i64_up_down_counter("breakwater.pool.in_flight")
            .with_unit("{job}")
            .with_description("Jobs this node's pool is running now, per queue")
            .build(),
        _gauges: gauges,
        _age: age,
    }
}

fn kv(key: &'static str, value: &str) -> KeyValue {
    KeyValue::new(key, value.to_owned())
}

/// Counts one circuit transition `from` → `to` (state names as in the `circuit_state` column).
pub fn circuit_transition(from: &str, to: &str) {
    get()
        .instruments
        .transitions
        .add(1, &[kv("from", from), kv("to", to)]);
}

/// Counts one delivery job snoozed by its channel's rate limit (no request, no attempt used).
pub fn rate_limited(tier: &str) {
    get().instruments.rate_limited.add(1, &[kv("tier", tier)]);
}

/// Records how long one HTTP delivery attempt of `tier` took, by `outcome` class (`success`,
/// `transient`, `permanent`).
pub fn attempt_duration(tier: &str, outcome: &str, duration: Duration) {
    get().instruments.attempt_duration.record(
        duration.as_secs_f64(),
        &[kv("tier", tier), kv("outcome", outcome)],
    );
}

/// Records one finished and recorded HTTP delivery attempt of `tier`: its `outcome` class
/// (`success`, `transient`, `permanent`), the `status` it left the delivery in (`delivered`,
/// `failed`, `paused`, `dead`), and, when delivered, the end-to-end `latency` since the API accepted it.
/// `probe` marks the half-open probe delivery (also counted in `breakwater.probe.results`).
/// The attempt's duration is recorded apart ([`attempt_duration`]), where it is measured.
pub fn attempt(tier: &str, outcome: &str, status: &str, latency: Option<Duration>, probe: bool) {
    let i = &get().instruments;
    let tier_kv = kv("tier", tier);
    let outcome_kv = kv("outcome", outcome);
    i.attempts.add(1, &[tier_kv.clone(), outcome_kv.clone()]);
    i.deliveries
        .add(1, &[tier_kv.clone(), kv("status", status)]);
    if let Some(l) = latency {
        i.latency.record(l.as_secs_f64(), &[tier_kv]);
    }
    if probe {
        i.probes.add(1, &[outcome_kv]);
    }
}

/// Adds `delta` (±1) to this node's in-flight jobs of `queue`.
pub fn pool_in_flight(queue: &str, delta: i64) {
    get()
        .instruments
        .in_flight
        .add(delta, &[kv("queue", queue)]);
}

/// Replaces the cluster-wide facts the scrape-time gauges report.
pub fn set_snapshot(s: Snapshot) {
    *SNAPSHOT.write().unwrap_or_else(|e| e.into_inner()) = Some(s);
}

/// Every instrument as Prometheus text exposition (see [`PROMETHEUS_CONTENT_TYPE`]). Call
/// [`set_snapshot`] first for fresh scrape-time gauges.
pub fn render() -> String {
    let families = get().registry.gather();
    prometheus::TextEncoder::new()
        .encode_to_string(&families)
        .unwrap_or_else(|e| format!("# encoding metrics failed: {e}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn renders_otel_instruments_as_prometheus_text_with_units_and_suffixes() {
        circuit_transition("closed", "open");
        attempt_duration("default", "success", Duration::from_millis(120));
        attempt(
            "default",
            "success",
            "delivered",
            Some(Duration::from_millis(300)),
            false,
        );
        attempt("bulk", "transient", "failed", None, true);
        rate_limited("high");
        pool_in_flight("deliveries", 1);
        set_snapshot(Snapshot {
            channels_by_state: vec![("open".into(), 2), ("closed".into(), 5)],
            parked_by_tier: vec![("default".into(), 42)],
            queues: vec![QueueGauge {
                queue: "deliveries".into(),
                available: 7,
                scheduled: 3,
                executing: 1,
                oldest_available_age_s: 1.5,
            }],
        });
        let text = render();
        for want in [
            "breakwater_circuit_transitions_total{from=\"closed\",to=\"open\"} 1",
            "breakwater_attempts_total{outcome=\"success\",tier=\"default\"} 1",
            "breakwater_deliveries_total{status=\"delivered\",tier=\"default\"} 1",
            "breakwater_deliveries_rate_limited_total{tier=\"high\"} 1",
            "breakwater_probe_results_total{outcome=\"transient\"} 1",
            "breakwater_delivery_latency_seconds_count{tier=\"default\"} 1",
            "breakwater_attempt_duration_seconds_bucket{outcome=\"success\",tier=\"default\",le=\"0.25\"} 1",
            "breakwater_circuit_channels{state=\"open\"} 2",
            "breakwater_deliveries_parked{tier=\"default\"} 42",
            "breakwater_queue_depth{queue=\"deliveries\"} 7",
            "breakwater_queue_scheduled{queue=\"deliveries\"} 3",
            "breakwater_queue_executing{queue=\"deliveries\"} 1",
            "breakwater_queue_oldest_available_age_seconds{queue=\"deliveries\"} 1.5",
            "breakwater_pool_in_flight{queue=\"deliveries\"} 1",
        ] {
            assert!(
                line(&text, want).is_some(),
                "missing {want:?} in:\n{text}"
            );
        }
        assert!(text.contains("# HELP breakwater_delivery_latency_seconds End-to-end"));
        assert!(text.contains("# TYPE breakwater_circuit_transitions_total counter"));
        assert!(text.contains("service_name=\"breakwater\""), "{text}");
        assert_eq!(install(|b| b), Err(AlreadyInstalled));
    }
}
