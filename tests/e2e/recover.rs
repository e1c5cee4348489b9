//! Resend and recover: resending one final delivery
//! (`POST /api/v1/deliveries/{id}/resend`), recovering a channel's final deliveries since a time
//! (`POST /api/v1/channels/{id}/recover`), and the tenant-wide delivery search
//! (`GET /api/v1/deliveries`). Real Postgres, a real receiver on loopback.

use breakwater_e2e::http::{assert_invalid, assert_ok, assert_problem, get, post};
use breakwater_e2e::{audit_count, Behavior, TestApp};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::time::Duration;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(10);

fn resend_path(id: Uuid) -> String {
    format!("/api/v1/deliveries/{id}/resend")
}

fn recover_path(channel: Uuid) -> String {
    format!("/api/v1/channels/{channel}/recover")
}

/// `POST /api/v1/channels/{channel}/recover` with `body` as `key`; asserts 200 and returns the
/// answer.
async fn recover(app: &TestApp, key: &str, channel: Uuid, body: &Value) -> Value {
    assert_ok(
        post(app, &recover_path(channel), Some(key), body).await,
        200,
    )
    .await
}

/// Enqueues one delivery of `event_type` to `channel`; returns its id.
async fn deliver_type(app: &TestApp, key: &str, channel: Uuid, event_type: &str) -> Uuid {
    let (s, v) = app
        .post(
            &format!("/api/v1/channels/{channel}/deliveries"),
            key,
            &json!({ "event_type": event_type, "payload": { "t": event_type } }),
        )
        .await;
    assert_eq!(s, 202, "enqueue: {v}");
    v["id"].as_str().unwrap().parse().unwrap()
}

/// The ids of a JSON array of ids (or of objects with an `id` or a `delivery_id`).
fn ids(v: &Value) -> Vec<Uuid> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| {
            let s = x.as_str().or_else(|| x["id"].as_str());
            let s = s.or_else(|| x["delivery_id"].as_str()).unwrap();
            s.parse().unwrap()
        })
        .collect()
}

