//! Lean receivers for load: a healthy one that records end-to-end latency per phase (atomic
//! counters, one small mutex per phase, hdrhistogram), a dead one (`timeout`, `refuse`, `503` or
//! `slow`), and a slow one with many endpoints that answer 200 after a fixed delay. The dead and
//! slow ones count the requests they hold at once ([`InFlight`]).
//!
//! Signatures are not verified here (the end-to-end tests do that); the receivers parse only
//! what they measure: `data.phase`, `data.seq`, `data.sent_us` (healthy), `data.round`,
//! `data.seq` (slow).

use crate::clock::now_us;
use crate::stats::new_hist;
use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use hdrhistogram::Histogram;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
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

/// Most timeline samples kept per phase.
const MAX_TIMELINE: usize = 2_000_000;

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

/// Serves `app` on `listener` in a task of its own until `stop` is cancelled; then open
/// requests finish first (graceful shutdown). Every receiver here runs this way.
fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
    })
}

/// Reads `count` every 20 ms until it reaches `n` or `timeout` passes; returns the last reading.
async fn wait_count(n: u64, timeout: Duration, count: impl Fn() -> u64) -> u64 {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let c = count();
        if c >= n || tokio::time::Instant::now() >= deadline {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
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

/// A gauge of the requests a receiver holds: how many now, the most ever at once, and how many
/// in all. A request counts from its arrival at the handler until the handler returns its
/// response, or until the request is dropped (the client closed the connection first).
#[derive(Debug, Default)]
pub struct InFlight {
    current: AtomicU64,
    max: AtomicU64,
    total: AtomicU64,
}

/// Counts one request out of its [`InFlight`] gauge when dropped.
#[must_use = "the request counts as in flight until the guard is dropped"]
pub struct InFlightGuard<'a>(&'a InFlight);

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.0.current.fetch_sub(1, Ordering::Relaxed);
    }
}

impl InFlight {
    /// Counts a request in; the guard counts it out.
    pub fn enter(&self) -> InFlightGuard<'_> {
        self.total.fetch_add(1, Ordering::Relaxed);
        let now = self.current.fetch_add(1, Ordering::Relaxed) + 1;
        self.max.fetch_max(now, Ordering::Relaxed);
        InFlightGuard(self)
    }

    /// Requests in flight now.
    pub fn current(&self) -> u64 {
        self.current.load(Ordering::Relaxed)
    }

    /// The most requests ever in flight at once (since the start or the last
    /// [`reset_max`](Self::reset_max)).
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Requests counted in, in all.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Starts a new maximum from the current count (for the next round of a scenario).
    pub fn reset_max(&self) {
        self.max.store(self.current(), Ordering::Relaxed);
    }
}

/// How the dead endpoint fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum DeadMode {
    /// Accepts the request and never answers, so the service's request timeout fires.
    #[value(name = "timeout")]
    #[serde(rename = "timeout")]
    Timeout,
    /// Nothing listens on the port: connection refused.
    #[value(name = "refuse")]
    #[serde(rename = "refuse")]
    Refuse,
    /// Answers 503 at once.
    #[value(name = "503")]
    #[serde(rename = "503")]
    Status503,
    /// Not dead but slow: answers 200 after a fixed delay (`--slow-ms`), so its circuit never
    /// opens.
    #[value(name = "slow")]
    #[serde(rename = "slow")]
    Slow,
}

impl DeadMode {
    /// The name used on the command line and in `result.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadMode::Timeout => "timeout",
            DeadMode::Refuse => "refuse",
            DeadMode::Status503 => "503",
            DeadMode::Slow => "slow",
        }
    }
}

#[derive(Clone)]
struct DeadState {
    mode: DeadMode,
    slow: Duration,
    arrivals: Arc<Mutex<Vec<u64>>>,
    in_flight: Arc<InFlight>,
    stop: CancellationToken,
}

