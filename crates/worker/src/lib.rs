//! Breakwater's workers.
//!
//! A node runs one pool per tier queue (`deliveries_high`, `deliveries`, `deliveries_bulk`, sizes
//! from configuration), the LISTEN/NOTIFY listener that wakes them, and the queue's upkeep
//! (heartbeat, promotion of due jobs, rescue, pruning). Each delivery job is one signed HTTP
//! attempt ([`deliver`]); no transaction or pooled connection is held while the request is in
//! flight.

mod config;
pub mod deliver;
pub mod http;
mod node;

pub use config::WorkerConfig;
pub use node::{node_id, run_node};
