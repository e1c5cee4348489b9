//! The node's job handler: routes each job to its kind's code.

use crate::slots::ChannelSlots;
use crate::{alert, deliver, probe};
use breakwater_core::circuit::{CircuitConfig, JOB_ALERT, JOB_PROBE};
use breakwater_core::JOB_DELIVER;
use breakwater_queue::{runner::Handler, Backoff, Job};
use sqlx::PgPool;
use std::sync::Arc;
use tracing::Instrument;
use uuid::Uuid;

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
    /// This node's in-flight deliveries per channel, capped.
    pub in_flight: Arc<ChannelSlots>,
}

impl Handler for Worker {
    /// Delivery queues take at most the per-node cap of one channel per fetch.
    fn per_group_limit(&self, queue: &str) -> Option<usize> {
        queue
            .starts_with("deliveries")
            .then(|| self.in_flight.cap())
    }

    /// Delivery queues skip channels at their per-node cap.
    fn excluded_groups(&self, queue: &str) -> Vec<Uuid> {
        if queue.starts_with("deliveries") {
            self.in_flight.saturated()
        } else {
            Vec::new()
        }
    }

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
                JOB_ALERT => alert::run(self, job).await,
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
