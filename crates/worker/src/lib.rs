//! Breakwater's workers.
//!
//! A node runs one pool per tier queue (`deliveries_high`, `deliveries`, `deliveries_bulk`, sizes
//! from configuration) plus small pools on the `circuit` queue (probe watchers) and the `alerts`
//! queue (alert webhooks, flapping timers), the LISTEN/NOTIFY listener that wakes them, the
//! health check, the queue's upkeep (heartbeat, promotion of due jobs, rescue, pruning) and the
//! retention pruner ([`retention`]). Each delivery job is one signed HTTP attempt (`deliver`),
//! gated by its channel's circuit; no transaction or pooled connection is held while the request
//! is in flight.
//!
//! Modules, without a cycle: `handler` dispatches each job by its kind to `deliver`, `probe`,
//! `host_probe` or `alert`; every job module takes the node's `worker::Worker`; `deliver` and
//! `alert` send through `request` (the one signed request), `deliver` records telemetry through
//! `observe`, which wraps `request::send`; `request` takes OAuth2 tokens from `oauth2`, which
//! sends through the client of `http` (a leaf). `stall` (a leaf) watches the node's own stalls: the
//! request timeout counts running time, and a failure the node's stall explains is
//! inconclusive, not the endpoint's. `keep` (a leaf) keeps a result the node already has until
//! the database takes it, through an outage (`deliver`, `alert` and the `batch` recorder).
//! `executor` (a leaf) is the one place a job is ended in the queue: every job module's steps
//! end their job with an `executor::Outcome` it records (the `batch` recorder's plain successes
//! excepted, ended many at a time).

mod alert;
mod batch;
mod begin;
mod config;
mod deliver;
mod executor;
mod handler;
mod host_probe;
mod http;
mod keep;
mod node;
mod oauth2;
mod observe;
mod probe;
mod request;
pub mod retention;
mod stall;
mod worker;

pub use config::WorkerConfig;
pub use node::{node_id, run_node, NodeParams};
pub use retention::RetentionConfig;