async fn dead(State(s): State<DeadState>) -> StatusCode {
    let _held = s.in_flight.enter();
    {
        let mut a = s.arrivals.lock().unwrap();
        if a.len() < MAX_TIMELINE {
            a.push(now_us());
        }
    }
    match s.mode {
        // Never answer within the service's timeout; give up when the harness stops (bounded
        // anyway).
        DeadMode::Timeout => {
            tokio::select! {
                _ = s.stop.cancelled() => {}
                _ = tokio::time::sleep(Duration::from_secs(900)) => {}
            }
            StatusCode::SERVICE_UNAVAILABLE
        }
        // 200 after the delay, or at once when the harness stops.
        DeadMode::Slow => {
            tokio::select! {
                _ = s.stop.cancelled() => {}
                _ = tokio::time::sleep(s.slow) => {}
            }
            StatusCode::OK
        }
        DeadMode::Refuse | DeadMode::Status503 => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// A running dead endpoint.
pub struct DeadEndpoint {
    /// Its URL.
    pub url: String,
    /// How it fails.
    pub mode: DeadMode,
    arrivals: Arc<Mutex<Vec<u64>>>,
    in_flight: Arc<InFlight>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl DeadEndpoint {
    /// Starts it on an ephemeral loopback port (for `refuse`: a port that was free a moment ago
    /// and that nothing listens on). `slow` is the `slow` mode's delay before its 200 (ignored
    /// by the other modes).
    pub async fn start(mode: DeadMode, slow: Duration) -> std::io::Result<Self> {
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let in_flight = Arc::new(InFlight::default());
        let stop = CancellationToken::new();
        if mode == DeadMode::Refuse {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            return Ok(Self {
                url: format!("http://127.0.0.1:{port}/dead"),
                mode,
                arrivals,
                in_flight,
                stop,
                task: None,
            });
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/dead", listener.local_addr()?);
        let app = Router::new()
            .route("/dead", post(dead))
            .route("/dead/{i}", post(dead))
            .with_state(DeadState {
                mode,
                slow,
                arrivals: arrivals.clone(),
                in_flight: in_flight.clone(),
                stop: stop.clone(),
            });
        let task = serve(listener, app, stop.clone());
        Ok(Self {
            url,
            mode,
            arrivals,
            in_flight,
            stop,
            task: Some(task),
        })
    }

    /// Harness-clock arrival times (µs) of every request received (none for `refuse`; at most
    /// the first 2 000 000).
    pub fn arrivals(&self) -> Vec<u64> {
        self.arrivals.lock().unwrap().clone()
    }

    /// The URL of the `i`-th dead channel of a dead *host*: `<url>/<i>` (`/dead/<i>`), the same
    /// port and so the same host key; every path fails the same way.
    pub fn url_for(&self, i: usize) -> String {
        format!("{}/{i}", self.url)
    }

    /// The same gauge as [`Self::in_flight`], shared, for a task that samples it while the run
    /// goes on; `None` for `refuse`.
    pub fn gauge(&self) -> Option<Arc<InFlight>> {
        (self.mode != DeadMode::Refuse).then(|| self.in_flight.clone())
    }

    /// Its gauge of requests held at once and received in all; `None` for `refuse` (nothing
    /// listens, so nothing is counted).
    pub fn in_flight(&self) -> Option<&InFlight> {
        (self.mode != DeadMode::Refuse).then_some(&*self.in_flight)
    }

    /// Stops it; hanging requests are answered at once (503; `slow`: 200).
    pub async fn stop(self) {
        self.stop.cancel();
        if let Some(t) = self.task {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

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

    #[test]
    fn in_flight_keeps_the_most_at_once() {
        let g = InFlight::default();
        let a = g.enter();
        let b = g.enter();
        drop(a);
        let c = g.enter();
        assert_eq!((g.current(), g.max(), g.total()), (2, 2, 3));
        drop(b);
        drop(c);
        assert_eq!((g.current(), g.max()), (0, 2));
        g.reset_max();
        assert_eq!(g.max(), 0);
    }

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
