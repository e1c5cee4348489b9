//! Per-tenant quotas: channels, active keys, deliveries per second and per
//! day (counting fan-out deliveries), the operator setting them, and the ingress limit shared by
//! all of a tenant's keys on every node.

use breakwater::Role;
use breakwater_e2e::{
    active_keys, eventually, live_channels, spawn_node_thread, test_settings, TestApp, OPERATOR_KEY,
};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// Sets tenant `tenant`'s quotas (the operator's `PATCH /api/v1/tenants/{id}` with `quotas`);
/// asserts 200 and returns the quotas now in force.
async fn set_quotas(app: &TestApp, tenant: Uuid, quotas: Value) -> Value {
    let (s, v) = app
        .patch(
            &format!("/api/v1/tenants/{tenant}"),
            OPERATOR_KEY,
            &json!({ "quotas": quotas }),
        )
        .await;
    assert_eq!(s, 200, "set quotas: {v}");
    v["quotas"].clone()
}

/// Deliveries of `tenant`, and its messages, as the rows say.
async fn created(pool: &PgPool, tenant: Uuid) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM deliveries WHERE tenant_id = $1),
                (SELECT count(*) FROM messages WHERE tenant_id = $1)",
    )
    .bind(tenant)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Asserts a `quota_exceeded` problem naming `quota` with `status`.
fn assert_quota(status: u16, body: &Value, want_status: u16, quota: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["code"], "quota_exceeded", "{body}");
    assert_eq!(body["quota"], quota, "{body}");
    assert_eq!(body["type"], "urn:breakwater:problem:quota_exceeded");
    assert!(
        body["detail"].as_str().unwrap().contains(quota),
        "the detail names the quota: {body}"
    );
}

/// `POST /api/v1/messages` with `key`; status, `Retry-After` (if any) and body.
async fn send(app: &TestApp, key: &str, body: &Value) -> (u16, Option<u64>, Value) {
    post_with_retry_after(app, "/api/v1/messages", key, body).await
}

async fn post_with_retry_after(
    app: &TestApp,
    path: &str,
    key: &str,
    body: &Value,
) -> (u16, Option<u64>, Value) {
    let r = app
        .http
        .post(format!("{}{path}", app.api))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (status, retry, r.json().await.unwrap_or(Value::Null))
}

fn message_to(channels: &[Uuid]) -> Value {
    json!({ "event_type": "order.paid", "payload": { "n": 1 }, "channels": channels })
}

fn batch(n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({ "event_type": "e", "payload": { "i": i } }))
        .collect();
    json!({ "deliveries": items })
}

/// The channel quota: the config default for a tenant without its own, the operator's override
/// for one with it; the next channel over it is a 409 naming the quota and nothing is created;
/// a deleted channel frees its place; concurrent creations cannot pass it together.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_channel_quota_refuses_the_next_channel_and_creates_nothing(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.api.quota_channels = 3).await;
    let (a, key_a) = app.tenant("acme", "default").await;
    let (b, key_b) = app.tenant("globex", "default").await;
    assert_eq!(
        set_quotas(&app, a, json!({ "channels": 2 })).await["channels"],
        2
    );
    let url = app.receiver.url("hook");
    let body = json!({ "url": url });

    let first = app.channel_to(&key_a, &url, json!({})).await;
    app.channel_to(&key_a, &url, json!({})).await;
    let (s, v) = app.post("/api/v1/channels", &key_a, &body).await;
    assert_quota(s, &v, 409, "channels");
    assert_eq!(live_channels(&pool, a).await, 2, "nothing was created");

    // Deleting one frees its place.
    let (s, _, _) = app
        .delete(&format!("/api/v1/channels/{first}"), &key_a)
        .await;
    assert_eq!(s, 204);
    app.channel_to(&key_a, &url, json!({})).await;
    assert_eq!(live_channels(&pool, a).await, 2);

    // Tenant B has the config default (3), and its creations race: exactly 3 pass.
    let results =
        futures::future::join_all((0..8).map(|_| app.post("/api/v1/channels", &key_b, &body)))
            .await;
    let made = results.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(made, 3, "{results:?}");
    for (s, v) in results.iter().filter(|(s, _)| *s != 201) {
        assert_quota(*s, v, 409, "channels");
    }
    assert_eq!(live_channels(&pool, b).await, 3);
    app.stop().await;
}

