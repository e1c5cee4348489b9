//! Rate limits across the cluster, the per-node channel cap, and tier queues.

use breakwater::Role;
use breakwater_e2e::{
    consecutive_failures, eventually, spawn_workers, stop_all, test_settings, wait_until, Behavior,
    TestApp,
};
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

/// The shortest time from the first to the last of any `n` consecutive sorted arrival times.
fn tightest_span(times: &[Instant], n: usize) -> Duration {
    times
        .windows(n)
        .map(|w| w[n - 1].duration_since(w[0]))
        .min()
        .unwrap_or(Duration::MAX)
}

/// How far ahead of the schedule `times[0] + k × interval` the k-th sorted arrival came, at the
/// most (zero when none did).
fn most_ahead_of_schedule(times: &[Instant], interval: Duration) -> Duration {
    times
        .iter()
        .enumerate()
        .map(|(k, t)| (times[0] + interval * k as u32).saturating_duration_since(*t))
        .max()
        .unwrap_or_default()
}

/// The most a request's arrival at the receiver may trail the moment the database granted its
/// send (the load read, signing, the HTTP send, on a loaded 2-core machine in a debug build).
/// The limit holds on the database's clock; the receiver sees the sends through this delay.
const ARRIVAL_DELAY_MAX: Duration = Duration::from_millis(250);

