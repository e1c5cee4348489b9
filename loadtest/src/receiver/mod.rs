//! Lean receivers for load: a healthy one that records end-to-end latency per phase (atomic
//! counters, one small mutex per phase, hdrhistogram), a dead one (`timeout`, `refuse`, `503` or
//! `slow`), and a slow one with many endpoints that answer 200 after a fixed delay. The dead and
//! slow ones count the requests they hold at once ([`InFlight`]).
//!
//! Signatures are not verified here (the end-to-end tests do that); the receivers parse only
//! what they measure: `data.phase`, `data.seq`, `data.sent_us` (healthy), `data.round`,
//! `data.seq` (slow).

mod dead;
mod healthy;
mod in_flight;
mod slow;

pub use dead::{DeadEndpoint, DeadMode};
pub use healthy::{
    HealthyReceiver, PhaseRecord, Sink, PHASES, PHASE_BASELINE, PHASE_FAIRNESS, PHASE_LOADED,
    PHASE_THROUGHPUT, PHASE_WARMUP,
};
pub use in_flight::{InFlight, InFlightGuard};
pub use slow::{Arrival, SlowReceiver, SlowRecord};

use axum::Router;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Most timeline samples kept per phase (healthy), and most arrivals kept (dead, slow).
const MAX_TIMELINE: usize = 2_000_000;

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
