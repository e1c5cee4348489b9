//! API behaviour: auth, tenant isolation, bad input, one module per resource.
//!
//! Every error must be an `application/problem+json` body whose `status` matches the HTTP status
//! and whose `detail` says what is wrong ([`breakwater_e2e::http::assert_problem`]); no request
//! may produce a 500.

use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

mod auth;
mod enqueue;
mod isolation;
mod keep_alive;
mod malformed;
mod portal;
mod slow_clients;
mod tenants_channels;

/// Rows in `table`.
pub(super) async fn count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The whole channel row as JSON.
pub(super) async fn channel_row(pool: &PgPool, id: Uuid) -> Value {
    sqlx::query_scalar("SELECT to_jsonb(c) FROM channels c WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The enqueue route of `channel`.
pub(super) fn enqueue_path(channel: Uuid) -> String {
    format!("/api/v1/channels/{channel}/deliveries")
}

/// An enqueue body of `event_type` with a small payload.
pub(super) fn event(event_type: &str) -> Value {
    json!({ "event_type": event_type, "payload": { "n": 1 } })
}
