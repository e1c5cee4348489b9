//! Careful closing: `close_after_successes` trials one at a time, a circuit
//! that opens with nothing waiting, and the database clock. Real receivers on loopback, real
//! queue, several nodes.

use breakwater::Role;
use breakwater_core::circuit::{self, Admission, ProbeStep};
use breakwater_core::testing;
use breakwater_e2e::gauge::{Gauge, Hit};
use breakwater_e2e::probe::{end_cooldown, open_circuit, probe_step};
use breakwater_e2e::{
    audit_count, count_status, eventually, own_pool, spawn_workers, stop_all, test_settings,
    TestApp,
};
use serde_json::json;
use sqlx::PgPool;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Waits until the channel's circuit is open and nothing of it is in flight any more.
async fn wait_open_and_quiet(app: &TestApp, ch: Uuid) {
    assert!(
        eventually(Duration::from_secs(20), || async {
            app.circuit_state(ch).await != "closed"
                && count_status(&app.pool, ch, "delivering").await == 0
        })
        .await,
        "the circuit opens"
    );
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn three_nodes_close_after_one_probe_and_two_trials_one_at_a_time(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let mut node_settings = test_settings();
    node_settings.worker.pool_default = 4;
    node_settings.worker.max_attempts = 10;
    let nodes = spawn_workers(&pool, 3, &node_settings);
    let (_, key) = app.tenant("acme", "default").await;
    let gauge = Gauge::start(Duration::from_millis(100), 503).await;
    let ch = app
        .channel_to(
            &key,
            &gauge.url,
            json!({ "failure_threshold": 3, "cooldown_ms": 300, "close_after_successes": 3 }),
        )
        .await;
    let (_, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(v["circuit"]["close_after_successes"], 3);
    let ids = app.deliver_many(&key, ch, 30).await;
    wait_open_and_quiet(&app, ch).await;
    // Nothing is in flight from here on (every attempt so far is recorded).
    let quiet = Instant::now();

    // Recovery: from now on the endpoint answers 200 (after 100 ms each).
    gauge.answer(200);
    assert!(
        eventually(Duration::from_secs(30), || async {
            count_status(&pool, ch, "delivered").await == 30
        })
        .await,
        "every delivery arrives after recovery"
    );
    assert_eq!(app.circuit_state(ch).await, "closed");
    stop_all(nodes);

    let hits = gauge.hits();
    let ok: Vec<&Hit> = hits.iter().filter(|h| h.status == 200).collect();
    // Each delivery answered 200 once: released once, never sent twice.
    assert_eq!(ok.len(), 30, "30 successful requests, one per delivery");
    assert_eq!(
        ok.iter().map(|h| h.id).collect::<HashSet<_>>(),
        ids.iter().copied().collect::<HashSet<_>>()
    );
    // The first three successes are the probe and its two trials, and they are the attempts
    // recorded as probes.
    let probes: HashSet<Uuid> = sqlx::query_scalar(
        "SELECT delivery_id FROM delivery_attempts WHERE channel_id = $1 AND probe AND outcome = 'success'",
    )
    .bind(ch)
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .collect();
    assert_eq!(probes.len(), 3, "one probe and two trials succeeded");
    assert_eq!(
        ok[..3].iter().map(|h| h.id).collect::<HashSet<_>>(),
        probes,
        "nothing but the probe and its trials went before the circuit closed"
    );
    // One at a time: each trial arrived after the previous one was answered, and nothing that
    // arrived before the third success was answered overlapped anything.
    for w in ok[..3].windows(2) {
        assert!(
            w[1].start >= w[0].end,
            "a trial overlapped the previous one"
        );
    }
    let before_close: Vec<&Hit> = hits
        .iter()
        .filter(|h| h.start >= quiet && h.start < ok[2].end)
        .collect();
    let max_in_flight = before_close
        .iter()
        .map(|h| h.in_flight_at_start)
        .max()
        .unwrap();
    println!(
        "k = 3 on three nodes: {} requests before the close, at most {max_in_flight} in flight; backlog of {} released after",
        before_close.len(),
        ok.len() - 3
    );
    let after_trials: Vec<&Hit> = hits
        .iter()
        .filter(|h| h.status == 200 && h.start >= ok[2].end)
        .collect();
    assert_eq!(after_trials.len(), 27, "the backlog went after the close");
    assert!(
        before_close.iter().all(|h| h.in_flight_at_start == 1),
        "two requests were in flight at once before the circuit closed"
    );
    assert_eq!(audit_count(&pool, ch, &["circuit.trial_passed"]).await, 2);
    assert_eq!(audit_count(&pool, ch, &["circuit.closed"]).await, 1);
    assert_eq!(audit_count(&pool, ch, &["circuit.opened"]).await, 1);
    let (passed, needed): (i64, i64) = sqlx::query_as(
        "SELECT max((details->>'passed')::int8), max((details->>'needed')::int8) FROM audit_log
         WHERE channel_id = $1 AND action = 'circuit.trial_passed'",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((passed, needed), (2, 3));
    let parked: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM job_groups WHERE group_id = $1 AND (parked OR probe_slots > 0)",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(parked, 0, "the job group is released");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_failed_second_trial_reopens_with_a_longer_cooldown(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.circuit.max_cooldown_ms = 10_000;
        s.worker.max_attempts = 10;
    })
    .await;
    let (_, key) = app.tenant("acme", "default").await;
    let gauge = Gauge::start(Duration::from_millis(20), 503).await;
    let ch = app
        .channel_to(
            &key,
            &gauge.url,
            json!({ "failure_threshold": 3, "cooldown_ms": 600, "close_after_successes": 3 }),
        )
        .await;
    app.deliver_many(&key, ch, 10).await;
    wait_open_and_quiet(&app, ch).await;
    // The probe and the first trial pass, the second trial fails; everything after passes.
    gauge.script(&[200, 200, 503]);
    gauge.answer(200);
    assert!(
        eventually(Duration::from_secs(30), || async {
            count_status(&pool, ch, "delivered").await == 10
        })
        .await,
        "all delivered after the second half-open run"
    );
    assert_eq!(app.circuit_state(ch).await, "closed");

    // The audit trail, in order.
    let trail: Vec<(String, serde_json::Value, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "SELECT action, details, at FROM audit_log WHERE channel_id = $1 AND action LIKE 'circuit.%' ORDER BY id",
    )
    .bind(ch)
    .fetch_all(&pool)
    .await
    .unwrap();
    let actions: Vec<&str> = trail.iter().map(|(a, _, _)| a.as_str()).collect();
    println!("trail: {actions:?}");
    let gap_ms = |d: &serde_json::Value, at: chrono::DateTime<chrono::Utc>| {
        let next: chrono::DateTime<chrono::Utc> =
            serde_json::from_value(d["next_probe_at"].clone()).unwrap();
        (next - at).num_milliseconds()
    };
    let (_, opened, opened_at) = trail
        .iter()
        .find(|(a, _, _)| a == "circuit.opened")
        .unwrap();
    let first_gap = gap_ms(opened, *opened_at);
    assert_eq!(first_gap, 600, "first cooldown");
    // The reopening right after the second success of a run (the failed second trial).
    let i = trail
        .windows(2)
        .position(|w| {
            w[0].0 == "circuit.trial_passed"
                && w[0].1["passed"] == 2
                && w[1].0 == "circuit.reopened"
        })
        .expect("a failure on the second trial reopened the circuit")
        + 1;
    let reopened_gap = gap_ms(&trail[i].1, trail[i].2);
    assert!(
        reopened_gap > first_gap,
        "the cooldown after a failed trial ({reopened_gap} ms) is longer than the first ({first_gap} ms)"
    );
    // Then a whole new run: probe, two trials, closed; the count restarted at 0.
    assert_eq!(
        &actions[i + 1..],
        &[
            "circuit.probe_started",
            "circuit.trial_passed",
            "circuit.trial_passed",
            "circuit.closed"
        ]
    );
    assert_eq!(trail[i + 2].1["passed"], 1);
    let (ok_probes, failed_probes): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE outcome = 'success'), count(*) FILTER (WHERE outcome <> 'success')
         FROM delivery_attempts WHERE channel_id = $1 AND probe",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        ok_probes, 5,
        "2 trials in the failed run, 3 in the closing run"
    );
    assert!(failed_probes >= 1);
    app.stop().await;
}

