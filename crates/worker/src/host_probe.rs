//! The host probe watcher: one job per open host circuit (unique key `host_probe:<host>`),
//! snoozing itself between steps, that moves `open` to `half_open` after the cooldown, wakes one
//! waiting delivery of the host as its probe, and takes over a probe whose lease expired (see
//! [`breakwater_core::hosts::watch_step`] for the rule when nothing is waiting). It ends when the
//! host is closed.

use crate::executor::{self, Outcome};
use crate::worker::Worker;
use breakwater_core::hosts::{self, WatchStep};
use breakwater_core::jobs::HostProbeArgs;
use breakwater_core::Result;
use breakwater_queue::Job;
use std::time::Duration;

/// Runs one step of a host's probe watcher ([`hosts::watch_step`]) in one transaction, fenced by
/// the job's claim: done, or snoozed until the condition it waits for holds.
pub(crate) async fn run(w: &Worker, job: Job) -> Result<()> {
    let Some(HostProbeArgs { host_key: key }) =
        w.args_or_discard(&job, "args lack a host_key").await?
    else {
        return Ok(());
    };
    let mut tx = w.pool.begin().await?;
    let (step, transition) = hosts::watch(&mut tx, &key, &w.hosts).await?;
    let fenced = match step {
        WatchStep::Done => executor::finish(&mut tx, &job, Outcome::Complete).await?,
        WatchStep::Wait(wait) => {
            // A little past the moment, so the condition holds when the watcher looks again.
            let wait = wait + Duration::from_millis(20);
            executor::finish(&mut tx, &job, Outcome::Snooze { wait }).await?
        }
    };
    if fenced {
        tx.commit().await?;
        crate::deliver::count_transitions(transition.as_slice());
    } else {
        tracing::warn!(host_key = %key, "host probe watcher lost its claim; step rolled back");
        tx.rollback().await?;
    }
    Ok(())
}
