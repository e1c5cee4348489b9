//! Delivery-level operational events: `delivery.dead` once per death, a dead
//! storm summarised (`deliveries.dead`), `channel.failing` once per streak and
//! `channel.recovered` at its end, kinds switched off per tenant, and each tenant's events on its
//! own alert endpoint only. Real receivers, real Postgres, several worker nodes where the bound
//! matters. Counts come from the alert jobs (each enqueued in the transaction that decided it)
//! and what the receiver got, asserted with equality.

use breakwater::Role;
use breakwater_e2e::{
    audit_count, count_status, spawn_workers, stop_all, test_settings, wait_until, Behavior,
    TestApp,
};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// Alert jobs ever enqueued for `tenant` of event `event` (none is pruned within a test).
async fn alert_jobs(pool: &PgPool, tenant: Uuid, event: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE kind = 'alert' AND args->>'tenant_id' = $1
           AND args->>'event' = $2",
    )
    .bind(tenant.to_string())
    .bind(event)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Every alert job of `tenant`, any event.
async fn all_alert_jobs(pool: &PgPool, tenant: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM jobs WHERE kind = 'alert' AND args->>'tenant_id' = $1")
        .bind(tenant.to_string())
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Sets `tenant`'s `alert_events` through the API; asserts 200 and returns them as answered.
async fn set_events(app: &TestApp, key: &str, events: Value) -> Value {
    let (s, v) = app
        .patch("/api/v1/tenant", key, &json!({ "alert_events": events }))
        .await;
    assert_eq!(s, 200, "{v}");
    v["alert_events"].clone()
}

/// Waits until the receiver's `endpoint` got (with a 200) as many alerts as `tenant` has jobs.
async fn wait_all_sent(app: &TestApp, pool: &PgPool, tenant: Uuid, endpoint: &str) {
    let jobs = all_alert_jobs(pool, tenant).await;
    wait_until(
        Duration::from_secs(30),
        &format!("{jobs} alerts reach {endpoint}"),
        || async { app.alerts(endpoint).len() as i64 >= jobs },
    )
    .await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_delivery_that_exhausts_its_attempts_sends_one_signed_delivery_dead_to_its_tenant_only(
    pool: PgPool,
) {
    // The circuit never opens here (3 attempts, threshold 10).
    let app = TestApp::spawn_with(pool.clone(), |s| s.circuit.failure_threshold = 10).await;
    let (tenant_a, key_a) = app.tenant_with_alerts("acme", "a-oncall").await;
    let (tenant_b, key_b) = app.tenant_with_alerts("globex", "b-oncall").await;
    let (s, v) = app.get("/api/v1/tenant", &key_a).await;
    assert_eq!(s, 200);
    assert_eq!(
        v["alert_events"],
        json!({"delivery_dead": true, "channel_failing": false, "channel_recovered": false,
               "dead_window_ms": 300000, "dead_alerts_per_window": 5,
               "failing_window_ms": 300000, "failing_threshold_percent": 50,
               "failing_min_attempts": 20}),
        "the defaults"
    );
    let ch_a = app.channel(&key_a, "a-dies").await;
    let ch_b = app.channel(&key_b, "b-dies").await;
    app.receiver.set("a-dies", Behavior::Status(503, None));
    app.receiver.set("b-dies", Behavior::Status(500, None));
    let dead_a = app.deliver(&key_a, ch_a, json!({ "n": 1 })).await;
    let dead_b = app.deliver(&key_b, ch_b, json!({ "n": 2 })).await;
    app.wait_delivery(dead_a, "dead", Duration::from_secs(30))
        .await;
    app.wait_delivery(dead_b, "dead", Duration::from_secs(30))
        .await;
    // Each death enqueued its alert in the transaction that made it dead: the counts are final.
    assert_eq!(alert_jobs(&pool, tenant_a, "delivery.dead").await, 1);
    assert_eq!(alert_jobs(&pool, tenant_b, "delivery.dead").await, 1);
    wait_all_sent(&app, &pool, tenant_a, "a-oncall").await;
    wait_all_sent(&app, &pool, tenant_b, "b-oncall").await;

    let got = app.alerts("a-oncall");
    assert_eq!(got.len(), 1, "exactly one alert: {got:#?}");
    let a = &got[0];
    assert_eq!(a["type"], "delivery.dead");
    let d = &a["data"];
    assert_eq!(d["tenant_id"], tenant_a.to_string());
    assert_eq!(d["channel_id"], ch_a.to_string());
    assert_eq!(d["delivery_id"], dead_a.to_string());
    assert_eq!(d["event_type"], "test.event");
    assert_eq!(
        d["message_id"],
        Value::Null,
        "enqueued on its own, not from a message"
    );
    assert_eq!(d["attempts"], 3);
    assert!(
        d["last_error"].as_str().unwrap().contains("503"),
        "last error: {}",
        d["last_error"]
    );
    assert_eq!(d["to_state"], "closed");
    assert!(app
        .receiver
        .received("a-oncall")
        .iter()
        .all(|r| r.signature_ok == Some(true)));
    // The other tenant's death went to its own endpoint, and nothing of A's did.
    let b = app.alerts("b-oncall");
    assert_eq!(b.len(), 1, "{b:#?}");
    assert_eq!(b[0]["data"]["tenant_id"], tenant_b.to_string());
    assert_eq!(b[0]["data"]["delivery_id"], dead_b.to_string());
    app.stop().await;
}

/// The dead-storm scenario: 200 deliveries of one channel die (410, permanent) on three worker
/// nodes within one 20 s window, with the allowance of 5 per window. The tenant hears exactly
/// 5 `delivery.dead` and, when the window ends, one `deliveries.dead` with count 195 and the
/// first 10 of those ids — 6 requests instead of 200.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_dead_storm_on_one_channel_sends_the_allowance_and_one_summary(pool: PgPool) {
    const STORM: i64 = 200;
    const PER_WINDOW: i64 = 5;
    const WINDOW_MS: i64 = 20_000;
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let mut s = test_settings();
    s.worker.pool_default = 8;
    let nodes = spawn_workers(&pool, 3, &s);
    let (tenant, key) = app.tenant_with_alerts("acme", "oncall").await;
    let set = set_events(
        &app,
        &key,
        json!({ "dead_window_ms": WINDOW_MS, "dead_alerts_per_window": PER_WINDOW }),
    )
    .await;
    assert_eq!(set["dead_window_ms"], WINDOW_MS);
    let ch = app
        .channel_with(&key, "gone", json!({ "max_in_flight": 16 }))
        .await;
    app.receiver.set("gone", Behavior::Status(410, None));
    app.deliver_many(&key, ch, STORM as usize).await;
    app.wait_deliveries(ch, "dead", STORM, Duration::from_secs(60))
        .await;
    let spread: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM max(updated_at) - min(updated_at))::float8
         FROM deliveries WHERE channel_id = $1",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        spread * 1000.0 < WINDOW_MS as f64,
        "the storm must fit in one window for this count (it took {spread} s)"
    );
    assert_eq!(
        alert_jobs(&pool, tenant, "delivery.dead").await,
        PER_WINDOW,
        "the allowance, on three nodes"
    );
    wait_until(
        Duration::from_secs(WINDOW_MS as u64 / 1000 + 20),
        "the window's summary arrives",
        || async { !app.alerts_of("oncall", "deliveries.dead").is_empty() },
    )
    .await;
    stop_all(nodes);
    assert_eq!(alert_jobs(&pool, tenant, "deliveries.dead").await, 1);
    let got = app.alerts("oncall");
    let dead = app.alerts_of("oncall", "delivery.dead");
    let summaries = app.alerts_of("oncall", "deliveries.dead");
    println!(
        "{}",
        json!({
            "scenario": "200 deliveries dying (410) on one channel, 3 nodes, window 20 s, 5 per window",
            "delivery.dead": dead.len(),
            "deliveries.dead": summaries.len(),
            "requests_to_alert_endpoint": got.len(),
        })
    );
    assert_eq!(got.len() as i64, PER_WINDOW + 1, "{got:#?}");
    assert_eq!(dead.len() as i64, PER_WINDOW);
    let sum = &summaries[0]["data"];
    assert_eq!(sum["count"], STORM - PER_WINDOW);
    assert_eq!(sum["channel_id"], ch.to_string());
    assert_eq!(sum["window_ms"], WINDOW_MS);
    let ids = sum["delivery_ids"].as_array().unwrap();
    assert_eq!(ids.len(), 10);
    let individually: Vec<&Value> = dead.iter().map(|a| &a["data"]["delivery_id"]).collect();
    assert!(
        ids.iter().all(|id| !individually.contains(&id)),
        "a summarised death is not also alerted one by one"
    );
    assert!(app
        .receiver
        .received("oncall")
        .iter()
        .all(|r| r.signature_ok == Some(true)));
    app.stop().await;
}

