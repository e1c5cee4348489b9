//! Counts read straight from the test database, for assertions.

use sqlx::PgPool;
use uuid::Uuid;

/// Channels of `tenant` not deleted.
pub async fn live_channels(pool: &PgPool, tenant: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM channels WHERE tenant_id = $1 AND deleted_at IS NULL")
        .bind(tenant)
        .fetch_one(pool)
        .await
        .expect("counting live channels")
}

/// API keys of `tenant` not revoked.
pub async fn active_keys(pool: &PgPool, tenant: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL")
        .bind(tenant)
        .fetch_one(pool)
        .await
        .expect("counting active keys")
}

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

/// Live jobs (available, scheduled or executing) of `channel`'s group: work a node may still
/// send to the channel's endpoint.
pub async fn live_jobs(pool: &PgPool, channel: Uuid) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM jobs
         WHERE group_id = $1 AND state IN ('available', 'scheduled', 'executing')",
    )
    .bind(channel)
    .fetch_one(pool)
    .await
    .expect("count live jobs")
}

/// Live jobs (available, scheduled or executing) of `kind` (e.g. `"alert"`).
pub async fn live_jobs_of_kind(pool: &PgPool, kind: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM jobs
         WHERE kind = $1 AND state IN ('available', 'scheduled', 'executing')",
    )
    .bind(kind)
    .fetch_one(pool)
    .await
    .expect("count live jobs")
}

/// Whether every job of `channel`'s group (and there are `n`) is parked, by the queue's own
/// definition ([`breakwater_queue::parked_count`]: waiting, in a parked group or behind a
/// parked gate): the fetch takes none of them before a release.
pub async fn all_parked(pool: &PgPool, channel: Uuid, n: i64) -> bool {
    let all: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE group_id = $1")
        .bind(channel)
        .fetch_one(pool)
        .await
        .expect("count jobs");
    let parked = breakwater_queue::parked_count(pool, channel)
        .await
        .expect("count parked jobs");
    all == n && parked == n
}
