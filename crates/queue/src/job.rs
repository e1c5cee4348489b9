//! Jobs as the queue stores and hands them out.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// Priority of work that should jump the line (probes, alerts). Lower runs first.
pub const PRIORITY_URGENT: i16 = 0;
/// Priority of normal work.
pub const PRIORITY_NORMAL: i16 = 1;
/// Priority of parked work: fetched only when nothing at a lower number is due.
pub const PRIORITY_PARKED: i16 = 3;

/// A job's state in the `jobs.state` column (`text`, checked by the table's CHECK constraint);
/// decodes from and encodes to that column directly (`sqlx::Type`), and serializes as the same
/// snake_case word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum JobState {
    /// Due now and fetchable.
    Available,
    /// Waiting for `scheduled_at` (backoff, snooze, parked).
    Scheduled,
    /// Claimed by a node under a claim token.
    Executing,
    /// Done.
    Completed,
    /// Gave up: the dead letter state.
    Discarded,
    /// Cancelled before it ran.
    Cancelled,
}

impl JobState {
    /// The column value.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Available => "available",
            JobState::Scheduled => "scheduled",
            JobState::Executing => "executing",
            JobState::Completed => "completed",
            JobState::Discarded => "discarded",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Parses the column value; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "available" => JobState::Available,
            "scheduled" => JobState::Scheduled,
            "executing" => JobState::Executing,
            "completed" => JobState::Completed,
            "discarded" => JobState::Discarded,
            "cancelled" => JobState::Cancelled,
            _ => return None,
        })
    }
}

/// A job to insert.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// Queue name; pools fetch from one queue each.
    pub queue: String,
    /// What the handler should do (free text, e.g. `"deliver"`).
    pub kind: String,
    /// Handler input.
    pub args: Value,
    /// Lower runs first; see [`PRIORITY_NORMAL`] and [`PRIORITY_PARKED`].
    pub priority: i16,
    /// Total runs allowed, including the first (must be > 0).
    pub max_attempts: i32,
    /// Run no earlier than this (database time); `None` = now.
    pub scheduled_at: Option<DateTime<Utc>>,
    /// At most one live job per key (partial unique index).
    pub unique_key: Option<String>,
    /// Group for [`crate::park_group`] / [`crate::release_group`].
    pub group_id: Option<Uuid>,
}

impl NewJob {
    /// A job of `kind` on `queue` with `args`, normal priority, 12 attempts, due now.
    pub fn new(queue: impl Into<String>, kind: impl Into<String>, args: Value) -> Self {
        Self {
            queue: queue.into(),
            kind: kind.into(),
            args,
            priority: PRIORITY_NORMAL,
            max_attempts: 12,
            scheduled_at: None,
            unique_key: None,
            group_id: None,
        }
    }

    /// Sets the priority (lower runs first).
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the number of runs allowed.
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Sets the earliest run time.
    pub fn scheduled_at(mut self, at: DateTime<Utc>) -> Self {
        self.scheduled_at = Some(at);
        self
    }

    /// Sets the unique key.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// Sets the group.
    pub fn group(mut self, group_id: Uuid) -> Self {
        self.group_id = Some(group_id);
        self
    }
}

/// A claimed job, as returned by [`crate::fetch`].
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Job {
    /// Row id.
    pub id: i64,
    /// Queue it was fetched from.
    pub queue: String,
    /// Handler kind.
    pub kind: String,
    /// Handler input.
    pub args: Value,
    /// Priority at fetch time.
    pub priority: i16,
    /// This run's number, starting at 1 (incremented by the fetch).
    pub attempt: i32,
    /// Runs allowed.
    pub max_attempts: i32,
    /// The fencing token of this claim; pass it to every result call.
    pub claim_token: Uuid,
    /// Unique key, if any.
    pub unique_key: Option<String>,
    /// Group, if any.
    pub group_id: Option<Uuid>,
    /// The group's gate at claim time ([`crate::set_group_gate`]), if any.
    pub gate_key: Option<String>,
    /// When the job was inserted (database time).
    pub created_at: DateTime<Utc>,
}

impl Job {
    /// Whether this run is the last one allowed.
    pub fn is_last_attempt(&self) -> bool {
        self.attempt >= self.max_attempts
    }
}
