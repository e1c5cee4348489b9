//! Payload filters: a channel's JSON Logic `filter` over `{event_type,
//! payload}` decides whether a message reaches it; checked when set (422 naming `filter`),
//! removed by `PATCH {"filter": null}`, tried with `POST /api/v1/channels/{id}/filter/test`.

use breakwater_e2e::http::{assert_invalid, assert_problem, post};
use breakwater_e2e::{audit_count, live_channels, TestApp};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::time::Duration;
use uuid::Uuid;

/// `POST /api/v1/messages`; asserts 202 and returns the channels that got a delivery.
async fn fan_out(app: &TestApp, key: &str, event_type: &str, payload: Value) -> BTreeSet<Uuid> {
    let (s, v) = app
        .post(
            "/api/v1/messages",
            key,
            &json!({ "event_type": event_type, "payload": payload }),
        )
        .await;
    assert_eq!(s, 202, "send message: {v}");
    v["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["channel_id"].as_str().unwrap().parse().unwrap())
        .collect()
}

/// Delivery rows of `channel`, whatever their status.
async fn deliveries_of(pool: &PgPool, channel: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE channel_id = $1")
        .bind(channel)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// `POST /api/v1/channels/{channel}/filter/test`; status and body.
async fn try_filter(app: &TestApp, key: &str, channel: Uuid, body: Value) -> (u16, Value) {
    app.post(
        &format!("/api/v1/channels/{channel}/filter/test"),
        key,
        &body,
    )
    .await
}

fn paid() -> Value {
    json!({ "==": [{ "var": "payload.status" }, "paid"] })
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_message_reaches_only_the_channels_whose_filter_matches(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    let paid_ch = app
        .channel_with(&key, "paid", json!({ "filter": paid() }))
        .await;
    let big = app
        .channel_with(
            &key,
            "big",
            json!({ "filter": { ">": [{ "var": "payload.amount" }, 100] } }),
        )
        .await;
    // An event-type filter, written as a prefix test on the type.
    let invoices = app
        .channel_with(
            &key,
            "invoices",
            json!({ "filter": { "==": [{ "substr": [{ "var": "event_type" }, 0, 8] }, "invoice."] } }),
        )
        .await;
    // Any line item with a given SKU: iteration over the payload.
    let sku = app
        .channel_with(
            &key,
            "sku",
            json!({ "filter": { "some": [{ "var": "payload.items" },
                { "==": [{ "var": "sku" }, "X-1"] }] } }),
        )
        .await;
    let all = app.channel(&key, "all").await;

    let first = fan_out(
        &app,
        &key,
        "invoice.paid",
        json!({ "status": "paid", "amount": 50, "items": [{ "sku": "A" }] }),
    )
    .await;
    assert_eq!(first, BTreeSet::from([paid_ch, invoices, all]));
    let second = fan_out(
        &app,
        &key,
        "order.created",
        json!({ "status": "open", "amount": 500, "items": [{ "sku": "B" }, { "sku": "X-1" }] }),
    )
    .await;
    assert_eq!(second, BTreeSet::from([big, sku, all]));

    for (ep, n) in [
        ("paid", 1),
        ("big", 1),
        ("invoices", 1),
        ("sku", 1),
        ("all", 2),
    ] {
        app.wait_received(ep, n, Duration::from_secs(10)).await;
    }
    // Every expected delivery has arrived; the filtered-out ones were never created, so nothing
    // more can come.
    for (ch, ep, n) in [
        (paid_ch, "paid", 1),
        (big, "big", 1),
        (invoices, "invoices", 1),
        (sku, "sku", 1),
        (all, "all", 2),
    ] {
        assert_eq!(app.receiver.received(ep).len(), n, "{ep} received");
        assert_eq!(
            deliveries_of(&pool, ch).await,
            n as i64,
            "{ep} delivery rows"
        );
    }
    let body: Value = serde_json::from_slice(&app.receiver.received("big")[0].body).unwrap();
    assert_eq!(
        body["data"]["amount"], 500,
        "the matching message itself: {body}"
    );

    // The per-channel enqueue names its channel: no filter applies there.
    let (s, v) = app
        .post(
            &format!("/api/v1/channels/{big}/deliveries"),
            &key,
            &json!({ "event_type": "order.created", "payload": { "amount": 1 } }),
        )
        .await;
    assert_eq!(s, 202, "{v}");
    app.wait_received("big", 2, Duration::from_secs(10)).await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn named_channels_are_filtered_too(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    let paid_ch = app
        .channel_with(&key, "paid", json!({ "filter": paid() }))
        .await;
    let other = app.channel(&key, "other").await;
    let (s, v) = app
        .post(
            "/api/v1/messages",
            &key,
            &json!({ "event_type": "invoice.paid", "payload": { "status": "void" },
                     "channels": [paid_ch, other] }),
        )
        .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["deliveries"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["deliveries"][0]["channel_id"], json!(other));
    app.wait_received("other", 1, Duration::from_secs(10)).await;
    assert_eq!(deliveries_of(&pool, paid_ch).await, 0);
    assert!(app.receiver.received("paid").is_empty());
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn bad_and_oversize_filters_are_refused_naming_filter(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let url = app.receiver.url("x");
    let nested = json!({ "some": [{ "var": "payload.a" },
        { "some": [{ "var": "b" }, { "==": [{ "var": "" }, 1] }] }] });
    let oversize = json!({ "in": [{ "var": "payload.s" }, "x".repeat(5000)] });
    for (bad, says) in [
        (
            json!({ "regex": [{ "var": "payload.s" }, "^a"] }),
            "unknown operator",
        ),
        (json!(true), "JSON Logic operation"),
        (json!("payload.status == 'paid'"), "JSON Logic operation"),
        (json!({ "==": [1, 1], "!=": [1, 2] }), "exactly one key"),
        (nested, "may not be nested"),
        (json!({ "map": [[1], 1] }), "unknown operator"),
        (oversize, "at most 4096"),
    ] {
        let body = assert_invalid(
            post(
                &app,
                "/api/v1/channels",
                Some(&key),
                &json!({ "url": url, "filter": bad }),
            )
            .await,
            "filter",
        )
        .await;
        assert!(
            body["detail"].as_str().unwrap().contains(says),
            "{bad}: {body}"
        );
    }
    assert_eq!(live_channels(&pool, tenant).await, 0, "nothing was created");

    // The same checks on PATCH; the channel keeps its filter.
    let ch = app
        .channel_with(&key, "x", json!({ "filter": paid() }))
        .await;
    let (s, v) = app
        .patch_channel(&key, ch, json!({ "filter": { "regex": ["a", "b"] } }))
        .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["field"], "filter", "{v}");
    let (_, read) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(read["filter"], paid());
    assert_eq!(audit_count(&pool, ch, &["channel.updated"]).await, 0);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_test_route_says_whether_a_sample_matches(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    let filter = json!({ "and": [
        { "==": [{ "var": "event_type" }, "invoice.paid"] },
        { ">=": [{ "var": "payload.amount" }, 100] }
    ] });
    let ch = app
        .channel_with(&key, "x", json!({ "filter": filter }))
        .await;
    let plain = app.channel(&key, "y").await;

    for (body, matches) in [
        (
            json!({ "event_type": "invoice.paid", "payload": { "amount": 100 } }),
            true,
        ),
        (
            json!({ "event_type": "invoice.paid", "payload": { "amount": 99 } }),
            false,
        ),
        (
            json!({ "event_type": "invoice.void", "payload": { "amount": 100 } }),
            false,
        ),
        // Without an event type the filter reads `null`.
        (json!({ "payload": { "amount": 100 } }), false),
    ] {
        let (s, v) = try_filter(&app, &key, ch, body.clone()).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["matches"], matches, "{body}: {v}");
        assert_eq!(v["has_filter"], true);
        assert_eq!(v["error"], Value::Null);
    }
    // A failing evaluation does not match, and says why.
    let arith = app
        .channel_with(
            &key,
            "z",
            json!({ "filter": { ">": [{ "+": [{ "var": "payload.n" }, 1] }, 0] } }),
        )
        .await;
    let (_, v) = try_filter(&app, &key, arith, json!({ "payload": { "n": "abc" } })).await;
    assert_eq!(v["matches"], false, "{v}");
    assert!(v["error"].is_string(), "{v}");
    // No filter: everything matches.
    let (_, v) = try_filter(&app, &key, plain, json!({ "payload": 1 })).await;
    assert_eq!(
        v,
        json!({ "matches": true, "has_filter": false, "error": null })
    );
    // Bad input.
    assert_invalid(
        post(
            &app,
            &format!("/api/v1/channels/{ch}/filter/test"),
            Some(&key),
            &json!({ "event_type": "has space", "payload": {} }),
        )
        .await,
        "event_type",
    )
    .await;
    let (s, _) = try_filter(&app, &key, ch, json!({ "event_type": "a" })).await;
    assert_eq!(s, 422, "payload is required");
    assert_problem(
        post(
            &app,
            &format!("/api/v1/channels/{}/filter/test", Uuid::now_v7()),
            Some(&key),
            &json!({ "payload": {} }),
        )
        .await,
        404,
    )
    .await;
    // Nothing was sent or stored.
    assert_eq!(deliveries_of(&pool, ch).await, 0);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn patch_sets_and_null_removes_the_filter_audited_once_each(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app.channel(&key, "x").await;

    let (s, v) = app
        .patch_channel(&key, ch, json!({ "filter": paid() }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["filter"], paid());
    assert_eq!(audit_count(&pool, ch, &["channel.updated"]).await, 1);
    let details: Value = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE channel_id = $1 AND action = 'channel.updated'",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(details["old"]["filter"], Value::Null, "{details}");
    assert_eq!(details["new"]["filter"], paid(), "{details}");
    // The same filter again changes nothing and audits nothing.
    app.patch_channel(&key, ch, json!({ "filter": paid() }))
        .await;
    assert_eq!(audit_count(&pool, ch, &["channel.updated"]).await, 1);

    assert!(fan_out(&app, &key, "a.b", json!({ "status": "open" }))
        .await
        .is_empty());
    assert_eq!(deliveries_of(&pool, ch).await, 0);

    let (s, v) = app.patch_channel(&key, ch, json!({ "filter": null })).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["filter"], Value::Null);
    assert_eq!(audit_count(&pool, ch, &["channel.updated"]).await, 2);
    let (_, v) = try_filter(&app, &key, ch, json!({ "payload": { "status": "open" } })).await;
    assert_eq!(v["has_filter"], false);

    assert_eq!(
        fan_out(&app, &key, "a.b", json!({ "status": "open" })).await,
        BTreeSet::from([ch])
    );
    app.wait_received("x", 1, Duration::from_secs(10)).await;
    assert_eq!(deliveries_of(&pool, ch).await, 1);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_fan_out_to_many_filtered_channels_is_one_request(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    // 40 channels on one endpoint: even ones want region "eu", odd ones "us".
    let mut eu = BTreeSet::new();
    for i in 0..40 {
        let region = if i % 2 == 0 { "eu" } else { "us" };
        let ch = app
            .channel_with(
                &key,
                "many",
                json!({ "filter": { "==": [{ "var": "payload.region" }, region] } }),
            )
            .await;
        if region == "eu" {
            eu.insert(ch);
        }
    }
    let got = fan_out(&app, &key, "a.b", json!({ "region": "eu" })).await;
    assert_eq!(got, eu);
    app.wait_received("many", 20, Duration::from_secs(20)).await;
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(total, 20);
    app.stop().await;
}

/// The cost a filter adds to a fan-out (BENCHMARKS.md, "Payload filters on a fan-out"): one
/// message to 1000 channels without filters, with a filter every channel matches, and with one
/// none matches; the median of `RUNS` `POST /api/v1/messages` round trips each, taken in turns.
/// The API alone (no worker sends anything). Run it by hand:
/// `cargo nextest run -p breakwater-e2e --test e2e --run-ignored only --no-capture
/// filters::fan_out_cost`.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
#[ignore = "a measurement, not a check: run by hand for BENCHMARKS.md"]
async fn fan_out_cost_with_and_without_filters(pool: PgPool) {
    const RUNS: usize = 31;
    let app = TestApp::spawn_role(pool.clone(), breakwater::Role::Api, |s| {
        s.api.quota_deliveries_per_second = 1_000_000_000;
        s.api.quota_deliveries_per_day = 1_000_000_000;
    })
    .await;
    let url = app.receiver.url("fan");
    // A distinct filter per channel (`$i` is the channel's number), so nothing could be shared
    // between channels.
    let matches_all = json!({ "and": [
        { "==": [{ "var": "event_type" }, "order.created"] },
        { ">=": [{ "var": "payload.qty" }, 1] },
        { "!=": [{ "var": "payload.region" }, "$i"] },
        { "some": [{ "var": "payload.lines" }, { "==": [{ "var": "sku" }, "x-1"] }] }
    ] });
    let matches_none = json!({ "==": [{ "var": "payload.region" }, "$i"] });
    let mut cases = Vec::new();
    for (name, filter) in [
        ("no filter", Value::Null),
        ("filter, all match", matches_all),
        ("filter, none match", matches_none),
    ] {
        let (tenant, key) = app.tenant(name, "default").await;
        sqlx::query(
            "WITH c AS (
                 INSERT INTO channels (id, tenant_id, url, signing_secret, filter)
                 SELECT gen_random_uuid(), $1, $2, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
                        replace($3::text, '$i', 'r' || i)::jsonb
                 FROM generate_series(1, 1000) AS i
                 RETURNING id)
             INSERT INTO job_groups (group_id, share_key) SELECT id, $1 FROM c",
        )
        .bind(tenant)
        .bind(&url)
        .bind(filter.is_object().then(|| filter.to_string()))
        .execute(&pool)
        .await
        .unwrap();
        cases.push((name, key, Vec::new()));
    }
    let payload = json!({ "qty": 3, "region": "eu",
        "lines": [{ "sku": "a-9" }, { "sku": "x-1" }], "note": "n".repeat(1000) });
    for _ in 0..RUNS {
        for (_, key, times) in cases.iter_mut() {
            let t0 = std::time::Instant::now();
            let (s, v) = app
                .post(
                    "/api/v1/messages",
                    key,
                    &json!({ "event_type": "order.created", "payload": payload }),
                )
                .await;
            times.push(t0.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(s, 202, "{v}");
        }
    }
    for (name, _, mut times) in cases {
        times.sort_by(f64::total_cmp);
        println!(
            "fan-out to 1000 channels, {name}: median {:.1} ms, min {:.1} ms, max {:.1} ms ({RUNS} runs)",
            times[RUNS / 2],
            times[0],
            times[RUNS - 1]
        );
    }
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_fan_out_whose_filters_overrun_the_time_budget_is_refused_whole(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let plain = app.channel(&key, "plain").await;
    // 300 channels with the costliest filter the bounds allow on a string: 50 substring
    // searches (for needles that are absent) over the payload's 250 KiB string. Made with SQL.
    let searches: Vec<Value> = (0..50)
        .map(|i| json!({ "in": [format!("absent-{i}"), { "var": "payload.s" }] }))
        .collect();
    let costly = json!({ "or": searches });
    breakwater_core::filters::check(&costly).expect("within the bounds");
    sqlx::query(
        "WITH c AS (
             INSERT INTO channels (id, tenant_id, url, signing_secret, filter)
             SELECT gen_random_uuid(), $1, $2, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', $3::jsonb
             FROM generate_series(1, 300)
             RETURNING id)
         INSERT INTO job_groups (group_id, share_key) SELECT id, $1 FROM c",
    )
    .bind(tenant)
    .bind(app.receiver.url("costly"))
    .bind(costly.to_string())
    .execute(&pool)
    .await
    .unwrap();
    let body = assert_invalid(
        post(
            &app,
            "/api/v1/messages",
            Some(&key),
            &json!({ "event_type": "a.b", "payload": { "s": "ab".repeat(125_000) } }),
        )
        .await,
        "payload",
    )
    .await;
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("nothing was sent"),
        "{body}"
    );
    // Refused whole: no message, no delivery, not even to the channel without a filter.
    let messages: i64 = sqlx::query_scalar("SELECT count(*) FROM messages")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(messages, 0);
    assert_eq!(deliveries_of(&pool, plain).await, 0);
    let all: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(all, 0);
    app.stop().await;
}
