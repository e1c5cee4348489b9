//! The probe watcher: one job per open channel (unique key `probe:<channel>`), snoozing itself
//! between steps, that moves `open` to `half_open` after the cooldown and takes over a probe
//! whose lease expired. It ends when the circuit is closed or paused, and when the circuit is
//! half-open with nothing to probe with (the delivery that claims the role schedules it again).

use crate::executor::{self, Outcome};
use crate::worker::Worker;
use breakwater_core::circuit::{self, ProbeStep};
use breakwater_core::jobs::ProbeArgs;
use breakwater_core::Result;
use breakwater_queue::Job;
use std::time::Duration;

/// Runs one step of a channel's probe watcher ([`circuit::probe_step`]) in one transaction, fenced
/// by the job's claim: done, or snoozed until the cooldown or the probe's lease is over.
pub(crate) async fn run(w: &Worker, job: Job) -> Result<()> {
    let Some(ProbeArgs { channel_id }) = w.args_or_discard(&job, "args lack a channel_id").await?
    else {
        return Ok(());
    };
    tracing::Span::current().record("channel_id", tracing::field::display(channel_id));
    let mut tx = w.pool.begin().await?;
    let (step, transition) = circuit::probe_watch(&mut tx, channel_id, &w.circuit).await?;
    let fenced = match step {
        ProbeStep::Done => executor::finish(&mut tx, &job, Outcome::Complete).await?,
        ProbeStep::Wait(wait) => snooze(&mut tx, &job, wait).await?,
        ProbeStep::Started {
            generation,
            delivery_id,
            lease: Some(lease),
        } => {
            tracing::info!(%channel_id, generation, ?delivery_id, "probe started");
            snooze(&mut tx, &job, lease).await?
        }
        ProbeStep::Started {
            generation,
            lease: None,
            ..
        } => {
            // Nothing to probe with: the watcher ends; the next delivery to arrive claims the
            // probe role and schedules it again for its lease (the `circuit` module doc).
            tracing::info!(%channel_id, generation, "half-open with nothing waiting; the next delivery is the probe");
            executor::finish(&mut tx, &job, Outcome::Complete).await?
        }
    };
    if fenced {
        tx.commit().await?;
        crate::deliver::count_transitions(transition.as_slice());
    } else {
        tracing::warn!(%channel_id, "probe watcher lost its claim; step rolled back");
        tx.rollback().await?;
    }
    Ok(())
}

async fn snooze(tx: &mut sqlx::PgConnection, job: &Job, wait: Duration) -> Result<bool> {
    // A little past the moment, so the condition (cooldown over, lease expired) holds when the
    // watcher looks again.
    let wait = wait + Duration::from_millis(20);
    executor::finish(tx, job, Outcome::Snooze { wait }).await
}
