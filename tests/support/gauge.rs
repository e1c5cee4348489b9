//! A fake endpoint on loopback that measures concurrency: how many requests it holds at once,
//! when each arrived and left, and what it answered (scripted).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// One request a [`Gauge`] answered.
#[derive(Debug, Clone)]
pub struct Hit {
    /// `webhook-id` (the delivery id).
    pub id: Uuid,
    /// Arrival.
    pub start: Instant,
    /// When the answer left.
    pub end: Instant,
    /// Requests in flight at the gauge when this one arrived, itself included.
    pub in_flight_at_start: usize,
    /// Status answered.
    pub status: u16,
}

#[derive(Default)]
struct GaugeState {
    in_flight: AtomicUsize,
    default_status: AtomicU16,
    /// Statuses for the next requests, in arrival order; then `default_status`.
    script: Mutex<VecDeque<u16>>,
    hits: Mutex<Vec<Hit>>,
}

/// A receiver on loopback that counts how many requests are in flight at once: each request
/// takes `delay`, then gets the next scripted status (or the default).
pub struct Gauge {
    /// The URL to point a channel at (`http://127.0.0.1:<port>/hook`).
    pub url: String,
    state: Arc<GaugeState>,
    stop: tokio_util::sync::CancellationToken,
}

impl Gauge {
    /// Starts a gauge whose requests each take `delay` (the fake endpoint's pace, not a wait of
    /// the test) and then get `status` unless scripted otherwise.
    pub async fn start(delay: Duration, status: u16) -> Self {
        let state = Arc::new(GaugeState::default());
        state.default_status.store(status, Ordering::SeqCst);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let s = state.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: axum::http::HeaderMap| {
                let s = s.clone();
                async move {
                    let start = Instant::now();
                    let in_flight_at_start = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    let status = s
                        .script
                        .lock()
                        .unwrap()
                        .pop_front()
                        .unwrap_or_else(|| s.default_status.load(Ordering::SeqCst));
                    tokio::time::sleep(delay).await;
                    let id = headers
                        .get("webhook-id")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_default();
                    s.in_flight.fetch_sub(1, Ordering::SeqCst);
                    s.hits.lock().unwrap().push(Hit {
                        id,
                        start,
                        end: Instant::now(),
                        in_flight_at_start,
                        status,
                    });
                    axum::http::StatusCode::from_u16(status).unwrap()
                }
            }),
        );
        let stop = tokio_util::sync::CancellationToken::new();
        let token = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(token.cancelled_owned())
                .await
                .unwrap();
        });
        Gauge { url, state, stop }
    }

    /// Answers `status` from now on (after any scripted statuses).
    pub fn answer(&self, status: u16) {
        self.state.default_status.store(status, Ordering::SeqCst);
    }

    /// Answers the next requests with `statuses`, in arrival order.
    pub fn script(&self, statuses: &[u16]) {
        self.state.script.lock().unwrap().extend(statuses);
    }

    /// Answered requests, by arrival.
    pub fn hits(&self) -> Vec<Hit> {
        let mut h = self.state.hits.lock().unwrap().clone();
        h.sort_by_key(|h| h.start);
        h
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