/// Waits until the database clock is `ms` past the channel's last `circuit.probe_started` row.
async fn wait_past_probe_start(pool: &PgPool, ch: Uuid, ms: i64) {
    assert!(
        eventually(Duration::from_secs(20), || async {
            sqlx::query_scalar::<_, bool>(
                "SELECT coalesce(now() > max(at) + ($2::float8 * interval '1 millisecond'), false)
                 FROM audit_log WHERE channel_id = $1 AND action = 'circuit.probe_started'",
            )
            .bind(ch)
            .bind(ms)
            .fetch_one(pool)
            .await
            .unwrap()
        })
        .await
    );
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn with_nothing_waiting_the_circuit_waits_quietly_and_the_next_delivery_probes(pool: PgPool) {
    // Three worker nodes; short leases so that several pass during the test. One attempt per
    // delivery (the API node gives new jobs their attempts).
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |s| s.worker.max_attempts = 1).await;
    let mut node_settings = test_settings();
    node_settings.worker.pool_default = 4;
    node_settings.worker.max_attempts = 1;
    node_settings.circuit.probe_lease_ms = 300;
    let nodes = spawn_workers(&pool, 3, &node_settings);
    let (_, key) = app.tenant("acme", "default").await;
    // "empty": opens on its only delivery's failure; "dead": its three deliveries all went
    // dead (one attempt each), the third failure opening it.
    let empty_ep = Gauge::start(Duration::ZERO, 503).await;
    let dead_ep = Gauge::start(Duration::ZERO, 503).await;
    let empty = app
        .channel_to(
            &key,
            &empty_ep.url,
            json!({ "failure_threshold": 1, "cooldown_ms": 200 }),
        )
        .await;
    let dead = app
        .channel_to(
            &key,
            &dead_ep.url,
            json!({ "failure_threshold": 3, "cooldown_ms": 200 }),
        )
        .await;
    app.deliver(&key, empty, json!({})).await;
    app.deliver_many(&key, dead, 3).await;
    for ch in [empty, dead] {
        app.wait_circuit(ch, "half_open", Duration::from_secs(15))
            .await;
        assert_eq!(
            count_status(&pool, ch, "dead").await,
            if ch == empty { 1 } else { 3 },
            "the backlog is dead: nothing waits"
        );
    }
    // Let more than five lease periods pass on the database clock.
    for ch in [empty, dead] {
        wait_past_probe_start(&pool, ch, 5 * 300 + 200).await;
    }
    for ch in [empty, dead] {
        assert_eq!(
            audit_count(&pool, ch, &["circuit.probe_started"]).await,
            1,
            "one probe_started row, not one per lease period"
        );
        let (state, probe, deadline): (
            String,
            Option<Uuid>,
            Option<chrono::DateTime<chrono::Utc>>,
        ) = sqlx::query_as(
            "SELECT circuit_state, probe_delivery_id, probe_deadline FROM channels WHERE id = $1",
        )
        .bind(ch)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(
            (state.as_str(), probe, deadline),
            ("half_open", None, None),
            "half-open, the role empty, no lease running"
        );
        let watchers: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM jobs WHERE unique_key = $1 AND state IN ('available', 'scheduled', 'executing')",
        )
        .bind(testing::probe_key(ch))
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(watchers, 0, "the watcher ended quietly");
    }

    // The endpoints recover; the next delivery to arrive is the probe, and closes the circuit.
    empty_ep.answer(200);
    dead_ep.answer(200);
    let fresh = [
        app.deliver(&key, empty, json!({ "new": 1 })).await,
        app.deliver(&key, dead, json!({ "new": 1 })).await,
    ];
    for (ch, d) in [empty, dead].into_iter().zip(fresh) {
        // The new delivery probed and closed the circuit.
        app.wait_circuit(ch, "closed", Duration::from_secs(15))
            .await;
        let probe: bool = sqlx::query_scalar(
            "SELECT bool_and(probe) FROM delivery_attempts WHERE delivery_id = $1",
        )
        .bind(d)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(probe, "the new delivery was the probe");
        assert_eq!(app.delivery_status(d).await, "delivered");
        assert_eq!(audit_count(&pool, ch, &["circuit.probe_started"]).await, 1);
        assert_eq!(audit_count(&pool, ch, &["circuit.closed"]).await, 1);
    }
    stop_all(nodes);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_delivery_that_claims_an_empty_probe_role_gets_a_lease_and_a_watcher(pool: PgPool) {
    // API only: the test steps the circuit itself.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (key, ch) = app.tenant_with_channel("x").await;
    let cfg = test_settings().circuit;
    open_circuit(&pool, ch, &cfg).await;
    end_cooldown(&pool, ch).await;
    let step = probe_step(&pool, ch, &cfg).await;
    let ProbeStep::Started {
        generation,
        delivery_id: None,
        lease: None,
    } = step
    else {
        panic!("nothing parked: the role stays empty, no lease: {step:?}")
    };
    // Stepping again changes nothing and writes nothing: no lease to expire.
    assert_eq!(probe_step(&pool, ch, &cfg).await, ProbeStep::Done);

    // The watcher ended there (no worker runs here: end it as the worker does).
    sqlx::query("DELETE FROM jobs WHERE unique_key = $1")
        .bind(testing::probe_key(ch))
        .execute(&pool)
        .await
        .unwrap();
    // A delivery arrives and claims the role as the worker would.
    let d = app.deliver(&key, ch, json!({})).await;
    let mut conn = pool.acquire().await.unwrap();
    assert!(matches!(
        circuit::admit(&mut conn, ch, d, &cfg).await.unwrap(),
        Admission::Send {
            probe_generation: Some(g),
            ..
        } if g == generation
    ));
    let (probe, deadline, lease_ms): (Option<Uuid>, chrono::DateTime<chrono::Utc>, f64) =
        sqlx::query_as(
            "SELECT probe_delivery_id, probe_deadline,
                    extract(epoch FROM probe_deadline - now())::float8 * 1000
             FROM channels WHERE id = $1",
        )
        .bind(ch)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(probe, Some(d));
    assert!(lease_ms > 0.0 && lease_ms <= cfg.probe_lease_ms as f64);
    let watcher_at: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
        "SELECT scheduled_at FROM jobs WHERE unique_key = $1 AND state IN ('available', 'scheduled')",
    )
    .bind(testing::probe_key(ch))
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(watcher_at, deadline, "the watcher runs when the lease ends");
    // A second delivery does not become a second probe.
    let other = app.deliver(&key, ch, json!({})).await;
    assert_eq!(
        circuit::admit(&mut conn, ch, other, &cfg).await.unwrap(),
        Admission::Park
    );
    // The probe's node dies: at the lease's end the watcher takes over (one more audit row).
    sqlx::query("UPDATE channels SET probe_deadline = now() - interval '1 ms' WHERE id = $1")
        .bind(ch)
        .execute(&mut *conn)
        .await
        .unwrap();
    let step = probe_step(&pool, ch, &cfg).await;
    assert!(
        matches!(step, ProbeStep::Started { generation: g, delivery_id: Some(_), lease: Some(_) } if g > generation),
        "{step:?}"
    );
    assert_eq!(audit_count(&pool, ch, &["circuit.probe_started"]).await, 2);
    drop(conn);
    app.stop().await;
}