/// The webhook-ids the receiver got at `endpoint`, in arrival order, each asserted signed
/// with the channel's secret.
fn signed_webhook_ids(app: &TestApp, endpoint: &str) -> Vec<String> {
    app.receiver
        .received(endpoint)
        .iter()
        .map(|r| {
            assert_eq!(r.signature_ok, Some(true), "every request verifies");
            r.webhook_id.clone().expect("a webhook-id")
        })
        .collect()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_resent_delivered_or_dead_delivery_arrives_again_with_the_same_webhook_id(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "ok").await;

    // Delivered, then resent: a second request with the same webhook-id, a fresh signature.
    let delivered = app.deliver(&key, channel, json!({ "order": 1 })).await;
    app.wait_delivery(delivered, "delivered", WAIT).await;
    let v = assert_ok(
        post(&app, &resend_path(delivered), Some(&key), &json!({})).await,
        202,
    )
    .await;
    assert_eq!(v["id"], json!(delivered));
    assert!(
        ["pending", "delivering", "delivered"].contains(&v["status"].as_str().unwrap()),
        "{v}"
    );
    app.wait_received("ok", 2, WAIT).await;
    app.wait_delivery(delivered, "delivered", WAIT).await;
    assert_eq!(
        signed_webhook_ids(&app, "ok"),
        [delivered.to_string(), delivered.to_string()],
        "a resend carries the delivery's webhook-id again"
    );
    let bodies: Vec<Value> = app
        .receiver
        .received("ok")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(bodies[0], bodies[1], "the same message, byte for byte");
    let read = assert_ok(
        get(&app, &format!("/api/v1/deliveries/{delivered}"), Some(&key)).await,
        200,
    )
    .await;
    assert_eq!(read["attempts"], 2, "{read}");
    assert_eq!(read["attempt_log"].as_array().unwrap().len(), 2);
    assert!(read["delivered_at"].is_string());

    // Dead (a 410 is permanent), then resent once the endpoint is fixed.
    app.receiver.set("ok", Behavior::Status(410, None));
    let dead = app.deliver(&key, channel, json!({ "order": 2 })).await;
    app.wait_delivery(dead, "dead", WAIT).await;
    app.receiver.set("ok", Behavior::Status(200, None));
    assert_ok(
        post(&app, &resend_path(dead), Some(&key), &json!({})).await,
        202,
    )
    .await;
    app.wait_received("ok", 4, WAIT).await;
    app.wait_delivery(dead, "delivered", WAIT).await;
    assert_eq!(
        &signed_webhook_ids(&app, "ok")[2..],
        [dead.to_string(), dead.to_string()]
    );

    // A delivery of a message carries the message's id, on a resend too.
    let (s, m) = app
        .post(
            "/api/v1/messages",
            &key,
            &json!({ "event_type": "order.paid", "payload": { "order": 3 } }),
        )
        .await;
    assert_eq!(s, 202, "{m}");
    let message: Uuid = m["id"].as_str().unwrap().parse().unwrap();
    let of_message: Uuid = m["deliveries"][0]["delivery_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    app.wait_delivery(of_message, "delivered", WAIT).await;
    assert_ok(
        post(&app, &resend_path(of_message), Some(&key), &json!({})).await,
        202,
    )
    .await;
    app.wait_received("ok", 6, WAIT).await;
    app.wait_delivery(of_message, "delivered", WAIT).await;
    assert_eq!(
        &signed_webhook_ids(&app, "ok")[4..],
        [message.to_string(), message.to_string()]
    );
    assert_eq!(
        audit_count(&app.pool, channel, &["delivery.resent"]).await,
        3
    );

    // A purged payload cannot be resent: 409 naming why.
    let (s, _, _) = app
        .delete(&format!("/api/v1/deliveries/{delivered}/payload"), &key)
        .await;
    assert_eq!(s, 204);
    let p = assert_problem(
        post(&app, &resend_path(delivered), Some(&key), &json!({})).await,
        409,
    )
    .await;
    assert_eq!(p["code"], "payload_purged", "{p}");

    // A portal session with the manage scope may resend (the portal is the customer's own
    // self-service); a read session may not.
    let (_, read_token) = app.portal_session(tenant, "read").await;
    let p = assert_problem(
        post(&app, &resend_path(dead), Some(&read_token), &json!({})).await,
        403,
    )
    .await;
    assert_eq!(p["code"], "forbidden");
    let (_, manage_token) = app.portal_session(tenant, "manage").await;
    assert_ok(
        post(&app, &resend_path(dead), Some(&manage_token), &json!({})).await,
        202,
    )
    .await;
    app.wait_received("ok", 7, WAIT).await;
    app.wait_delivery(dead, "delivered", WAIT).await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_resend_to_a_paused_channel_is_parked_until_it_resumes_and_a_live_one_is_409(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("ok").await;
    let id = app.deliver(&key, channel, json!({ "n": 1 })).await;
    app.wait_delivery(id, "delivered", WAIT).await;
    app.wait_received("ok", 1, WAIT).await;

    app.pause(&key, channel).await;
    let v = assert_ok(
        post(&app, &resend_path(id), Some(&key), &json!({})).await,
        202,
    )
    .await;
    assert_eq!(
        v["status"], "paused",
        "a resend to a paused channel is parked: {v}"
    );
    let parked = breakwater_queue::parked_count(&app.pool, channel)
        .await
        .unwrap();
    assert_eq!(parked, 1, "its new job waits in the parked group");

    // A delivery that is not final (this one is parked) cannot be resent: 409.
    let p = assert_problem(
        post(&app, &resend_path(id), Some(&key), &json!({})).await,
        409,
    )
    .await;
    assert_eq!(p["code"], "not_final", "{p}");
    assert_eq!(app.receiver.count("ok"), 1, "nothing was sent while paused");

    app.resume(&key, channel).await;
    app.wait_received("ok", 2, WAIT).await;
    app.wait_delivery(id, "delivered", WAIT).await;
    assert_eq!(
        signed_webhook_ids(&app, "ok"),
        [id.to_string(), id.to_string()]
    );

    // Unknown delivery: 404; a path id that is not a UUID: 400.
    assert_problem(
        post(&app, &resend_path(Uuid::now_v7()), Some(&key), &json!({})).await,
        404,
    )
    .await;
    assert_problem(
        post(
            &app,
            "/api/v1/deliveries/nope/resend",
            Some(&key),
            &json!({}),
        )
        .await,
        400,
    )
    .await;
    app.stop().await;
}

/// A cancelled delivery is final like a delivered or dead one: a resend sends it (its first
/// request, since it was cancelled before any), and a recover picks cancelled deliveries only
/// when `status` names them, because the default (`dead`) is what the endpoint missed, not what
/// the tenant chose to stop.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_cancelled_delivery_is_resent_and_recovered_when_asked_for(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("ep").await;
    // Parked behind a pause, so both are cancelled before any attempt.
    app.pause(&key, channel).await;
    let mut cancelled = Vec::new();
    for n in 0..2 {
        cancelled.push(app.deliver(&key, channel, json!({ "n": n })).await);
    }
    for id in &cancelled {
        let (s, v, _) = app.cancel(&key, *id).await;
        assert_eq!((s, v["status"].as_str()), (200, Some("cancelled")), "{v}");
    }
    app.resume(&key, channel).await;
    app.wait_settled(channel).await;
    assert_eq!(
        app.receiver.count("ep"),
        0,
        "a cancelled delivery is not sent"
    );

    let since = "2020-01-01T00:00:00Z";
    let dry = recover(
        &app,
        &key,
        channel,
        &json!({ "since": since, "dry_run": true }),
    )
    .await;
    assert_eq!(dry["count"], 0, "the default status is dead only: {dry}");
    let dry = recover(
        &app,
        &key,
        channel,
        &json!({ "since": since, "status": ["cancelled"], "dry_run": true }),
    )
    .await;
    assert_eq!(ids(&dry["ids"]), cancelled, "{dry}");

    // Resend one: sent, under its own id as webhook-id.
    let v = assert_ok(
        post(&app, &resend_path(cancelled[0]), Some(&key), &json!({})).await,
        202,
    )
    .await;
    assert_eq!(v["id"], json!(cancelled[0]));
    app.wait_delivery(cancelled[0], "delivered", WAIT).await;
    app.wait_received("ep", 1, WAIT).await;
    let read = assert_ok(
        get(
            &app,
            &format!("/api/v1/deliveries/{}", cancelled[0]),
            Some(&key),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(read["attempts"], 1, "{read}");

    // Recover the cancelled ones: only the other is still cancelled.
    let body = json!({ "since": since, "status": ["cancelled"] });
    let run = recover(&app, &key, channel, &body).await;
    assert_eq!(ids(&run["ids"]), [cancelled[1]], "{run}");
    assert_eq!(run["parked"], false);
    app.wait_delivery(cancelled[1], "delivered", WAIT).await;
    app.wait_received("ep", 2, WAIT).await;
    assert_eq!(
        signed_webhook_ids(&app, "ep"),
        [cancelled[0].to_string(), cancelled[1].to_string()]
    );
    let again = recover(&app, &key, channel, &body).await;
    assert_eq!(again["count"], 0, "{again}");
    assert_eq!(
        audit_count(&app.pool, channel, &["delivery.resent"]).await,
        1
    );
    assert_eq!(
        audit_count(&app.pool, channel, &["deliveries.recovered"]).await,
        2
    );
    app.wait_settled(channel).await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn recover_dry_run_counts_and_running_it_twice_sends_once(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("down").await;
    app.receiver.set("down", Behavior::Status(410, None));
    let mut dead = Vec::new();
    for i in 0..5 {
        dead.push(app.deliver(&key, channel, json!({ "i": i })).await);
    }
    app.wait_deliveries(channel, "dead", 5, WAIT).await;
    app.wait_received("down", 5, WAIT).await;

    // Paused, so the recovered deliveries stay on their way while we recover again.
    app.pause(&key, channel).await;
    let since = "2020-01-01T00:00:00Z";
    let dry = recover(
        &app,
        &key,
        channel,
        &json!({ "since": since, "dry_run": true }),
    )
    .await;
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["count"], 5, "{dry}");
    assert_eq!(ids(&dry["ids"]), dead, "oldest first");
    assert_eq!(dry["parked"], true);
    assert_eq!(
        app.delivery_status(dead[0]).await,
        "dead",
        "a dry run changes nothing"
    );
    assert_eq!(
        audit_count(&app.pool, channel, &["deliveries.recovered"]).await,
        0
    );

    let first = recover(&app, &key, channel, &json!({ "since": since })).await;
    assert_eq!(first["count"], 5, "{first}");
    assert_eq!(ids(&first["ids"]), dead);
    assert_eq!(first["parked"], true);
    assert_eq!(first["next_cursor"], Value::Null);
    app.wait_deliveries(channel, "paused", 5, WAIT).await;

    // Again while they are parked: nothing more goes.
    let second = recover(&app, &key, channel, &json!({ "since": since })).await;
    assert_eq!(second["count"], 0, "{second}");
    let dry = recover(
        &app,
        &key,
        channel,
        &json!({ "since": since, "dry_run": true }),
    )
    .await;
    assert_eq!(dry["count"], 0);
    assert_eq!(
        audit_count(&app.pool, channel, &["deliveries.recovered"]).await,
        2
    );

    app.receiver.set("down", Behavior::Status(200, None));
    app.resume(&key, channel).await;
    app.wait_deliveries(channel, "delivered", 5, WAIT).await;
    app.wait_settled(channel).await;
    let got = signed_webhook_ids(&app, "down");
    assert_eq!(
        got.len(),
        10,
        "each dead delivery once before and once recovered"
    );
    for id in &dead {
        let n = got.iter().filter(|w| **w == id.to_string()).count();
        assert_eq!(n, 2, "{id} arrived {n} times");
    }
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn recover_keeps_to_its_filters_and_continues_with_its_cursor(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("ep").await;
    let d1 = deliver_type(&app, &key, channel, "a.x").await;
    let d2 = deliver_type(&app, &key, channel, "b.y").await;
    app.wait_deliveries(channel, "delivered", 2, WAIT).await;
    app.receiver.set("ep", Behavior::Status(410, None));
    let d3 = deliver_type(&app, &key, channel, "a.x").await;
    let d4 = deliver_type(&app, &key, channel, "b.y").await;
    let d5 = deliver_type(&app, &key, channel, "a.x").await;
    app.wait_deliveries(channel, "dead", 3, WAIT).await;
    app.pause(&key, channel).await;
    let created = |v: Value| v["created_at"].as_str().unwrap().to_string();
    let d4_at = created(
        assert_ok(
            get(&app, &format!("/api/v1/deliveries/{d4}"), Some(&key)).await,
            200,
        )
        .await,
    );

    let since = "2020-01-01T00:00:00Z";
    let dry = |body: Value| {
        let app = &app;
        let key = &key;
        async move {
            let mut body = body;
            if body.get("since").is_none() {
                body["since"] = json!(since);
            }
            body["dry_run"] = json!(true);
            ids(&recover(app, key, channel, &body).await["ids"])
        }
    };
    assert_eq!(dry(json!({})).await, [d3, d4, d5], "default: the dead ones");
    assert_eq!(dry(json!({ "status": ["delivered"] })).await, [d1, d2]);
    assert_eq!(
        dry(json!({ "status": ["delivered", "dead"], "event_types": ["a.x"] })).await,
        [d1, d3, d5]
    );
    assert_eq!(
        dry(json!({ "until": d4_at })).await,
        [d3],
        "until is exclusive"
    );
    assert_eq!(
        dry(json!({ "since": d4_at })).await,
        [d4, d5],
        "since is inclusive"
    );

    // Bounded: one per call, then the cursor continues.
    let body = json!({ "since": since, "event_types": ["a.x"], "limit": 1 });
    let one = recover(&app, &key, channel, &body).await;
    assert_eq!(ids(&one["ids"]), [d3], "{one}");
    let cursor = one["next_cursor"]
        .as_str()
        .expect("more to come")
        .to_string();
    let mut next = body.clone();
    next["after"] = json!(cursor);
    let two = recover(&app, &key, channel, &next).await;
    assert_eq!(ids(&two["ids"]), [d5], "{two}");
    assert_eq!(two["next_cursor"], Value::Null);
    // From the start again: those two are on their way, d4 is of another type.
    let again = recover(&app, &key, channel, &body).await;
    assert_eq!(again["count"], 0, "{again}");
    for (id, status) in [
        (d1, "delivered"),
        (d2, "delivered"),
        (d3, "paused"),
        (d4, "dead"),
        (d5, "paused"),
    ] {
        assert_eq!(app.delivery_status(id).await, status, "{id}");
    }

    // Bad input: 422 naming the field.
    let path = recover_path(channel);
    for (body, field) in [
        (json!({}), "since"),
        (
            json!({ "since": "2026-12-05T10:00:00Z", "until": "2026-12-05T09:00:00Z" }),
            "since",
        ),
        (json!({ "since": since, "status": ["pending"] }), "status"),
        (json!({ "since": since, "status": ["nope"] }), "status"),
        (json!({ "since": since, "status": [] }), "status"),
        (json!({ "since": since, "event_types": [] }), "event_types"),
        (
            json!({ "since": since, "event_types": vec!["a.x"; 101] }),
            "event_types",
        ),
        (
            json!({ "since": since, "event_types": ["with space"] }),
            "event_types",
        ),
        (json!({ "since": since, "limit": 0 }), "limit"),
        (json!({ "since": since, "limit": 1001 }), "limit"),
        (json!({ "since": since, "after": "garbage" }), "after"),
        (json!({ "since": since, "colour": "red" }), "colour"),
    ] {
        assert_invalid(post(&app, &path, Some(&key), &body).await, field).await;
    }
    assert_eq!(
        audit_count(&app.pool, channel, &["deliveries.recovered"]).await,
        3
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn search_finds_a_tenants_deliveries_by_each_filter_and_pages(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let one = app.channel(&key, "one").await;
    let two = app.channel(&key, "two").await;
    let mut all = Vec::new();
    for _ in 0..3 {
        all.push(deliver_type(&app, &key, one, "a.x").await);
    }
    for _ in 0..2 {
        all.push(deliver_type(&app, &key, two, "b.y").await);
    }
    app.wait_deliveries(one, "delivered", 3, WAIT).await;
    app.wait_deliveries(two, "delivered", 2, WAIT).await;
    app.pause(&key, two).await;
    let parked = deliver_type(&app, &key, two, "b.y").await;
    all.push(parked);
    let (s, m) = app
        .post(
            "/api/v1/messages",
            &key,
            &json!({ "event_type": "c.z", "payload": {} }),
        )
        .await;
    assert_eq!(s, 202, "{m}");
    let message = m["id"].as_str().unwrap().to_string();
    let of_message: BTreeSet<Uuid> = ids(&m["deliveries"]).into_iter().collect();
    assert_eq!(of_message.len(), 2, "one per channel");

    let search = |query: String| {
        let app = &app;
        let key = &key;
        async move {
            let v = assert_ok(
                get(app, &format!("/api/v1/deliveries{query}"), Some(key)).await,
                200,
            )
            .await;
            (
                ids(&v["data"]),
                v["next_cursor"].as_str().map(str::to_string),
            )
        }
    };
    // Everything, newest first, paged two at a time without gaps or repeats.
    let (everything, _) = search(String::new()).await;
    assert_eq!(everything.len(), 8);
    let mut paged = Vec::new();
    let mut after = None::<String>;
    loop {
        let q = match &after {
            Some(c) => format!("?limit=2&after={c}"),
            None => "?limit=2".to_string(),
        };
        let (page, next) = search(q).await;
        assert!(page.len() <= 2);
        paged.extend(page);
        match next {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    assert_eq!(paged, everything);
    let mut expected = all.clone();
    expected.reverse();
    assert_eq!(
        everything
            .iter()
            .filter(|id| !of_message.contains(id))
            .copied()
            .collect::<Vec<_>>(),
        expected,
        "newest first"
    );

    let (by_type, _) = search("?event_type=a.x".into()).await;
    assert_eq!(by_type, all[..3].iter().rev().copied().collect::<Vec<_>>());
    let (by_channel, _) = search(format!("?channel_id={two}&event_type=b.y")).await;
    assert_eq!(
        by_channel,
        all[3..].iter().rev().copied().collect::<Vec<_>>()
    );
    let (by_status, _) = search("?status=paused".into()).await;
    assert!(by_status.contains(&parked), "{by_status:?}");
    assert!(by_status
        .iter()
        .all(|id| *id == parked || of_message.contains(id)));
    let (by_message, _) = search(format!("?message_id={message}")).await;
    assert_eq!(
        by_message.iter().copied().collect::<BTreeSet<_>>(),
        of_message
    );
    let (none, _) = search(format!(
        "?message_id={message}&channel_id={}",
        Uuid::now_v7()
    ))
    .await;
    assert!(none.is_empty());
    // since (inclusive) and until (exclusive) on when they were accepted.
    let at = |id: Uuid| {
        let app = &app;
        let key = &key;
        async move {
            let v = assert_ok(
                get(app, &format!("/api/v1/deliveries/{id}"), Some(key)).await,
                200,
            )
            .await;
            v["created_at"].as_str().unwrap().replace('+', "%2B")
        }
    };
    let (window, _) = search(format!(
        "?since={}&until={}",
        at(all[1]).await,
        at(all[3]).await
    ))
    .await;
    assert_eq!(window, [all[2], all[1]]);

    for (query, field) in [
        ("?status=nope", "status"),
        ("?event_type=with%20space", "event_type"),
        ("?channel_id=nope", "channel_id"),
        ("?message_id=nope", "message_id"),
        ("?since=yesterday", "since"),
        (
            "?since=2026-12-05T10:00:00Z&until=2026-12-05T09:00:00Z",
            "since",
        ),
        ("?limit=0", "limit"),
        ("?after=garbage", "after"),
    ] {
        assert_invalid(
            get(&app, &format!("/api/v1/deliveries{query}"), Some(&key)).await,
            field,
        )
        .await;
    }
    app.stop().await;
}
