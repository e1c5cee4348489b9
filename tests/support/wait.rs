//! Waiting on a condition instead of sleeping a fixed time.
//!
//! Every wait in the suite polls a condition with a deadline: it returns as soon as the
//! condition holds, so a fast machine runs fast, and a slow one gets the whole deadline.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`eventually`] and [`wait_until`] poll their condition.
pub const POLL: Duration = Duration::from_millis(25);

/// Polls `cond` every [`POLL`] until it is true or `timeout` passes; returns the last answer.
pub async fn eventually<F, Fut>(timeout: Duration, cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_every(timeout, POLL, cond).await
}

/// Polls `cond` every `every` until it is true or `timeout` passes; returns the last answer.
/// For a condition that may hold only for a moment (poll it more often than [`POLL`]) or that is
/// costly to ask (less often).
pub async fn eventually_every<F, Fut>(timeout: Duration, every: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}

/// Polls `cond` every [`POLL`] until it is true; panics with `what` (the condition in words,
/// e.g. "the circuit opens") when `timeout` passes first. Returns how long it took.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, cond: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    assert!(
        eventually(timeout, cond).await,
        "timed out after {timeout:?} waiting until {what}"
    );
    started.elapsed()
}