/// The flapping scenario: an endpoint answering 200 and 503 in turn (a failed share of 50 %,
/// over the 30 % threshold) while the circuit stays closed (never 10 failures in a row), then
/// healthy. Exactly one `channel.failing` for the whole streak, then one `channel.recovered`
/// (measured: 207 requests, 60 failed attempts, 152 deliveries; 1 + 1 alerts).
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_flapping_endpoint_sends_failing_once_per_streak_then_recovered(pool: PgPool) {
    const WINDOW_MS: i64 = 3_000;
    let app = TestApp::spawn_with(pool.clone(), |s| s.circuit.failure_threshold = 10).await;
    let (tenant, key) = app.tenant_with_alerts("acme", "oncall").await;
    set_events(
        &app,
        &key,
        json!({ "channel_failing": true, "channel_recovered": true, "delivery_dead": false,
                "failing_window_ms": WINDOW_MS, "failing_threshold_percent": 30,
                "failing_min_attempts": 10 }),
    )
    .await;
    let ch = app.channel(&key, "flaky").await;
    // 120 requests alternating 200 / 503, then 200 for good.
    let mut seq: Vec<Behavior> = (0..120)
        .map(|i| Behavior::Status(if i % 2 == 0 { 200 } else { 503 }, None))
        .collect();
    seq.push(Behavior::Status(200, None));
    app.receiver.set("flaky", Behavior::Sequence(seq));
    // A steady trickle: the share needs attempts in the window, while flapping and after.
    let mut sent = 0;
    let started = std::time::Instant::now();
    while app.alerts_of("oncall", "channel.recovered").is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no channel.recovered within 60 s"
        );
        app.deliver_many(&key, ch, 4).await;
        sent += 4;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let flapped = app.receiver.received("flaky").len();
    let failing = app.alerts_of("oncall", "channel.failing");
    let recovered = app.alerts_of("oncall", "channel.recovered");
    let failed_attempts: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM delivery_attempts WHERE channel_id = $1 AND outcome <> 'success'",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    println!(
        "{}",
        json!({
            "scenario": "200/503 alternating for 120 requests, then 200; threshold 30 %, window 3 s, min 10 attempts",
            "deliveries": sent, "requests": flapped, "failed_attempts": failed_attempts,
            "channel.failing": failing.len(), "channel.recovered": recovered.len(),
            "circuit.opened": audit_count(&pool, ch, &["circuit.opened"]).await,
        })
    );
    assert_eq!(
        audit_count(&pool, ch, &["circuit.opened"]).await,
        0,
        "the circuit stayed closed"
    );
    assert!(
        failed_attempts >= 30,
        "it flapped: {failed_attempts} failures"
    );
    assert_eq!(alert_jobs(&pool, tenant, "channel.failing").await, 1);
    assert_eq!(alert_jobs(&pool, tenant, "channel.recovered").await, 1);
    assert_eq!(failing.len(), 1, "one failing per streak");
    assert_eq!(recovered.len(), 1);
    let f = &failing[0]["data"];
    assert_eq!(f["channel_id"], ch.to_string());
    assert_eq!(f["to_state"], "closed");
    assert_eq!(f["threshold_percent"], 30);
    assert!(f["failed"].as_i64().unwrap() * 100 >= 30 * f["attempts_in_window"].as_i64().unwrap());
    let r = &recovered[0]["data"];
    assert!(r["failed"].as_i64().unwrap() * 100 < 30 * r["attempts_in_window"].as_i64().unwrap());
    assert!(r["failing_since"].is_string());
    // A delivery whose 3 attempts all met a 503 died; delivery.dead is off here, so the
    // endpoint heard the streak's two alerts and nothing else.
    println!("dead deliveries: {}", count_status(&pool, ch, "dead").await);
    wait_all_sent(&app, &pool, tenant, "oncall").await;
    assert_eq!(app.alerts("oncall").len(), 2, "{:#?}", app.alerts("oncall"));
    assert!(app
        .receiver
        .received("oncall")
        .iter()
        .all(|r| r.signature_ok == Some(true)));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn switched_off_kinds_send_nothing_and_bad_settings_are_a_422(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.circuit.failure_threshold = 100).await;
    let (tenant, key) = app.tenant_with_alerts("quiet", "oncall").await;
    // Out of bounds: a 422 naming the field, nothing changed.
    for (body, field) in [
        (
            json!({ "dead_window_ms": 10 }),
            "alert_events.dead_window_ms",
        ),
        (
            json!({ "failing_threshold_percent": 101 }),
            "alert_events.failing_threshold_percent",
        ),
        (
            json!({ "dead_alerts_per_window": -1 }),
            "alert_events.dead_alerts_per_window",
        ),
    ] {
        let (s, v) = app
            .patch("/api/v1/tenant", &key, &json!({ "alert_events": body }))
            .await;
        assert_eq!(s, 422, "{v}");
        assert_eq!(v["field"], field, "{v}");
    }
    let (s, v) = app
        .patch(
            "/api/v1/tenant",
            &key,
            &json!({ "alert_events": { "delivery_dead": null } }),
        )
        .await;
    assert_eq!(s, 422, "null is not a setting: {v}");
    // delivery.dead off; failing stays off (the default).
    let set = set_events(&app, &key, json!({ "delivery_dead": false })).await;
    assert_eq!(set["delivery_dead"], false);
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = 'tenant.alert_events_changed'",
    )
    .bind(tenant)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(audited, 1, "one audit row for the one change");
    let ch = app.channel(&key, "dies").await;
    app.receiver.set("dies", Behavior::Status(404, None));
    app.deliver_many(&key, ch, 30).await;
    app.wait_deliveries(ch, "dead", 30, Duration::from_secs(30))
        .await;
    // Every death's transaction has committed: nothing was enqueued, nothing is coming.
    assert_eq!(all_alert_jobs(&pool, tenant).await, 0);
    assert!(app.receiver.received("oncall").is_empty());
    app.stop().await;
}
