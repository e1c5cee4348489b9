//! The queue's error type.

/// Errors of the queue. Every variant is a database problem: the queue itself has no other way
/// to fail, and a failed call leaves every job where it was (each call is one statement or one
/// caller-owned transaction).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database refused or could not run a statement.
    #[error("queue database error: {0}")]
    Database(#[from] sqlx::Error),
}

/// `Result` with the queue's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
