//! How a job ends: each step of a job returns an [`Outcome`], and [`finish`] — the one place the
//! worker ends a claimed job in the queue — records it, fenced by the job's claim token (as
//! River's executor records a worker's result). The retry delay has one owner too
//! ([`Retries`]). A leaf: every job module imports it; it imports none of them.
//!
//! [`finish`] makes exactly the queue call the outcome names, one statement on the connection or
//! transaction it is given (a snooze to zero delay adds its queue's wake-up), so a step keeps its
//! own transaction, lock order and round trips. The batched success path ([`crate::batch`]) ends
//! its jobs many at a time with [`breakwater_queue::finish_batch`] instead.

use breakwater_core::circuit::AfterAttempt;
use breakwater_core::deliveries::Status;
use breakwater_core::outcome::Class;
use breakwater_core::{retry_policy, Result};
use breakwater_queue::{Backoff, Feedback, GroupLimits, Job, RetryOutcome};
use sqlx::{PgConnection, PgPool};
use std::time::Duration;
use uuid::Uuid;

/// How one run of a claimed job ends. The texts are appended to the job's `errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome<'a> {
    /// Done: the job is completed.
    Complete,
    /// Back to waiting for `wait` without using an attempt (zero: due at once, its queue woken).
    Snooze {
        /// How long until the job may run again.
        wait: Duration,
    },
    /// The work the job stood for was called off: cancelled, final, never retried.
    Cancel {
        /// Why (e.g. [`breakwater_core::lifecycle::REASON_CHANNEL_DELETED`]).
        reason: &'a str,
    },
    /// Failed: run again after `delay` ([`Retries::delay`]), or discarded by the queue when that
    /// was the job's last attempt.
    Retry {
        /// The wait before the next attempt.
        delay: Duration,
        /// What went wrong (URL-free).
        error: &'a str,
    },
    /// Failed for good, whatever attempts remain: the job is discarded (dead letter).
    Discard {
        /// Why.
        error: &'a str,
    },
}

impl<'a> Outcome<'a> {
    /// A recorded delivery attempt's outcome, by the delivery's status core gave it
    /// ([`AfterAttempt::status`]): delivered completes the job, dead discards it (a permanent
    /// failure, or the last attempt), failed or paused retries it after `retries`' delay for
    /// attempt `attempt` (the job's, 1-based), or the attempt's `Retry-After` hold if longer (a
    /// paused delivery's retry then waits in its parked group). `error` is the attempt's text.
    pub(crate) fn of_attempt(
        after: &AfterAttempt,
        retries: Retries<'_>,
        attempt: i32,
        error: &'a str,
    ) -> Self {
        match after.status {
            Status::Delivered => Outcome::Complete,
            Status::Dead => Outcome::Discard { error },
            _ => Outcome::Retry {
                delay: retries.delay(attempt, after.retry_after),
                error,
            },
        }
    }

    /// A sent alert's outcome, by its answer's `class`: a 2xx completes the job, a transient
    /// failure retries it after `retries`' delay for attempt `attempt` (the queue discards it
    /// after its last), a permanent one discards it.
    pub(crate) fn of_alert(
        class: Class,
        retries: Retries<'_>,
        attempt: i32,
        error: &'a str,
    ) -> Self {
        match class {
            Class::Success => Outcome::Complete,
            Class::Transient => Outcome::Retry {
                delay: retries.delay(attempt, None),
                error,
            },
            Class::Permanent => Outcome::Discard { error },
        }
    }
}

/// The one retry policy of the worker's jobs: a failed attempt waits the backoff of the
/// delivery's own retry policy (`deliveries.retry_policy`), else the configuration's
/// (`worker.backoff_*`), jittered ([`retry_policy::retry_delay`]) — or the endpoint's
/// `Retry-After` hold if longer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retries<'a> {
    /// The configuration's backoff (and the jitter of every delay).
    pub(crate) backoff: &'a Backoff,
    /// The delivery's own retry policy, if it was accepted with one (an alert has none).
    pub(crate) policy: Option<&'a retry_policy::RetryPolicy>,
}

impl Retries<'_> {
    /// The wait before the retry of a job whose attempt `attempt` (1-based) failed: the backoff,
    /// or `hold` (the answer's `Retry-After`, [`AfterAttempt::retry_after`]) if longer.
    pub(crate) fn delay(&self, attempt: i32, hold: Option<Duration>) -> Duration {
        retry_policy::retry_delay(self.policy, attempt, self.backoff).max(hold.unwrap_or_default())
    }
}

