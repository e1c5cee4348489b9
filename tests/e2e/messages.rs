//! Messages and fan-out (`POST /api/v1/messages`), signing-secret rotation with a grace period,
//! redirects, and the ingress limit counting a fan-out as one request.

use breakwater::Role;
use breakwater_e2e::{eventually, wait_until, Behavior, TestApp};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Creates a channel to receiver endpoint `endpoint` with an event-type filter (`null` = every
/// type) and registers its secret with the receiver.
async fn channel_with_filter(app: &TestApp, key: &str, endpoint: &str, filter: Value) -> Uuid {
    let (s, v) = app
        .post(
            "/api/v1/channels",
            key,
            &json!({ "url": app.receiver.url(endpoint), "event_types": filter }),
        )
        .await;
    assert_eq!(s, 201, "create channel: {v}");
    let canonical = filter.as_array().map(|types| {
        let set: BTreeSet<&str> = types.iter().map(|t| t.as_str().unwrap()).collect();
        json!(set)
    });
    assert_eq!(
        v["event_types"],
        canonical.unwrap_or(Value::Null),
        "the filter is shown sorted, without repeats"
    );
    app.receiver
        .set_secret(endpoint, v["signing_secret"].as_str().unwrap());
    v["id"].as_str().unwrap().parse().unwrap()
}

/// `POST /api/v1/messages` with an optional `Idempotency-Key`; status and body.
async fn send(app: &TestApp, key: &str, body: &Value, idem: Option<&str>) -> (u16, Value) {
    let mut req = app
        .http
        .post(format!("{}/api/v1/messages", app.api))
        .bearer_auth(key)
        .json(body);
    if let Some(k) = idem {
        req = req.header("Idempotency-Key", k);
    }
    let r = req.send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

/// The channel ids of a 202's `deliveries`.
fn channels_of(v: &Value) -> BTreeSet<Uuid> {
    v["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["channel_id"].as_str().unwrap().parse().unwrap())
        .collect()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_message_reaches_exactly_the_channels_whose_filter_matches(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    let (_, other_key) = app.tenant("globex", "default").await;
    let orders = channel_with_filter(
        &app,
        &key,
        "orders",
        json!(["order.paid", "order.created", "order.paid"]),
    )
    .await;
    let everything = channel_with_filter(&app, &key, "everything", Value::Null).await;
    let billing = channel_with_filter(&app, &key, "billing", json!(["invoice.paid"])).await;
    let paused = channel_with_filter(&app, &key, "paused", json!(["order.created"])).await;
    // Another tenant's channel with no filter: never touched by acme's messages.
    let foreign = channel_with_filter(&app, &other_key, "foreign", Value::Null).await;
    app.pause(&key, paused).await;

    let (s, v) = send(
        &app,
        &key,
        &json!({ "event_type": "order.created", "payload": { "order": 7, "total": 12.50 } }),
        None,
    )
    .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["idempotent_replay"], false);
    let message: Uuid = v["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        channels_of(&v),
        BTreeSet::from([orders, everything, paused]),
        "the subscribed channels and only those: {v}"
    );
    for d in v["deliveries"].as_array().unwrap() {
        let want = if d["channel_id"] == json!(paused) {
            "paused"
        } else {
            "pending"
        };
        assert_eq!(
            d["status"], want,
            "a paused channel's delivery is parked: {d}"
        );
    }

    // Each subscribed endpoint gets the event once, signed with its own secret, with the message
    // id as webhook-id and the same body everywhere.
    for ep in ["orders", "everything"] {
        app.wait_received(ep, 1, Duration::from_secs(10)).await;
    }
    let (a, b) = (
        app.receiver.received("orders"),
        app.receiver.received("everything"),
    );
    for r in [&a[0], &b[0]] {
        assert_eq!(r.webhook_id.as_deref(), Some(message.to_string().as_str()));
        assert_eq!(r.signature_ok, Some(true));
    }
    assert_eq!(a[0].body, b[0].body, "one message, one body");
    let body: Value = serde_json::from_slice(&a[0].body).unwrap();
    assert_eq!(body["type"], "order.created");
    assert_eq!(body["data"], json!({ "order": 7, "total": 12.50 }));

    // The paused channel holds its delivery until resumed, then gets it.
    assert_eq!(app.receiver.count("paused"), 0);
    app.resume(&key, paused).await;
    app.wait_received("paused", 1, Duration::from_secs(10))
        .await;

    // The message shows each channel's delivery, all delivered in the end.
    assert!(
        eventually(Duration::from_secs(10), || async {
            let (_, m) = app.get(&format!("/api/v1/messages/{message}"), &key).await;
            m["deliveries"]
                .as_array()
                .is_some_and(|d| d.len() == 3 && d.iter().all(|d| d["status"] == "delivered"))
        })
        .await
    );
    let (s, m) = app.get(&format!("/api/v1/messages/{message}"), &key).await;
    assert_eq!(s, 200);
    assert_eq!(m["event_type"], "order.created");
    assert_eq!(m["payload"], json!({ "order": 7, "total": 12.50 }));
    assert_eq!(m["channels"], Value::Null);
    // Each delivery is an ordinary delivery too, pointing back at its message.
    let d0 = m["deliveries"][0]["delivery_id"].as_str().unwrap();
    let (s, d) = app.get(&format!("/api/v1/deliveries/{d0}"), &key).await;
    assert_eq!(s, 200);
    assert_eq!(d["message_id"], json!(message));
    assert_eq!(d["payload"], json!({ "order": 7, "total": 12.50 }));
    assert_eq!(d["attempt_log"][0]["status_code"], 200);

    // Named channels: only those of them that subscribe.
    let (s, v) = send(
        &app,
        &key,
        &json!({ "event_type": "order.created", "payload": {}, "channels": [billing, orders] }),
        None,
    )
    .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(channels_of(&v), BTreeSet::from([orders]));
    // Another tenant's channel, or a missing one, is a 422 naming `channels`; nothing is sent.
    for bad in [foreign, Uuid::now_v7()] {
        let (s, v) = send(
            &app,
            &key,
            &json!({ "event_type": "order.created", "payload": {}, "channels": [orders, bad] }),
            None,
        )
        .await;
        assert_eq!(s, 422, "{v}");
        assert_eq!(v["field"], "channels");
    }
    let (s, v) = send(
        &app,
        &key,
        &json!({ "event_type": "order.created", "payload": {}, "channels": [] }),
        None,
    )
    .await;
    assert_eq!((s, v["field"].clone()), (422, json!("channels")));

    // No subscriber: accepted, delivered nowhere.
    let (s, v) = send(
        &app,
        &key,
        &json!({ "event_type": "nobody.cares", "payload": 1 }),
        None,
    )
    .await;
    assert_eq!(s, 202);
    assert_eq!(channels_of(&v), BTreeSet::from([everything]));

    // Filters change with PATCH; null clears one; bad ones are 422.
    let (s, v) = app
        .http
        .patch(format!("{}/api/v1/channels/{billing}", app.api))
        .bearer_auth(&key)
        .json(&json!({ "event_types": null }))
        .send()
        .await
        .map(|r| (r.status().as_u16(), r))
        .unwrap();
    assert_eq!(s, 200);
    assert_eq!(v.json::<Value>().await.unwrap()["event_types"], Value::Null);
    for bad in [
        json!([]),
        json!(["has space"]),
        json!(["a".repeat(101)]),
        json!("order.paid"),
    ] {
        let r = app
            .http
            .patch(format!("{}/api/v1/channels/{orders}", app.api))
            .bearer_auth(&key)
            .json(&json!({ "event_types": bad }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 422, "{bad}");
    }
    let (s, v) = send(
        &app,
        &key,
        &json!({ "event_type": "invoice.paid", "payload": {} }),
        None,
    )
    .await;
    assert_eq!(s, 202);
    assert_eq!(channels_of(&v), BTreeSet::from([everything, billing]));

    // Another tenant cannot read the message.
    let (s, _) = app
        .get(&format!("/api/v1/messages/{message}"), &other_key)
        .await;
    assert_eq!(s, 404);
    let (s, _) = app
        .get(&format!("/api/v1/messages/{}", Uuid::now_v7()), &key)
        .await;
    assert_eq!(s, 404);

    // Nothing was ever made for the other tenant's channel, so nothing reached it.
    assert_eq!(app.receiver.count("foreign"), 0);
    let foreign_rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE channel_id = $1")
            .bind(foreign)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(foreign_rows, 0);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn purging_a_message_deliverys_payload_purges_the_message_once_all_are_final(pool: PgPool) {
    // A message's deliveries share its payload (stored once, on the message): purging one
    // purges the message's, so it waits until none of them may still be sent.
    let app = TestApp::spawn(pool.clone()).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let sent = channel_with_filter(&app, &key, "sent", Value::Null).await;
    let held = channel_with_filter(&app, &key, "held", Value::Null).await;
    app.pause(&key, held).await;
    let (s, v) = send(
        &app,
        &key,
        &json!({ "event_type": "card.saved", "payload": { "card": "4111-1111" } }),
        None,
    )
    .await;
    assert_eq!(s, 202, "{v}");
    let message: Uuid = v["id"].as_str().unwrap().parse().unwrap();
    let of = |channel: Uuid| -> Uuid {
        v["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["channel_id"] == json!(channel))
            .unwrap()["delivery_id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (delivered, waiting) = (of(sent), of(held));
    wait_until(
        Duration::from_secs(10),
        "the unpaused channel's delivery is delivered",
        || {
            let app = &app;
            async move { app.delivery_status(delivered).await == "delivered" }
        },
    )
    .await;
    let purge = |id: Uuid| {
        let (app, key) = (&app, key.clone());
        async move {
            app.delete(&format!("/api/v1/deliveries/{id}/payload"), &key)
                .await
        }
    };

    // The paused channel's delivery may still be sent: 409, nothing purged.
    let (s, p, _) = purge(delivered).await;
    assert_eq!(s, 409, "{p}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("1 of them may still be sent"),
        "{p}"
    );
    let (_, m) = app.get(&format!("/api/v1/messages/{message}"), &key).await;
    assert_eq!(m["payload"]["card"], "4111-1111", "{m}");

    // Once it is cancelled, every delivery of the message is final: purged, both marked.
    let (s, _, _) = app.cancel(&key, waiting).await;
    assert_eq!(s, 200);
    let (s, p, _) = purge(delivered).await;
    assert_eq!(s, 204, "{p}");
    for id in [delivered, waiting] {
        let (_, d) = app.get(&format!("/api/v1/deliveries/{id}"), &key).await;
        assert!(d["payload"].is_null(), "{d}");
        assert!(d["payload_purged_at"].is_string(), "{d}");
    }
    let stored: String = sqlx::query_scalar("SELECT payload FROM messages WHERE id = $1")
        .bind(message)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, "null", "the payload is gone from the database");
    // Again (through the other delivery): nothing more to do, no second audit row.
    assert_eq!(purge(waiting).await.0, 204);
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = 'delivery.payload_purged'",
    )
    .bind(tenant)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(audited, 2, "one audit row per delivery of the message");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_repeated_idempotency_key_replays_the_message_once(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    let a = channel_with_filter(&app, &key, "a", Value::Null).await;
    let b = channel_with_filter(&app, &key, "b", json!(["order.created"])).await;
    let body = json!({ "event_type": "order.created", "payload": { "n": 1 } });

    // Five identical requests at once: one message, one delivery per channel.
    let answers =
        futures::future::join_all((0..5).map(|_| send(&app, &key, &body, Some("order-1-created"))))
            .await;
    let first = &answers[0].1;
    for (s, v) in &answers {
        assert_eq!(*s, 202, "{v}");
        assert_eq!(v["id"], first["id"]);
        assert_eq!(channels_of(v), BTreeSet::from([a, b]));
        let ids: Vec<&Value> = v["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| &d["delivery_id"])
            .collect();
        let first_ids: Vec<&Value> = first["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| &d["delivery_id"])
            .collect();
        assert_eq!(ids, first_ids, "the same deliveries");
    }
    assert_eq!(
        answers
            .iter()
            .filter(|(_, v)| v["idempotent_replay"] == false)
            .count(),
        1,
        "exactly one created it"
    );
    for ep in ["a", "b"] {
        app.wait_received(ep, 1, Duration::from_secs(10)).await;
    }

    // A replay after delivery answers with the current statuses.
    let message = first["id"].as_str().unwrap().to_string();
    assert!(
        eventually(Duration::from_secs(10), || async {
            let (_, m) = app.get(&format!("/api/v1/messages/{message}"), &key).await;
            m["deliveries"]
                .as_array()
                .is_some_and(|d| d.iter().all(|d| d["status"] == "delivered"))
        })
        .await
    );
    let (s, v) = send(&app, &key, &body, Some("order-1-created")).await;
    assert_eq!(s, 202);
    assert_eq!(v["idempotent_replay"], true);
    assert!(v["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["status"] == "delivered"));

    // The same key with another payload or other channels is a conflict; nothing is sent.
    for other in [
        json!({ "event_type": "order.created", "payload": { "n": 2 } }),
        json!({ "event_type": "order.created", "payload": { "n": 1 }, "channels": [a] }),
    ] {
        let (s, v) = send(&app, &key, &other, Some("order-1-created")).await;
        assert_eq!(s, 409, "{v}");
    }
    // Message keys are their own namespace: the per-channel enqueue may use the same key.
    let r = app
        .http
        .post(format!("{}/api/v1/channels/{a}/deliveries", app.api))
        .bearer_auth(&key)
        .header("Idempotency-Key", "order-1-created")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    app.wait_received("a", 2, Duration::from_secs(10)).await;
    // One message, one delivery per channel (and the direct one): nothing else to send.
    let (messages, deliveries): (i64, i64) =
        sqlx::query_as("SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM deliveries)")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((messages, deliveries), (1, 3));
    assert_eq!(app.receiver.count("b"), 1);
    app.stop().await;
}

/// The `sqlx::query` events (one per statement sent) seen on the thread it is the default of.
#[derive(Clone, Default)]
struct Statements(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Statements {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Summary(String);
        impl tracing::field::Visit for Summary {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "summary" {
                    self.0 = format!("{v:?}");
                }
            }
            fn record_str(&mut self, f: &tracing::field::Field, v: &str) {
                if f.name() == "summary" {
                    self.0 = v.to_string();
                }
            }
        }
        if event.metadata().target() == "sqlx::query" {
            let mut s = Summary(String::new());
            event.record(&mut s);
            self.0.lock().unwrap().push(s.0);
        }
    }
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_message_to_1000_channels_is_one_request_one_transaction_and_few_statements(
    pool: PgPool,
) {
    // The API alone: no worker touches the rows, so their xmin still names the transaction that
    // wrote them.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (tenant, key) = app.tenant("broadcaster", "default").await;
    // 1000 subscribed channels and 50 that subscribe to something else, made with SQL (fast).
    let url = app.receiver.url("fan");
    for (n, filter) in [(1000, "order.created"), (50, "other.event")] {
        sqlx::query(
            "WITH c AS (
                 INSERT INTO channels (id, tenant_id, url, signing_secret, event_types)
                 SELECT gen_random_uuid(), $1, $2, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', ARRAY[$4]
                 FROM generate_series(1, $3)
                 RETURNING id)
             INSERT INTO job_groups (group_id, share_key) SELECT id, $1 FROM c",
        )
        .bind(tenant)
        .bind(&url)
        .bind(n)
        .bind(filter)
        .execute(&pool)
        .await
        .unwrap();
    }

    let t0 = Instant::now();
    let (s, v) = send(
        &app,
        &key,
        &json!({ "event_type": "order.created", "payload": { "sku": "x-1", "qty": 3 } }),
        None,
    )
    .await;
    let took = t0.elapsed();
    assert_eq!(s, 202, "{v}");
    println!(
        "POST /api/v1/messages to 1000 channels: {} ms (HTTP round trip, debug build)",
        took.as_millis()
    );
    let message: Uuid = v["id"].as_str().unwrap().parse().unwrap();
    let deliveries = v["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 1000);
    assert_eq!(channels_of(&v).len(), 1000, "one delivery per channel");

    // One transaction: the message, its 1000 deliveries and their 1000 jobs share one xmin.
    let (rows, xids): (i64, i64) = sqlx::query_as(
        "WITH w AS (
             SELECT xmin::text AS x FROM messages WHERE id = $1
             UNION ALL SELECT xmin::text FROM deliveries WHERE message_id = $1
             UNION ALL SELECT j.xmin::text FROM jobs j JOIN deliveries d
                 ON j.unique_key = 'delivery:' || d.id WHERE d.message_id = $1)
         SELECT count(*), count(DISTINCT x) FROM w",
    )
    .bind(message)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (rows, xids),
        (2001, 1),
        "one transaction wrote all 2001 rows"
    );
    // Each job is on the tenant's tier queue, in its channel's group, due now.
    let ok_jobs: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs j JOIN deliveries d ON j.unique_key = 'delivery:' || d.id
         WHERE d.message_id = $1 AND j.queue = 'deliveries' AND j.group_id = d.channel_id
           AND j.state = 'available' AND j.kind = 'deliver'",
    )
    .bind(message)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(ok_jobs, 1000);
    // The payload is stored once, on the message.
    let copies: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries WHERE message_id = $1 AND payload IS NOT NULL",
    )
    .bind(message)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(copies, 0);

    // A bounded number of statements: the same fan-out through the domain call, on a thread of
    // its own whose every statement is counted.
    let connect = (*pool.connect_options()).clone();
    let (statements, took) = std::thread::spawn(move || {
        let counted = Statements::default();
        let subscriber = {
            use tracing_subscriber::layer::SubscriberExt;
            tracing_subscriber::registry().with(counted.clone())
        };
        let _default = tracing::subscriber::set_default(subscriber);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(1)
                .connect_with(connect)
                .await
                .unwrap();
            let mut conn = pool.acquire().await.unwrap();
            // Warm the connection (its first statements prepare type information).
            sqlx::query("SELECT 1").execute(&mut *conn).await.unwrap();
            drop(conn);
            counted.0.lock().unwrap().clear();
            let t0 = Instant::now();
            let mut tx = pool.begin().await.unwrap();
            let sent = breakwater_core::messages::send(
                &mut tx,
                tenant,
                breakwater_core::Tier::Default,
                &breakwater_core::messages::NewMessage {
                    event_type: "order.created".into(),
                    payload: serde_json::value::RawValue::from_string("{\"n\":2}".into()).unwrap(),
                    idempotency_key: Some("second".into()),
                    channels: None,
                },
                3,
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
            let took = t0.elapsed();
            assert_eq!(sent.deliveries.len(), 1000);
            let statements = counted.0.lock().unwrap().clone();
            (statements, took)
        })
    })
    .join()
    .unwrap();
    println!(
        "messages::send to 1000 channels: {} ms, {} statements: {statements:?}",
        took.as_millis(),
        statements.len()
    );
    assert!(
        (3..=10).contains(&statements.len()),
        "a bounded number of statements, not one per channel: {statements:?}"
    );
    app.stop().await;
}

/// Verifies a received request with `secret` using the Standard Webhooks library.
fn verifies(r: &breakwater::receiver::Received, secret: &str) -> bool {
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(
        "webhook-id",
        r.webhook_id.as_deref().unwrap().parse().unwrap(),
    );
    headers.insert(
        "webhook-timestamp",
        r.webhook_timestamp.unwrap().to_string().parse().unwrap(),
    );
    headers.insert(
        "webhook-signature",
        r.webhook_signature.as_deref().unwrap().parse().unwrap(),
    );
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(&r.body, &headers)
        .is_ok()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_rotated_secret_signs_beside_the_old_one_for_the_grace_period_only(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    let (_, other_key) = app.tenant("globex", "default").await;
    let (s, v) = app
        .post(
            "/api/v1/channels",
            &key,
            &json!({ "url": app.receiver.url("rot") }),
        )
        .await;
    assert_eq!(s, 201);
    let channel = v["id"].as_str().unwrap().to_string();
    let old = v["signing_secret"].as_str().unwrap().to_string();

    // Out of range, or another tenant's channel: refused, nothing rotated.
    let (s, v) = app
        .post(
            &format!("/api/v1/channels/{channel}/secret/rotate"),
            &key,
            &json!({ "grace_ms": 7 * 86_400_000_i64 + 1 }),
        )
        .await;
    assert_eq!((s, v["field"].clone()), (422, json!("grace_ms")));
    let (s, _) = app
        .post(
            &format!("/api/v1/channels/{channel}/secret/rotate"),
            &other_key,
            &json!({}),
        )
        .await;
    assert_eq!(s, 404);

    // Rotate with a 2-s grace period.
    let (s, v) = app
        .post(
            &format!("/api/v1/channels/{channel}/secret/rotate"),
            &key,
            &json!({ "grace_ms": 2_000 }),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let new = v["signing_secret"].as_str().unwrap().to_string();
    assert!(new.starts_with("whsec_") && new != old);
    assert!(v["previous_secret_expires_at"].is_string());

    // Inside the grace period: two signatures, new first; a receiver holding either verifies.
    let ch: Uuid = channel.parse().unwrap();
    app.deliver(&key, ch, json!({ "n": 1 })).await;
    app.wait_received("rot", 1, Duration::from_secs(5)).await;
    let during = app.receiver.received("rot").remove(0);
    let sig = during.webhook_signature.clone().unwrap();
    assert_eq!(sig.split(' ').count(), 2, "v1,<new> v1,<old>: {sig}");
    assert!(verifies(&during, &new), "the new secret verifies");
    assert!(verifies(&during, &old), "the old secret verifies");
    let stranger = breakwater_core::signing::generate_secret();
    assert!(!verifies(&during, &stranger));

    // After it: only the new signature. A delivery reads the secrets when it is sent, on the
    // database clock, so once the grace period is over there, the next one is signed once.
    wait_until(
        Duration::from_secs(10),
        "the grace period is over on the database clock",
        || async {
            sqlx::query_scalar::<_, bool>(
                "SELECT coalesce(previous_secret_expires_at <= now(), true) FROM channels WHERE id = $1",
            )
            .bind(ch)
            .fetch_one(&app.pool)
            .await
            .unwrap()
        },
    )
    .await;
    app.deliver(&key, ch, json!({ "n": 2 })).await;
    app.wait_received("rot", 2, Duration::from_secs(5)).await;
    let after = app.receiver.received("rot").remove(1);
    let sig = after.webhook_signature.clone().unwrap();
    assert!(
        !sig.contains(' '),
        "one signature after the grace period: {sig}"
    );
    assert!(verifies(&after, &new), "the new secret verifies");
    assert!(!verifies(&after, &old), "the old secret no longer does");

    // Without a body: the default grace period, 24 h.
    let r = app
        .http
        .post(format!(
            "{}/api/v1/channels/{channel}/secret/rotate",
            app.api
        ))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    let until: chrono::DateTime<chrono::Utc> = v["previous_secret_expires_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let hours = (until - chrono::Utc::now()).num_minutes() as f64 / 60.0;
    assert!((23.9..=24.1).contains(&hours), "{hours} h");
    let (_, view) = app.get(&format!("/api/v1/channels/{channel}"), &key).await;
    assert_eq!(
        view["previous_secret_expires_at"],
        v["previous_secret_expires_at"]
    );
    assert!(view.get("signing_secret").is_none() && !view.to_string().contains("whsec_"));

    // Audited, never with a secret.
    let rows: Vec<Value> = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE action = 'channel.secret_rotated' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["grace_ms"], 2_000);
    assert!(rows.iter().all(|r| !r.to_string().contains("whsec_")));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_redirect_is_a_retried_failure_never_followed_and_logged(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, ch) = app.tenant_with_channel("moved").await;
    let elsewhere = format!("{}/secret-path?token=abc", app.receiver.url("elsewhere"));
    app.receiver.set(
        "moved",
        Behavior::Sequence(vec![
            Behavior::Redirect(301, elsewhere),
            Behavior::Status(200, None),
        ]),
    );
    let id = app.deliver(&key, ch, json!({ "n": 1 })).await;
    // Delivered on a later attempt.
    app.wait_delivery(id, "delivered", Duration::from_secs(10))
        .await;
    assert_eq!(app.receiver.count("moved"), 2);
    assert_eq!(
        app.receiver.count("elsewhere"),
        0,
        "the Location is never followed"
    );
    let (_, v) = app.get(&format!("/api/v1/deliveries/{id}"), &key).await;
    let log = v["attempt_log"].as_array().unwrap();
    assert_eq!(log.len(), 2, "{v}");
    assert_eq!(log[0]["status_code"], 301);
    assert_eq!(log[0]["outcome"], "transient");
    let error = log[0]["error"].as_str().unwrap();
    let origin = app.receiver.url("");
    assert_eq!(
        error,
        format!(
            "HTTP 301 redirect to {}/… (not followed)",
            origin.trim_end_matches('/')
        ),
        "the Location, cut to its origin"
    );
    assert!(!error.contains("token") && !error.contains("secret-path"));
    assert_eq!(log[1]["status_code"], 200);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_fan_out_counts_as_one_request_against_the_ingress_limit(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.api.ingress_per_second = 1;
        // One per second, two at once: the third request within a second is refused.
        s.api.ingress_burst = 2;
    })
    .await;
    let (tenant, key) = app.tenant("acme", "default").await;
    // Three channels made with SQL, so that the key's budget is untouched.
    for ep in ["a", "b", "c"] {
        let secret = breakwater_core::signing::generate_secret();
        sqlx::query(
            "WITH c AS (
                 INSERT INTO channels (id, tenant_id, url, signing_secret)
                 VALUES (gen_random_uuid(), $1, $2, $3) RETURNING id)
             INSERT INTO job_groups (group_id, share_key) SELECT id, $1 FROM c",
        )
        .bind(tenant)
        .bind(app.receiver.url(ep))
        .bind(&secret)
        .execute(&app.pool)
        .await
        .unwrap();
        app.receiver.set_secret(ep, &secret);
    }
    let body = json!({ "event_type": "e", "payload": {} });
    for _ in 0..2 {
        let (s, v) = send(&app, &key, &body, None).await;
        assert_eq!(s, 202, "{v}");
        assert_eq!(v["deliveries"].as_array().unwrap().len(), 3);
    }
    let r = app
        .http
        .post(format!("{}/api/v1/messages", app.api))
        .bearer_auth(&key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        429,
        "the third request within the burst"
    );
    assert!(r.headers().contains_key("retry-after"));
    // Each of the two messages reached every channel.
    for ep in ["a", "b", "c"] {
        app.wait_received(ep, 2, Duration::from_secs(10)).await;
        assert!(app
            .receiver
            .received(ep)
            .iter()
            .all(|r| r.signature_ok == Some(true)));
    }
    app.stop().await;
}

#[test]
fn the_default_ingress_limit_is_generous() {
    let s = breakwater::config::Settings::load(None).expect("embedded defaults");
    assert_eq!(
        (s.api.ingress_per_second, s.api.ingress_burst),
        (1_000, 2_000)
    );
    let d = breakwater_api::ApiConfig::default();
    assert_eq!((d.ingress_per_second, d.ingress_burst), (1_000, 2_000));
}
