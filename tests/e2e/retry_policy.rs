//! Retry policy and timeout per channel, and the breaker's explanation: real
//! receivers on loopback, the real worker and queue.

use breakwater_e2e::http::{assert_invalid, assert_ok, send};
use breakwater_e2e::{audit_count, wait_until, Behavior, TestApp};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// `PATCH {path}` with `key` and `body`, as a raw response (for the problem checks).
async fn patch_raw(app: &TestApp, path: &str, key: &str, body: Value) -> reqwest::Response {
    send(
        app.http
            .patch(format!("{}{path}", app.api))
            .bearer_auth(key)
            .json(&body),
    )
    .await
}

/// The attempts the receiver saw of `endpoint`, in arrival order.
fn arrivals(app: &TestApp, endpoint: &str) -> Vec<std::time::Instant> {
    app.receiver
        .received(endpoint)
        .iter()
        .map(|r| r.at)
        .collect()
}

/// `(max_attempts, retry_policy copy)` of a delivery's job and row.
async fn accepted_with(pool: &PgPool, delivery: Uuid) -> (i32, Option<Value>) {
    sqlx::query_as(
        "SELECT j.max_attempts, d.retry_policy FROM deliveries d
         JOIN jobs j ON j.unique_key = 'delivery:' || d.id::text WHERE d.id = $1",
    )
    .bind(delivery)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_policy_round_trips_and_out_of_bounds_values_are_422(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let policy = json!({
        "max_attempts": 7,
        "backoff": {"kind": "schedule", "delays_ms": [5000, 300000, 1800000, 7200000, 18000000, 36000000]},
        "request_timeout_ms": 10000
    });
    let created = app
        .create_channel(
            &key,
            &app.receiver.url("a"),
            json!({ "retry_policy": policy }),
        )
        .await;
    assert_eq!(created["retry_policy"], policy);
    let ch: Uuid = created["id"].as_str().unwrap().parse().unwrap();
    let (s, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(s, 200);
    assert_eq!(v["retry_policy"], policy);
    let in_force = &v["retry_policy_in_force"];
    assert_eq!(in_force["max_attempts"], 7);
    assert_eq!(in_force["backoff"], policy["backoff"]);
    assert_eq!(in_force["request_timeout_ms"], 10000);
    assert_eq!(
        in_force["source"],
        json!({"max_attempts": "channel", "backoff": "channel", "request_timeout_ms": "channel"})
    );

    // An exponential backoff replaces it whole; a schedule alone sets its attempts.
    let exp = json!({"backoff": {"kind": "exponential", "base_ms": 1000, "factor": 2.5, "cap_ms": 60000}});
    let (s, v) = app
        .patch_channel(&key, ch, json!({ "retry_policy": exp }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["retry_policy"], exp);
    assert_eq!(
        v["retry_policy_in_force"]["source"]["max_attempts"],
        "config"
    );
    assert_eq!(v["retry_policy_in_force"]["max_attempts"], 3); // test_settings
    let (_, v) = app
        .patch_channel(
            &key,
            ch,
            json!({ "retry_policy": {"backoff": {"kind": "schedule", "delays_ms": [200, 400]}} }),
        )
        .await;
    assert_eq!(v["retry_policy"]["max_attempts"], 3);
    assert_eq!(audit_count(&app.pool, ch, &["channel.updated"]).await, 2);

    // Out of bounds: 422 naming the field, nothing changed.
    let path = format!("/api/v1/channels/{ch}");
    for (body, field) in [
        (json!({"max_attempts": 0}), "retry_policy.max_attempts"),
        (json!({"max_attempts": 101}), "retry_policy.max_attempts"),
        (
            json!({"request_timeout_ms": 50}),
            "retry_policy.request_timeout_ms",
        ),
        (
            json!({"request_timeout_ms": 120001}),
            "retry_policy.request_timeout_ms",
        ),
        (
            json!({"backoff": {"kind": "schedule", "delays_ms": []}}),
            "retry_policy.backoff.delays_ms",
        ),
        (
            json!({"backoff": {"kind": "schedule", "delays_ms": [200, 99]}}),
            "retry_policy.backoff.delays_ms",
        ),
        (
            json!({"backoff": {"kind": "exponential", "base_ms": 50, "factor": 2, "cap_ms": 1000}}),
            "retry_policy.backoff.base_ms",
        ),
        (
            json!({"backoff": {"kind": "exponential", "base_ms": 1000, "factor": 11, "cap_ms": 5000}}),
            "retry_policy.backoff.factor",
        ),
        (
            json!({"backoff": {"kind": "exponential", "base_ms": 1000, "factor": 2, "cap_ms": 900}}),
            "retry_policy.backoff.cap_ms",
        ),
    ] {
        assert_invalid(
            patch_raw(&app, &path, &key, json!({ "retry_policy": body })).await,
            field,
        )
        .await;
    }
    // A field or kind the policy does not have: 422 on the body.
    for body in [
        json!({"retries": 3}),
        json!({"backoff": {"kind": "linear", "step_ms": 100}}),
    ] {
        assert_invalid(
            patch_raw(&app, &path, &key, json!({ "retry_policy": body })).await,
            "retry_policy",
        )
        .await;
    }
    assert_eq!(audit_count(&app.pool, ch, &["channel.updated"]).await, 2);

    // The tenant's default is checked the same way, and `null` clears a channel's own.
    assert_invalid(
        patch_raw(
            &app,
            "/api/v1/tenant",
            &key,
            json!({"retry_policy": {"max_attempts": 0}}),
        )
        .await,
        "retry_policy.max_attempts",
    )
    .await;
    let (s, v) = app
        .patch_channel(&key, ch, json!({ "retry_policy": null }))
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["retry_policy"], Value::Null);
    assert_eq!(
        v["retry_policy_in_force"]["source"],
        json!({"max_attempts": "config", "backoff": "config", "request_timeout_ms": "config"})
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn an_explicit_schedule_retries_at_its_delays(pool: PgPool) {
    // test_settings: no jitter, so the waits are the schedule's (plus the promoter's ≤ 50 ms).
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(
            &key,
            "flaky",
            json!({ "retry_policy": {"backoff": {"kind": "schedule", "delays_ms": [200, 400]}} }),
        )
        .await;
    app.receiver.set("flaky", Behavior::Status(500, None));
    let d = app.deliver(&key, ch, json!({"n": 1})).await;
    app.wait_delivery(d, "dead", Duration::from_secs(10)).await;
    let at = arrivals(&app, "flaky");
    assert_eq!(at.len(), 3, "3 attempts: the schedule's two retries");
    let gaps: Vec<u128> = at.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect();
    println!("schedule [200, 400] ms: the receiver saw gaps of {gaps:?} ms");
    assert!((200..450).contains(&gaps[0]), "first wait {} ms", gaps[0]);
    assert!((400..650).contains(&gaps[1]), "second wait {} ms", gaps[1]);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_channel_timeout_fails_a_slower_answer_as_a_timeout(pool: PgPool) {
    // The service's timeout is 2 s (test_settings); the channel's is 300 ms. The endpoint
    // answers after 1 s: within the service's, past the channel's.
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let short = app
        .channel_with(
            &key,
            "slow-a",
            json!({ "retry_policy": {"max_attempts": 1, "request_timeout_ms": 300} }),
        )
        .await;
    let plain = app.channel_with(&key, "slow-b", json!({})).await;
    app.receiver
        .set("slow-a", Behavior::Delay(Duration::from_secs(1), 200));
    app.receiver
        .set("slow-b", Behavior::Delay(Duration::from_secs(1), 200));
    let d_short = app.deliver(&key, short, json!({"n": 1})).await;
    let d_plain = app.deliver(&key, plain, json!({"n": 2})).await;
    app.wait_delivery(d_short, "dead", Duration::from_secs(10))
        .await;
    app.wait_delivery(d_plain, "delivered", Duration::from_secs(10))
        .await;
    let (kind, duration_ms, error): (Option<String>, i32, Option<String>) = sqlx::query_as(
        "SELECT error_kind, duration_ms, error FROM delivery_attempts WHERE delivery_id = $1",
    )
    .bind(d_short)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    println!("channel timeout 300 ms: {kind:?} after {duration_ms} ms: {error:?}");
    assert_eq!(kind.as_deref(), Some("timeout"));
    assert!((300..900).contains(&duration_ms), "{duration_ms} ms");
    assert!(error.unwrap().contains("within 300 ms"));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_tenant_default_applies_where_the_channel_sets_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let (s, v) = app
        .patch(
            "/api/v1/tenant",
            &key,
            &json!({"retry_policy": {"max_attempts": 2, "request_timeout_ms": 1500}}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["retry_policy"]["max_attempts"], 2);
    let inherits = app.channel_with(&key, "dead-a", json!({})).await;
    let own = app
        .channel_with(&key, "dead-b", json!({"retry_policy": {"max_attempts": 1}}))
        .await;
    let (_, v) = app.get(&format!("/api/v1/channels/{inherits}"), &key).await;
    let f = &v["retry_policy_in_force"];
    assert_eq!(
        (f["max_attempts"].clone(), f["request_timeout_ms"].clone()),
        (json!(2), json!(1500))
    );
    assert_eq!(f["source"]["max_attempts"], "tenant");
    assert_eq!(f["source"]["backoff"], "config");
    let (_, v) = app.get(&format!("/api/v1/channels/{own}"), &key).await;
    let f = &v["retry_policy_in_force"];
    assert_eq!(
        (f["max_attempts"].clone(), f["request_timeout_ms"].clone()),
        (json!(1), json!(1500))
    );
    assert_eq!(f["source"]["request_timeout_ms"], "tenant");

    app.receiver.set("dead-a", Behavior::Status(500, None));
    app.receiver.set("dead-b", Behavior::Status(500, None));
    let a = app.deliver(&key, inherits, json!({"n": 1})).await;
    let b = app.deliver(&key, own, json!({"n": 2})).await;
    assert_eq!(accepted_with(&app.pool, a).await.0, 2);
    assert_eq!(accepted_with(&app.pool, b).await.0, 1);
    app.wait_delivery(a, "dead", Duration::from_secs(10)).await;
    app.wait_delivery(b, "dead", Duration::from_secs(10)).await;
    assert_eq!(app.receiver.count("dead-a"), 2, "the tenant's 2 attempts");
    assert_eq!(
        app.receiver.count("dead-b"),
        1,
        "the channel's own 1 attempt"
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_change_applies_to_deliveries_accepted_after_it(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(&key, "dead", json!({"retry_policy": {"max_attempts": 1}}))
        .await;
    app.receiver.set("dead", Behavior::Status(500, None));
    // Held back while the policy changes.
    app.pause(&key, ch).await;
    let before = app.deliver(&key, ch, json!({"n": 1})).await;
    let (s, _) = app
        .patch_channel(
            &key,
            ch,
            json!({"retry_policy": {"backoff": {"kind": "schedule", "delays_ms": [100, 100]}}}),
        )
        .await;
    assert_eq!(s, 200);
    let after = app.deliver(&key, ch, json!({"n": 2})).await;
    let (attempts, copy) = accepted_with(&app.pool, before).await;
    assert_eq!((attempts, copy), (1, Some(json!({"max_attempts": 1}))));
    let (attempts, copy) = accepted_with(&app.pool, after).await;
    assert_eq!(attempts, 3);
    assert_eq!(copy.unwrap()["backoff"]["delays_ms"], json!([100, 100]));
    app.resume(&key, ch).await;
    app.wait_delivery(before, "dead", Duration::from_secs(10))
        .await;
    app.wait_delivery(after, "dead", Duration::from_secs(10))
        .await;
    let tries = |id: Uuid| {
        app.receiver
            .received("dead")
            .iter()
            .filter(|r| r.webhook_id.as_deref() == Some(&id.to_string()))
            .count()
    };
    assert_eq!(
        tries(before),
        1,
        "accepted before the change: its old policy"
    );
    assert_eq!(tries(after), 3, "accepted after: the new one");
    app.stop().await;
}

/// Delivers a backlog of 20 to `ch` (an endpoint dead in some way, its cooldown long enough
/// that no probe goes during the test), waits for the circuit to open and settle, and returns
/// the non-probe requests made (the attempts recorded) and the explanation's prediction for
/// `mode`.
async fn seen_and_predicted(app: &TestApp, key: &str, ch: Uuid, mode: &str) -> (i64, i64) {
    let (s, explained) = app
        .get(&format!("/api/v1/channels/{ch}/circuit/explain"), key)
        .await;
    assert_eq!(s, 200, "{explained}");
    let predicted = explained["before_open"][mode]["requests"].as_i64().unwrap();
    app.deliver_many(key, ch, 20).await;
    wait_until(Duration::from_secs(10), "the circuit opened", || async {
        app.circuit_state(ch).await == "open"
    })
    .await;
    // Requests in flight at the opening are recorded within a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM delivery_attempts WHERE channel_id = $1 AND NOT probe",
    )
    .bind(ch)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    (seen, predicted)
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_explanation_predicts_what_a_refusing_endpoint_gets(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    // A port nothing listens on: every connection is refused.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ch = app
        .channel_to(
            &key,
            &format!("http://127.0.0.1:{port}/hook"),
            json!({"cooldown_ms": 60000}),
        )
        .await;
    let (seen, predicted) = seen_and_predicted(&app, &key, ch, "refused").await;
    println!("refusing endpoint: {seen} requests before the circuit opened, {predicted} predicted");
    assert_eq!(seen, predicted);
    let kinds: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT error_kind FROM delivery_attempts WHERE channel_id = $1",
    )
    .bind(ch)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(kinds, ["connect"]);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_explanation_predicts_what_a_503_endpoint_receives(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(&key, "down", json!({"cooldown_ms": 60000}))
        .await;
    app.receiver.set("down", Behavior::Status(503, None));
    let (seen, predicted) = seen_and_predicted(&app, &key, ch, "server_error").await;
    println!(
        "503 endpoint: {} requests received, {seen} recorded before the circuit opened, {predicted} predicted",
        app.receiver.count("down")
    );
    assert_eq!(seen, predicted);
    assert_eq!(app.receiver.count("down") as i64, predicted);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_explanation_answers_from_the_settings_and_warns(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    // test_settings: threshold 5, cooldown 0.5 s doubling to 1 s, limit 4, 3 attempts with
    // 50 ms × 2 capped at 400 ms, timeout 2 s.
    let ch = app.channel_with(&key, "a", json!({})).await;
    let (s, e) = app
        .get(&format!("/api/v1/channels/{ch}/circuit/explain"), &key)
        .await;
    assert_eq!(s, 200);
    assert_eq!(e["before_open"]["refused"]["requests"], 5);
    assert_eq!(e["before_open"]["timing_out"]["rounds"], 2);
    assert_eq!(e["before_open"]["timing_out"]["time_to_open_ms"], 4000);
    assert_eq!(e["while_open"]["first_probe_after_ms"], 500);
    assert_eq!(
        e["while_open"]["probes_at_ms"].as_array().unwrap()[..3],
        [json!(500), json!(1500), json!(2500)]
    );
    assert_eq!(e["until_dead"]["waits_ms"], json!([50, 100]));
    assert_eq!(e["until_dead"]["requests_total_ms"], 6000);
    let codes = |e: &Value| -> Vec<String> {
        e["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["code"].as_str().unwrap().to_string())
            .collect()
    };
    // The test timeout (2 s) is longer than the 0.5 s cooldown; 3 attempts are fewer than the
    // threshold of 5.
    assert_eq!(
        codes(&e),
        ["timeout_exceeds_cooldown", "attempts_below_threshold"]
    );
    // A long schedule outlives the 30-day retention; a slow rate limit never fills the health
    // check's window.
    let (s, _) = app
        .patch_channel(
            &key,
            ch,
            json!({
                "rate_limit": "10/h",
                "cooldown_ms": 1000,
                "retry_policy": {"max_attempts": 12, "request_timeout_ms": 1000,
                                 "backoff": {"kind": "exponential", "base_ms": 86400000, "factor": 2, "cap_ms": 604800000}}
            }),
        )
        .await;
    assert_eq!(s, 200);
    let e = assert_ok(
        breakwater_e2e::http::get(
            &app,
            &format!("/api/v1/channels/{ch}/circuit/explain"),
            Some(&key),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        codes(&e),
        [
            "schedule_outlives_retention",
            "rate_limit_below_health_minimum"
        ]
    );
    app.stop().await;
}
