//! Rate limits across the cluster, the per-node channel cap, and tier queues.

use breakwater::Role;
use breakwater_e2e::{eventually, spawn_node_thread, test_settings, Behavior, TestApp};
use serde_json::json;
use sqlx::PgPool;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The most requests in any 1-second window of sorted arrival times.
fn max_per_second(times: &[Instant]) -> usize {
    let mut best = 0;
    let mut start = 0;
    for end in 0..times.len() {
        while times[end].duration_since(times[start]) >= Duration::from_secs(1) {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best
}

fn p95(v: Vec<u128>) -> u128 {
    v[(v.len() * 95).div_ceil(100).saturating_sub(1)]
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_rate_limit_holds_across_two_nodes_and_spreads_requests(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let nodes: Vec<_> = (0..2)
        .map(|_| {
            spawn_node_thread(
                (*pool.connect_options()).clone(),
                test_settings(),
                Role::Worker,
            )
        })
        .collect();
    let (_, key) = app.tenant("meta-like", "default").await;
    let (s, v) = app
        .post(
            "/api/v1/channels",
            &key,
            &json!({ "url": app.receiver.url("limited"), "rate_limit": "20/s" }),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["rate_limit"], "20/s");
    let ch: Uuid = v["id"].as_str().unwrap().parse().unwrap();

    let t0 = Instant::now();
    app.deliver_many(&key, ch, 400).await;
    assert_eq!(
        app.receiver
            .wait_for("limited", 400, Duration::from_secs(40))
            .await,
        400
    );
    let took = t0.elapsed();
    for n in nodes {
        n.stop();
    }
    let mut times: Vec<Instant> = app
        .receiver
        .received("limited")
        .iter()
        .map(|r| r.at)
        .collect();
    times.sort();
    let max = max_per_second(&times);
    if std::env::var_os("BW_DEBUG_RATE").is_some() {
        let offs: Vec<u128> = times
            .iter()
            .map(|t| t.duration_since(times[0]).as_millis())
            .collect();
        println!("arrivals (ms): {offs:?}");
    }
    println!(
        "20/s over two nodes: 400 deliveries in {:.2} s; busiest 1-second window: {max} requests",
        took.as_secs_f64()
    );
    assert!(
        max <= 20 + 2,
        "a 1-second window saw {max} requests (limit 20 + burst 2)"
    );
    assert!(
        (17.0..=23.0).contains(&took.as_secs_f64()),
        "run took {:.2} s, expected 20 s ± 15 %",
        took.as_secs_f64()
    );
    let (extra, limited): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM deliveries WHERE channel_id = $1 AND attempts <> 1),
                (SELECT rate_limited_total FROM channels WHERE id = $1)",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(extra, 0, "waiting for the rate limit used no attempt");
    assert!(
        limited >= 300,
        "held-back deliveries are counted as rate-limited: {limited}"
    );
    let failures: i32 =
        sqlx::query_scalar("SELECT consecutive_failures FROM channels WHERE id = $1")
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(failures, 0, "being rate-limited is not a failure");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn rate_limit_forms_are_checked_and_patchable(pool: PgPool) {
    let app = TestApp::spawn_role(pool, Role::Api, |_| {}).await;
    let (_, key) = app.tenant("acme", "default").await;
    for bad in ["0/s", "-1/s", "80/d", "eighty/s", "80", "99999999999/s"] {
        let (s, v) = app
            .post(
                "/api/v1/channels",
                &key,
                &json!({ "url": app.receiver.url("x"), "rate_limit": bad }),
            )
            .await;
        assert_eq!(s, 422, "{bad}: {v}");
        assert_eq!(v["field"], "rate_limit");
        assert!(
            v["detail"].as_str().unwrap().contains("\"80/s\""),
            "{bad}: the message says the accepted form: {v}"
        );
    }
    let ch = app.channel(&key, "x").await;
    let patch = |body: serde_json::Value| {
        let (http, url, key) = (
            app.http.clone(),
            format!("{}/api/v1/channels/{ch}", app.api),
            key.clone(),
        );
        async move {
            let r = http
                .patch(url)
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .unwrap();
            (
                r.status().as_u16(),
                r.json::<serde_json::Value>().await.unwrap(),
            )
        }
    };
    let (s, v) = patch(json!({ "rate_limit": "1000/m" })).await;
    assert_eq!((s, v["rate_limit"].as_str()), (200, Some("1000/m")));
    let (s, v) = patch(json!({ "rate_limit": "5000/h" })).await;
    assert_eq!((s, v["rate_limit"].as_str()), (200, Some("5000/h")));
    let (s, _) = patch(json!({ "rate_limit": "80/d" })).await;
    assert_eq!(s, 422);
    let (s, v) = patch(json!({ "rate_limit": null })).await;
    assert_eq!(
        (s, v["rate_limit"].is_null()),
        (200, true),
        "null removes the limit"
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_slow_channel_cannot_hold_the_pool(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.worker.request_timeout_ms = 10_000;
        s.worker.channel_concurrency_initial = 4;
        s.worker.channel_latency_target_ms = 1_000;
    })
    .await;
    let (_, slow_key) = app.tenant("slow-co", "default").await;
    let (_, fast_key) = app.tenant("fast-co", "default").await;
    let slow = app.channel(&slow_key, "slow").await;
    let fast = app.channel(&fast_key, "fast").await;
    app.receiver
        .set("slow", Behavior::Delay(Duration::from_secs(5), 200));
    app.deliver_many(&slow_key, slow, 1_000).await;

    let sent_at = app
        .stream(&fast_key, fast, 60, Duration::from_millis(50))
        .await;
    assert_eq!(
        app.receiver
            .wait_for("fast", 60, Duration::from_secs(10))
            .await,
        60
    );
    let fast_p95 = p95(app.latencies_ms("fast", &sent_at));
    let slow_in_flight: i64 =
        sqlx::query_scalar("SELECT count(*) FROM jobs WHERE group_id = $1 AND state = 'executing'")
            .bind(slow)
            .fetch_one(&pool)
            .await
            .unwrap();
    println!(
        "slow channel (5 s per request, 1000 pending): {} requests so far, {slow_in_flight} in flight; fast channel p95 {fast_p95} ms",
        app.receiver.count("slow")
    );
    assert!(
        slow_in_flight <= 4,
        "the channel's adaptive limit (starting at 4, falling on 5 s answers) holds: {slow_in_flight} in flight"
    );
    assert!(
        fast_p95 < 1_000,
        "the fast channel keeps flowing: p95 {fast_p95} ms"
    );
    let used: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries WHERE channel_id = $1 AND attempts > 1",
    )
    .bind(slow)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(used, 0, "jobs sent back by the cap used no attempt");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_bulk_backlog_does_not_delay_the_high_tier(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, bulk_key) = app.tenant("bulk-co", "bulk").await;
    let (_, high_key) = app.tenant("vip-co", "high").await;
    let bulk = app.channel(&bulk_key, "bulk").await;
    let high = app.channel(&high_key, "vip").await;
    app.deliver_many(&bulk_key, bulk, 5_000).await;

    let sent_at = app
        .stream(&high_key, high, 50, Duration::from_millis(40))
        .await;
    assert_eq!(
        app.receiver
            .wait_for("vip", 50, Duration::from_secs(10))
            .await,
        50
    );
    let high_p95 = p95(app.latencies_ms("vip", &sent_at));
    let bulk_done = app.receiver.count("bulk");
    println!("high tier beside a 5000 bulk backlog: p95 {high_p95} ms; bulk delivered so far {bulk_done}");
    assert!(
        bulk_done < 5_000,
        "the bulk backlog was still there while the high tier was measured"
    );
    assert!(high_p95 < 500, "high-tier p95 {high_p95} ms");
    let queues: Vec<String> = sqlx::query_scalar("SELECT DISTINCT queue FROM jobs ORDER BY queue")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        queues,
        vec!["deliveries_bulk".to_string(), "deliveries_high".to_string()]
    );
    assert!(eventually(Duration::from_secs(1), || async { true }).await);
    app.stop().await;
}