/// The key quota: with `active_keys` 2 and the tenant's first key, one more is made and the
/// next is a 409 naming the quota, whether the tenant or the operator asks; revoking one frees
/// its place.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_key_quota_refuses_the_next_key(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    set_quotas(&app, tenant, json!({ "active_keys": 2 })).await;
    let second = app.create_key(&key, json!({ "name": "ci" })).await;
    let (s, v) = app.post("/api/v1/tenant/keys", &key, &json!({})).await;
    assert_quota(s, &v, 409, "active_keys");
    let (s, v) = app
        .post(
            &format!("/api/v1/tenants/{tenant}/keys"),
            OPERATOR_KEY,
            &json!({}),
        )
        .await;
    assert_quota(s, &v, 409, "active_keys");
    assert_eq!(active_keys(&pool, tenant).await, 2, "nothing was created");

    let (s, _, _) = app
        .delete(
            &format!("/api/v1/tenant/keys/{}", second["id"].as_str().unwrap()),
            &key,
        )
        .await;
    assert_eq!(s, 204);
    app.create_key(&key, json!({})).await;
    assert_eq!(active_keys(&pool, tenant).await, 2);
    app.stop().await;
}

/// The per-second quota counts deliveries, not requests: a message fanned out to more channels
/// than the quota is refused whole (no message, no delivery), a batch too; within it, a fan-out
/// passes and the next one within the second is refused with `Retry-After`, then fits once the
/// second is over. Another tenant sends the same fan-out meanwhile, unaffected.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_per_second_quota_counts_fan_out_deliveries_and_refuses_whole(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (a, key_a) = app.tenant("acme", "default").await;
    let (b, key_b) = app.tenant("globex", "default").await;
    set_quotas(&app, a, json!({ "deliveries_per_second": 3 })).await;
    let mut chans_a = Vec::new();
    let mut chans_b = Vec::new();
    for i in 0..4 {
        chans_a.push(app.channel(&key_a, &format!("a{i}")).await);
        chans_b.push(app.channel(&key_b, &format!("b{i}")).await);
    }

    // 4 deliveries at 3/s never fit: refused whole, without Retry-After.
    let (s, retry, v) = send(&app, &key_a, &message_to(&chans_a)).await;
    assert_quota(s, &v, 429, "deliveries_per_second");
    assert_eq!(
        retry, None,
        "a fan-out larger than the quota never fits: {v}"
    );
    assert_eq!(created(&pool, a).await, (0, 0), "no message, no delivery");

    // 3 fit; 3 more within the second do not, nor a batch of 2: refused, with Retry-After.
    let (s, _, v) = send(&app, &key_a, &message_to(&chans_a[..3])).await;
    assert_eq!(s, 202, "{v}");
    let (s, retry, v) = send(&app, &key_a, &message_to(&chans_a[..3])).await;
    assert_quota(s, &v, 429, "deliveries_per_second");
    assert!(matches!(retry, Some(1..=2)), "Retry-After {retry:?}");
    let batch_path = format!("/api/v1/channels/{}/deliveries/batch", chans_a[0]);
    let (s, retry, v) = post_with_retry_after(&app, &batch_path, &key_a, &batch(2)).await;
    assert_quota(s, &v, 429, "deliveries_per_second");
    assert!(retry.is_some(), "{v}");
    assert_eq!(created(&pool, a).await, (3, 1), "only the first fan-out");

    // Another tenant meanwhile: its fan-out to 4 goes through at once.
    let (s, _, v) = send(&app, &key_b, &message_to(&chans_b)).await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["deliveries"].as_array().unwrap().len(), 4);
    assert_eq!(created(&pool, b).await, (4, 1));

    // Once the second is over, A's fan-out of 3 fits again.
    let body = message_to(&chans_a[..3]);
    assert!(
        eventually(Duration::from_secs(5), || async {
            send(&app, &key_a, &body).await.0 == 202
        })
        .await,
        "the fan-out fits after Retry-After"
    );
    assert_eq!(created(&pool, a).await, (6, 2));
    app.stop().await;
}

