//! Delivery end to end: a node, a receiver on loopback, the real queue.

use breakwater_e2e::{wait_until, Behavior, TestApp};
use serde_json::json;
use sqlx::PgPool;
use std::time::Duration;

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn delivered_once_with_a_signature_that_verifies(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, ch) = app.tenant_with_channel("ok").await;
    let id = app.deliver(&key, ch, json!({ "order": 42 })).await;

    app.wait_received("ok", 1, Duration::from_secs(10)).await;
    app.wait_delivery(id, "delivered", Duration::from_secs(5))
        .await;
    let got = app.receiver.received("ok");
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].webhook_id.as_deref(),
        Some(id.to_string().as_str()),
        "webhook-id is the delivery id"
    );
    assert_eq!(
        got[0].signature_ok,
        Some(true),
        "signature verifies with the channel secret"
    );
    let body: serde_json::Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(body["type"], "test.event");
    assert_eq!(body["data"], json!({ "order": 42 }));

    let (s, v) = app.get(&format!("/api/v1/deliveries/{id}"), &key).await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "delivered");
    assert_eq!(v["attempts"], 1);
    assert_eq!(v["attempt_log"][0]["status_code"], 200);
    assert_eq!(v["attempt_log"][0]["outcome"], "success");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn each_attempt_is_signed_when_sent_not_when_enqueued(pool: PgPool) {
    // 1.5 s between attempts, so the two webhook-timestamps must differ.
    let app = TestApp::spawn_with(pool, |s| {
        s.worker.backoff_base_ms = 1_500;
        s.worker.backoff_cap_ms = 1_500;
    })
    .await;
    let (key, ch) = app.tenant_with_channel("flaky").await;
    app.receiver.set("flaky", Behavior::Status(503, None));
    let id = app.deliver(&key, ch, json!({})).await;
    app.wait_received("flaky", 1, Duration::from_secs(10)).await;
    app.receiver.set("flaky", Behavior::Status(200, None));
    app.wait_received("flaky", 2, Duration::from_secs(10)).await;
    app.wait_delivery(id, "delivered", Duration::from_secs(5))
        .await;

    let got = app.receiver.received("flaky");
    assert!(
        got.iter().all(|r| r.signature_ok == Some(true)),
        "both attempts verify"
    );
    let stamps: Vec<i64> = got
        .iter()
        .map(|r| r.webhook_timestamp.expect("webhook-timestamp"))
        .collect();
    assert!(
        stamps[1] > stamps[0],
        "each attempt carries its own timestamp: {stamps:?}"
    );
    for r in &got {
        let skew = (r.received_unix - r.webhook_timestamp.unwrap()).abs();
        assert!(
            skew <= 1,
            "signed at send time, not at enqueue (skew {skew} s)"
        );
    }
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_503_endpoint_is_retried_then_dead(pool: PgPool) {
    let app = TestApp::spawn(pool).await; // max_attempts = 3, 50 ms backoff
    let (key, ch) = app.tenant_with_channel("down").await;
    app.receiver.set("down", Behavior::Status(503, None));
    let id = app.deliver(&key, ch, json!({})).await;

    app.wait_delivery(id, "dead", Duration::from_secs(10)).await;
    assert_eq!(app.receiver.count("down"), 3, "three attempts, no more");
    let rows: Vec<(i32, String, Option<i32>)> =
        sqlx::query_as("SELECT attempt, outcome, status_code FROM delivery_attempts WHERE delivery_id = $1 ORDER BY attempt")
            .bind(id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(
        rows,
        vec![
            (1, "transient".into(), Some(503)),
            (2, "transient".into(), Some(503)),
            (3, "transient".into(), Some(503))
        ]
    );
    let job_state: String =
        sqlx::query_scalar("SELECT state FROM jobs WHERE args->>'delivery_id' = $1")
            .bind(id.to_string())
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(
        job_state, "discarded",
        "the job is in the dead letter state"
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_400_endpoint_is_dead_after_one_attempt(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, ch) = app.tenant_with_channel("rejects").await;
    app.receiver.set("rejects", Behavior::Status(400, None));
    let id = app.deliver(&key, ch, json!({})).await;

    app.wait_delivery(id, "dead", Duration::from_secs(10)).await;
    // Its job is final and nothing is in flight: no retry can still show up.
    app.wait_settled(ch).await;
    assert_eq!(app.receiver.count("rejects"), 1);
    let (s, v) = app.get(&format!("/api/v1/deliveries/{id}"), &key).await;
    assert_eq!(s, 200);
    assert_eq!(v["attempts"], 1);
    assert_eq!(v["attempt_log"][0]["outcome"], "permanent");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn connection_refused_is_transient(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    // A port nothing listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (s, v) = app
        .post(
            "/api/v1/channels",
            &key,
            &json!({ "url": format!("http://{free}/x") }),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let ch: uuid::Uuid = v["id"].as_str().unwrap().parse().unwrap();
    let id = app.deliver(&key, ch, json!({})).await;
    app.wait_delivery(id, "dead", Duration::from_secs(10)).await;
    let kinds: Vec<Option<String>> = sqlx::query_scalar(
        "SELECT error_kind FROM delivery_attempts WHERE delivery_id = $1 ORDER BY attempt",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(kinds, vec![Some("connect".to_string()); 3]);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn internal_targets_are_refused_at_send_time_unless_allowed(pool: PgPool) {
    // The channel was created while private targets were allowed; a node that forbids them
    // must not send to it (e.g. DNS or configuration changed since).
    let app = TestApp::spawn(pool.clone()).await;
    let (key, ch) = app.tenant_with_channel("internal").await;
    app.stop().await;

    let app = TestApp::spawn_with(pool, |s| s.allow_private_targets = false).await;
    let id = app.deliver(&key, ch, json!({})).await;
    app.wait_delivery(id, "dead", Duration::from_secs(10)).await;
    let kind: Option<String> =
        sqlx::query_scalar("SELECT error_kind FROM delivery_attempts WHERE delivery_id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(kind.as_deref(), Some("blocked"));
    assert_eq!(app.receiver.count("internal"), 0);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_batch_is_delivered_once_per_delivery(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "high").await;
    let ch = app.channel(&key, "bulk").await;
    let items: Vec<_> = (0..200)
        .map(|i| json!({ "event_type": "e", "payload": { "i": i } }))
        .collect();
    let (s, v) = app
        .post(
            &format!("/api/v1/channels/{ch}/deliveries/batch"),
            &key,
            &json!({ "deliveries": items }),
        )
        .await;
    assert_eq!(s, 202, "{v}");
    app.wait_received("bulk", 200, Duration::from_secs(20))
        .await;
    let got = app.receiver.received("bulk");
    let ids: std::collections::HashSet<_> = got.iter().map(|r| r.webhook_id.clone()).collect();
    assert_eq!(ids.len(), 200, "no duplicates");
    assert!(got.iter().all(|r| r.signature_ok == Some(true)));
    let queue: String = sqlx::query_scalar("SELECT DISTINCT queue FROM jobs")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(
        queue, "deliveries_high",
        "a high-tier tenant's jobs run on the high queue"
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn payloads_are_delivered_byte_for_byte(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, ch) = app.tenant_with_channel("exact").await;
    // Money amounts, huge integers, exponent forms and key order must survive untouched.
    let raw = r#"{"zeta":1,"alpha":{"b":1,"a":2},"amount":19.999999999999999999,"big":123456789012345678901234567890,"e":1E2,"neg":-0.0}"#;
    let body = format!(r#"{{"event_type":"invoice.paid","payload":{raw}}}"#);
    let r = app
        .http
        .post(format!("{}/api/v1/channels/{ch}/deliveries", app.api))
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    app.wait_received("exact", 1, Duration::from_secs(10)).await;
    let got = String::from_utf8(app.receiver.received("exact")[0].body.to_vec()).unwrap();
    assert!(
        got.contains(&format!(r#""data":{raw}}}"#)),
        "payload re-encoded: {got}"
    );
    assert_eq!(app.receiver.received("exact")[0].signature_ok, Some(true));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_last_attempt_rescued_from_a_dead_node_leaves_the_delivery_dead_and_replayable(
    pool: PgPool,
) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.worker.max_attempts = 1).await;
    let (key, ch) = app.tenant_with_channel("slow").await;
    app.receiver
        .set("slow", Behavior::Delay(Duration::from_secs(3), 200));
    let id = app.deliver(&key, ch, json!({ "n": 1 })).await;
    app.wait_delivery(id, "delivering", Duration::from_secs(10))
        .await;
    // Its node dies mid-request: the claim now names a node with no heartbeat, so the rescuer
    // takes it back; that was its last attempt, so the job is discarded.
    sqlx::query("UPDATE jobs SET attempted_by = 'a-node-that-died' WHERE state = 'executing'")
        .execute(&pool)
        .await
        .unwrap();
    // The rescuer has run long: its own heartbeat has been unbroken for more than the rescue
    // horizon (a node judges others only then), so it rescues at once.
    sqlx::query("UPDATE queue_nodes SET beating_since = now() - interval '1 hour'")
        .execute(&pool)
        .await
        .unwrap();
    // The delivery follows its discarded job.
    app.wait_delivery(id, "dead", Duration::from_secs(10)).await;
    let (status, error): (String, Option<String>) =
        sqlx::query_as("SELECT status, last_error FROM deliveries WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(status, "dead");
    assert!(
        error.unwrap_or_default().contains("rescued"),
        "with the reason"
    );
    // The abandoned run's late 200 is fenced off: it changes nothing.
    app.wait_received("slow", 1, Duration::from_secs(10)).await;
    // Wait until the abandoned run is over: its request ended (the endpoint answers after 3 s,
    // past the tests' 2 s request timeout) and the node wrote, fenced, its result.
    wait_until(
        Duration::from_secs(10),
        "the abandoned run's late answer was handled",
        || async { app.in_flight().await == 0.0 },
    )
    .await;
    assert_eq!(app.delivery_status(id).await, "dead");
    // And it can be replayed.
    app.receiver.set("slow", Behavior::Status(200, None));
    let (s, _) = app
        .post_empty(&format!("/api/v1/deliveries/{id}/replay"), &key)
        .await;
    assert_eq!(s, 202);
    app.wait_delivery(id, "delivered", Duration::from_secs(10))
        .await;
    app.stop().await;
}
