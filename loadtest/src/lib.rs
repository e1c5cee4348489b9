//! Breakwater's load-test harness (issue 6).
//!
//! Everything runs in one process on loopback: the service itself (K nodes, each on its own
//! thread with its own Tokio runtime and its own database pool, as separate processes would
//! have), lean receivers (a healthy one that measures latency, and a dead one), and the load
//! generator, which drives the service over its HTTP API only.
//!
//! - [`isolation`]: a dead channel of tenant A holds a backlog while tenant B's healthy channel in
//!   the same tier gets a steady stream; the same stream without the backlog is the baseline.
//! - [`throughput`]: many deliveries to fast endpoints across many channels, deliveries/s end to
//!   end.
//! - [`fetch_bench`]: the queue's fetch (+ complete) with 0 and with 100 000 parked jobs.
//!
//! Latency is end to end: the sender writes the [`clock::now_us`] of the moment it sends the
//! enqueue request into the payload, and the receiver subtracts it from its own reading of the
//! same monotonic clock (same process).

#![recursion_limit = "256"]

pub mod api;
pub mod chart;
pub mod clock;
pub mod db;
pub mod fetch_bench;
pub mod isolation;
pub mod machine;
pub mod receiver;
pub mod service;
pub mod stats;
pub mod stream;
pub mod throughput;

use std::path::Path;

/// Writes `value` as pretty JSON to `dir/name`, creating `dir`.
pub fn write_json(dir: &Path, name: &str, value: &serde_json::Value) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    std::fs::write(dir.join(name), s)?;
    Ok(())
}
