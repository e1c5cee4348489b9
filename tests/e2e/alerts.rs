//! Alerts an on-call can live with: a flapping circuit sends N transition
//! alerts, one `channel.flapping` and, once stable for the window, one `channel.flapping_ended`;
//! a tenant's own pause and resume page nobody unless asked (`alert_on_manual`); an endpoint that
//! rejects us (401/403) is recorded, audited and alerted once per streak. Real receivers, real
//! Postgres, three worker nodes where it matters. Every expected count is computed from the
//! audit log (which records every transition) and the policy, and asserted with equality.

use breakwater::config::Settings;
use breakwater::Role;
use breakwater_e2e::{
    audit_count, eventually, host_of, spawn_workers, stop_all, test_settings, wait_until, Behavior,
    TestApp, ThreadNode, OPERATOR_KEY,
};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// Test settings with a circuit threshold of 3 and the given flapping policy.
fn policy(s: &mut Settings, transitions: i32, window_ms: i64) {
    s.circuit.failure_threshold = 3;
    s.alerts.flapping_transitions = transitions;
    s.alerts.flapping_window_ms = window_ms;
}

/// Three worker nodes with [`policy`] and 4 slots each.
fn three_workers(pool: &PgPool, transitions: i32, window_ms: i64) -> Vec<ThreadNode> {
    let mut s = test_settings();
    s.worker.pool_default = 4;
    policy(&mut s, transitions, window_ms);
    spawn_workers(pool, 3, &s)
}

/// The delivery-level events (`tests/e2e/delivery_events.rs`), which these tests do not count:
/// a delivery that dies here (a 403, or three 503s) sends its `delivery.dead` as well.
const DELIVERY_EVENTS: &[&str] = &[
    "delivery.dead",
    "deliveries.dead",
    "channel.failing",
    "channel.recovered",
];

/// Circuit and endpoint alert jobs ever enqueued for `channel` (each is one webhook; none is
/// pruned within a test), delivery-level events ([`DELIVERY_EVENTS`]) left out.
async fn alert_jobs(pool: &PgPool, channel: Uuid) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE kind = 'alert' AND args->>'channel_id' = $1
           AND NOT args->>'event' = ANY($2)",
    )
    .bind(channel.to_string())
    .bind(DELIVERY_EVENTS)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The circuit and endpoint alerts `endpoint` got, delivery-level events left out.
fn circuit_alerts(app: &TestApp, endpoint: &str) -> Vec<Value> {
    app.alerts(endpoint)
        .into_iter()
        .filter(|a| !DELIVERY_EVENTS.contains(&a["type"].as_str().unwrap_or_default()))
        .collect()
}

/// A channel's circuit state, failure count, last failure reason and time, and rejection streak
/// start.
type RejectionRow = (
    String,
    i32,
    Option<String>,
    Option<DateTime<Utc>>,
    Option<DateTime<Utc>>,
);

