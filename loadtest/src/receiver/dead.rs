//! The dead endpoint: it times out, refuses, answers 503, or (`slow`) answers 200 after a delay,
//! and counts the requests it holds ([`InFlight`]) and when they arrived.

use super::{serve, InFlight, MAX_TIMELINE};
use crate::clock::now_us;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
