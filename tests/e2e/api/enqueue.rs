//! Enqueueing deliveries: invalid and oversized payloads, idempotency keys, batches.

use super::{count, enqueue_path, event};
use breakwater_e2e::http::{assert_invalid, assert_ok, assert_problem, get, post, send};
use breakwater_e2e::TestApp;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn invalid_deliveries_are_422_and_insert_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    let path = enqueue_path(channel);

    for (bad, field) in [
        (json!({ "event_type": "", "payload": {} }), "event_type"),
        (json!({ "event_type": "   ", "payload": {} }), "event_type"),
        // Visible ASCII only: no spaces (not even around it, where they were once trimmed).
        (
            json!({ "event_type": "  a.b  ", "payload": {} }),
            "event_type",
        ),
        (
            json!({ "event_type": "e".repeat(201), "payload": {} }),
            "event_type",
        ),
        (json!({ "event_type": "a\nb", "payload": {} }), "event_type"),
    ] {
        assert_invalid(post(&app, &path, Some(&key), &bad).await, field).await;
    }
    for bad in [
        json!({ "event_type": "a.b", "payload": {}, "priority": 1 }),
        json!({ "event_type": "a.b" }),
        json!({ "payload": {} }),
        json!({ "event_type": 5, "payload": {} }),
    ] {
        let body = assert_problem(post(&app, &path, Some(&key), &bad).await, 422).await;
        assert_eq!(body["code"], "invalid_body", "{bad}: {body}");
    }
    // An empty Idempotency-Key is refused, not treated as "no key".
    let resp = send(
        app.http
            .post(format!("{}{path}", app.api))
            .bearer_auth(&key)
            .header("idempotency-key", "")
            .json(&event("a.b")),
    )
    .await;
    assert_invalid(resp, "idempotency_key").await;
    // Enqueueing to a channel that does not exist.
    assert_problem(
        post(
            &app,
            &enqueue_path(Uuid::now_v7()),
            Some(&key),
            &event("a.b"),
        )
        .await,
        404,
    )
    .await;

    assert_eq!(count(&app.pool, "deliveries").await, 0);
    assert_eq!(count(&app.pool, "jobs").await, 0);

    // Accepted: 202 pending.
    let ok = assert_ok(post(&app, &path, Some(&key), &event("a.b")).await, 202).await;
    assert_eq!(ok["status"], "pending");
    assert_eq!(ok["idempotent_replay"], false);
    let id = ok["id"].as_str().unwrap();
    let read = assert_ok(
        get(&app, &format!("/api/v1/deliveries/{id}"), Some(&key)).await,
        200,
    )
    .await;
    assert_eq!(read["event_type"], "a.b");
    assert_eq!(count(&app.pool, "deliveries").await, 1);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn oversized_payloads_are_413(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    let path = enqueue_path(channel);
    let payload = |kib: usize| json!({ "data": "x".repeat(kib * 1024) });

    // Far over the limit: refused by the body limit.
    let resp = post(
        &app,
        &path,
        Some(&key),
        &json!({ "event_type": "big", "payload": payload(300) }),
    )
    .await;
    let body = assert_problem(resp, 413).await;
    assert_eq!(body["code"], "payload_too_large");
    // The refusal states the route's limit (the payload's 256 KiB plus 16 KiB for the rest).
    let limit = 256 * 1024 + 16 * 1024;
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .ends_with(&format!("at most {limit} bytes")),
        "{body}"
    );
    // Just over 256 KiB: the body fits the envelope allowance, the payload does not.
    let resp = post(
        &app,
        &path,
        Some(&key),
        &json!({ "event_type": "big", "payload": payload(257) }),
    )
    .await;
    let body = assert_problem(resp, 413).await;
    assert_eq!(body["field"], "payload", "{body}");
    // In a batch, one oversized item refuses the batch.
    let batch =
        json!({ "deliveries": [event("small"), { "event_type": "big", "payload": payload(300) }] });
    let body = assert_problem(
        post(&app, &format!("{path}/batch"), Some(&key), &batch).await,
        413,
    )
    .await;
    assert!(
        body["detail"].as_str().unwrap().contains("deliveries[1]"),
        "{body}"
    );
    assert_eq!(count(&app.pool, "deliveries").await, 0);

    // Under the limit is fine.
    assert_ok(
        post(
            &app,
            &path,
            Some(&key),
            &json!({ "event_type": "ok", "payload": payload(250) }),
        )
        .await,
        202,
    )
    .await;
    assert_eq!(count(&app.pool, "deliveries").await, 1);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn repeated_idempotency_key_replays_the_first_delivery(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    let other_channel = app.channel(&key, "acme2").await;
    let enqueue = |channel: Uuid, key: String, idem: &'static str, event_type: &'static str| {
        let req = app
            .http
            .post(format!("{}{}", app.api, enqueue_path(channel)))
            .bearer_auth(key)
            .header("idempotency-key", idem)
            .json(&event(event_type));
        send(req)
    };

    let first = assert_ok(enqueue(channel, key.clone(), "order-1", "a.b").await, 202).await;
    assert_eq!(first["idempotent_replay"], false);
    let again = assert_ok(enqueue(channel, key.clone(), "order-1", "a.b").await, 202).await;
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["idempotent_replay"], true);
    // The replay reports the first delivery's real status (a worker may have sent it already).
    assert!(
        ["pending", "delivering", "delivered"].contains(&again["status"].as_str().unwrap()),
        "{again}"
    );
    // The same key with a different request is a conflict: the new event must not be dropped
    // silently. Nothing changes.
    let changed = assert_problem(enqueue(channel, key.clone(), "order-1", "c.d").await, 409).await;
    assert_eq!(changed["code"], "conflict");
    assert_eq!(changed["field"], "idempotency_key", "{changed}");
    assert_eq!(count(&app.pool, "deliveries").await, 1);
    let event_type: String = sqlx::query_scalar("SELECT event_type FROM deliveries")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(event_type, "a.b");
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE kind = 'deliver'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(jobs, 1, "a replay enqueued another job");

    // The same key for another of the tenant's channels is a conflict, not a silent replay.
    let body = assert_problem(
        enqueue(other_channel, key.clone(), "order-1", "a.b").await,
        409,
    )
    .await;
    assert_eq!(body["code"], "conflict");
    // Batch items with a used key replay too.
    let batch_path = format!("{}/batch", enqueue_path(channel));
    let batch = json!({ "deliveries": [
        { "event_type": "a.b", "payload": { "n": 1 }, "idempotency_key": "order-1" },
        { "event_type": "a.b", "payload": {}, "idempotency_key": "order-2" },
    ] });
    let out = assert_ok(post(&app, &batch_path, Some(&key), &batch).await, 202).await;
    assert_eq!(out["data"][0]["id"], first["id"]);
    assert_eq!(out["data"][0]["idempotent_replay"], true);
    assert_eq!(out["data"][1]["idempotent_replay"], false);
    assert_eq!(count(&app.pool, "deliveries").await, 2);
    // A batch item whose key was used for another event is a 409 naming that item; the whole
    // batch is refused.
    let batch = json!({ "deliveries": [
        { "event_type": "a.b", "payload": {}, "idempotency_key": "order-3" },
        { "event_type": "a.b", "payload": {}, "idempotency_key": "order-2" },
        { "event_type": "x.y", "payload": {}, "idempotency_key": "order-1" },
    ] });
    let refused = assert_problem(post(&app, &batch_path, Some(&key), &batch).await, 409).await;
    assert_eq!(
        refused["field"], "deliveries[2].idempotency_key",
        "{refused}"
    );
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .starts_with("deliveries[2].idempotency_key: "),
        "{refused}"
    );
    assert_eq!(count(&app.pool, "deliveries").await, 2, "nothing enqueued");

    // Keys are per tenant: another tenant's identical key is a new delivery.
    let (_, key_b) = app.tenant("b", "default").await;
    let channel_b = app.channel(&key_b, "b").await;
    let theirs = assert_ok(
        enqueue(channel_b, key_b.clone(), "order-1", "a.b").await,
        202,
    )
    .await;
    assert_eq!(theirs["idempotent_replay"], false);
    assert_ne!(theirs["id"], first["id"]);
    assert_eq!(count(&app.pool, "deliveries").await, 3);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn batch_enqueues_in_order_and_is_all_or_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    let path = format!("{}/batch", enqueue_path(channel));

    let batch = json!({ "deliveries": [
        { "event_type": "first", "payload": { "i": 0 } },
        { "event_type": "second", "payload": { "i": 1 } },
        { "event_type": "third", "payload": { "i": 2 } },
    ] });
    let out = assert_ok(post(&app, &path, Some(&key), &batch).await, 202).await;
    let data = out["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    for (i, (item, event_type)) in data.iter().zip(["first", "second", "third"]).enumerate() {
        assert_eq!(item["status"], "pending");
        assert_eq!(item["idempotent_replay"], false);
        let id = item["id"].as_str().unwrap();
        let read = assert_ok(
            get(&app, &format!("/api/v1/deliveries/{id}"), Some(&key)).await,
            200,
        )
        .await;
        assert_eq!(read["event_type"], event_type, "item {i} out of order");
        assert_eq!(read["payload"], json!({ "i": i }));
    }
    assert_eq!(count(&app.pool, "deliveries").await, 3);

    // One invalid item refuses the whole batch, naming the item.
    let bad = json!({ "deliveries": [event("ok.1"), event(""), event("ok.2")] });
    let resp = post(&app, &path, Some(&key), &bad).await;
    assert_invalid(resp, "deliveries[1].event_type").await;
    let bad = json!({ "deliveries": [event("ok.1"), { "event_type": "x", "payload": {}, "idempotency_key": "" }] });
    let resp = post(&app, &path, Some(&key), &bad).await;
    assert_invalid(resp, "deliveries[1].idempotency_key").await;
    let bad = json!({ "deliveries": [event("ok.1"), { "event_type": "x", "payload": {}, "extra": true }] });
    assert_problem(post(&app, &path, Some(&key), &bad).await, 422).await;
    assert_invalid(
        post(&app, &path, Some(&key), &json!({ "deliveries": [] })).await,
        "deliveries",
    )
    .await;
    assert_problem(post(&app, &path, Some(&key), &json!({})).await, 422).await;
    assert_eq!(
        count(&app.pool, "deliveries").await,
        3,
        "a refused batch inserted deliveries"
    );
    app.stop().await;
}
