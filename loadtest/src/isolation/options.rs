//! The isolation scenario's options: the backlog and the dead channels it goes to, the healthy
//! stream, the service and the run.

use crate::receiver::DeadMode;
use crate::service::ServiceOptions;
use crate::RunOptions;
use std::time::Duration;

/// Options of the isolation scenario.
#[derive(Debug, Clone)]
pub struct Options {
    /// Deliveries enqueued to the dead channel(s) before the measured stream (split evenly
    /// over `dead_channels`, at least 1 each).
    pub backlog: u64,
    /// Dead channels, all on the one dead endpoint (one host); 1 = the original scenario.
    pub dead_channels: usize,
    /// Tenants the dead channels are spread over (round robin); ≤ `dead_channels`.
    pub dead_tenants: usize,
    /// How the dead endpoint fails.
    pub dead_mode: DeadMode,
    /// With [`DeadMode::Slow`]: how long the dead endpoint takes to answer 200.
    pub slow: Duration,
    /// The dead channels' `ordering`: with [`DeadOrdering::Fifo`] their backlog is blocked
    /// behind its failing head instead of parked by the circuit alone.
    pub dead_ordering: DeadOrdering,
    /// Healthy deliveries per second.
    pub rate: f64,
    /// Length of each stream (baseline and loaded).
    pub duration: Duration,
    /// After a stream, how long to wait for its deliveries to arrive.
    pub drain_timeout: Duration,
    /// Deliveries per backlog batch request (≤ 1000).
    pub backlog_batch: usize,
    /// Old finished deliveries (each with an attempt and a completed job) seeded before the
    /// baseline and pruned by the retention pruner while the loaded stream runs (0 = none); see
    /// [`crate::prune`].
    pub prune_rows: u64,
    /// The service (its `tier` is every tenant's).
    pub service: ServiceOptions,
    /// The run's database, `result.json` (and `latency.svg`) and progress log.
    pub run: RunOptions,
}

impl Options {
    /// Whether this is the dead-host variant (more than one dead channel or tenant).
    pub fn multi(&self) -> bool {
        self.dead_channels > 1 || self.dead_tenants > 1
    }

    /// The backlog of dead channel `i`: `backlog` split evenly (the first `backlog mod K` get
    /// one more), at least 1 each.
    pub fn share(&self, i: usize) -> u64 {
        let k = self.dead_channels.max(1) as u64;
        (self.backlog / k + u64::from((i as u64) < self.backlog % k)).max(1)
    }
}

/// The `ordering` the dead channels are created with (the channel API's field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeadOrdering {
    /// `"none"`: deliveries in parallel (the service's default).
    None,
    /// `"fifo"`: one at a time in the order accepted; the failing head blocks the backlog.
    Fifo,
}

impl DeadOrdering {
    /// The API's value.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadOrdering::None => "none",
            DeadOrdering::Fifo => "fifo",
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            backlog: 10_000,
            dead_channels: 1,
            dead_tenants: 1,
            dead_mode: DeadMode::Timeout,
            slow: Duration::from_secs(2),
            dead_ordering: DeadOrdering::None,
            rate: 50.0,
            duration: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(60),
            backlog_batch: 1000,
            prune_rows: 0,
            service: ServiceOptions::default(),
            run: RunOptions::default(),
        }
    }
}
