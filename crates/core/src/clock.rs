//! The one clock the cluster agrees on: the database's (docs/design.md, "Postgres is the only shared
//! state": time comparisons use the database's `now()`, never a node's clock).
//!
//! Scheduling times and the times they are compared with are computed in SQL (`now() + …`)
//! wherever possible. Where a time must be computed in Rust — the end of a replay window, a
//! `Retry-After` HTTP-date turned into a wait — it is measured against [`db_now`], read in the
//! transaction that uses it. Left on the node's clock on purpose: request-signing timestamps
//! (`webhook-timestamp` is the sender's claim, checked by the receiver against its own clock),
//! pure durations (`Instant`), and the end-to-end latency histogram (an observation, compared
//! with nothing stored).

use crate::Result;
use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

/// The database's `now()`: the start of the current transaction when `exec` is one, else of the
/// statement. Microsecond precision.
pub async fn db_now(exec: impl PgExecutor<'_>) -> Result<DateTime<Utc>> {
    Ok(sqlx::query_scalar("SELECT now()").fetch_one(exec).await?)
}
