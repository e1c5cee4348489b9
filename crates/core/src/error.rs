//! The domain's error type.

/// Errors of domain operations, with variants a caller (the API) can map to a response.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object does not exist, or belongs to another tenant (never say which).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A field is invalid; `field` names it, the message says what is accepted.
    #[error("{field}: {message}")]
    Invalid {
        /// The offending field, as named in the API.
        field: &'static str,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// A JSON value (a payload, an event type's example) fails its event type's JSON Schema
    /// ([`crate::event_types`]): the API answers 422 `schema_violation` naming `field` and
    /// listing the failing parts by JSON pointer.
    #[error("{field}: does not match the event type's schema ({} violations)", violations.len())]
    SchemaViolation {
        /// The field that holds the value (`payload`, `example`).
        field: &'static str,
        /// The first failing parts ([`crate::event_types::MAX_VIOLATIONS`]).
        violations: Vec<crate::event_types::Violation>,
    },
    /// The request conflicts with the current state (e.g. a reused idempotency key).
    #[error("conflict: {0}")]
    Conflict(String),
    /// Item `index` (from 0) of the list a caller gave conflicts with the current state on its
    /// field `field`: a batch item's idempotency key already used for another channel or
    /// another event. The API answers 409 naming the item (`deliveries[3].idempotency_key`).
    #[error("item {index}: {field}: conflict: {message}")]
    ItemConflict {
        /// The item's position in the list, from 0.
        index: usize,
        /// The conflicting field, as named in the API.
        field: &'static str,
        /// What conflicts.
        message: String,
    },
    /// A request would take the tenant over one of its quotas ([`crate::quotas`]); nothing of it
    /// was done. The API answers 409 for a count quota (channels, active keys: waiting does not
    /// help) and 429 for a rate (with `Retry-After` when `retry_after` is set), naming `quota`.
    #[error("quota {}: {message}", quota.as_str())]
    QuotaExceeded {
        /// Which quota.
        quota: crate::quotas::Quota,
        /// Its value for this tenant.
        limit: i64,
        /// When the request would fit, for a rate; `None` for a count, or a request larger than
        /// the whole quota (it never fits).
        retry_after: Option<std::time::Duration>,
        /// What is over and what to do, for a person.
        message: String,
    },
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The queue refused an argument ([`breakwater_queue::Error::InvalidArgument`]). A database
    /// error of the queue's statements is an [`Error::Database`]: they run in the caller's
    /// transactions, so a lock or statement timeout there means what it means anywhere.
    #[error(transparent)]
    Queue(breakwater_queue::Error),
    /// A worker's batched write failed: the batch of results (or of begins) it went in failed
    /// (the cause, as text, since every item of the batch gets it), or the node's batcher
    /// stopped. Nothing of it was recorded; the job is retried.
    #[error("not recorded: {0}")]
    Unrecorded(String),
}

impl From<breakwater_queue::Error> for Error {
    fn from(e: breakwater_queue::Error) -> Self {
        match e {
            breakwater_queue::Error::Database(db) => Error::Database(db),
            other => Error::Queue(other),
        }
    }
}

impl Error {
    /// Whether this is a database error that says the database could not be reached or the
    /// statement was cut off by something that passes (an outage, a failover, a deadlock), so
    /// the same work may succeed later unchanged ([`breakwater_queue::is_transient`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Database(e) if breakwater_queue::is_transient(e))
    }

    /// An [`Error::Invalid`] for `field`.
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            field,
            message: message.into(),
        }
    }
}

/// `Result` with the domain's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