fn p95(v: Vec<u128>) -> u128 {
    v[(v.len() * 95).div_ceil(100).saturating_sub(1)]
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_rate_limit_holds_across_two_nodes_and_spreads_requests(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let nodes = spawn_workers(&pool, 2, &test_settings());
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
    app.wait_received("limited", 400, Duration::from_secs(90))
        .await;
    let took = t0.elapsed();
    stop_all(nodes);
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
        "20/s over two nodes: 400 deliveries in {:.2} s; busiest 1-second window: {max} requests; 21 arrivals within at least {:?}; at most {:?} ahead of one per 50 ms",
        took.as_secs_f64(),
        tightest_span(&times, 21),
        most_ahead_of_schedule(&times, Duration::from_millis(50)),
    );
    // Sends are granted at least 50 ms apart on the database clock (no burst); each arrives up
    // to ARRIVAL_DELAY_MAX after its grant, which can bring arrivals closer than 50 ms (a
    // 1-second window of arrivals saw 22 on a loaded machine). So any 21 arrivals span at
    // least 1 s less that delay, and no arrival is further ahead of one per 50 ms from the
    // first than that delay: a doubled rate (two nodes each sending at the limit), a burst of
    // more than five, or a rate 10% over the limit fails one of them.
    let tightest = tightest_span(&times, 21);
    assert!(
        tightest >= Duration::from_secs(1) - ARRIVAL_DELAY_MAX,
        "21 requests arrived within {tightest:?} (limit 20/s, strict; busiest 1-s window {max})"
    );
    let ahead = most_ahead_of_schedule(&times, Duration::from_millis(50));
    assert!(
        ahead <= ARRIVAL_DELAY_MAX,
        "an arrival came {ahead:?} ahead of one per 50 ms from the first: over the limit"
    );
    // 400 at 20/s cannot finish in less than ~19 s plus the first window's burst. How much
    // longer it takes depends on the machine's load, so the upper side is not asserted: the
    // spread is, every second of the run must see requests (no stall, no burst-then-wait).
    assert!(
        took.as_secs_f64() >= 17.0,
        "400 deliveries at 20/s finished in {:.2} s: the limit did not hold",
        took.as_secs_f64()
    );
    let span = times.last().unwrap().duration_since(times[0]).as_secs() as usize + 1;
    let busy_seconds = times
        .iter()
        .map(|t| t.duration_since(times[0]).as_secs())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert!(
        busy_seconds + 1 >= span,
        "requests were not spread: {busy_seconds} of {span} seconds saw one"
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
    let failures = consecutive_failures(&pool, ch).await;
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
    let patch = |body: serde_json::Value| app.patch_channel(&key, ch, body);
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
        s.worker.channel_concurrency_ceiling = 16;
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
    app.wait_received("fast", 60, Duration::from_secs(10)).await;
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
    // A steady 5-s endpoint is no sign of overload (its limit may grow from 4 once answers
    // come back), but never past its ceiling: the rest of the pool stays for others.
    assert!(
        slow_in_flight <= 16,
        "the channel's adaptive limit holds it to its ceiling (16): {slow_in_flight} in flight"
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

/// A healthy endpoint that always answers in 1.2 s (slower than the 1-s target the limit used
/// to have, which cut it to 1 in flight for good): its own latency is its baseline, so with a
/// backlog its limit doubles per round trip, from 4 to 16 within a few seconds.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_slow_but_steady_endpoint_gets_the_concurrency_its_backlog_needs(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.worker.request_timeout_ms = 10_000;
    })
    .await;
    let (_, key) = app.tenant("steady-co", "default").await;
    let ch = app.channel(&key, "steady").await;
    app.receiver
        .set("steady", Behavior::Delay(Duration::from_millis(1_200), 200));
    app.deliver_many(&key, ch, 300).await;

    // The channel view's in-flight count, every 100 ms, until it reaches 16 (or 30 s pass).
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while t0.elapsed() < Duration::from_secs(30) {
        let (s, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
        assert_eq!(s, 200, "{v}");
        let c = &v["concurrency"];
        let (in_flight, limit) = (
            c["in_flight"].as_i64().unwrap(),
            c["limit"].as_i64().unwrap(),
        );
        seen.push((t0.elapsed().as_millis(), in_flight, limit));
        if in_flight >= 16 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let received = app.receiver.count("steady");
    let (recent, baseline): (Option<f32>, Option<f32>) = sqlx::query_as(
        "SELECT latency_recent_ms, latency_baseline_ms FROM job_groups WHERE group_id = $1",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    println!(
        "1.2-s endpoint, 300 pending: (ms, in flight, limit) {:?}; {received} received; recent {recent:?} ms, baseline {baseline:?} ms",
        seen.iter().step_by(5).collect::<Vec<_>>()
    );
    let most = seen.iter().map(|&(_, n, _)| n).max().unwrap_or(0);
    assert!(
        most >= 16,
        "a steady 1.2-s endpoint with a backlog reaches 16 in flight within 30 s (the old fixed \
         1-s target kept it at 1): at most {most}"
    );
    let retried: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries WHERE channel_id = $1 AND attempts > 1",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(retried, 0, "no attempt failed on the way");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_bulk_backlog_does_not_delay_the_high_tier(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, bulk_key) = app.tenant("bulk-co", "bulk").await;
    let (_, high_key) = app.tenant("vip-co", "high").await;
    let bulk = app.channel(&bulk_key, "bulk").await;
    let high = app.channel(&high_key, "vip").await;
    const BULK: usize = 5_000;
    app.deliver_many(&bulk_key, bulk, BULK).await;

    // One high-tier delivery every 20 ms: most are sent while the bulk backlog drains.
    let sent_at = app
        .stream(&high_key, high, 50, Duration::from_millis(20))
        .await;
    app.wait_received("vip", 50, Duration::from_secs(10)).await;
    let high_p95 = p95(app.latencies_ms("vip", &sent_at));
    let bulk_done = app.receiver.count("bulk");
    // For each high-tier delivery sent while at least 1 000 of the bulk backlog were left: the
    // share of what was left that arrived while it waited (from its enqueue to its arrival).
    // Behind the backlog, one would wait for all of it (a share of 1); beside it, only for what
    // the bulk tier's own workers send in the moment a high-tier delivery takes. A share, not a
    // time, so a loaded machine, which slows both tiers alike, does not move it much (an
    // assertion on the p95 in ms failed once beside a parallel build); and not a count either,
    // which grows with the bulk tier's own speed (it failed once the bulk tier got faster).
    let bulk_at: Vec<Instant> = {
        let mut v: Vec<Instant> = app.receiver.received("bulk").iter().map(|r| r.at).collect();
        v.sort();
        v
    };
    let mut shares: Vec<u128> = app
        .receiver
        .received("vip")
        .iter()
        .filter_map(|r| {
            let sent = *sent_at.get(r.webhook_id.as_ref()?)?;
            let from = bulk_at.partition_point(|t| *t <= sent);
            let to = bulk_at.partition_point(|t| *t <= r.at);
            let left = BULK - from;
            // In per mille of what was left.
            (left >= 1_000).then_some(((to - from) * 1000 / left) as u128)
        })
        .collect();
    shares.sort();
    let measured = shares.len();
    println!("high tier beside a {BULK} bulk backlog: p95 {high_p95} ms; bulk delivered so far {bulk_done}; {measured} of 50 sent with at least 1000 bulk left");
    assert!(
        measured >= 25,
        "only {measured} of 50 high-tier deliveries were sent while at least 1000 bulk ones waited: the test measured nothing"
    );
    let share_p95 = p95(shares);
    println!("share of the bulk backlog left that arrived while a high-tier one waited: p95 {share_p95} per mille");
    // Behind the backlog every one of them would see all of what was left arrive first
    // (1000‰); beside it most overtake a good part of it. Measured at 115–701‰ (p95) on a
    // loaded 2-core machine, debug build.
    assert!(
        share_p95 < 800,
        "{share_p95}‰ of the bulk backlog left (p95) arrived while a high-tier one waited ({high_p95} ms): it waited behind the bulk backlog"
    );
    let queues: Vec<String> = sqlx::query_scalar("SELECT DISTINCT queue FROM jobs ORDER BY queue")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        queues,
        vec!["deliveries_bulk".to_string(), "deliveries_high".to_string()]
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_frozen_transaction_on_one_channel_blocks_nobody_else(pool: PgPool) {
    // The production pool size (config/default.toml), not the tests' smaller one.
    let app = TestApp::spawn_with(pool.clone(), |s| s.database.max_connections = 20).await;
    let (_, key_a) = app.tenant("frozen-co", "default").await;
    let (_, key_b) = app.tenant("other-co", "default").await;
    let a = app.channel(&key_a, "a").await;
    let b = app.channel(&key_b, "b").await;

    // A worker frozen between its update of channel A's row and its commit: the row stays
    // locked (this connection has no server-side timeouts of its own).
    let mut frozen = pool.acquire().await.unwrap();
    sqlx::query("BEGIN").execute(&mut *frozen).await.unwrap();
    sqlx::query(
        "UPDATE channels SET consecutive_failures = consecutive_failures + 1 WHERE id = $1",
    )
    .bind(a)
    .execute(&mut *frozen)
    .await
    .unwrap();

    // 30 enqueues to A at once: each waits at most the API's lock_timeout, then 503.
    let mut waiting = Vec::new();
    for i in 0..30 {
        let (http, url, key) = (
            app.http.clone(),
            format!("{}/api/v1/channels/{a}/deliveries", app.api),
            key_a.clone(),
        );
        waiting.push(tokio::spawn(async move {
            let r = http
                .post(url)
                .bearer_auth(key)
                .json(&json!({ "event_type": "t", "payload": { "i": i } }))
                .send()
                .await
                .unwrap();
            let retry_after = r.headers().get("retry-after").is_some();
            (r.status().as_u16(), retry_after)
        }));
    }
    // Until they wait on the frozen row's lock in the database.
    wait_until(
        Duration::from_secs(5),
        "enqueues to A wait on the locked row",
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
                >= 1
        },
    )
    .await;
    // Meanwhile another tenant's enqueue and the readiness probe answer promptly.
    let t = Instant::now();
    let (s, v) = app
        .post(
            &format!("/api/v1/channels/{b}/deliveries"),
            &key_b,
            &json!({ "event_type": "t", "payload": {} }),
        )
        .await;
    let enqueue_ms = t.elapsed().as_millis();
    assert_eq!(s, 202, "{v}");
    let t = Instant::now();
    let ready = app
        .http
        .get(format!("{}/readyz", app.api))
        .send()
        .await
        .unwrap()
        .status();
    let ready_ms = t.elapsed().as_millis();
    assert_eq!(ready, 200);
    assert!(
        enqueue_ms < 1_000 && ready_ms < 1_000,
        "another tenant's enqueue took {enqueue_ms} ms, /readyz {ready_ms} ms"
    );
    for w in waiting {
        let (status, retry_after) = w.await.unwrap();
        assert!(
            status == 503 && retry_after,
            "a request to the locked channel gets 503 with Retry-After, not {status}"
        );
    }
    app.wait_received("b", 1, Duration::from_secs(10)).await;
    // Once the transaction ends, A takes deliveries again, and nothing half-done was left.
    sqlx::query("ROLLBACK").execute(&mut *frozen).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE channel_id = $1")
        .bind(a)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "a refused enqueue left nothing behind");
    app.deliver_many(&key_a, a, 3).await;
    app.wait_received("a", 3, Duration::from_secs(10)).await;
    app.stop().await;
}

/// An enqueue wakes the workers (`NOTIFY`), so its `COMMIT` takes Postgres's one
/// notification-queue lock, which every committing transaction that notified holds in turn
/// through its WAL flush. Waiting for that queue is not waiting for a row another transaction
/// holds: the API's `lock_timeout` (250 ms) must not turn it into a 503. (It did: a burst of
/// commits in the isolation benchmark's timeout mode gave a healthy tenant's enqueues 503s.)
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn an_enqueue_waits_its_turn_to_commit_behind_other_notifying_commits(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (key, ch) = app.tenant_with_channel("ep").await;

    // Eight transactions that notify, then hold the notification lock about 100 ms each through
    // their commit (`commit_delay`: the WAL flush waits that long before it writes;
    // `commit_siblings = 0`: whatever else runs), queued one behind another: ~800 ms in all.
    // Each on a connection of its own (the test pool has fewer).
    let holds: Vec<_> = (0..8)
        .map(|_| {
            let options = pool.connect_options();
            tokio::spawn(async move {
                let mut conn: sqlx::PgConnection =
                    sqlx::Connection::connect_with(&*options).await.unwrap();
                let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
                for sql in [
                    "SELECT pg_notify('bw_test_hold', 'x')",
                    "SET LOCAL commit_delay = 100000",
                    "SET LOCAL commit_siblings = 0",
                    // A catalog write, so the commit has WAL to flush.
                    "CREATE TEMP TABLE hold (a int) ON COMMIT DROP",
                ] {
                    sqlx::query(sql).execute(&mut *tx).await.unwrap();
                }
                tx.commit().await.unwrap();
            })
        })
        .collect();
    // Until five of them wait for the lock: it stays busy for about 500 ms more.
    wait_until(
        Duration::from_secs(10),
        "five commits wait for the notification lock",
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_locks
                 WHERE locktype = 'object' AND classid = 'pg_database'::regclass AND objid = 0
                   AND NOT granted",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
                >= 5
        },
    )
    .await;

    let (s, v) = app
        .post(
            &format!("/api/v1/channels/{ch}/deliveries"),
            &key,
            &json!({ "event_type": "t", "payload": {} }),
        )
        .await;
    assert_eq!(s, 202, "the enqueue waits for its turn to commit: {v}");
    for h in holds {
        h.await.unwrap();
    }
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE channel_id = $1")
        .bind(ch)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 1, "the accepted delivery is stored");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_changed_rate_limit_applies_at_once_to_the_deliveries_already_waiting(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (key, ch) = app.tenant_with_channel("limited").await;
    let (app_ref, key_ref) = (&app, &key);
    let patch = |body: serde_json::Value| async move {
        assert_eq!(app_ref.patch_channel(key_ref, ch, body).await.0, 200);
    };
    // Deliveries holding a turn of the old limit (minutes to hours out): a turn taken under the
    // new 10/s limit is at most a few hundred ms out and may be taken at any moment.
    let held = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM deliveries
             WHERE channel_id = $1 AND rate_slot_at > now() + interval '1 minute'",
        )
        .bind(ch)
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    // 1/h: the first of 3 goes, the other two hold turns an hour and two hours out.
    patch(json!({ "rate_limit": "1/h" })).await;
    app.deliver_many(&key, ch, 3).await;
    app.wait_received("limited", 1, Duration::from_secs(10))
        .await;
    assert!(eventually(Duration::from_secs(10), || async { held().await == 2 }).await);
    // 10/s, then 30 more: all 33 arrive at the new rate (32 × 100 ms ≈ 3.2 s), none waits an hour.
    patch(json!({ "rate_limit": "10/s" })).await;
    assert_eq!(
        held().await,
        0,
        "the old turns are dropped with the old limit"
    );
    app.deliver_many(&key, ch, 30).await;
    // Every waiting delivery follows the new limit.
    app.wait_received("limited", 33, Duration::from_secs(8))
        .await;

    // Removing the limit releases the waiting ones at once.
    patch(json!({ "rate_limit": "1/h" })).await;
    app.deliver_many(&key, ch, 3).await;
    app.wait_received("limited", 34, Duration::from_secs(10))
        .await;
    assert!(eventually(Duration::from_secs(10), || async { held().await == 2 }).await);
    patch(json!({ "rate_limit": null })).await;
    // No limit: nothing waits.
    app.wait_received("limited", 36, Duration::from_secs(3))
        .await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_channels_concurrency_ceiling_is_set_shown_and_checked(pool: PgPool) {
    let app = TestApp::spawn_role(pool, Role::Api, |_| {}).await;
    let (_, key) = app.tenant("acme", "default").await;
    let (s, v) = app
        .post(
            "/api/v1/channels",
            &key,
            &json!({ "url": app.receiver.url("x"), "max_in_flight": 2 }),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let ch: Uuid = v["id"].as_str().unwrap().parse().unwrap();
    let (_, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(v["max_in_flight"], 2);
    assert_eq!(
        v["concurrency"],
        json!({ "in_flight": 0, "waiting": 0, "limit": 2, "floor": 1, "ceiling": 2 }),
        "the initial limit (4) is held under the channel's ceiling"
    );
    let (s, v) = app
        .patch_channel(&key, ch, json!({ "max_in_flight": null }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["concurrency"],
        json!({ "in_flight": 0, "waiting": 0, "limit": 4, "floor": 1, "ceiling": 64 })
    );
    for bad in [json!(0), json!(-3), json!(10_001), json!("ten")] {
        let (s, v) = app
            .patch_channel(&key, ch, json!({ "max_in_flight": bad }))
            .await;
        assert_eq!(s, 422, "{bad}: {v}");
        assert!(
            v["field"] == "max_in_flight"
                || v["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("max_in_flight"),
            "the problem names the field: {v}"
        );
    }
    app.stop().await;
}

/// A lock that one of the queue's own statements in an enqueue waits for past the API's
/// `lock_timeout` (here the jobs table held in `SHARE` mode by another session; under load, a
/// slow disk's relation extension) is a 503 with `Retry-After` that changes nothing, as any other
/// lock timeout, not a 500. (The isolation benchmark on a machine with slow fsync answered 24–42
/// enqueues per run with 500: the queue's database errors missed the 503 mapping.)
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_lock_timeout_in_the_queue_is_a_503_that_changes_nothing(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    let mut holder = pool.acquire().await.unwrap();
    sqlx::query("BEGIN").execute(&mut *holder).await.unwrap();
    sqlx::query("LOCK TABLE jobs IN SHARE MODE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let r = app
        .http
        .post(format!("{}/api/v1/channels/{channel}/deliveries", app.api))
        .bearer_auth(&key)
        .json(&json!({ "event_type": "t", "payload": {} }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry_after = r.headers().get("retry-after").is_some();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!((status, retry_after), (503, true), "{body}");
    assert_eq!(body["code"], "unavailable");
    sqlx::query("ROLLBACK").execute(&mut *holder).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "the refused enqueue left nothing behind");
    let d = app.deliver(&key, channel, json!({})).await;
    assert_eq!(app.delivery_status(d).await, "pending");
    app.stop().await;
}

/// A rate-limited channel's retry keeps its place. A 5/s channel with 50
/// deliveries waiting (10 s of backlog); the 4th request is answered 503 once, and its retry is
/// due 1 s later (the backoff). It takes the retry lane, ahead of the deliveries accepted after
/// it, so it goes about 1 s after the failure, not at the end of the backlog (~9 s later, where
/// a fresh turn behind everything queued put it). The bound leaves 3 s for a loaded machine's
/// lag. The limit still holds with the retry in it, and the line keeps its order.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_rate_limited_retry_keeps_its_place_in_line(pool: PgPool) {
    const BACKOFF: Duration = Duration::from_secs(1);
    const INTERVAL: Duration = Duration::from_millis(200);
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.worker.backoff_base_ms = BACKOFF.as_millis() as u64;
        s.worker.backoff_cap_ms = BACKOFF.as_millis() as u64;
        s.worker.backoff_jitter = 0.0;
    })
    .await;
    let (_, key) = app.tenant("limited-retry", "default").await;
    let ch = app
        .channel_with(&key, "limited", json!({ "rate_limit": "5/s" }))
        .await;
    let mut script = vec![Behavior::Status(200, None); 3];
    script.push(Behavior::Status(503, None));
    script.push(Behavior::Status(200, None));
    app.receiver.set("limited", Behavior::Sequence(script));
    app.deliver_many(&key, ch, 50).await;
    app.wait_received("limited", 51, Duration::from_secs(60))
        .await;

    let mut got = app.receiver.received("limited");
    got.sort_by_key(|r| r.at);
    let failed = got
        .iter()
        .position(|r| r.answered == Some(503))
        .expect("one request was answered 503");
    let id = got[failed].webhook_id.clone();
    let retry = got
        .iter()
        .rposition(|r| r.webhook_id == id)
        .expect("the failed delivery is sent again");
    assert!(retry > failed, "the retry is a later request");
    let delay = got[retry].at.duration_since(got[failed].at);
    let after_it = got.len() - 1 - retry;
    println!(
        "503 at request {failed}; retry at request {retry} after {delay:?}; {after_it} after it"
    );
    assert!(
        delay <= BACKOFF + Duration::from_secs(3),
        "the retry went {delay:?} after the failure (backoff {BACKOFF:?}): it lost its place"
    );
    assert!(
        after_it >= 30,
        "only {after_it} deliveries accepted after the retry went after it"
    );
    let times: Vec<Instant> = got.iter().map(|r| r.at).collect();
    let tightest = tightest_span(&times, 6);
    assert!(
        tightest >= Duration::from_secs(1) - ARRIVAL_DELAY_MAX,
        "6 requests arrived within {tightest:?} (limit 5/s, strict)"
    );
    let ahead = most_ahead_of_schedule(&times, INTERVAL);
    assert!(
        ahead <= ARRIVAL_DELAY_MAX,
        "an arrival came {ahead:?} ahead of one per {INTERVAL:?} from the first: over the limit"
    );
    app.wait_settled(ch).await;
    app.stop().await;
}
