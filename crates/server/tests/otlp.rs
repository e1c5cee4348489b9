//! OTLP export: with `telemetry.otlp_endpoint` set, metrics and traces are pushed over
//! OTLP/HTTP (protobuf) to `<endpoint>/v1/metrics` and `<endpoint>/v1/traces`.
//!
//! Its own test binary: telemetry is process-wide (one subscriber, one meter provider).

use axum::body::Bytes;
use axum::http::{HeaderMap, Uri};
use axum::Router;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Seen = Arc<Mutex<Vec<(String, String, usize)>>>;

/// A stand-in collector on loopback: records (path, content type, body size) of every POST.
async fn collector() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
        let s = s.clone();
        async move {
            let ct = headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            s.lock()
                .unwrap()
                .push((uri.path().to_string(), ct, body.len()));
            ""
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_traces_are_pushed_over_otlp_http_when_configured() {
    let (endpoint, seen) = collector().await;
    let mut settings = breakwater::local_settings("otlp-test-operator-key");
    settings.telemetry.otlp_endpoint = format!("{endpoint}/");
    settings.telemetry.otlp_metrics_interval_ms = 200;
    let guard = breakwater::telemetry::init(&settings, "info").expect("telemetry starts");

    tracing::info_span!("webhook.attempt", delivery_id = "d-1", outcome = "success")
        .in_scope(|| tracing::info!("attempt recorded"));
    breakwater_telemetry::attempt("default", "success", "delivered", None, false);

    let pushed = |path: &str| {
        seen.lock()
            .unwrap()
            .iter()
            .any(|(p, ct, n)| p == path && ct == "application/x-protobuf" && *n > 0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !pushed("/v1/metrics") && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        pushed("/v1/metrics"),
        "metrics pushed: {:?}",
        seen.lock().unwrap()
    );
    // Dropping the guard flushes the span batch (blocking: off the runtime's threads).
    tokio::task::spawn_blocking(move || drop(guard))
        .await
        .unwrap();
    assert!(
        pushed("/v1/traces"),
        "traces pushed: {:?}",
        seen.lock().unwrap()
    );
}
