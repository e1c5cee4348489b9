//! What every job runs with: the node's [`Worker`] (pool, client, settings), and reading a job's
//! args. Imports no job module, so the job modules and the dispatcher ([`crate::handler`]) can all
//! import it without a cycle.

use breakwater_core::circuit::CircuitConfig;
use breakwater_core::hosts::HostsConfig;
use breakwater_core::jobs::JobArgs;
use breakwater_queue::{Backoff, GroupLimits, Job};
use sqlx::PgPool;

/// Everything a job needs; one per node, shared by its pools.
#[derive(Clone)]
pub struct Worker {
    /// Database pool.
    pub pool: PgPool,
    /// Outbound client (see [`crate::http::client`]).
    pub client: reqwest::Client,
    /// This node's id, recorded on attempts.
    pub node_id: String,
    /// Retry backoff of deliveries.
    pub backoff: Backoff,
    /// Attempts a delivery gets (for jobs this node creates, e.g. replays on close).
    pub max_attempts: i32,
    /// Bytes of response body kept.
    pub excerpt_bytes: usize,
    /// Whether internal targets are allowed (development, tests).
    pub allow_private: bool,
    /// Circuit settings.
    pub circuit: CircuitConfig,
    /// Host circuit settings.
    pub hosts: HostsConfig,
    /// Each channel's cluster-wide concurrency bounds (its adaptive limit moves inside them).
    pub limits: GroupLimits,
}

/// The args of `job` as `T` (the registry's struct of its kind, [`breakwater_core::jobs`]):
/// `None` if they do not parse — a field missing or of another type — and the caller then
/// discards the job with a reason.
pub(crate) fn args<T: JobArgs>(job: &Job) -> Option<T> {
    T::from_json(&job.args).ok()
}
