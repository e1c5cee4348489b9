//! Tenant isolation: another tenant's channel or delivery is 404 and stays unchanged.

use super::{channel_row, count, enqueue_path, event};
use breakwater_e2e::http::{assert_invalid, assert_ok, assert_problem, get, post, send};
use breakwater_e2e::TestApp;
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn other_tenants_channel_is_404_and_unchanged(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key_a) = app.tenant("a", "default").await;
    let (_, key_b) = app.tenant("b", "default").await;
    let channel_a = app.channel(&key_a, "a").await;
    let channel_b = app.channel(&key_b, "b").await;
    let before = channel_row(&app.pool, channel_a).await;

    // Another tenant's channel answers exactly like one that does not exist.
    let missing = assert_problem(
        get(
            &app,
            &format!("/api/v1/channels/{}", Uuid::now_v7()),
            Some(&key_b),
        )
        .await,
        404,
    )
    .await;
    let foreign = assert_problem(
        get(&app, &format!("/api/v1/channels/{channel_a}"), Some(&key_b)).await,
        404,
    )
    .await;
    assert_eq!(foreign, missing);
    assert_eq!(foreign["code"], "not_found");

    // B cannot enqueue to it, one at a time or in a batch, with or without an idempotency key.
    assert_problem(
        post(&app, &enqueue_path(channel_a), Some(&key_b), &event("x.y")).await,
        404,
    )
    .await;
    let resp = send(
        app.http
            .post(format!("{}{}", app.api, enqueue_path(channel_a)))
            .bearer_auth(&key_b)
            .header("idempotency-key", "k1")
            .json(&event("x.y")),
    )
    .await;
    assert_problem(resp, 404).await;
    let batch = json!({ "deliveries": [event("x.y"), event("x.z")] });
    assert_problem(
        post(
            &app,
            &format!("{}/batch", enqueue_path(channel_a)),
            Some(&key_b),
            &batch,
        )
        .await,
        404,
    )
    .await;
    // B cannot try A's payload filter (nor learn whether it has one), nor set one on it.
    let filter_test = |id: Uuid| format!("/api/v1/channels/{id}/filter/test");
    let sample = json!({ "event_type": "x.y", "payload": { "n": 1 } });
    let missing_filter = assert_problem(
        post(&app, &filter_test(Uuid::now_v7()), Some(&key_b), &sample).await,
        404,
    )
    .await;
    let foreign_filter = assert_problem(
        post(&app, &filter_test(channel_a), Some(&key_b), &sample).await,
        404,
    )
    .await;
    assert_eq!(foreign_filter, missing_filter);
    let (s, _) = app
        .patch_channel(&key_b, channel_a, json!({ "filter": { "==": [1, 1] } }))
        .await;
    assert_eq!(s, 404);
    assert_eq!(
        count(&app.pool, "deliveries").await,
        0,
        "a delivery was created on another tenant's channel"
    );
    assert_eq!(count(&app.pool, "jobs").await, 0);

    // B's list holds only B's channel.
    let list = assert_ok(get(&app, "/api/v1/channels", Some(&key_b)).await, 200).await;
    let ids: Vec<&Value> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(ids, [&json!(channel_b)]);
    // Paging from A's channel id does not reveal it either: a raw id is not a cursor.
    assert_invalid(
        get(
            &app,
            &format!("/api/v1/channels?after={channel_a}"),
            Some(&key_b),
        )
        .await,
        "after",
    )
    .await;

    // A's channel is untouched and still A's.
    assert_eq!(channel_row(&app.pool, channel_a).await, before);
    let read = assert_ok(
        get(&app, &format!("/api/v1/channels/{channel_a}"), Some(&key_a)).await,
        200,
    )
    .await;
    assert_eq!(read["id"], json!(channel_a));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn other_tenants_delivery_is_404(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant_a, key_a) = app.tenant("a", "default").await;
    let (_, key_b) = app.tenant("b", "default").await;
    let channel_a = app.channel(&key_a, "a").await;
    let delivery = app
        .deliver(&key_a, channel_a, json!({ "secret": "A's data" }))
        .await;

    let own = assert_ok(
        get(
            &app,
            &format!("/api/v1/deliveries/{delivery}"),
            Some(&key_a),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(own["id"], json!(delivery));
    assert_eq!(own["channel_id"], json!(channel_a));
    assert_eq!(own["event_type"], "test.event");
    assert_eq!(own["payload"], json!({ "secret": "A's data" }));
    assert!(own["attempts"].is_number(), "{own}");
    assert!(own["attempt_log"].is_array(), "{own}");

    let missing = assert_problem(
        get(
            &app,
            &format!("/api/v1/deliveries/{}", Uuid::now_v7()),
            Some(&key_b),
        )
        .await,
        404,
    )
    .await;
    let foreign = assert_problem(
        get(
            &app,
            &format!("/api/v1/deliveries/{delivery}"),
            Some(&key_b),
        )
        .await,
        404,
    )
    .await;
    assert_eq!(
        foreign, missing,
        "another tenant's delivery must look missing"
    );
    assert!(!foreign.to_string().contains("A's data"));

    // Still A's, with the data A sent.
    let (owner, payload): (Uuid, String) =
        sqlx::query_as("SELECT tenant_id, payload FROM deliveries WHERE id = $1")
            .bind(delivery)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(owner, tenant_a);
    assert_eq!(
        serde_json::from_str::<Value>(&payload).unwrap(),
        json!({ "secret": "A's data" })
    );
    assert_eq!(count(&app.pool, "deliveries").await, 1);
    app.stop().await;
}
