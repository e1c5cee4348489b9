//! The channel circuit end to end: several nodes, real HTTP, the real queue.

use breakwater::Role;
use breakwater_core::circuit::{self, CircuitConfig, ProbeStep};
use breakwater_core::testing;
use breakwater_e2e::probe::{end_cooldown, open_circuit, probe_step};
use breakwater_e2e::{
    audit_count, count_status, eventually, spawn_workers, stop_all, test_settings, wait_until,
    Behavior, TestApp,
};
use serde_json::json;
use sqlx::PgPool;
use std::time::{Duration, Instant};
use uuid::Uuid;

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn three_nodes_open_once_then_send_one_probe_per_cooldown(pool: PgPool) {
    // API in this runtime; three worker nodes, each on its own runtime, pool and node id.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let mut node_settings = test_settings();
    node_settings.worker.pool_default = 4;
    let nodes = spawn_workers(&pool, 3, &node_settings);
    let per_node = node_settings.worker.pool_default as i64;
    let threshold = 5;

    let (key, ch) = app.tenant_with_channel("dead").await;
    app.receiver.set("dead", Behavior::Status(503, None));
    app.deliver_many(&key, ch, 200).await;

    assert!(
        eventually(Duration::from_secs(15), || async {
            app.circuit_state(ch).await != "closed"
        })
        .await
    );
    // Watch the open circuit over several cooldowns (0.5 s, then 1 s capped): until four probes
    // went out, which takes at least 0.5 + 0.5 + 1 + 1 s.
    wait_until(
        Duration::from_secs(20),
        "four probes were sent to the open circuit",
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM delivery_attempts WHERE channel_id = $1 AND probe",
            )
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap()
                >= 4
        },
    )
    .await;
    stop_all(nodes);

    assert_eq!(
        audit_count(&pool, ch, &["circuit.opened"]).await,
        1,
        "exactly one closed → open"
    );
    let transitions: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE channel_id = $1 AND from_state = 'closed' AND to_state = 'open'",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(transitions, 1);

    let received = app.receiver.count("dead") as i64;
    let (attempts, probes): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE probe) FROM delivery_attempts WHERE channel_id = $1",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        received, attempts,
        "every request the endpoint saw is a recorded attempt"
    );
    let before_open = attempts - probes;
    println!("dead endpoint: {before_open} requests before/while opening (threshold {threshold}, in flight ≤ {}), {probes} probe requests after", 3 * per_node);
    assert!(before_open >= threshold);
    assert!(
        before_open <= threshold + 3 * per_node,
        "{before_open} non-probe requests: more than the threshold plus what was in flight"
    );

    // After opening, only probes: one per cooldown window across all three nodes.
    let opened_at: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
        "SELECT at FROM audit_log WHERE channel_id = $1 AND action = 'circuit.opened'",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    let late_non_probes: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM delivery_attempts WHERE channel_id = $1 AND NOT probe AND started_at > $2 + interval '250 ms'",
    )
    .bind(ch)
    .bind(opened_at)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        late_non_probes, 0,
        "nothing but probes is sent once the circuit is open"
    );
    let probe_starts: Vec<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
        "SELECT started_at FROM delivery_attempts WHERE channel_id = $1 AND probe ORDER BY started_at",
    )
    .bind(ch)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(probes >= 4, "probes kept coming: {probes}");
    // At most one probe per cooldown window (≥ 0.5 s) of the time watched.
    let watched_ms = (*probe_starts.last().unwrap() - opened_at).num_milliseconds();
    assert!(
        probes <= watched_ms / 450 + 1,
        "at most one probe per cooldown window in {watched_ms} ms: {probes}"
    );
    assert!(
        (probe_starts[0] - opened_at).num_milliseconds() >= 450,
        "first probe after the cooldown"
    );
    for w in probe_starts.windows(2) {
        let gap = (w[1] - w[0]).num_milliseconds();
        assert!(gap >= 450, "probes {gap} ms apart: less than a cooldown");
    }
    let started = audit_count(&pool, ch, &["circuit.probe_started"]).await;
    assert!(
        probes == started || probes + 1 == started,
        "one request per probe: {probes} vs {started}"
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_dead_backlog_of_2000_does_not_hold_up_another_tenant(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, dead_key) = app.tenant("dead-co", "default").await;
    let (_, ok_key) = app.tenant("fine-co", "default").await;
    let dead = app.channel(&dead_key, "dead").await;
    let fine = app.channel(&ok_key, "fine").await;
    app.receiver.set("dead", Behavior::Hang); // the worst kind: every request times out
    app.deliver_many(&dead_key, dead, 2_000).await;

    let t0 = Instant::now();
    let sent_at = app
        .stream(&ok_key, fine, 100, Duration::from_millis(20))
        .await;
    app.wait_received("fine", 100, Duration::from_secs(20))
        .await;
    let lat = app.latencies_ms("fine", &sent_at);
    println!(
        "healthy channel beside a hanging 2000-backlog: p50 {} ms, p95 {} ms, max {} ms over {:.1} s",
        lat[49],
        lat[94],
        lat[99],
        t0.elapsed().as_secs_f64()
    );
    // With the per-node cap only 4 requests hang at a time, so the fifth timeout (2 s each)
    // comes after two rounds; wait for the circuit to open, then check the backlog is parked
    // and the healthy channel still flows.
    assert!(
        eventually(Duration::from_secs(15), || async {
            app.circuit_state(dead).await != "closed"
        })
        .await,
        "the dead channel's circuit opens"
    );
    for i in 100..120 {
        app.deliver(&ok_key, fine, json!({ "i": i })).await;
    }
    // Healthy deliveries arrive while the backlog is parked.
    app.wait_received("fine", 120, Duration::from_secs(10))
        .await;
    let (s, v) = app
        .get(&format!("/api/v1/channels/{dead}"), &dead_key)
        .await;
    assert_eq!(s, 200);
    let parked = v["circuit"]["parked"].as_i64().unwrap();
    assert!(parked >= 2_000 - 40, "backlog parked: {parked}");
    assert!(
        app.receiver.count("dead") <= 5 + 20 + 2,
        "dead endpoint got {} requests",
        app.receiver.count("dead")
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn recovery_releases_the_backlog_exactly_once_without_spending_attempts(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(&key, "flaky", json!({ "cooldown_ms": 300 }))
        .await;
    app.receiver.set("flaky", Behavior::Status(503, None));
    let ids = app.deliver_many(&key, ch, 500).await;
    app.wait_circuit(ch, "open", Duration::from_secs(10)).await;
    let paused = count_status(&app.pool, ch, "paused").await;
    assert!(
        paused > 400,
        "the backlog's deliveries are marked paused: {paused}"
    );

    app.receiver.set("flaky", Behavior::Status(200, None));
    app.wait_circuit(ch, "closed", Duration::from_secs(15))
        .await;
    // Every delivery arrives.
    app.wait_deliveries(ch, "delivered", 500, Duration::from_secs(20))
        .await;
    let ok: Vec<String> = app
        .receiver
        .received("flaky")
        .into_iter()
        .filter(|r| r.answered == Some(200))
        .map(|r| r.webhook_id.unwrap())
        .collect();
    let distinct: std::collections::HashSet<_> = ok.iter().collect();
    assert_eq!(
        ok.len(),
        500,
        "one successful request per delivery: {} duplicates",
        ok.len() - distinct.len()
    );
    assert_eq!(distinct.len(), 500);
    assert!(
        ids.iter().all(|id| distinct.contains(&id.to_string())),
        "none lost"
    );
    // Parking never used an attempt: each delivery's attempts are exactly its HTTP requests,
    // and its job's attempt count agrees.
    let mismatched: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries d
         JOIN jobs j ON j.args->>'delivery_id' = d.id::text
         WHERE d.channel_id = $1
           AND (d.attempts <> (SELECT count(*) FROM delivery_attempts a WHERE a.delivery_id = d.id)
                OR j.attempt <> d.attempts)",
    )
    .bind(ch)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(mismatched, 0);
    let once: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries WHERE channel_id = $1 AND attempts = 1",
    )
    .bind(ch)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(
        once >= 450,
        "deliveries never tried before opening went out once: {once}"
    );
    assert_eq!(audit_count(&app.pool, ch, &["circuit.closed"]).await, 1);
    app.stop().await;
}

