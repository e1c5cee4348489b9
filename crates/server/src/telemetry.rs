//! Start-up of the process's telemetry: logs to stderr as text or JSON (`log_format`, level via
//! `RUST_LOG`), the metrics provider (Prometheus at `GET /metrics`, plus an OTLP periodic reader
//! when `telemetry.otlp_endpoint` is set), and, with the same setting, `tracing` spans exported
//! as OpenTelemetry traces over OTLP/HTTP.
//!
//! Spans carry ids and outcomes (see `breakwater_worker` and the API's request spans), never
//! secrets or payload bodies; the same fields appear in JSON logs through the span context.

use crate::config::{Settings, TelemetryConfig};
use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::metrics::PeriodicReader;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use std::io::IsTerminal;
use std::time::Duration;
use tracing_subscriber::filter::{filter_fn, EnvFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The log filter when `RUST_LOG` is unset.
pub const DEFAULT_LOG_FILTER: &str = "info,sqlx=warn,tower_http=warn";

/// Keeps the OTLP exporters running; dropping it flushes and stops them (call it at exit).
pub struct Guard {
    tracer: Option<SdkTracerProvider>,
    otlp_metrics: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(t) = self.tracer.take() {
            if let Err(e) = t.shutdown() {
                eprintln!("flushing OTLP traces failed: {e}");
            }
        }
        if self.otlp_metrics {
            if let Err(e) = breakwater_telemetry::provider().shutdown() {
                eprintln!("flushing OTLP metrics failed: {e}");
            }
        }
    }
}

/// Sets up logs, metrics and traces for the process from `settings`; `default_filter` applies
/// when `RUST_LOG` is unset. Call once, first thing in `main`, inside the Tokio runtime.
///
/// Errors when an OTLP exporter cannot be built (e.g. a malformed endpoint).
pub fn init(settings: &Settings, default_filter: &str) -> anyhow::Result<Guard> {
    let cfg = &settings.telemetry;
    let otlp_metrics = match cfg.otlp() {
        Some(base) => {
            let exporter = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_endpoint(format!("{base}/v1/metrics"))
                .build()
                .context("building the OTLP metric exporter (telemetry.otlp_endpoint)")?;
            let reader = PeriodicReader::builder(exporter)
                .with_interval(Duration::from_millis(cfg.otlp_metrics_interval_ms))
                .build();
            breakwater_telemetry::install(|b| b.with_reader(reader))
                .context("installing the OTLP metrics reader")?;
            true
        }
        None => false,
    };
    let tracer = cfg
        .otlp()
        .map(|base| tracer_provider(cfg, base))
        .transpose()?;

    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let json = settings.log_format == "json";
    let otel = tracer.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("breakwater"))
            // The exporters' own HTTP client must not feed spans back into the exporter.
            .with_filter(filter_fn(|m| {
                let t = m.target();
                !(t.starts_with("opentelemetry")
                    || t.starts_with("hyper")
                    || t.starts_with("reqwest")
                    || t.starts_with("h2"))
            }))
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(json.then(|| {
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(std::io::stderr)
        }))
        .with((!json).then(|| {
            tracing_subscriber::fmt::layer()
                .with_ansi(ansi_colours())
                .with_writer(std::io::stderr)
        }))
        .with(otel)
        .try_init()
        .context("installing the tracing subscriber")?;
    if let Some(base) = cfg.otlp() {
        tracing::info!(
            endpoint = base,
            "exporting metrics and traces over OTLP/HTTP"
        );
    }
    Ok(Guard {
        tracer,
        otlp_metrics,
    })
}

fn tracer_provider(cfg: &TelemetryConfig, base: &str) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{base}/v1/traces"))
        .build()
        .context("building the OTLP span exporter (telemetry.otlp_endpoint)")?;
    Ok(SdkTracerProvider::builder()
        .with_resource(breakwater_telemetry::resource())
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            cfg.otlp_trace_sample_ratio,
        ))))
        .with_batch_exporter(exporter)
        .build())
}

/// Whether the text log uses ANSI colours: only when stderr is a terminal and `NO_COLOR` is not
/// set to a non-empty value (<https://no-color.org>). A log redirected to a file, a pipe or
/// journald is plain text.
pub fn ansi_colours() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