/// Moves the test database's clock `hours` ahead of every node's: a `public.now()` that shadows
/// `pg_catalog.now()` for every new session (search path `public, pg_catalog`), also in the
/// column defaults. Returns a pool whose sessions see the shifted clock.
async fn shift_database_clock(pool: &PgPool, hours: i32) -> PgPool {
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query(&format!(
        "CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql STABLE
         AS $$ SELECT pg_catalog.now() + interval '{hours} hours' $$"
    ))
    .execute(&mut *conn)
    .await
    .unwrap();
    let db: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    sqlx::query(&format!(
        "ALTER DATABASE \"{db}\" SET search_path = public, pg_catalog"
    ))
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query("SET search_path = public, pg_catalog")
        .execute(&mut *conn)
        .await
        .unwrap();
    // Column defaults were bound to pg_catalog.now() when the tables were made: rebind them.
    let defaults: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns
         WHERE table_schema = 'public' AND column_default IN ('now()', 'pg_catalog.now()')",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert!(defaults.len() > 10, "the tables' now() defaults are found");
    for (t, c) in defaults {
        sqlx::query(&format!(
            "ALTER TABLE \"{t}\" ALTER COLUMN \"{c}\" SET DEFAULT now()"
        ))
        .execute(&mut *conn)
        .await
        .unwrap();
    }
    drop(conn);
    let shifted = own_pool(pool, 5).await;
    let ahead: f64 =
        sqlx::query_scalar("SELECT extract(epoch FROM now() - pg_catalog.now())::float8")
            .fetch_one(&shifted)
            .await
            .unwrap();
    assert_eq!(ahead, f64::from(hours) * 3600.0, "the clock is shifted");
    shifted
}

