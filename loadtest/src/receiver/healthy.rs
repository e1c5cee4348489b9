//! The healthy receiver: `POST /h/{anything}` answers 200 at once and records each payload's
//! end-to-end latency in its phase ([`Sink`]).

use super::{serve, wait_count, MAX_TIMELINE};
use crate::clock::now_us;
use crate::stats::new_hist;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use hdrhistogram::Histogram;
use serde::Deserialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Phases a payload can belong to.
pub const PHASES: usize = 5;
/// Warm-up deliveries (not reported).
pub const PHASE_WARMUP: u8 = 0;
/// The baseline stream (no backlog).
pub const PHASE_BASELINE: u8 = 1;
/// The stream measured while the dead channel holds its backlog.
pub const PHASE_LOADED: u8 = 2;
/// The throughput scenario.
pub const PHASE_THROUGHPUT: u8 = 3;
/// The fairness scenario's measured deliveries (tenant B's, `seq` = round).
pub const PHASE_FAIRNESS: u8 = 4;

/// What the healthy receiver recorded for one phase.
pub struct PhaseRecord {
    /// End-to-end latency of first arrivals, µs.
    pub hist: Histogram<u64>,
    /// Arrivals per sequence number (index = seq).
    pub seen: Vec<u32>,
    /// Distinct sequence numbers received.
    pub unique: u64,
    /// Repeated arrivals (at-least-once delivery).
    pub duplicates: u64,
    /// (arrival µs on the harness clock, latency µs) of first arrivals, in arrival order.
    pub timeline: Vec<(u64, u64)>,
}

impl Default for PhaseRecord {
    fn default() -> Self {
        Self {
            hist: new_hist(),
            seen: Vec::new(),
            unique: 0,
            duplicates: 0,
            timeline: Vec::new(),
        }
    }
}

/// The healthy receiver's shared state.
pub struct Sink {
    phases: Vec<Mutex<PhaseRecord>>,
    /// Requests received (any phase, parsed or not).
    pub requests: AtomicU64,
    /// Requests whose body was not a harness payload.
    pub unparsed: AtomicU64,
}

impl Default for Sink {
    fn default() -> Self {
        Self {
            phases: (0..PHASES).map(|_| Mutex::default()).collect(),
            requests: AtomicU64::new(0),
            unparsed: AtomicU64::new(0),
        }
    }
}

#[derive(Deserialize)]
struct Envelope {
    data: Marker,
}

#[derive(Deserialize)]
struct Marker {
    phase: u8,
    seq: u64,
    sent_us: u64,
}

impl Sink {
    fn record(&self, m: &Marker, at_us: u64) -> bool {
        let Some(p) = self.phases.get(m.phase as usize) else {
            return false;
        };
        let Ok(seq) = usize::try_from(m.seq) else {
            return false;
        };
        if seq >= 100_000_000 {
            return false;
        }
        let mut p = p.lock().unwrap();
        if p.seen.len() <= seq {
            p.seen.resize(seq + 1, 0);
        }
        p.seen[seq] += 1;
        if p.seen[seq] > 1 {
            p.duplicates += 1;
            return true;
        }
        p.unique += 1;
        let latency = at_us.saturating_sub(m.sent_us);
        p.hist.saturating_record(latency.max(1));
        if p.timeline.len() < MAX_TIMELINE {
            p.timeline.push((at_us, latency));
        }
        true
    }

    /// Distinct deliveries of `phase` received so far.
    pub fn unique(&self, phase: u8) -> u64 {
        self.phases[phase as usize].lock().unwrap().unique
    }

    /// Runs `f` on the record of `phase`.
    pub fn with<R>(&self, phase: u8, f: impl FnOnce(&PhaseRecord) -> R) -> R {
        f(&self.phases[phase as usize].lock().unwrap())
    }

    /// Waits until `phase` has `n` distinct deliveries or `timeout` passes; returns the count.
    pub async fn wait_for(&self, phase: u8, n: u64, timeout: Duration) -> u64 {
        wait_count(n, timeout, || self.unique(phase)).await
    }
}

async fn healthy(State(sink): State<Arc<Sink>>, body: Bytes) -> StatusCode {
    let at = now_us();
    sink.requests.fetch_add(1, Ordering::Relaxed);
    let ok = serde_json::from_slice::<Envelope>(&body)
        .map(|e| sink.record(&e.data, at))
        .unwrap_or(false);
    if !ok {
        sink.unparsed.fetch_add(1, Ordering::Relaxed);
    }
    StatusCode::OK
}

/// A running healthy receiver: `POST /h/{anything}` answers 200 and records.
pub struct HealthyReceiver {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub base: String,
    /// What it recorded.
    pub sink: Arc<Sink>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl HealthyReceiver {
    /// Starts on an ephemeral loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let sink = Arc::new(Sink::default());
        let app = Router::new()
            .route("/h/{ep}", post(healthy))
            .with_state(sink.clone());
        let stop = CancellationToken::new();
        let task = serve(listener, app, stop.clone());
        Ok(Self {
            base,
            sink,
            stop,
            task,
        })
    }

    /// The URL of endpoint `name`.
    pub fn url(&self, name: &str) -> String {
        format!("{}/h/{name}", self.base)
    }

    /// Stops listening (open requests finish first, at most 5 s).
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_counts_first_arrivals_and_duplicates() {
        let s = Sink::default();
        let m = |seq| Marker {
            phase: PHASE_BASELINE,
            seq,
            sent_us: 1_000,
        };
        assert!(s.record(&m(3), 6_000));
        assert!(s.record(&m(3), 9_000));
        assert!(s.record(&m(0), 2_000));
        assert!(!s.record(
            &Marker {
                phase: 9,
                seq: 0,
                sent_us: 0
            },
            1
        ));
        s.with(PHASE_BASELINE, |p| {
            assert_eq!(p.unique, 2);
            assert_eq!(p.duplicates, 1);
            assert_eq!(p.hist.len(), 2);
            assert_eq!(p.timeline, vec![(6_000, 5_000), (2_000, 1_000)]);
            assert_eq!(p.seen, vec![1, 0, 0, 2]);
        });
    }
}
