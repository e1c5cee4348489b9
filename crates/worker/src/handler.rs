//! The node's job handler: routes each job to its kind's code.

use crate::{alert, deliver, host_probe, probe};
use breakwater_core::alerts::JOB_FLAPPING_WATCH;
use breakwater_core::circuit::{CircuitConfig, JOB_ALERT, JOB_PROBE};
use breakwater_core::hosts::{HostsConfig, JOB_HOST_PROBE};
use breakwater_core::JOB_DELIVER;
use breakwater_queue::{runner::Handler, Backoff, GroupLimits, Job};
use sqlx::PgPool;
use tracing::Instrument;

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

impl Handler for Worker {
    async fn handle(&self, job: Job) -> Result<(), String> {
        let span = tracing::info_span!(
            "job",
            job_id = job.id,
            kind = %job.kind,
            attempt = job.attempt,
            queue = %job.queue,
            channel_id = tracing::field::Empty,
            delivery_id = tracing::field::Empty,
            tenant_id = tracing::field::Empty,
            outcome = tracing::field::Empty,
            status = tracing::field::Empty,
        );
        let _in_flight = crate::observe::InFlight::start(&job);
        async move {
            let r = match job.kind.as_str() {
                JOB_DELIVER => deliver::run(self, job).await,
                JOB_PROBE => probe::run(self, job).await,
                JOB_HOST_PROBE => host_probe::run(self, job).await,
                JOB_ALERT => alert::run(self, job).await,
                JOB_FLAPPING_WATCH => alert::run_flapping_watch(self, job).await,
                other => {
                    let msg = format!("no handler for job kind {other:?}");
                    breakwater_queue::discard(&self.pool, job.id, job.claim_token, &msg)
                        .await
                        .map(|_| ())
                        .map_err(Into::into)
                }
            };
            r.map_err(|e: breakwater_core::Error| e.to_string())
        }
        .instrument(span)
        .await
    }
}

/// Argument `name` of `job` as a UUID: `None` if it is missing or not a UUID string (the caller
/// discards such a job with a reason).
pub(crate) fn uuid_arg(job: &Job, name: &str) -> Option<uuid::Uuid> {
    job.args.get(name)?.as_str()?.parse().ok()
}