/// Opens `channel` and moves it to half-open with the probe watcher's own steps.
async fn open_then_half_open(pool: &PgPool, channel: Uuid, cfg: &CircuitConfig) -> i64 {
    open_circuit(pool, channel, cfg).await;
    end_cooldown(pool, channel).await;
    let ProbeStep::Started { generation, .. } = probe_step(pool, channel, cfg).await else {
        panic!("probe did not start")
    };
    generation
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_stale_probe_result_changes_nothing(pool: PgPool) {
    // API only: this test drives the circuit itself.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (key, ch) = app.tenant_with_channel("x").await;
    app.deliver_many(&key, ch, 10).await;
    let cfg = test_settings().circuit;

    let g1 = open_then_half_open(&pool, ch, &cfg).await;
    // The probe of g1 fails: re-opened under a new generation.
    let mut tx = pool.begin().await.unwrap();
    let t = testing::probe_failed(&mut tx, ch, g1, "HTTP 503", &cfg)
        .await
        .unwrap()
        .expect("reopened");
    tx.commit().await.unwrap();
    assert!(t.generation > g1);

    // A late success of the g1 probe (e.g. a second copy of the result) must not close it.
    let mut tx = pool.begin().await.unwrap();
    assert_eq!(
        testing::probe_succeeded(&mut tx, ch, g1, 3, &cfg)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        testing::probe_failed(&mut tx, ch, g1, "late", &cfg)
            .await
            .unwrap(),
        None
    );
    tx.commit().await.unwrap();
    assert_eq!(app.circuit_state(ch).await, "open");
    assert_eq!(audit_count(&pool, ch, &["circuit.closed"]).await, 0);
    let parked: i64 =
        sqlx::query_scalar("SELECT count(*) FROM jobs j JOIN job_groups g ON g.group_id = j.group_id AND g.parked WHERE j.group_id = $1 AND j.state IN ('available', 'scheduled')")
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(parked, 10, "nothing released");

    // A probe whose lease expires is taken over by the next one (new generation); the old
    // probe's result is then stale too.
    end_cooldown(&pool, ch).await;
    let ProbeStep::Started { generation: g2, .. } = probe_step(&pool, ch, &cfg).await else {
        panic!()
    };
    sqlx::query("UPDATE channels SET probe_deadline = now() - interval '1 s' WHERE id = $1")
        .bind(ch)
        .execute(&pool)
        .await
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    let ProbeStep::Started { generation: g3, .. } =
        testing::probe_step(&mut tx, ch, &cfg).await.unwrap()
    else {
        panic!("an expired probe lease must be taken over")
    };
    assert!(g3 > g2);
    assert_eq!(
        testing::probe_succeeded(&mut tx, ch, g2, 3, &cfg)
            .await
            .unwrap(),
        None,
        "the dead probe's result is stale"
    );
    assert!(
        testing::probe_succeeded(&mut tx, ch, g3, 3, &cfg)
            .await
            .unwrap()
            .is_some(),
        "the current probe closes it"
    );
    tx.commit().await.unwrap();
    assert_eq!(app.circuit_state(ch).await, "closed");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn fifty_racing_failures_make_one_transition(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (_, ch) = app.tenant_with_channel("x").await;
    let cfg = test_settings().circuit;
    let mut tasks = Vec::new();
    for i in 0..50 {
        let (pool, cfg) = (pool.clone(), cfg.clone());
        tasks.push(tokio::spawn(async move {
            let mut tx = pool.begin().await.unwrap();
            let t = testing::record_failure(&mut tx, ch, &format!("failure {i}"), &cfg)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            t.is_some()
        }));
    }
    let mut won = 0;
    for t in tasks {
        won += t.await.unwrap() as usize;
    }
    assert_eq!(won, 1, "exactly one caller wins the transition");
    assert_eq!(audit_count(&pool, ch, &["circuit.opened"]).await, 1);
    let (state, failures): (String, i32) =
        sqlx::query_as("SELECT circuit_state, consecutive_failures FROM channels WHERE id = $1")
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(state, "open");
    assert_eq!(failures, 5, "failures after opening are not counted");
    let watchers: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE unique_key = $1")
        .bind(format!("probe:{ch}"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(watchers, 1, "one probe watcher");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_health_check_trips_once_on_the_transition_and_not_again_after_closing(pool: PgPool) {
    // A channel whose threshold is out of reach, so only the health check can open it.
    let app = TestApp::spawn_with(pool.clone(), |s| s.worker.max_attempts = 1).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(&key, "sick", json!({ "failure_threshold": 10000 }))
        .await;
    app.receiver.set("sick", Behavior::Status(503, None));
    app.deliver_many(&key, ch, 30).await;
    app.wait_deliveries(ch, "dead", 30, Duration::from_secs(10))
        .await;
    assert_eq!(
        app.circuit_state(ch).await,
        "closed",
        "the threshold alone does not trip it"
    );

    let cfg = test_settings().circuit; // 20 attempts, ratio 0.5, 1 h window
    let mut conn = pool.acquire().await.unwrap();
    let opened = circuit::health_check(&mut conn, &cfg).await.unwrap();
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].channel_id, ch);
    assert!(
        circuit::health_check(&mut conn, &cfg)
            .await
            .unwrap()
            .is_empty(),
        "no second trip"
    );
    assert_eq!(audit_count(&pool, ch, &["circuit.opened"]).await, 1);

    // Close it through a successful probe; the 30 failures are still in the window.
    end_cooldown(&pool, ch).await;
    let mut tx = pool.begin().await.unwrap();
    let ProbeStep::Started { generation, .. } =
        testing::probe_step(&mut tx, ch, &cfg).await.unwrap()
    else {
        panic!()
    };
    testing::probe_succeeded(&mut tx, ch, generation, 3, &cfg)
        .await
        .unwrap()
        .expect("closed");
    tx.commit().await.unwrap();
    assert!(
        circuit::health_check(&mut conn, &cfg)
            .await
            .unwrap()
            .is_empty(),
        "old failures do not re-open it"
    );
    assert_eq!(app.circuit_state(ch).await, "closed");
    assert_eq!(audit_count(&pool, ch, &["circuit.opened"]).await, 1);
    drop(conn);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn with_nothing_parked_the_next_delivery_becomes_the_only_probe(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.worker.max_attempts = 1).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(
            &key,
            "ep",
            json!({ "failure_threshold": 1, "cooldown_ms": 200 }),
        )
        .await;
    app.receiver.set("ep", Behavior::Status(503, None));
    app.deliver(&key, ch, json!({})).await;
    // Opens; the one delivery is dead (1 attempt), so nothing is parked; the watcher moves
    // the circuit to half-open with no probe delivery.
    app.wait_circuit(ch, "half_open", Duration::from_secs(10))
        .await;
    app.receiver.set("ep", Behavior::Status(200, None));
    for i in 0..5 {
        app.deliver(&key, ch, json!({ "i": i })).await;
    }
    app.wait_received("ep", 6, Duration::from_secs(15)).await;
    app.wait_circuit(ch, "closed", Duration::from_secs(5)).await;
    let probes: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM delivery_attempts WHERE channel_id = $1 AND probe",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(probes, 1, "exactly one of the new deliveries was the probe");
    // Nothing of the channel is left to send or in flight: the count below is final.
    app.wait_settled(ch).await;
    assert_eq!(
        app.receiver.count("ep"),
        6,
        "each new delivery went out once"
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn retry_after_holds_the_whole_channel_without_spending_attempts(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (key, ch) = app.tenant_with_channel("busy").await;
    app.receiver
        .set("busy", Behavior::Status(429, Some("2".into())));
    let first = app.deliver(&key, ch, json!({})).await;
    app.wait_received("busy", 1, Duration::from_secs(5)).await;
    let limited_at = app.receiver.received("busy")[0].at;
    app.receiver.set("busy", Behavior::Status(200, None));
    // The hold starts when the 429 is recorded (a request admitted before that cannot know).
    assert!(
        eventually(Duration::from_secs(5), || async {
            sqlx::query_scalar::<_, bool>(
                "SELECT retry_after_until IS NOT NULL FROM channels WHERE id = $1",
            )
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap()
        })
        .await
    );
    let others: Vec<Uuid> = {
        let mut v = Vec::new();
        for i in 0..5 {
            v.push(app.deliver(&key, ch, json!({ "i": i })).await);
        }
        v
    };
    app.wait_received("busy", 7, Duration::from_secs(10)).await;
    // The receiver answered all six; their attempts are on the rows once the worker recorded them.
    app.wait_deliveries(ch, "delivered", 6, Duration::from_secs(10))
        .await;
    let rest = app.receiver.received("busy");
    for r in &rest[1..] {
        let after = r.at.duration_since(limited_at);
        assert!(
            after >= Duration::from_millis(1_900),
            "a request {after:?} after the 429's Retry-After: 2"
        );
    }
    let attempts = |id: Uuid| {
        let pool = &pool;
        async move {
            sqlx::query_scalar::<_, i32>("SELECT attempts FROM deliveries WHERE id = $1")
                .bind(id)
                .fetch_one(pool)
                .await
                .unwrap()
        }
    };
    for id in &others {
        assert_eq!(
            attempts(*id).await,
            1,
            "waiting for Retry-After used no attempt"
        );
    }
    assert_eq!(
        attempts(first).await,
        2,
        "the limited delivery: its 429 and its success"
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn channel_overrides_are_patched_and_visible(pool: PgPool) {
    let app = TestApp::spawn_role(pool, Role::Api, |_| {}).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(&key, "x", json!({ "failure_threshold": 3 }))
        .await;
    let (s, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(s, 200);
    assert_eq!(v["circuit"]["state"], "closed");
    assert_eq!(v["circuit"]["failure_threshold"], 3);
    assert_eq!(
        v["circuit"]["cooldown_ms"], 500,
        "the global default shows through"
    );
    assert_eq!(v["circuit"]["parked"], 0);

    let r = app
        .http
        .patch(format!("{}/api/v1/channels/{ch}", app.api))
        .bearer_auth(&key)
        .json(&json!({ "cooldown_ms": 2500, "failure_threshold": null }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["circuit"]["cooldown_ms"], 2500);
    assert_eq!(
        v["circuit"]["failure_threshold"], 5,
        "null clears the override"
    );
    let r = app
        .http
        .patch(format!("{}/api/v1/channels/{ch}", app.api))
        .bearer_auth(&key)
        .json(&json!({ "failure_threshold": 0 }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let (_, other) = app.tenant("other", "default").await;
    let r = app
        .http
        .patch(format!("{}/api/v1/channels/{ch}", app.api))
        .bearer_auth(&other)
        .json(&json!({ "cooldown_ms": 1 }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "another tenant cannot touch it");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn an_open_channel_is_never_fetched_and_the_reconciler_repairs_a_missed_release(
    pool: PgPool,
) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    // A long cooldown: no probe runs during the test.
    let ch = app
        .channel_with(&key, "held", json!({ "cooldown_ms": 600_000 }))
        .await;
    let mut conn = pool.acquire().await.unwrap();
    let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
    circuit::apply_manual(
        &mut tx,
        ch,
        circuit::Manual::ForceOpen,
        circuit::ManualBy::Operator,
        "operator",
        "test",
        &CircuitConfig::default(),
    )
    .await
    .unwrap()
    .expect("opened");
    tx.commit().await.unwrap();
    app.deliver_many(&key, ch, 20).await;

    // While open, none of its jobs is ever claimed: they stay available and unattempted, and the
    // endpoint hears nothing, across several of the workers' fetches (the poll is 200 ms).
    let other = app.channel(&key, "other").await;
    app.deliver_many(&key, other, 10).await;
    app.wait_received("other", 10, Duration::from_secs(10))
        .await;
    let claimed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE group_id = $1 AND (attempt > 0 OR state <> 'available')",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((claimed, app.receiver.count("held")), (0, 0));

    // A release that was missed: the circuit is closed behind the breaker's back, its group
    // stays parked. The reconciler (every 5 s) notices and releases it with the same one-row
    // release; every delivery then arrives once.
    sqlx::query("UPDATE channels SET circuit_state = 'closed', next_probe_at = NULL WHERE id = $1")
        .bind(ch)
        .execute(&pool)
        .await
        .unwrap();
    app.wait_received("held", 20, Duration::from_secs(15)).await;
    // The receiver counts a request when it arrives: wait for the results to be recorded.
    app.wait_settled(ch).await;
    let attempts: i64 =
        sqlx::query_scalar("SELECT sum(attempts)::int8 FROM deliveries WHERE channel_id = $1")
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(attempts, 20, "parking never spent an attempt");
    app.stop().await;
}

/// A node and tenant `acme`'s channel to `endpoint`, which answers 503, with a 10-min cooldown
/// (the cap raised to match) and a threshold of 2, `n` deliveries waiting, its circuit open and
/// nothing of it in flight. Deliveries outlive the test (25 attempts). Returns the app, the
/// tenant's key, the channel and the deliveries.
async fn open_for_ten_minutes(
    pool: &PgPool,
    endpoint: &str,
    n: usize,
) -> (TestApp, String, Uuid, Vec<Uuid>) {
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.circuit.max_cooldown_ms = 600_000;
        s.worker.max_attempts = 25;
    })
    .await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(
            &key,
            endpoint,
            json!({ "cooldown_ms": 600_000, "failure_threshold": 2 }),
        )
        .await;
    app.receiver.set(endpoint, Behavior::Status(503, None));
    let ids = app.deliver_many(&key, ch, n).await;
    app.wait_circuit(ch, "open", Duration::from_secs(15)).await;
    wait_until(Duration::from_secs(10), "nothing in flight", || async {
        let (_, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
        v["concurrency"]["in_flight"] == 0
    })
    .await;
    (app, key, ch, ids)
}

/// The tenant's `action` (`pause` or `resume`) on channel `ch`: asserts 200, returns the view.
async fn tenant_action(app: &TestApp, key: &str, ch: Uuid, action: &str) -> serde_json::Value {
    let (s, v) = app
        .post_empty(&format!("/api/v1/channels/{ch}/{action}"), key)
        .await;
    assert_eq!(s, 200, "{action}: {v}");
    v
}

/// A tenant who fixes the URL of a channel whose circuit is open does not wait for the cooldown
/// the old endpoint earned (here 10 min): the next probe comes at once, to the new URL, and its
/// answer closes the circuit and releases the backlog.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_new_url_of_an_open_channel_is_probed_at_once(pool: PgPool) {
    let (app, key, ch, ids) = open_for_ten_minutes(&pool, "broken", 8).await;
    let far: bool = sqlx::query_scalar(
        "SELECT next_probe_at > now() + interval '5 min' FROM channels WHERE id = $1",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(far, "the cooldown of the old endpoint is 10 min");

    let (s, v) = app
        .patch_channel(&key, ch, json!({ "url": app.receiver.url("fixed") }))
        .await;
    assert_eq!(s, 200, "{v}");
    app.wait_circuit(ch, "closed", Duration::from_secs(15))
        .await;
    for id in ids {
        app.wait_delivery(id, "delivered", Duration::from_secs(15))
            .await;
    }
    assert!(
        app.receiver.count("fixed") >= 8,
        "every delivery went to the new URL"
    );
    app.stop().await;
}

/// A pause and a resume never close a breaker without a probe, and never bring its probe
/// forward: a channel paused while its circuit was open resumes to `open` with its probe time as
/// it was (here 10 min away: nothing is sent, the watcher waits for it); a pause that outlasts
/// the cooldown resumes with the probe due at once, and only that probe's answer closes it: a
/// pause and a resume must neither send the whole backlog at the dead endpoint nor, toggled five
/// times, make five probes and a 10-min cooldown.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_channel_paused_while_open_resumes_open_and_only_a_probe_closes_it(pool: PgPool) {
    let (app, key, ch, ids) = open_for_ten_minutes(&pool, "down", 6).await;
    let before = app.receiver.count("down");
    let path = format!("/api/v1/channels/{ch}");
    let (_, v) = app.get(&path, &key).await;
    let probe_at = v["next_probe_at"].clone();
    assert!(probe_at.is_string(), "{v}");

    // Quick toggles: the probe stays where the cooldown put it.
    for _ in 0..3 {
        let v = tenant_action(&app, &key, ch, "pause").await;
        assert_eq!(v["circuit"]["state"], "paused", "{v}");
        let v = tenant_action(&app, &key, ch, "resume").await;
        assert_eq!(
            v["circuit"]["state"], "open",
            "back to the breaker's verdict: {v}"
        );
        assert_eq!(
            (
                v["next_probe_at"].clone(),
                v["circuit"]["consecutive_failures"].clone()
            ),
            (probe_at.clone(), json!(2)),
            "the probe time and the failures are kept: {v}"
        );
    }
    let watcher_waits: bool = sqlx::query_scalar(
        "SELECT scheduled_at > now() + interval '5 minutes' FROM jobs
         WHERE unique_key = $1 AND state IN ('available', 'scheduled')",
    )
    .bind(format!("probe:{ch}"))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(watcher_waits, "the probe watcher waits for the cooldown");
    assert_eq!(
        audit_count(&pool, ch, &["channel.resumed"]).await,
        3,
        "each resume is audited"
    );

    // A pause that outlasts the cooldown: its probe comes at once on resume, fails (the endpoint
    // is still down) and re-opens the circuit with a doubled cooldown — one request, not the
    // backlog.
    tenant_action(&app, &key, ch, "pause").await;
    end_cooldown(&pool, ch).await;
    tenant_action(&app, &key, ch, "resume").await;
    wait_until(
        Duration::from_secs(15),
        "the probe fails and re-opens",
        || async {
            let (_, v) = app.get(&path, &key).await;
            v["circuit"]["state"] == "open" && v["circuit"]["probe_failures"] == 1
        },
    )
    .await;
    assert_eq!(app.receiver.count("down"), before + 1, "one probe request");

    // Once the endpoint answers, the next such resume probes it and the probe closes.
    app.receiver.set("down", Behavior::Status(200, None));
    tenant_action(&app, &key, ch, "pause").await;
    end_cooldown(&pool, ch).await;
    tenant_action(&app, &key, ch, "resume").await;
    app.wait_circuit(ch, "closed", Duration::from_secs(15))
        .await;
    for id in ids {
        app.wait_delivery(id, "delivered", Duration::from_secs(15))
            .await;
    }
    // A channel paused while closed still resumes to closed.
    tenant_action(&app, &key, ch, "pause").await;
    let v = tenant_action(&app, &key, ch, "resume").await;
    assert_eq!(v["circuit"]["state"], "closed", "{v}");
    app.stop().await;
}

/// A new URL while a channel is paused from open counts for its resume: the resume probes the
/// new URL at once (not after the old endpoint's 10-min cooldown), and its answer closes the
/// circuit.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_new_url_while_paused_from_open_is_probed_at_the_resume(pool: PgPool) {
    let (app, key, ch, ids) = open_for_ten_minutes(&pool, "gone", 3).await;
    tenant_action(&app, &key, ch, "pause").await;
    let (s, v) = app
        .patch_channel(&key, ch, json!({ "url": app.receiver.url("moved") }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["circuit"]["state"], "paused", "{v}");
    let v = tenant_action(&app, &key, ch, "resume").await;
    assert_eq!(v["circuit"]["state"], "open", "{v}");
    app.wait_circuit(ch, "closed", Duration::from_secs(15))
        .await;
    for id in ids {
        app.wait_delivery(id, "delivered", Duration::from_secs(15))
            .await;
    }
    assert_eq!(app.receiver.count("moved"), 3);
    app.stop().await;
}

/// A `Retry-After` hold ends with the endpoint that asked for it, and with an operator's close:
/// a new URL (the circuit still closed) and a force-close both send the held deliveries at once,
/// not after the hour.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_retry_after_hold_ends_with_a_new_url_or_an_operators_close(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    for (how, ep) in [
        ("a new URL", "busy-url"),
        ("an operator's close", "busy-close"),
    ] {
        app.receiver
            .set(ep, Behavior::Status(429, Some("3600".into())));
        let ch = app.channel(&key, ep).await;
        app.deliver(&key, ch, json!({ "first": true })).await;
        app.wait_received(ep, 1, Duration::from_secs(10)).await;
        let ids = {
            let mut v = Vec::new();
            for i in 0..3 {
                v.push(app.deliver(&key, ch, json!({ "i": i })).await);
            }
            v
        };
        let path = format!("/api/v1/channels/{ch}");
        // Every waiting delivery held, none in flight (a 429 answered later would set a new
        // hold, as it should).
        wait_until(Duration::from_secs(10), "the hold holds all", || async {
            let (_, v) = app.get(&path, &key).await;
            let held = v["circuit"]["held"].as_i64().unwrap_or(0);
            held >= 3 && v["concurrency"]["waiting"] == held && v["concurrency"]["in_flight"] == 0
        })
        .await;
        let to = match how {
            "a new URL" => {
                let fixed = app.receiver.url(&format!("{ep}-fixed"));
                let (s, v) = app.patch_channel(&key, ch, json!({ "url": fixed })).await;
                assert_eq!(s, 200, "{v}");
                assert_eq!(v["retry_after_until"], serde_json::Value::Null, "{v}");
                format!("{ep}-fixed")
            }
            _ => {
                app.receiver.set(ep, Behavior::Status(200, None));
                let (s, v) = app
                    .post_empty(
                        &format!("/api/v1/admin/channels/{ch}/close"),
                        breakwater_e2e::OPERATOR_KEY,
                    )
                    .await;
                assert_eq!(s, 200, "{v}");
                assert_eq!(
                    audit_count(&pool, ch, &["circuit.retry_after_dropped"]).await,
                    1,
                    "the operator's close ended the hold, audited"
                );
                ep.to_string()
            }
        };
        for id in &ids {
            app.wait_delivery(*id, "delivered", Duration::from_secs(10))
                .await;
        }
        assert!(app.receiver.count(&to) >= 3, "{how}: sent to {to}");
    }
    app.stop().await;
}

/// An answer from a URL the channel no longer has moves nothing of the channel's. The request
/// goes out, the tenant `PATCH`es a new URL while it is in flight, and then the old URL answers:
/// a `429` with an hour's `Retry-After` (failure threshold 1) sets no hold on the new URL and
/// opens nothing; a half-open probe's `503` does not re-open the circuit for a 10-min cooldown,
/// the role passes on and the new URL's answer closes it. Either way the delivery goes to the
/// new URL at once: the old URL's late 429 does not hold the new one for an hour.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_late_answer_of_an_old_url_moves_nothing_on_the_new_one(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.worker.request_timeout_ms = 5_000;
        s.circuit.max_cooldown_ms = 600_000;
        s.worker.max_attempts = 25;
    })
    .await;
    let (_, key) = app.tenant("acme", "default").await;
    let slow = |answer: Behavior| Behavior::Delayed(Duration::from_secs(3), Box::new(answer));

    // A closed channel: the old URL's slow 429.
    app.receiver
        .set("late", slow(Behavior::Status(429, Some("3600".into()))));
    let ch = app
        .channel_with(&key, "late", json!({ "failure_threshold": 1 }))
        .await;
    let id = app.deliver(&key, ch, json!({ "n": 1 })).await;
    app.wait_received("late", 1, Duration::from_secs(10)).await;
    let new_url = app.receiver.url("late-new");
    let (s, v) = app.patch_channel(&key, ch, json!({ "url": new_url })).await;
    assert_eq!(s, 200, "{v}");
    app.wait_delivery(id, "delivered", Duration::from_secs(15))
        .await;
    let (_, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(
        (
            v["retry_after_until"].clone(),
            v["circuit"]["state"].clone(),
            v["circuit"]["consecutive_failures"].clone(),
        ),
        (serde_json::Value::Null, json!("closed"), json!(0)),
        "no hold, no failure from the old URL: {v}"
    );
    let (_, d) = app.get(&format!("/api/v1/deliveries/{id}"), &key).await;
    assert_eq!(d["attempts"], 2, "the old URL's 429, then the new URL: {d}");
    assert_eq!(app.receiver.count("late-new"), 1);

    // An open channel: its probe's slow 503 from the old URL.
    app.receiver.set(
        "probe",
        Behavior::Sequence(vec![
            Behavior::Status(503, None),
            slow(Behavior::Status(503, None)),
        ]),
    );
    let ch = app
        .channel_with(&key, "probe", json!({ "failure_threshold": 1 }))
        .await;
    let id = app.deliver(&key, ch, json!({ "n": 2 })).await;
    app.wait_circuit(ch, "open", Duration::from_secs(10)).await;
    // The probe is in flight (the second request), then the URL and a 10-min cooldown change.
    app.wait_received("probe", 2, Duration::from_secs(10)).await;
    let new_url = app.receiver.url("probe-new");
    let (s, v) = app
        .patch_channel(&key, ch, json!({ "url": new_url, "cooldown_ms": 600_000 }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["circuit"]["state"], "half_open", "{v}");
    app.wait_circuit(ch, "closed", Duration::from_secs(15))
        .await;
    app.wait_delivery(id, "delivered", Duration::from_secs(10))
        .await;
    assert_eq!(
        app.receiver.count("probe"),
        2,
        "nothing more to the old URL"
    );
    assert_eq!(app.receiver.count("probe-new"), 1);
    app.stop().await;
}

/// A permanent failure (`404`) that a URL gives after its channel moved away from it (a `PATCH`
/// while the request was in flight) does not make the delivery dead: it is retried, at the new
/// URL, which delivers it. A `404` of the channel's own URL still makes it dead.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_late_4xx_of_an_old_url_is_retried_at_the_new_one(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.worker.request_timeout_ms = 5_000;
    })
    .await;
    let (_, key) = app.tenant("acme", "default").await;
    app.receiver.set(
        "gone",
        Behavior::Delayed(
            Duration::from_secs(3),
            Box::new(Behavior::Status(404, None)),
        ),
    );
    let ch = app.channel_with(&key, "gone", json!({})).await;
    let id = app.deliver(&key, ch, json!({ "n": 1 })).await;
    app.wait_received("gone", 1, Duration::from_secs(10)).await;
    let new_url = app.receiver.url("gone-new");
    let (s, v) = app.patch_channel(&key, ch, json!({ "url": new_url })).await;
    assert_eq!(s, 200, "{v}");
    app.wait_delivery(id, "delivered", Duration::from_secs(20))
        .await;
    let (_, d) = app.get(&format!("/api/v1/deliveries/{id}"), &key).await;
    assert_eq!(d["attempts"], 2, "the old URL's 404, then the new URL: {d}");
    assert_eq!(app.receiver.count("gone-new"), 1);

    // The channel's own URL answering 404: dead, not retried.
    app.receiver.set("gone-new", Behavior::Status(404, None));
    let id = app.deliver(&key, ch, json!({ "n": 2 })).await;
    app.wait_delivery(id, "dead", Duration::from_secs(10)).await;
    let (_, d) = app.get(&format!("/api/v1/deliveries/{id}"), &key).await;
    assert_eq!(d["attempts"], 1, "{d}");
    app.stop().await;
}

/// A `PATCH` of the URL cannot commit between an attempt's record and its circuit step: the
/// worker's record of a permanent failure (a `404`) takes the channel row first
/// ([`circuit::after_attempt`]), so a `PATCH` waits for the attempt's transaction, and the
/// delivery's status and the circuit both go by the URL the channel had (its own: dead). The
/// test holds the delivery's row, so the worker's record stops inside it, sends the `PATCH`,
/// sees it wait for the worker, and lets go. (Were the URL compared unlocked by the record and
/// again under a later lock by the circuit step, a `PATCH` committing between the two would
/// leave the delivery dead while the circuit saw the URL moved.)
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_url_change_waits_for_the_record_of_a_permanent_failure(pool: PgPool) {
    // The PATCH may wait for the record as long as the test holds it (the API's default
    // lock_timeout is 250 ms).
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.database.api_lock_timeout_ms = 30_000;
        s.worker.request_timeout_ms = 10_000;
    })
    .await;
    let (_, key) = app.tenant("acme", "default").await;
    app.receiver.set(
        "old",
        Behavior::Delayed(
            Duration::from_secs(2),
            Box::new(Behavior::Status(404, None)),
        ),
    );
    let ch = app.channel_with(&key, "old", json!({})).await;
    let id = app.deliver(&key, ch, json!({ "n": 1 })).await;
    app.wait_received("old", 1, Duration::from_secs(10)).await;
    // The 404 comes in 2 s: hold the delivery's row before the worker records it.
    let mut holder = pool.begin().await.unwrap();
    let holder_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *holder)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM deliveries WHERE id = $1 FOR UPDATE")
        .bind(id)
        .execute(&mut *holder)
        .await
        .unwrap();
    // The backends waiting for a lock that `pid` holds (in this test's database), with what
    // they run.
    let waiting_on = |pid: i32| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (i32, String)>(
                "SELECT pid, query FROM pg_stat_activity
                 WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid))",
            )
            .bind(pid)
            .fetch_all(&pool)
            .await
            .unwrap()
        }
    };
    wait_until(
        Duration::from_secs(10),
        "the worker's record waits for the delivery row",
        || async { !waiting_on(holder_pid).await.is_empty() },
    )
    .await;
    // It stays blocked until the holder lets go.
    let worker_pid = waiting_on(holder_pid).await[0].0;

    let patch = app.patch_channel(&key, ch, json!({ "url": app.receiver.url("new") }));
    let release = async {
        wait_until(
            Duration::from_secs(10),
            "the PATCH waits for the worker's lock of the channel row",
            || async {
                waiting_on(worker_pid)
                    .await
                    .iter()
                    .any(|(_, q)| q.contains("FROM channels"))
            },
        )
        .await;
        holder.rollback().await.unwrap();
    };
    let ((s, v), ()) = tokio::join!(patch, release);
    assert_eq!(s, 200, "the PATCH goes through after the record: {v}");
    assert_eq!(v["url"], app.receiver.url("new"));
    app.wait_delivery(id, "dead", Duration::from_secs(10)).await;
    let (_, d) = app.get(&format!("/api/v1/deliveries/{id}"), &key).await;
    assert_eq!(d["attempts"], 1, "the 404 of the channel's own URL: {d}");
    assert_eq!(app.receiver.count("new"), 0);
    app.stop().await;
}
