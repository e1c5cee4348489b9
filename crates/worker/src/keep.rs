//! Keeping a result this node already has until the database takes it: a leaf that
//! every job module and the batch recorder use.

/// Runs `write` — the recording of a result this node already has (an endpoint answered) —
/// until it succeeds or fails for a reason other than the database being unreachable
/// ([`breakwater_core::Error::is_transient`]); between tries it waits
/// [`breakwater_queue::outage_delay`] (doubling from 200 ms, capped at
/// [`breakwater_queue::OUTAGE_RETRY_CAP`], jittered), however long the outage: the
/// job must not run again for want of a write, which would send its request again. Each try
/// must be one transaction fenced by the job's claim token, so a try after a rescue, or after a
/// `COMMIT` whose answer was lost but which did commit, changes nothing. `what` names the
/// result in the log.
///
/// Holding the result holds the handler, and so its pool slot: a node keeps at most as many
/// results as its pools run handlers, and fetches nothing new meanwhile for those slots.
pub(crate) async fn until_recorded<T, F, Fut>(
    what: &str,
    mut write: F,
) -> breakwater_core::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = breakwater_core::Result<T>>,
{
    let mut tries = 0;
    loop {
        match write().await {
            Err(e) if e.is_transient() => {
                tries += 1;
                let wait = breakwater_queue::outage_delay(tries);
                tracing::warn!(error = %e, tries, retry_in_ms = wait.as_millis() as u64,
                    "the database cannot take {what} now; keeping it and trying again");
                tokio::time::sleep(wait).await;
            }
            done => return done,
        }
    }
}
