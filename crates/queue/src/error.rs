//! The queue's error type.

/// Errors of the queue: a database problem, or an argument a call refuses before touching the
/// database. A failed call leaves every job where it was (each call is one statement or one
/// transaction).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database refused or could not run a statement.
    #[error("queue database error: {0}")]
    Database(#[from] sqlx::Error),
    /// An argument out of its range; the message names it (nothing was written).
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
}

/// `Result` with the queue's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