/// Records `outcome` for the claimed `job` on `conn` (a transaction's, to end the job with the
/// step's other writes): one conditional UPDATE on the job's id and claim token. Returns whether
/// the claim still held and the queue did as asked: `false` when the job was rescued (or handed
/// back) since it was claimed — nothing changed, and a caller in a transaction rolls it back —
/// and for a [`Outcome::Retry`] the queue discarded instead, as it was the job's last attempt.
///
/// # Errors
/// The database's.
pub(crate) async fn finish(
    conn: &mut PgConnection,
    job: &Job,
    outcome: Outcome<'_>,
) -> Result<bool> {
    let (id, token) = (job.id, job.claim_token);
    Ok(match outcome {
        Outcome::Complete => breakwater_queue::complete(&mut *conn, id, token).await?,
        Outcome::Snooze { wait } => breakwater_queue::snooze(conn, id, token, wait, None).await?,
        Outcome::Cancel { reason } => {
            breakwater_queue::cancel(&mut *conn, id, token, reason).await?
        }
        Outcome::Retry { delay, error } => matches!(
            breakwater_queue::retry(&mut *conn, id, token, delay, error).await?,
            Some(RetryOutcome::Retried(_))
        ),
        Outcome::Discard { error } => {
            breakwater_queue::discard(&mut *conn, id, token, error).await?
        }
    })
}

/// [`finish`] on a connection of `pool`, outside any transaction (a step with no other writes).
///
/// # Errors
/// The database's, a pool timeout included.
pub(crate) async fn finish_on(pool: &PgPool, job: &Job, outcome: Outcome<'_>) -> Result<bool> {
    finish(&mut *pool.acquire().await?, job, outcome).await
}

/// Ends a recorded delivery attempt's job in the attempt's transaction `tx`: first the channel's
/// job group (`group_id`) learns the attempt's concurrency `feedback`
/// ([`AfterAttempt::feedback`], [`breakwater_queue::adapt_limit`]), then [`finish`] ends the job
/// with `outcome`, which releases its slot — the order the batch recorder keeps too. Returns
/// [`finish`]'s answer.
///
/// # Errors
/// The database's.
pub(crate) async fn finish_attempt(
    tx: &mut PgConnection,
    job: &Job,
    group_id: Uuid,
    feedback: Feedback,
    limits: &GroupLimits,
    outcome: Outcome<'_>,
) -> Result<bool> {
    breakwater_queue::adapt_limit(&mut *tx, group_id, feedback, limits).await?;
    finish(tx, job, outcome).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakwater_core::deliveries::Endpoint;

    /// A backoff without jitter: 10 s, ×3.
    fn backoff() -> Backoff {
        Backoff {
            base: Duration::from_secs(10),
            factor: 3.0,
            cap: Duration::from_secs(3600),
            jitter: 0.0,
        }
    }

    fn after(status: Status, retry_after: Option<Duration>) -> AfterAttempt {
        AfterAttempt {
            status,
            endpoint: Endpoint::default(),
            retry_after,
            transitions: Vec::new(),
            feedback: Feedback::Neutral,
        }
    }

    #[test]
    fn an_attempt_ends_its_job_by_the_deliverys_status() {
        let b = backoff();
        let retries = Retries {
            backoff: &b,
            policy: None,
        };
        assert_eq!(
            Outcome::of_attempt(&after(Status::Delivered, None), retries, 1, "e"),
            Outcome::Complete
        );
        assert_eq!(
            Outcome::of_attempt(&after(Status::Dead, None), retries, 1, "e"),
            Outcome::Discard { error: "e" }
        );
        for status in [Status::Failed, Status::Paused] {
            assert_eq!(
                Outcome::of_attempt(&after(status, None), retries, 2, "e"),
                Outcome::Retry {
                    delay: Duration::from_secs(30),
                    error: "e"
                },
                "{status:?} retries after the backoff of its attempt"
            );
        }
    }

    #[test]
    fn a_retry_waits_out_a_longer_retry_after() {
        let b = backoff();
        let retries = Retries {
            backoff: &b,
            policy: None,
        };
        let long = Duration::from_secs(120);
        assert_eq!(
            Outcome::of_attempt(&after(Status::Failed, Some(long)), retries, 1, "429"),
            Outcome::Retry {
                delay: long,
                error: "429"
            }
        );
        // A shorter hold leaves the backoff.
        assert_eq!(
            retries.delay(1, Some(Duration::from_secs(1))),
            Duration::from_secs(10)
        );
    }

    #[test]
    fn an_alert_ends_its_job_by_its_answers_class() {
        let b = backoff();
        let retries = Retries {
            backoff: &b,
            policy: None,
        };
        assert_eq!(
            Outcome::of_alert(Class::Success, retries, 1, "e"),
            Outcome::Complete
        );
        assert_eq!(
            Outcome::of_alert(Class::Transient, retries, 3, "e"),
            Outcome::Retry {
                delay: Duration::from_secs(90),
                error: "e"
            }
        );
        assert_eq!(
            Outcome::of_alert(Class::Permanent, retries, 1, "e"),
            Outcome::Discard { error: "e" }
        );
    }
}
