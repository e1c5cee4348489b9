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

/// The host key of `channel` (its URL's host and port: the host circuit it shares).
pub async fn host_of(pool: &PgPool, channel: Uuid) -> String {
    sqlx::query_scalar("SELECT host_key FROM channels WHERE id = $1")
        .bind(channel)
        .fetch_one(pool)
        .await
        .expect("reading the channel's host")
}

/// The `consecutive_failures` column of `channel` (what the circuit counts towards opening).
pub async fn consecutive_failures(pool: &PgPool, channel: Uuid) -> i32 {
    sqlx::query_scalar("SELECT consecutive_failures FROM channels WHERE id = $1")
        .bind(channel)
        .fetch_one(pool)
        .await
        .expect("reading the channel's failures")
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
    count_live(pool, Some(channel), None).await
}

/// Live jobs (available, scheduled or executing) of `kind` (e.g. `"alert"`).
pub async fn live_jobs_of_kind(pool: &PgPool, kind: &str) -> i64 {
    count_live(pool, None, Some(kind)).await
}

/// Live jobs (available, scheduled or executing), of `group` and of `kind` where given.
async fn count_live(pool: &PgPool, group: Option<Uuid>, kind: Option<&str>) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM jobs
         WHERE ($1::uuid IS NULL OR group_id = $1) AND ($2::text IS NULL OR kind = $2)
           AND state IN ('available', 'scheduled', 'executing')",
    )
    .bind(group)
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
