//! The harness's monotonic clock, shared by sender and receiver (same process).

use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// The harness epoch (fixed at the first call).
pub fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// Microseconds since the harness epoch.
pub fn now_us() -> u64 {
    u64::try_from(epoch().elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Maps wall-clock times (the database's `now()`, the workers' `Utc::now()`: same machine, same
/// clock) onto the harness clock.
#[derive(Debug, Clone, Copy)]
pub struct WallMap {
    wall: chrono::DateTime<chrono::Utc>,
    us: u64,
}

impl WallMap {
    /// Takes a reference pair (wall now, harness now).
    pub fn now() -> Self {
        let us = now_us();
        Self {
            wall: chrono::Utc::now(),
            us,
        }
    }

    /// The harness-clock microseconds of wall time `t` (may be negative: before the epoch).
    pub fn to_us(&self, t: chrono::DateTime<chrono::Utc>) -> i64 {
        let d = (t - self.wall).num_microseconds().unwrap_or(0);
        self.us as i64 + d
    }
}