/// The alerting transitions the breaker made on `channel` (opened, closed): the audit log keeps
/// every one, suppressed or not.
const BREAKER_TRANSITIONS: &[&str] = &["circuit.opened", "circuit.closed"];

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_flapping_circuit_on_three_nodes_sends_n_alerts_one_flapping_and_one_ended(pool: PgPool) {
    const N: i32 = 3;
    // Long enough that the cycles (each ~1 s) never leave a window-long gap on a busy machine.
    const WINDOW_MS: i64 = 10_000;
    const CYCLES: usize = 4;
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |s| policy(s, N, WINDOW_MS)).await;
    let nodes = three_workers(&pool, N, WINDOW_MS);
    let (_, key) = app.tenant_with_alerts("acme", "oncall").await;
    let ch = app.channel(&key, "flappy").await;
    let host_key = host_of(&pool, ch).await;

    // The receiver flips between 503 and 200 under the test's control; each cycle opens the
    // circuit (3 failures) and closes it (a probe succeeds): two alerting transitions.
    for cycle in 0..CYCLES {
        app.receiver.set("flappy", Behavior::Status(503, None));
        app.deliver_many(&key, ch, 6).await;
        assert!(
            eventually(Duration::from_secs(20), || async {
                app.circuit_state(ch).await != "closed"
            })
            .await,
            "cycle {cycle}: the circuit opens"
        );
        app.receiver.set("flappy", Behavior::Status(200, None));
        // Each cycle ends with the circuit closed.
        app.wait_circuit(ch, "closed", Duration::from_secs(20))
            .await;
    }
    // Stable from here (200s): the flapping timer ends it after the window.
    assert!(
        eventually(Duration::from_secs(30), || async {
            !app.alerts_of("oncall", "channel.flapping_ended").is_empty()
        })
        .await,
        "one flapping_ended alert once the circuit was stable for the window"
    );
    stop_all(nodes);

    let transitions = audit_count(&pool, ch, BREAKER_TRANSITIONS).await;
    assert_eq!(
        transitions,
        2 * CYCLES as i64,
        "the audit log records every transition"
    );
    let expected = i64::from(N) + 2;
    assert_eq!(
        alert_jobs(&pool, ch).await,
        expected,
        "N transition alerts + 1 flapping + 1 ended, on three nodes"
    );
    let got = circuit_alerts(&app, "oncall");
    assert_eq!(got.len() as i64, expected, "each sent once: {got:#?}");
    assert!(app
        .receiver
        .received("oncall")
        .iter()
        .all(|r| r.signature_ok == Some(true)));

    let mut by_generation: Vec<&Value> = got.iter().collect();
    by_generation.sort_by_key(|a| a["data"]["generation"].as_i64());
    let types: Vec<&str> = by_generation
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "channel.circuit_opened",
            "channel.circuit_closed",
            "channel.circuit_opened",
            "channel.flapping",
            "channel.flapping_ended"
        ]
    );
    let flapping = &app.alerts_of("oncall", "channel.flapping")[0]["data"];
    assert_eq!(flapping["suppressed"], 1);
    assert_eq!(flapping["transition_count"], N + 1);
    assert_eq!(flapping["channel_id"], ch.to_string());
    let ended = &app.alerts_of("oncall", "channel.flapping_ended")[0]["data"];
    assert_eq!(
        ended["suppressed"].as_i64(),
        Some(transitions - i64::from(N)),
        "suppressed = audited transitions - alerted ones"
    );
    assert_eq!(ended["to_state"], "closed", "the real final state");
    assert_eq!(audit_count(&pool, ch, &["alerts.flapping_ended"]).await, 1);

    // Each transition alert carries the transition's database time: the audit row's `at`,
    // written in the same transaction.
    let audited: Vec<DateTime<Utc>> =
        sqlx::query_scalar("SELECT at FROM audit_log WHERE channel_id = $1 AND action = ANY($2)")
            .bind(ch)
            .bind(BREAKER_TRANSITIONS)
            .fetch_all(&pool)
            .await
            .unwrap();
    for a in by_generation.iter().take(N as usize + 1) {
        let at: DateTime<Utc> = a["timestamp"].as_str().unwrap().parse().unwrap();
        assert!(
            audited.contains(&at),
            "{at} is a transition's database time"
        );
        assert!(a["data"]["transition_count"].as_i64().unwrap() >= 1);
        // The channel's host circuit rides along (closed: only this channel fails).
        assert_eq!(a["data"]["host"]["host_key"], host_key.as_str(), "{a}");
        assert_eq!(a["data"]["host"]["state"], "closed", "{a}");
    }
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_tenants_own_pause_and_resume_alert_only_when_asked(pool: PgPool) {
    const N: i32 = 5;
    let app = TestApp::spawn_with(pool.clone(), |s| policy(s, N, 3_000)).await;
    let (tenant_id, key) = app.tenant_with_alerts("acme", "oncall").await;
    let ch = app.channel(&key, "maint").await;
    let toggle = |n: usize| {
        let (app, key) = (&app, key.clone());
        async move {
            for _ in 0..n {
                for action in ["pause", "resume"] {
                    let (s, v) = app
                        .post_empty(&format!("/api/v1/channels/{ch}/{action}"), &key)
                        .await;
                    assert_eq!(s, 200, "{action}: {v}");
                }
            }
        }
    };

    // alert_on_manual is false by default: audited, not alerted.
    let (_, v) = app.get("/api/v1/tenant", &key).await;
    assert_eq!(v["alert_on_manual"], false);
    toggle(50).await;
    assert_eq!(
        audit_count(&pool, ch, &["channel.paused", "channel.resumed"]).await,
        100
    );
    assert_eq!(
        alert_jobs(&pool, ch).await,
        0,
        "no alert for the tenant's own pauses"
    );

    // Bad input is a 4xx naming the field; nothing changes.
    let (s, v) = app
        .patch("/api/v1/tenant", &key, &json!({ "alert_on_manual": "yes" }))
        .await;
    assert!((400..500).contains(&s), "{s} {v}");
    assert!(v.to_string().contains("alert_on_manual"), "{v}");

    // The tenant asks for them: audited with old and new.
    let (s, v) = app
        .patch("/api/v1/tenant", &key, &json!({ "alert_on_manual": true }))
        .await;
    assert_eq!((s, &v["alert_on_manual"]), (200, &json!(true)), "{v}");
    let details: Value = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE tenant_id = $1 AND action = 'tenant.updated'",
    )
    .bind(tenant_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        details,
        json!({ "old": { "alert_on_manual": false }, "new": { "alert_on_manual": true } })
    );

    // 100 more transitions in a burst: N alerts, then one channel.flapping, then silence...
    toggle(50).await;
    assert_eq!(
        alert_jobs(&pool, ch).await,
        i64::from(N) + 1,
        "bounded by the flapping policy"
    );
    // ...and one flapping_ended after the window, with the rest counted.
    assert!(
        eventually(Duration::from_secs(20), || async {
            !app.alerts_of("oncall", "channel.flapping_ended").is_empty()
        })
        .await
    );
    assert_eq!(alert_jobs(&pool, ch).await, i64::from(N) + 2);
    let ended = &app.alerts_of("oncall", "channel.flapping_ended")[0]["data"];
    assert_eq!(ended["suppressed"].as_i64(), Some(100 - i64::from(N)));
    assert_eq!(ended["to_state"], "closed");
    assert!(
        eventually(Duration::from_secs(10), || async {
            app.alerts_of("oncall", "channel.paused").len()
                + app.alerts_of("oncall", "channel.resumed").len()
                == N as usize
        })
        .await
    );

    // An operator's pause of another channel alerts even when the tenant opts out again.
    let (s, v) = app
        .patch(
            &format!("/api/v1/tenants/{tenant_id}"),
            OPERATOR_KEY,
            &json!({ "alert_on_manual": false }),
        )
        .await;
    assert_eq!((s, &v["alert_on_manual"]), (200, &json!(false)), "{v}");
    let other = app.channel(&key, "other").await;
    let (s, _) = app
        .post_empty(
            &format!("/api/v1/admin/channels/{other}/pause"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        alert_jobs(&pool, other).await,
        1,
        "the operator's pause alerts"
    );
    // The operator's pause holds the channel: only an operator resumes it, and that alerts too.
    let (s, _) = app
        .post_empty(&format!("/api/v1/channels/{other}/resume"), &key)
        .await;
    assert_eq!(s, 409);
    let (s, _) = app
        .post_empty(
            &format!("/api/v1/admin/channels/{other}/resume"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        alert_jobs(&pool, other).await,
        2,
        "the operator's resume alerts"
    );
    app.resume(&key, other).await;
    assert_eq!(
        alert_jobs(&pool, other).await,
        2,
        "a tenant's no-op resume does not"
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn rejections_on_three_nodes_are_audited_and_alerted_once_per_streak(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let nodes = three_workers(&pool, 5, 600_000);
    let (_, key) = app.tenant_with_alerts("acme", "oncall").await;
    let ch = app.channel(&key, "locked").await;
    app.receiver.set("locked", Behavior::Status(403, None));
    app.deliver_many(&key, ch, 50).await;
    app.wait_deliveries(ch, "dead", 50, Duration::from_secs(30))
        .await;
    assert_eq!(
        app.receiver.count("locked"),
        50,
        "each rejected delivery was one request: the circuit never opened"
    );
    assert_eq!(
        audit_count(&pool, ch, &["channel.endpoint_rejected"]).await,
        1,
        "one audit row per streak"
    );
    assert_eq!(alert_jobs(&pool, ch).await, 1, "one alert per streak");
    let (state, failures, reason, failed_at, since): RejectionRow = sqlx::query_as(
        "SELECT circuit_state, consecutive_failures, last_failure_reason, last_failure_at,
                rejected_since
         FROM channels WHERE id = $1",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((state.as_str(), failures), ("closed", 0));
    assert_eq!(reason.as_deref(), Some("HTTP 403"));
    assert!(failed_at.is_some() && since.is_some());
    assert!(
        eventually(Duration::from_secs(10), || async {
            app.alerts_of("oncall", "channel.endpoint_rejected").len() == 1
        })
        .await
    );
    let a = &app.alerts_of("oncall", "channel.endpoint_rejected")[0];
    assert_eq!(a["data"]["status"], 403);
    assert_eq!(a["data"]["channel_id"], ch.to_string());
    assert_eq!(a["data"]["to_state"], "closed");
    let (_, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert!(
        v.to_string().contains("HTTP 403"),
        "the tenant sees the last failure: {v}"
    );

    // A success ends the streak; the next rejection starts a new one: one more of each.
    app.receiver.set("locked", Behavior::Status(200, None));
    let ok = app.deliver(&key, ch, json!({ "fixed": true })).await;
    app.wait_delivery(ok, "delivered", Duration::from_secs(10))
        .await;
    let since: Option<DateTime<Utc>> =
        sqlx::query_scalar("SELECT rejected_since FROM channels WHERE id = $1")
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(since, None, "a success ends the streak");
    app.receiver.set("locked", Behavior::Status(401, None));
    let again = app.deliver(&key, ch, json!({ "broken": true })).await;
    app.wait_delivery(again, "dead", Duration::from_secs(10))
        .await;
    assert_eq!(
        audit_count(&pool, ch, &["channel.endpoint_rejected"]).await,
        2
    );
    assert_eq!(alert_jobs(&pool, ch).await, 2);
    assert!(
        eventually(Duration::from_secs(10), || async {
            app.alerts_of("oncall", "channel.endpoint_rejected").len() == 2
        })
        .await
    );
    stop_all(nodes);
    assert_eq!(app.circuit_state(ch).await, "closed");
    app.stop().await;
}

/// A measurement: an endpoint alternating 503 and 200 every 4 s,
/// `failure_threshold` 3, `cooldown_ms` 1000, a steady trickle of deliveries, 90 s, the default
/// alert policy. Prints the alert count (23 on `d8ecacb`, one per transition) and asserts the
/// count the policy promises. Run with
/// `cargo nextest run -p breakwater-e2e --run-ignored only -E 'test(/issue_scenario/)' --no-capture`.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
#[ignore = "a 90 s measurement; see BENCHMARKS.md"]
async fn issue_scenario_alternating_endpoint_alerts_for_90_s(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| {
        let defaults = breakwater::local_settings(OPERATOR_KEY);
        s.alerts = defaults.alerts;
        s.circuit.failure_threshold = 3;
        s.circuit.cooldown_ms = 1_000;
        s.circuit.max_cooldown_ms = defaults.circuit.max_cooldown_ms;
    })
    .await;
    let (_, key) = app.tenant_with_alerts("acme", "oncall").await;
    let ch = app.channel(&key, "alternating").await;
    let started = std::time::Instant::now();
    let mut phase = u64::MAX;
    // Pacing of the scenario, not of an assertion: 503 for 4 s, 200 for 4 s, and one delivery
    // every 100 ms, for 90 s.
    while started.elapsed() < Duration::from_secs(90) {
        let p = started.elapsed().as_secs() / 4;
        if p != phase {
            phase = p;
            let status = if p.is_multiple_of(2) { 503 } else { 200 };
            app.receiver
                .set("alternating", Behavior::Status(status, None));
        }
        app.deliver(
            &key,
            ch,
            json!({ "t": started.elapsed().as_millis() as u64 }),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let transitions = audit_count(&pool, ch, BREAKER_TRANSITIONS).await;
    let jobs = alert_jobs(&pool, ch).await;
    let n = i64::from(
        breakwater::local_settings(OPERATOR_KEY)
            .alerts
            .flapping_transitions,
    );
    let promised = if transitions > n { n + 1 } else { transitions };
    assert!(
        eventually(Duration::from_secs(30), || async {
            circuit_alerts(&app, "oncall").len() as i64 == jobs
        })
        .await
    );
    println!(
        "{}",
        json!({
            "scenario": "503/200 alternating every 4 s, threshold 3, cooldown 1000 ms, 90 s",
            "transitions_audited": transitions,
            "alerts_sent": jobs,
            "alerts_before": 23,
        })
    );
    assert_eq!(jobs, promised);
    app.stop().await;
}

/// Alerts are scheduled fairly per tenant. Tenant A's alert endpoint hangs
/// (each of its alerts holds a worker for the request timeout, 2 s here) and A pauses and resumes
/// 8 channels: 16 alerts queued before B's. With the incident's 2 alert workers on the node, B's
/// alert still arrives at once: A's alerts are one group capped at one in flight, and the fair
/// fetch serves B (nothing in flight) before A's next. Ungrouped, B's alert waited behind A's
/// (about 7 rounds of 2 s here; 119.6 s in the incident).
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_tenants_hanging_alert_endpoint_costs_another_tenants_alerts_nothing(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| s.worker.pool_alerts = 2).await;
    let (tenant_a, key_a) = app.tenant_with_alerts("hangs", "a-oncall").await;
    let (_, key_b) = app.tenant_with_alerts("healthy", "b-oncall").await;
    app.receiver.set("a-oncall", Behavior::Hang);
    for key in [&key_a, &key_b] {
        let (s, v) = app
            .patch("/api/v1/tenant", key, &json!({ "alert_on_manual": true }))
            .await;
        assert_eq!(s, 200, "{v}");
    }
    let mut a_channels = Vec::new();
    for i in 0..8 {
        a_channels.push(app.channel(&key_a, &format!("a-{i}")).await);
    }
    let b_channel = app.channel(&key_b, "b-0").await;
    for &ch in &a_channels {
        app.pause(&key_a, ch).await;
        app.resume(&key_a, ch).await;
    }
    // A's alerts are queued (16, one per pause and resume) and its endpoint holds one already.
    wait_until(
        Duration::from_secs(10),
        "A's first alert reaches its endpoint",
        || async { !app.receiver.received("a-oncall").is_empty() },
    )
    .await;
    let queued: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE kind = 'alert' AND args->>'tenant_id' = $1",
    )
    .bind(tenant_a.to_string())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(queued, 16, "A's alerts: one per pause and one per resume");

    // From B's pause (its alert is enqueued in the pause's transaction) to its arrival.
    let t0 = std::time::Instant::now();
    app.pause(&key_b, b_channel).await;
    wait_until(Duration::from_secs(60), "B's alert arrives", || async {
        !app.alerts_of("b-oncall", "channel.paused").is_empty()
    })
    .await;
    let took = t0.elapsed();
    println!(
        "B's alert after {took:?}; A's endpoint got {} requests",
        app.receiver.received("a-oncall").len()
    );
    assert!(
        took < Duration::from_millis(1_500),
        "B's alert took {took:?}: it waited behind A's hanging alert endpoint"
    );
    // A holds at most one alert worker at a time, cluster-wide (its group's cap).
    let a_in_flight: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs
         WHERE kind = 'alert' AND state = 'executing' AND args->>'tenant_id' = $1",
    )
    .bind(tenant_a.to_string())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(a_in_flight <= 1, "A's alerts in flight: {a_in_flight}");
    app.stop().await;
}
