//! A generic Postgres job queue.
//!
//! Jobs live in one table, `jobs` (see `migrations/`). This crate knows nothing about what a job
//! does: callers give it a queue name, a kind, JSON args, a priority, an optional unique key and
//! an optional group id, and get back claimed [`Job`]s to run.
//!
//! - **Fetch** ([`fetch`]) is priority-first (lowest number first, then oldest) among the
//!   `available` jobs of one queue, and claims them in one statement with
//!   `FOR UPDATE SKIP LOCKED`, so two fetchers never get the same job. Each claim carries a
//!   fresh fencing token ([`Job::claim_token`]); every result ([`complete`], [`retry`],
//!   [`snooze`], [`discard`]) is recorded only while that token still matches, so the late
//!   result of a rescued run changes nothing.
//! - **Future work is off the hot path**: a job that is snoozed, backing off or parked is in state
//!   `scheduled` and is not in the fetch index; [`maintenance::promote_due`] moves due jobs back
//!   to `available`. The cost of a fetch therefore does not grow with the number of parked jobs.
//! - **Groups**: [`park_group`] and [`release_group`] move every waiting job of a group (a plain
//!   indexed `group_id` column) in one UPDATE.
//! - **Unique keys**: at most one live (`available`, `scheduled`, `executing`) job per
//!   `unique_key`, enforced by a partial unique index; [`enqueue`] returns `None` on a conflict.
//! - **Wake-ups**: enqueueing, promoting and releasing send `NOTIFY` on [`NOTIFY_CHANNEL`] with
//!   the queue name as payload; [`Wakers`] turns those into wake-ups of idle pools, and pools
//!   poll as a fallback.
//! - **Rescue**: nodes heartbeat into `queue_nodes`; [`maintenance::rescue`] makes jobs left
//!   `executing` by a node whose heartbeat is stale available again. A node that still
//!   heartbeats never has its jobs rescued.
//! - **Runner** ([`runner::run_pool`]): a fixed number of concurrent handlers per queue, graceful
//!   shutdown that stops fetching, lets in-flight jobs finish within a grace period and hands the
//!   rest back without using an attempt.
//!
//! Delivery is at-least-once: a job may run again after a crash, never zero times.

mod backoff;
mod enqueue;
mod error;
mod fetch;
mod group;
mod job;
pub mod maintenance;
mod outcome;
pub mod runner;
pub mod stats;
mod wake;

pub use backoff::Backoff;
pub use enqueue::{enqueue, enqueue_many, schedule_unique};
pub use error::{Error, Result};
pub use fetch::{fetch, fetch_excluding, fetch_per_group};
pub use group::{park_group, release_group, wake_one};
pub use job::{Job, JobState, NewJob, PRIORITY_NORMAL, PRIORITY_PARKED, PRIORITY_URGENT};
pub use outcome::{complete, discard, hand_back, retry, snooze, RetryOutcome};
pub use wake::{notify_queues, Wakers, NOTIFY_CHANNEL};