/// An HTTP-date (IMF-fixdate) for `at`.
fn http_date(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_node_clock_an_hour_behind_the_database_changes_nothing(pool: PgPool) {
    let node_start = chrono::Utc::now();
    let shifted = shift_database_clock(&pool, 1).await;
    let app = TestApp::spawn_with(shifted.clone(), |s| {
        s.worker.max_attempts = 1;
        s.circuit.retry_after_cap_ms = 7_200_000;
    })
    .await;
    let pool = shifted;
    let (tenant, key) = app.tenant("acme", "default").await;

    // 1. Parked at enqueue, on the database clock: a delivery to an open channel.
    let ep = Gauge::start(Duration::ZERO, 503).await;
    let ch = app.channel_to(
        &key,
        &ep.url,
        json!({ "failure_threshold": 3, "cooldown_ms": 500, "replay_dead_letters_on_close": true }),
    )
    .await;
    app.deliver_many(&key, ch, 3).await;
    wait_open_and_quiet(&app, ch).await;
    assert_eq!(count_status(&pool, ch, "dead").await, 3);
    let mut tx = pool.begin().await.unwrap();
    let gate = testing::lock_gate(&mut tx, ch).await.unwrap().unwrap();
    assert_eq!(gate.circuit_state, breakwater_core::circuit::State::Open);
    let enqueued = breakwater_core::deliveries::enqueue(
        &mut tx,
        tenant,
        breakwater_core::Tier::Default,
        ch,
        &[breakwater_core::deliveries::NewDelivery {
            event_type: "late.event".into(),
            payload: serde_json::value::RawValue::from_string("{}".into()).unwrap(),
            idempotency_key: None,
        }],
        1,
        true,
    )
    .await
    .unwrap();
    let (scheduled_at, tx_now): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as(
            "SELECT scheduled_at, now() FROM jobs WHERE unique_key = 'delivery:' || $1::text",
        )
        .bind(enqueued[0].id)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        scheduled_at, tx_now,
        "the parked job's scheduled_at is the database's now() of its enqueue"
    );
    assert!(scheduled_at > node_start + chrono::Duration::minutes(59));

    // 2. The probe closes the circuit; the replay window is on the database clock, so the three
    //    deliveries that went dead (an hour "ahead" of this node) are replayed and delivered.
    ep.answer(200);
    assert!(
        eventually(Duration::from_secs(20), || async {
            count_status(&pool, ch, "delivered").await == 4
        })
        .await,
        "the late delivery and the three replayed dead letters are delivered"
    );
    let (replayed, to, closed_at): (serde_json::Value, chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as(
            "SELECT r.details->'replayed', (r.details->>'to')::timestamptz, c.at
             FROM audit_log r JOIN audit_log c ON c.channel_id = r.channel_id AND c.action = 'circuit.closed'
             WHERE r.channel_id = $1 AND r.action = 'deliveries.replayed'",
        )
        .bind(ch)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(replayed.as_array().map(Vec::len), Some(3));
    assert_eq!(
        to, closed_at,
        "the window ends at the closing transaction's now()"
    );

    // 3. Attempts start on the database clock (the health check compares them with now()).
    let earliest: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT min(started_at) FROM delivery_attempts WHERE channel_id = $1")
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(earliest > node_start + chrono::Duration::minutes(59));

    // 4. A Retry-After HTTP-date is a moment on the database clock: 30 s after the database's
    //    now, not an hour and 30 s after this node's.
    let db_now: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT date_trunc('second', now())")
            .fetch_one(&pool)
            .await
            .unwrap();
    let until = db_now + chrono::Duration::seconds(30);
    let busy = app.channel(&key, "busy").await;
    app.receiver.set(
        "busy",
        breakwater_e2e::Behavior::Status(429, Some(http_date(until))),
    );
    app.deliver(&key, busy, json!({})).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            sqlx::query_scalar::<_, bool>(
                "SELECT retry_after_until IS NOT NULL FROM channels WHERE id = $1",
            )
            .bind(busy)
            .fetch_one(&pool)
            .await
            .unwrap()
        })
        .await
    );
    let held_until: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT retry_after_until FROM channels WHERE id = $1")
            .bind(busy)
            .fetch_one(&pool)
            .await
            .unwrap();
    let off_ms = (held_until - until).num_milliseconds().abs();
    assert!(
        off_ms < 50,
        "Retry-After {until} held the channel until {held_until} ({off_ms} ms off)"
    );

    // 5. The channel's view counts what waits out the hold: three more deliveries (the limited
    //    one had its one attempt), none parked: not `parked: 0` and nothing else while hundreds
    //    wait for an hour.
    for i in 0..3 {
        app.deliver(&key, busy, json!({ "i": i })).await;
    }
    let path = format!("/api/v1/channels/{busy}");
    let last = std::cell::RefCell::new(serde_json::Value::Null);
    let counted = eventually(Duration::from_secs(10), || async {
        let (_, v) = app.get(&path, &key).await;
        let done = v["circuit"]["held"] == 3;
        *last.borrow_mut() = v;
        done
    })
    .await;
    let last = last.into_inner();
    assert!(counted, "{last}");
    assert_eq!(last["circuit"]["parked"], 0, "{last}");
    assert_eq!(last["concurrency"]["waiting"], 3, "{last}");
    assert_eq!(app.receiver.count("busy"), 1, "nothing sent under the hold");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn close_after_successes_is_a_checked_audited_setting_per_channel_and_cluster(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (_, key) = app.tenant("acme", "default").await;
    let url = app.receiver.url("x");
    // Out of range at creation: 422 problem naming the field, nothing created.
    for bad in [0, 101, -3] {
        let (s, v) = app
            .post(
                "/api/v1/channels",
                &key,
                &json!({ "url": url, "close_after_successes": bad }),
            )
            .await;
        assert_eq!(s, 422, "{v}");
        assert!(
            v["detail"]
                .as_str()
                .unwrap()
                .contains("close_after_successes"),
            "{v}"
        );
    }
    let ch = app
        .channel_to(&key, &url, json!({ "close_after_successes": 3 }))
        .await;
    let path = format!("/api/v1/channels/{ch}");
    let (_, v) = app.get(&path, &key).await;
    assert_eq!(v["close_after_successes"], 3);
    assert_eq!(v["circuit"]["close_after_successes"], 3);
    assert_eq!(v["circuit"]["trial_successes"], 0);

    // PATCH: range-checked, audited with old and new, null returns to the cluster default.
    let (s, v, ctype) = app
        .call(
            "PATCH",
            &path,
            &key,
            Some(json!({ "close_after_successes": 0 })),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(ctype.starts_with("application/problem+json"), "{ctype}");
    assert!(v["detail"]
        .as_str()
        .unwrap()
        .contains("close_after_successes"));
    let (s, v) = app
        .patch(&path, &key, &json!({ "close_after_successes": 5 }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["circuit"]["close_after_successes"], 5);
    let details: serde_json::Value = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE channel_id = $1 AND action = 'channel.updated' ORDER BY id DESC LIMIT 1",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(details["old"]["close_after_successes"], 3, "{details}");
    assert_eq!(details["new"]["close_after_successes"], 5, "{details}");
    let (s, v) = app
        .patch(&path, &key, &json!({ "close_after_successes": null }))
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["close_after_successes"], serde_json::Value::Null);
    assert_eq!(
        v["circuit"]["close_after_successes"], 1,
        "the configuration's default"
    );

    // The cluster default: operator edit, range-checked, audited, seen by channels without one.
    let defaults = "/api/v1/admin/circuit-defaults";
    let op = breakwater_e2e::OPERATOR_KEY;
    let (s, v) = app
        .patch(defaults, op, &json!({ "close_after_successes": 101 }))
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(v["detail"]
        .as_str()
        .unwrap()
        .contains("close_after_successes"));
    let (s, v) = app
        .patch(defaults, op, &json!({ "close_after_successes": 4 }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["close_after_successes"], 4);
    assert_eq!(v["close_after_successes_overridden"], true);
    let (_, v) = app.get(&path, &key).await;
    assert_eq!(v["circuit"]["close_after_successes"], 4);
    let details: serde_json::Value = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE action = 'circuit_defaults.changed' ORDER BY id DESC LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(details["old"]["close_after_successes"], 1, "{details}");
    assert_eq!(details["new"]["close_after_successes"], 4, "{details}");

    // Another tenant cannot touch it.
    let (_, other) = app.tenant("other", "default").await;
    let (s, _) = app
        .patch(&path, &other, &json!({ "close_after_successes": 2 }))
        .await;
    assert_eq!(s, 404);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_probe_answered_4xx_passes_the_role_on_without_waiting_for_its_lease(pool: PgPool) {
    // A long lease: were the role to wait for it, the circuit would not close in this test.
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.circuit.probe_lease_ms = 600_000;
        s.worker.max_attempts = 10;
    })
    .await;
    let (_, key) = app.tenant("acme", "default").await;
    let gauge = Gauge::start(Duration::ZERO, 503).await;
    let ch = app
        .channel_to(
            &key,
            &gauge.url,
            json!({ "failure_threshold": 3, "cooldown_ms": 300 }),
        )
        .await;
    app.deliver_many(&key, ch, 10).await;
    wait_open_and_quiet(&app, ch).await;
    // The probe gets a 400 (the endpoint is up but refuses that one), everything after 200.
    gauge.script(&[400]);
    gauge.answer(200);
    // The next delivery took the role at once and closed the circuit.
    app.wait_circuit(ch, "closed", Duration::from_secs(20))
        .await;
    assert!(
        eventually(Duration::from_secs(20), || async {
            count_status(&pool, ch, "delivered").await == 9
        })
        .await
    );
    assert_eq!(
        count_status(&pool, ch, "dead").await,
        1,
        "the refused probe"
    );
    let probes: Vec<(String, Option<i32>)> = sqlx::query_as(
        "SELECT outcome, status_code FROM delivery_attempts WHERE channel_id = $1 AND probe ORDER BY started_at",
    )
    .bind(ch)
    .fetch_all(&pool)
    .await
    .unwrap();
    let tail: Vec<_> = probes.iter().rev().take(2).rev().cloned().collect();
    assert_eq!(
        tail,
        vec![
            ("permanent".to_string(), Some(400)),
            ("success".to_string(), Some(200))
        ],
        "the refused probe, then the next delivery as the probe: {probes:?}"
    );
    assert_eq!(audit_count(&pool, ch, &["circuit.closed"]).await, 1);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn deliveries_begun_together_are_each_decided_as_alone(pool: PgPool) {
    // API only: the test begins the deliveries as a worker's begin batcher does.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (key, closed) = app.tenant_with_channel("http://127.0.0.1:9/closed").await;
    let open = app.channel(&key, "http://127.0.0.1:9/open").await;
    let gone = app.channel(&key, "http://127.0.0.1:9/gone").await;
    let cfg = test_settings().circuit;
    let a = app.deliver(&key, closed, json!({"n": 1})).await;
    let b = app.deliver(&key, closed, json!({"n": 2})).await;
    let final_one = app.deliver(&key, closed, json!({"n": 3})).await;
    let parked = app.deliver(&key, open, json!({"n": 4})).await;
    let orphan = app.deliver(&key, gone, json!({"n": 5})).await;
    open_circuit(&pool, open, &cfg).await;
    sqlx::query("UPDATE deliveries SET status = 'delivered' WHERE id = $1")
        .bind(final_one)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE channels SET deleted_at = now() WHERE id = $1")
        .bind(gone)
        .execute(&pool)
        .await
        .unwrap();

    let pairs = [
        (open, parked),
        (closed, a),
        (gone, orphan),
        (closed, final_one),
        (closed, b),
        // A delivery named with a channel that is not its own is not begun.
        (open, a),
    ];
    let status = |d: Uuid| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT status FROM deliveries WHERE id = $1")
                .bind(d)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let before = [
        status(final_one).await,
        status(parked).await,
        status(orphan).await,
    ];
    let mut conn = pool.acquire().await.unwrap();
    let begun = circuit::admit_and_begin_many(&mut conn, &pairs)
        .await
        .unwrap();
    let kinds: Vec<String> = begun
        .iter()
        .map(|b| match b {
            circuit::Begun::Send { dispatch, .. } => format!("send {}", dispatch.id),
            circuit::Begun::Final => "final".into(),
            circuit::Begun::Other => "other".into(),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "other".to_string(),
            format!("send {a}"),
            "other".into(),
            "final".into(),
            format!("send {b}"),
            "other".into(),
        ],
        "one answer per pair, in order"
    );
    // Only the two sends were written; the rest is as it was.
    assert_eq!(status(a).await, "delivering");
    assert_eq!(status(b).await, "delivering");
    let after = [
        status(final_one).await,
        status(parked).await,
        status(orphan).await,
    ];
    assert_eq!(before, after);
    assert_eq!(before[0], "delivered");
    // Alone, each answers the same.
    let alone = testing::admit_and_begin(&mut conn, open, parked)
        .await
        .unwrap();
    assert!(matches!(alone, circuit::Begun::Other));
}