/// The per-day quota: batches and fan-outs count every delivery; the request that would pass
/// it is refused whole with `Retry-After` until midnight UTC, one that fits exactly passes. Two
/// nodes racing for the last places cannot both pass.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_per_day_quota_counts_every_delivery_and_holds_across_nodes(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let other = spawn_node_thread(
        (*pool.connect_options()).clone(),
        test_settings(),
        Role::Api,
    );
    let other_api = format!("http://{}", other.api_addr.unwrap());
    let (a, key_a) = app.tenant("acme", "default").await;
    let (b, key_b) = app.tenant("globex", "default").await;
    set_quotas(&app, a, json!({ "deliveries_per_day": 5 })).await;
    let ch = app.channel(&key_a, "a").await;
    let ch2 = app.channel(&key_a, "a2").await;
    let ch_b = app.channel(&key_b, "b").await;
    let batch_path = format!("/api/v1/channels/{ch}/deliveries/batch");

    let (s, _, v) = post_with_retry_after(&app, &batch_path, &key_a, &batch(3)).await;
    assert_eq!(s, 202, "{v}");
    let (s, retry, v) = post_with_retry_after(&app, &batch_path, &key_a, &batch(3)).await;
    assert_quota(s, &v, 429, "deliveries_per_day");
    let retry = retry.expect("Retry-After until midnight UTC");
    assert!((1..=86_400).contains(&retry), "{retry}");
    let (s, _, v) = send(&app, &key_a, &message_to(&[ch, ch2, ch])).await;
    // Two distinct channels: 3 + 2 = 5 fits exactly.
    assert_eq!(s, 202, "{v}");
    let (s, _, v) = send(&app, &key_a, &message_to(&[ch])).await;
    assert_quota(s, &v, 429, "deliveries_per_day");
    assert_eq!(created(&pool, a).await, (5, 1));

    // B is untouched by A's day.
    let (s, _, v) = post_with_retry_after(
        &app,
        &format!("/api/v1/channels/{ch_b}/deliveries/batch"),
        &key_b,
        &batch(10),
    )
    .await;
    assert_eq!(s, 202, "{v}");

    // Race: B's day quota is 10 more than it used; 10 batches of 2 on two nodes at once, so
    // exactly 5 pass.
    set_quotas(&app, b, json!({ "deliveries_per_day": 20 })).await;
    let path = format!("/api/v1/channels/{ch_b}/deliveries/batch");
    let body = batch(2);
    let results =
        futures::future::join_all(
            (0..10).map(|i| {
                let base = if i % 2 == 0 {
                    app.api.clone()
                } else {
                    other_api.clone()
                };
                let (http, path, key, body) =
                    (app.http.clone(), path.clone(), key_b.clone(), body.clone());
                async move {
                    breakwater_e2e::post_json(&http, &format!("{base}{path}"), &key, &body).await
                }
            }),
        )
        .await;
    let passed = results.iter().filter(|(s, _)| *s == 202).count();
    assert_eq!(passed, 5, "{results:?}");
    for (s, v) in results.iter().filter(|(s, _)| *s != 202) {
        assert_quota(*s, v, 429, "deliveries_per_day");
    }
    assert_eq!(created(&pool, b).await.0, 20);
    other.stop();
    app.stop().await;
}

/// The ingress limit is the tenant's, not each key's, and the cluster's, not each node's: at 1/s
/// with a burst of 2, two keys on two nodes get two requests in all, then 429 with Retry-After
/// (not 2 for each key on each node).
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_ingress_limit_is_shared_by_all_keys_of_a_tenant_on_every_node(pool: PgPool) {
    let tweak = |s: &mut breakwater::config::Settings| {
        s.api.ingress_per_second = 1;
        s.api.ingress_burst = 2;
    };
    let app = TestApp::spawn_with(pool.clone(), tweak).await;
    let mut settings = test_settings();
    tweak(&mut settings);
    let other = spawn_node_thread((*pool.connect_options()).clone(), settings, Role::Api);
    let other_api = format!("http://{}", other.api_addr.unwrap());
    let (tenant, key1) = app.tenant("acme", "default").await;
    let (_, key_b) = app.tenant("globex", "default").await;
    // The second key from the operator: the operator's requests are not the tenant's.
    let (s, v) = app
        .post(
            &format!("/api/v1/tenants/{tenant}/keys"),
            OPERATOR_KEY,
            &json!({}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let key2 = v["api_key"].as_str().unwrap().to_string();
    let get = |base: &str, key: &str| {
        let req = app
            .http
            .get(format!("{base}/api/v1/tenant"))
            .bearer_auth(key);
        async move {
            let r = req.send().await.unwrap();
            let retry = r.headers().get("retry-after").is_some();
            (r.status().as_u16(), retry)
        }
    };
    assert_eq!(get(&app.api, &key1).await.0, 200);
    assert_eq!(get(&other_api, &key2).await.0, 200);
    assert_eq!(get(&other_api, &key1).await, (429, true), "key 1 on node 2");
    assert_eq!(get(&app.api, &key2).await, (429, true), "key 2 on node 1");
    // Another tenant has its own budget.
    assert_eq!(get(&app.api, &key_b).await.0, 200);
    other.stop();
    app.stop().await;
}

/// The operator sets a tenant's quotas: GET shows the defaults, then the overrides (to the
/// operator and to the tenant), `null` puts one back to the default, values out of range are a
/// 422 naming the field, and each change is audited.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_operator_sets_a_tenants_quotas_and_get_shows_them(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.api.quota_deliveries_per_day = 0).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let path = format!("/api/v1/tenants/{tenant}");
    let defaults = json!({
        "channels": 1000, "active_keys": 100,
        "deliveries_per_second": 5000, "deliveries_per_day": null,
    });
    let (s, v) = app.get(&path, OPERATOR_KEY).await;
    assert_eq!((s, &v["quotas"]), (200, &defaults), "{v}");

    let set = set_quotas(
        &app,
        tenant,
        json!({ "channels": 7, "deliveries_per_second": 40, "deliveries_per_day": 900 }),
    )
    .await;
    let want = json!({
        "channels": 7, "active_keys": 100,
        "deliveries_per_second": 40, "deliveries_per_day": 900,
    });
    assert_eq!(set, want);
    assert_eq!(app.get(&path, OPERATOR_KEY).await.1["quotas"], want);
    assert_eq!(app.get("/api/v1/tenant", &key).await.1["quotas"], want);

    // null: back to the default; absent: unchanged.
    let set = set_quotas(
        &app,
        tenant,
        json!({ "channels": null, "deliveries_per_day": null }),
    )
    .await;
    assert_eq!(set["channels"], 1000);
    assert_eq!(set["deliveries_per_second"], 40);
    assert_eq!(set["deliveries_per_day"], Value::Null);

    for (field, bad) in [
        ("channels", json!(-1)),
        ("deliveries_per_second", json!(0)),
        ("deliveries_per_day", json!(0)),
    ] {
        let (s, v) = app
            .patch(&path, OPERATOR_KEY, &json!({ "quotas": { field: bad } }))
            .await;
        assert_eq!(s, 422, "{field}: {v}");
        assert_eq!(v["field"], format!("quotas.{field}"), "{v}");
    }
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = 'tenant.quotas_changed'",
    )
    .bind(tenant)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        audited, 2,
        "one audit row per change, none for a refused one"
    );
    app.stop().await;
}

