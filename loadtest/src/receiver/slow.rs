//! The slow receiver: many endpoints that answer 200 after a fixed delay, each with its own
//! [`InFlight`] gauge, recording the first arrival of every `(data.round, data.seq)`.

use super::{serve, wait_count, InFlight, MAX_TIMELINE};
use crate::clock::now_us;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One request to a [`SlowReceiver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Harness-clock arrival time, µs.
    pub at_us: u64,
    /// Index of the endpoint it came to.
    pub endpoint: usize,
    /// `data.round` of its payload.
    pub round: u64,
    /// `data.seq` of its payload.
    pub seq: u64,
}

/// What a [`SlowReceiver`] recorded.
#[derive(Debug, Default)]
pub struct SlowRecord {
    /// First arrivals of each `(round, seq)`, in arrival order (at most 2 000 000).
    pub arrivals: Vec<Arrival>,
    /// Distinct `seq`s received per round.
    pub unique: BTreeMap<u64, u64>,
    /// Repeated arrivals (at-least-once delivery).
    pub duplicates: u64,
    /// Requests whose body was not `{"data": {"round": …, "seq": …}}`.
    pub unparsed: u64,
    seen: HashSet<(u64, u64)>,
}

struct SlowState {
    delay: Duration,
    endpoints: Vec<InFlight>,
    total: InFlight,
    record: Mutex<SlowRecord>,
    stop: CancellationToken,
}

#[derive(Deserialize)]
struct SlowEnvelope {
    data: SlowMarker,
}

#[derive(Deserialize)]
struct SlowMarker {
    round: u64,
    seq: u64,
}

impl SlowRecord {
    fn record(&mut self, at_us: u64, endpoint: usize, body: &[u8]) {
        let Ok(SlowEnvelope { data: m }) = serde_json::from_slice::<SlowEnvelope>(body) else {
            self.unparsed += 1;
            return;
        };
        if !self.seen.insert((m.round, m.seq)) {
            self.duplicates += 1;
            return;
        }
        *self.unique.entry(m.round).or_default() += 1;
        if self.arrivals.len() < MAX_TIMELINE {
            self.arrivals.push(Arrival {
                at_us,
                endpoint,
                round: m.round,
                seq: m.seq,
            });
        }
    }
}

async fn slow(
    State(s): State<Arc<SlowState>>,
    Path(endpoint): Path<usize>,
    body: Bytes,
) -> StatusCode {
    let at = now_us();
    let Some(gauge) = s.endpoints.get(endpoint) else {
        return StatusCode::NOT_FOUND;
    };
    let _held = (gauge.enter(), s.total.enter());
    s.record.lock().unwrap().record(at, endpoint, &body);
    tokio::select! {
        _ = s.stop.cancelled() => {}
        _ = tokio::time::sleep(s.delay) => {}
    }
    StatusCode::OK
}

/// A running slow receiver: endpoints `POST /s/{0..n}` that answer 200 after a fixed delay,
/// each with its own [`InFlight`] gauge, plus one for all of them; it records the first arrival
/// of every `(data.round, data.seq)`.
pub struct SlowReceiver {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub base: String,
    state: Arc<SlowState>,
    task: tokio::task::JoinHandle<()>,
}

impl SlowReceiver {
    /// Starts `endpoints` endpoints answering after `delay` on an ephemeral loopback port.
    pub async fn start(endpoints: usize, delay: Duration) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(SlowState {
            delay,
            endpoints: (0..endpoints).map(|_| InFlight::default()).collect(),
            total: InFlight::default(),
            record: Mutex::default(),
            stop: CancellationToken::new(),
        });
        let app = Router::new()
            .route("/s/{ep}", post(slow))
            .with_state(state.clone());
        let task = serve(listener, app, state.stop.clone());
        Ok(Self { base, state, task })
    }

    /// The URL of endpoint `i` (`0..endpoints`).
    pub fn url(&self, i: usize) -> String {
        format!("{}/s/{i}", self.base)
    }

    /// The gauges of every endpoint, by index.
    pub fn endpoints(&self) -> &[InFlight] {
        &self.state.endpoints
    }

    /// The gauge of all endpoints together.
    pub fn total(&self) -> &InFlight {
        &self.state.total
    }

    /// Starts new maxima on every gauge (see [`InFlight::reset_max`]).
    pub fn reset_max(&self) {
        self.state.endpoints.iter().for_each(InFlight::reset_max);
        self.state.total.reset_max();
    }

    /// Distinct deliveries of `round` received so far.
    pub fn unique(&self, round: u64) -> u64 {
        let r = self.state.record.lock().unwrap();
        r.unique.get(&round).copied().unwrap_or(0)
    }

    /// Runs `f` on what it recorded.
    pub fn with<R>(&self, f: impl FnOnce(&SlowRecord) -> R) -> R {
        f(&self.state.record.lock().unwrap())
    }

    /// Waits until `round` has `n` distinct deliveries or `timeout` passes; returns the count.
    pub async fn wait_for(&self, round: u64, n: u64, timeout: Duration) -> u64 {
        wait_count(n, timeout, || self.unique(round)).await
    }

    /// Stops it: held requests are answered at once; open connections get at most 5 s.
    pub async fn stop(self) {
        self.state.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_record_counts_first_arrivals_per_round() {
        let mut r = SlowRecord::default();
        r.record(10, 0, br#"{"data": {"round": 0, "seq": 1}}"#);
        r.record(20, 1, br#"{"data": {"round": 0, "seq": 1}}"#);
        r.record(30, 1, br#"{"data": {"round": 1, "seq": 1}}"#);
        r.record(40, 1, b"not json");
        assert_eq!(r.unique.get(&0), Some(&1));
        assert_eq!(r.unique.get(&1), Some(&1));
        assert_eq!((r.duplicates, r.unparsed), (1, 1));
        assert_eq!(
            r.arrivals[0],
            Arrival {
                at_us: 10,
                endpoint: 0,
                round: 0,
                seq: 1
            }
        );
    }
}
