//! A generic Postgres job queue.
//!
//! Jobs live in one table, `jobs` (see `migrations/`). This crate knows nothing about what a job
//! does: callers give it a queue name, a kind, JSON args, a priority, an optional unique key and
//! an optional group id, and get back claimed [`Job`]s to run.
//!
//! - **Fetch** ([`fetch`]) claims jobs of one queue in one statement, lowest priority number
//!   first, and among equal priorities fairly: across *shares* (a group's fair-share key; for
//!   Breakwater, the tenant) by the fewest jobs in flight, then across a share's *groups*, then
//!   oldest first inside a group. It locks with `FOR UPDATE SKIP LOCKED`, so two fetchers never
//!   get the same job, and gives each claim a fresh fencing token ([`Job::claim_token`]); every
//!   result ([`complete`], [`retry`], [`snooze`], [`discard`]) is recorded only while that token
//!   still matches, so the late result of a rescued run changes nothing.
//! - **Groups** (`job_groups`): each group has a cluster-wide concurrency cap (an adaptive
//!   limit between a floor and a ceiling that follows the group's own latency, [`adapt_limit`]) enforced in the fetch under the
//!   group's row lock, and a *parked* flag ([`park_group`], [`release_group`]): parking is one
//!   row update, parked jobs stay put and are never fetched (except a probe, [`wake_one`]).
//!   The fetch reads one index entry per group with due work, so its cost does not grow with
//!   any group's backlog, whether that group is parked, at its cap, or just big.
//! - **Gates** (`job_gates`, [`set_group_gate`]): a second level above groups, keyed by text
//!   (for Breakwater: a receiving host). A gate's groups share a parked flag ([`park_gate`],
//!   [`release_gate`]: one row update), a probe slot ([`wake_one_in_gate`]: exactly one job of
//!   the whole parked gate) and a cluster-wide cap on their jobs in flight, shared fairly across
//!   shares. A job runs only if its group and its gate both let it.
//! - **Future work is off the hot path**: a job that is snoozed or backing off is in state
//!   `scheduled` and is not in the fetch indexes; [`maintenance::promote_due`] moves due jobs back
//!   to `available`.
//! - **Unique keys**: at most one live (`available`, `scheduled`, `executing`) job per
//!   `unique_key`, enforced by a partial unique index; [`enqueue`] returns `None` on a conflict.
//! - **Wake-ups**: enqueueing, promoting and releasing send `NOTIFY` on [`NOTIFY_CHANNEL`] with
//!   the queue name as payload; [`Wakers`] turns those into wake-ups of idle pools, and pools
//!   poll as a fallback.
//! - **Rescue**: nodes heartbeat into `queue_nodes`; [`maintenance::rescue`] makes jobs left
//!   `executing` by a node whose heartbeat is stale available again. A node that still
//!   heartbeats never has its jobs rescued.
//! - **Cancel**: [`cancel_groups`] and [`cancel_keys`] end waiting jobs (parked ones included)
//!   as `cancelled` in the caller's transaction; a running job keeps its claim and its handler
//!   may end it with [`cancel`].
//! - **Runner** ([`runner::run_pool`]): a fixed number of concurrent handlers per queue, graceful
//!   shutdown that stops fetching, lets in-flight jobs finish within a grace period and hands the
//!   rest back without using an attempt.
//!
//! Delivery is at-least-once: a job may run again after a crash, never zero times.

/// Locks (`FOR UPDATE`, until the transaction ends) the rows of queue table `$table` (a string
/// literal) that `$which` selects (a string literal: SQL on `$1`, bound to `$arg`, with an
/// `ORDER BY` when it takes many rows). One statement text for every row lock of the queue: a
/// group's, a gate's, or many of either in key order (see `slots::lock_slots`).
macro_rules! lock_rows {
    ($exec:expr, $table:literal, $which:literal, $arg:expr) => {{
        sqlx::query!(
            "SELECT 1 AS locked FROM " + $table + " WHERE " + $which + " FOR UPDATE",
            $arg
        )
        .fetch_all($exec)
        .await?;
    }};
}

mod backoff;
mod cancel;
mod enqueue;
mod error;
mod fetch;
mod gate;
mod group;
mod job;
pub mod maintenance;
mod outage;
mod outcome;
mod repair;
pub mod runner;
mod slots;
pub mod stats;
mod wake;

pub use backoff::Backoff;
pub use cancel::{cancel_groups, cancel_keys};
pub use enqueue::{enqueue, enqueue_many, reschedule_unique, schedule_unique};
pub use error::{Error, Result};
pub use fetch::{explain_fetch, fetch, fetch_batch, fetch_batch_from, index_rows, Fetched};
pub use gate::{
    gate_state, gate_summary_sql, park_gate, parked_gates, release_gate, set_gate_max_in_flight,
    set_group_gate, wake_one_in_gate, GateState,
};
pub use group::{
    adapt_limit, backlog, define_group, ensure_group, group_state, lock_group, make_due,
    make_group_due_until, park_group, parked_count, parked_groups, release_group, set_group_fifo,
    set_max_in_flight, wake_one, Backlog, Feedback, GroupLimits, GroupState,
};
pub use job::{Job, JobState, NewJob, PRIORITY_NORMAL, PRIORITY_PARKED, PRIORITY_URGENT};
pub use outage::{is_transient, outage_delay, OUTAGE_RETRY_CAP};
pub use outcome::{
    cancel, complete, discard, finish_batch, hand_back, hand_back_unknown, retry, snooze, Finish,
    GroupSuccesses, RetryOutcome,
};
pub use repair::{
    attempts_out_of_range, cancel_waiting_job, executing_job_exists_sql, last_job,
    last_job_state_sql, live_job_exists_sql, move_waiting, parked_count_sql, recount_gate_slots,
    recount_group_slots, slots_drift, AttemptOutOfRange, Reconciled, SlotOwner, SlotsDrift,
    WAITING_JOBS_SQL,
};
pub use wake::{notify_queues, ListenConfig, Wakers, NOTIFY_CHANNEL};
