//! Counts read straight from the test database, for assertions.

use sqlx::PgPool;
use uuid::Uuid;

/// Audit rows of `channel` whose action is one of `actions` (e.g. `&["circuit.opened"]`).
pub async fn audit_count(pool: &PgPool, channel: Uuid, actions: &[&str]) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE channel_id = $1 AND action = ANY($2)")
        .bind(channel)
        .bind(actions)
        .fetch_one(pool)
        .await
        .expect("count audit rows")
}

/// Deliveries of `channel` in `status` (`"delivered"`, `"delivering"`, `"dead"` …).
pub async fn count_status(pool: &PgPool, channel: Uuid, status: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE channel_id = $1 AND status = $2")
        .bind(channel)
        .bind(status)
        .fetch_one(pool)
        .await
        .expect("count deliveries")
}
