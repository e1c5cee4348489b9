//! The node's job handler: routes each job to its kind's code (and only that: what a job runs
//! with is [`Worker`], in its own module, so no job module imports this one).

use crate::executor::Outcome;
use crate::worker::Worker;
use crate::{alert, deliver, host_probe, probe};
use breakwater_core::jobs::JobKind;
use breakwater_queue::{runner::Handler, Job};
use tracing::Instrument;

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
            let r = match JobKind::parse(&job.kind) {
                Some(JobKind::Deliver) => deliver::run(self, job).await,
                Some(JobKind::Probe) => probe::run(self, job).await,
                Some(JobKind::HostProbe) => host_probe::run(self, job).await,
                Some(JobKind::Alert) => alert::run(self, job).await,
                Some(JobKind::FlappingWatch) => alert::run_flapping_watch(self, job).await,
                Some(JobKind::AlertEventsWatch) => alert::run_events_watch(self, job).await,
                None => {
                    let msg = format!("no handler for job kind {:?}", job.kind);
                    let error = &msg;
                    crate::executor::finish_on(&self.pool, &job, Outcome::Discard { error })
                        .await
                        .map(|_| ())
                }
            };
            r.map_err(|e: breakwater_core::Error| e.to_string())
        }
        .instrument(span)
        .await
    }
}