/// A tenant cannot change its own quotas: `quotas` in its own PATCH is refused (422), the
/// operator's route refuses its key (403), and its quotas stay as they were.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_tenant_cannot_change_its_own_quotas(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    set_quotas(&app, tenant, json!({ "channels": 2 })).await;
    let raise = json!({ "quotas": { "channels": 100000 } });
    let (s, v) = app.patch("/api/v1/tenant", &key, &raise).await;
    assert_eq!(s, 422, "{v}");
    let (s, v) = app
        .patch(&format!("/api/v1/tenants/{tenant}"), &key, &raise)
        .await;
    assert_eq!((s, v["code"].as_str()), (403, Some("forbidden")), "{v}");
    let (s, v) = app.get("/api/v1/tenant", &key).await;
    assert_eq!((s, &v["quotas"]["channels"]), (200, &json!(2)), "{v}");
    app.stop().await;
}

/// Quotas are per tenant: another tenant's key can neither read nor set them, the operator's
/// change to one tenant leaves another's defaults, and one tenant at its quota does not stop
/// another.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn quotas_are_isolated_between_tenants(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (a, key_a) = app.tenant("acme", "default").await;
    let (b, key_b) = app.tenant("globex", "default").await;
    let b_path = format!("/api/v1/tenants/{b}");
    let (s, _) = app.get(&b_path, &key_a).await;
    assert_eq!(s, 403);
    let (s, _) = app
        .patch(&b_path, &key_a, &json!({ "quotas": { "channels": 0 } }))
        .await;
    assert_eq!(s, 403);

    set_quotas(&app, a, json!({ "channels": 1 })).await;
    let (_, v) = app.get("/api/v1/tenant", &key_b).await;
    assert_eq!(v["quotas"]["channels"], 1000, "B keeps the default: {v}");
    assert_eq!(v["id"], b.to_string());
    let (_, v) = app.get("/api/v1/tenant", &key_a).await;
    assert_eq!(v["quotas"]["channels"], 1, "{v}");

    let url = app.receiver.url("hook");
    app.channel_to(&key_a, &url, json!({})).await;
    let (s, v) = app
        .post("/api/v1/channels", &key_a, &json!({ "url": url }))
        .await;
    assert_quota(s, &v, 409, "channels");
    app.channel_to(&key_b, &url, json!({})).await;
    app.channel_to(&key_b, &url, json!({})).await;
    assert_eq!(
        (live_channels(&pool, a).await, live_channels(&pool, b).await),
        (1, 2)
    );
    app.stop().await;
}

/// The default quotas are the documented ones, and high enough for every test and the demo.
#[test]
fn the_default_quotas_are_the_documented_ones() {
    let s = breakwater::config::Settings::load(None).expect("embedded defaults");
    assert_eq!(
        (
            s.api.quota_channels,
            s.api.quota_active_keys,
            s.api.quota_deliveries_per_second,
            s.api.quota_deliveries_per_day
        ),
        (1_000, 100, 5_000, 5_000_000)
    );
    assert_eq!(
        s.api.quota_defaults(),
        breakwater_core::quotas::QuotaDefaults::default()
    );
}
