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
pub(crate) struct Worker {
    /// Database pool.
    pub(crate) pool: PgPool,
    /// Outbound client (see [`crate::http::client`]).
    pub(crate) client: reqwest::Client,
    /// This node's id, recorded on attempts.
    pub(crate) node_id: String,
    /// Retry backoff of deliveries.
    pub(crate) backoff: Backoff,
    /// Attempts a delivery gets (for jobs this node creates, e.g. replays on close).
    pub(crate) max_attempts: i32,
    /// Bytes of response body kept.
    pub(crate) excerpt_bytes: usize,
    /// Whether internal targets are allowed (development, tests).
    pub(crate) allow_private: bool,
    /// Circuit settings.
    pub(crate) circuit: CircuitConfig,
    /// Host circuit settings.
    pub(crate) hosts: HostsConfig,
    /// Each channel's cluster-wide concurrency bounds (its adaptive limit moves inside them).
    pub(crate) limits: GroupLimits,
    /// This node's batch recorder of plain successes ([`crate::batch`]).
    pub(crate) recorder: crate::batch::Recorder,
    /// This node's begin batchers, one per queue ([`crate::begin`]).
    pub(crate) beginner: crate::begin::Beginners,
    /// This node's own stalls ([`crate::stall`]): what its request timeout and the judgement of
    /// a failed attempt discount.
    pub(crate) stall: crate::stall::StallWatch,
    /// The client's connect timeout (`worker.connect_timeout_ms`).
    pub(crate) connect_timeout: std::time::Duration,
    /// A request's total timeout, in this node's running time (`worker.request_timeout_ms`).
    pub(crate) request_timeout: std::time::Duration,
    /// This node's OAuth2 tokens of channels ([`crate::oauth2`]), in memory.
    pub(crate) tokens: std::sync::Arc<crate::oauth2::Tokens>,
}

/// The args of `job` as `T` (the registry's struct of its kind, [`breakwater_core::jobs`]):
/// `None` if they do not parse — a field missing or of another type — and the caller then
/// discards the job with a reason.
pub(crate) fn args<T: JobArgs>(job: &Job) -> Option<T> {
    T::from_json(&job.args).ok()
}

impl Worker {
    /// What this node's OAuth2 token requests go through ([`crate::oauth2::Via`]).
    pub(crate) fn token_via(&self) -> crate::oauth2::Via<'_> {
        crate::oauth2::Via {
            client: &self.client,
            allow_private: self.allow_private,
            request_timeout: self.request_timeout,
        }
    }

    /// The args of `job` as `T` ([`args`]), or `None` after discarding the job with `reason`
    /// when they do not parse (such a job can never run; the reason stays on its row).
    pub(crate) async fn args_or_discard<T: JobArgs>(
        &self,
        job: &Job,
        reason: &str,
    ) -> breakwater_core::Result<Option<T>> {
        let parsed = args(job);
        if parsed.is_none() {
            let outcome = crate::executor::Outcome::Discard { error: reason };
            crate::executor::finish_on(&self.pool, job, outcome).await?;
        }
        Ok(parsed)
    }
}
