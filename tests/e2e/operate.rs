//! The people around the breaker: tenants pausing and resuming, operators steering, the audit
//! log, alert webhooks, dead-letter replay.

use breakwater::Role;
use breakwater_core::deliveries::{self, Status};
use breakwater_e2e::{
    all_parked, consecutive_failures, eventually, live_jobs_of_kind, spawn_workers, stop_all,
    test_settings, wait_until, Behavior, TestApp, OPERATOR_KEY,
};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

async fn audit_rows(
    pool: &PgPool,
    channel: Uuid,
    action: &str,
) -> Vec<(String, Option<String>, Option<String>)> {
    sqlx::query_as("SELECT actor, from_state, to_state FROM audit_log WHERE channel_id = $1 AND action = $2 ORDER BY id")
        .bind(channel)
        .bind(action)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn pause_holds_every_request_and_resume_delivers_each_once(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (key, ch) = app.tenant_with_channel("maint").await;

    let (s, v) = app
        .post_empty(
            &format!("/api/v1/channels/{ch}/pause?reason=maintenance"),
            &key,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["circuit"]["state"], "paused");
    let (s, v) = app
        .post_empty(&format!("/api/v1/channels/{ch}/pause"), &key)
        .await;
    assert_eq!(
        (s, v["circuit"]["state"].as_str()),
        (200, Some("paused")),
        "pausing again is a no-op"
    );

    let ids = app.deliver_many(&key, ch, 50).await;
    // New deliveries are accepted and parked.
    app.wait_deliveries(ch, "paused", 50, Duration::from_secs(10))
        .await;
    // Every job is parked (scheduled a minute ahead, never attempted): no node can fetch one
    // before the resume, and none did so far.
    wait_until(
        Duration::from_secs(10),
        "all 50 jobs are parked",
        || async { all_parked(&pool, ch, 50).await },
    )
    .await;
    assert_eq!(
        app.receiver.count("maint"),
        0,
        "no request reaches a paused channel"
    );
    let (_, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(v["circuit"]["parked"], 50);

    let (s, v) = app
        .post_empty(&format!("/api/v1/channels/{ch}/resume"), &key)
        .await;
    assert_eq!((s, v["circuit"]["state"].as_str()), (200, Some("closed")));
    let (s, _) = app
        .post_empty(&format!("/api/v1/channels/{ch}/resume"), &key)
        .await;
    assert_eq!(s, 200, "resuming again is a no-op");
    app.wait_received("maint", 50, Duration::from_secs(10))
        .await;
    app.wait_settled(ch).await;
    let got: std::collections::HashSet<String> = app
        .receiver
        .received("maint")
        .into_iter()
        .map(|r| r.webhook_id.unwrap())
        .collect();
    assert_eq!(app.receiver.count("maint"), 50, "each once");
    assert!(ids.iter().all(|id| got.contains(&id.to_string())));

    let paused = audit_rows(&pool, ch, "channel.paused").await;
    let resumed = audit_rows(&pool, ch, "channel.resumed").await;
    assert_eq!(
        paused.len(),
        1,
        "a repeated pause writes no second audit row"
    );
    assert_eq!(resumed.len(), 1);
    assert!(
        paused[0].0.starts_with("tenant:"),
        "actor is the tenant key: {}",
        paused[0].0
    );
    assert_eq!(
        (paused[0].1.as_deref(), paused[0].2.as_deref()),
        (Some("closed"), Some("paused"))
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn pausing_another_tenants_channel_is_404_and_changes_nothing(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (_, owner) = app.tenant("owner", "default").await;
    let (_, other) = app.tenant("other", "default").await;
    let ch = app.channel(&owner, "x").await;
    // Creating the tenants and the channel wrote their own audit rows; count from here.
    let written: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log")
        .fetch_one(&pool)
        .await
        .unwrap();
    for action in ["pause", "resume", "replay"] {
        let r = app
            .http
            .post(format!("{}/api/v1/channels/{ch}/{action}", app.api))
            .bearer_auth(&other)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{action}");
    }
    assert_eq!(app.circuit_state(ch).await, "closed");
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, written, "the refused calls wrote no audit row");
    let (s, _) = app.get("/api/v1/audit", &other).await;
    assert_eq!(s, 200);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn three_nodes_send_one_signed_alert_per_transition(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let mut node_settings = test_settings();
    node_settings.worker.pool_default = 4;
    let nodes = spawn_workers(&pool, 3, &node_settings);
    let (tenant_id, key) = app.tenant_with_alerts("acme", "oncall").await;
    let ch = app.channel(&key, "dead").await;
    app.receiver.set("dead", Behavior::Status(503, None));
    app.deliver_many(&key, ch, 100).await;
    assert!(
        eventually(Duration::from_secs(15), || async {
            app.circuit_state(ch).await != "closed"
        })
        .await
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            !app.alerts_of("oncall", "channel.circuit_opened").is_empty()
        })
        .await
    );

    app.receiver.set("dead", Behavior::Status(200, None));
    app.wait_circuit(ch, "closed", Duration::from_secs(15))
        .await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            !app.alerts_of("oncall", "channel.circuit_closed").is_empty()
        })
        .await
    );
    // Every alert job is done and nothing runs on any node: a duplicate alert would have been
    // sent by now.
    wait_until(
        Duration::from_secs(10),
        "no alert job is left and nothing is in flight",
        || async { live_jobs_of_kind(&pool, "alert").await == 0 && app.in_flight().await == 0.0 },
    )
    .await;
    stop_all(nodes);

    let opened = app.alerts_of("oncall", "channel.circuit_opened");
    let closed = app.alerts_of("oncall", "channel.circuit_closed");
    assert_eq!(
        opened.len(),
        1,
        "exactly one opened alert across three nodes"
    );
    assert_eq!(closed.len(), 1, "exactly one closed alert");
    assert!(
        app.receiver
            .received("oncall")
            .iter()
            .all(|r| r.signature_ok == Some(true)),
        "signed with the alert secret"
    );
    let o = &opened[0]["data"];
    assert_eq!(o["channel_id"], ch.to_string());
    assert_eq!(o["tenant_id"], tenant_id.to_string());
    assert_eq!(
        (o["from_state"].as_str(), o["to_state"].as_str()),
        (Some("closed"), Some("open"))
    );
    assert!(o["failure_count"].as_i64().unwrap() >= 5);
    assert!(o["reason"].as_str().unwrap().contains("consecutive"));
    assert!(opened[0]["timestamp"].is_string());
    assert_eq!(
        (
            closed[0]["data"]["from_state"].as_str(),
            closed[0]["data"]["to_state"].as_str()
        ),
        (Some("half_open"), Some("closed"))
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_failing_alert_endpoint_is_retried_and_blocks_no_delivery(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant_with_alerts("acme", "oncall").await;
    app.receiver.set("oncall", Behavior::Status(500, None));
    let ch = app.channel(&key, "ep").await;
    // An operator's pause alerts (a tenant's own does not, unless it set alert_on_manual).
    let (s, _) = app
        .post_empty(&format!("/api/v1/admin/channels/{ch}/pause"), OPERATOR_KEY)
        .await;
    assert_eq!(s, 200);
    // The paused alert goes out and fails; meanwhile another channel's deliveries flow.
    let (_, other_key) = app.tenant("beta", "default").await;
    let fine = app.channel(&other_key, "fine").await;
    app.deliver_many(&other_key, fine, 30).await;
    app.wait_received("fine", 30, Duration::from_secs(10)).await;
    assert!(
        app.receiver
            .wait_for("oncall", 3, Duration::from_secs(10))
            .await
            >= 3,
        "the alert is retried"
    );
    app.receiver.set("oncall", Behavior::Status(200, None));
    assert!(
        eventually(Duration::from_secs(10), || async {
            app.alerts_of("oncall", "channel.paused").len() == 1
        })
        .await
    );
    // The alert job completes once the receiver's 200 is recorded.
    assert!(
        eventually(Duration::from_secs(10), || async {
            let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE kind = 'alert'")
                .fetch_one(&pool)
                .await
                .unwrap();
            state == "completed"
        })
        .await
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn replaying_a_dead_delivery_delivers_it_once(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (key, ch) = app.tenant_with_channel("ep").await;
    app.receiver.set("ep", Behavior::Status(400, None));
    let id = app.deliver(&key, ch, json!({ "n": 1 })).await;
    app.wait_delivery(id, "dead", Duration::from_secs(10)).await;

    app.receiver.set("ep", Behavior::Status(200, None));
    let (s, v) = app
        .post_empty(&format!("/api/v1/deliveries/{id}/replay"), &key)
        .await;
    assert_eq!(s, 202, "{v}");
    let (s, v) = app
        .post_empty(&format!("/api/v1/deliveries/{id}/replay"), &key)
        .await;
    assert_eq!(
        s, 409,
        "a delivery that is not dead is not replayed again: {v}"
    );
    app.wait_delivery(id, "delivered", Duration::from_secs(10))
        .await;
    app.wait_settled(ch).await;
    let ok = app
        .receiver
        .received("ep")
        .iter()
        .filter(|r| r.answered == Some(200))
        .count();
    assert_eq!(ok, 1, "delivered once");
    let live: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE unique_key = $1 AND state IN ('available','scheduled','executing')")
        .bind(format!("delivery:{id}"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(live, 0);
    let (_, other) = app.tenant("other", "default").await;
    let (s, _) = app
        .post_empty(&format!("/api/v1/deliveries/{id}/replay"), &other)
        .await;
    assert_eq!(s, 404);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_replay_to_a_paused_channel_is_parked_until_resume(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (key, ch) = app.tenant_with_channel("ep").await;
    app.receiver.set("ep", Behavior::Status(400, None));
    let one = app.deliver(&key, ch, json!({ "n": 1 })).await;
    let two = app.deliver(&key, ch, json!({ "n": 2 })).await;
    app.wait_delivery(one, "dead", Duration::from_secs(10))
        .await;
    app.wait_delivery(two, "dead", Duration::from_secs(10))
        .await;
    app.receiver.set("ep", Behavior::Status(200, None));
    let (s, v) = app
        .post_empty(&format!("/api/v1/channels/{ch}/pause"), &key)
        .await;
    assert_eq!(s, 200, "{v}");

    // Both replay routes say what the delivery is: parked with its channel, not pending.
    let (s, v) = app
        .post_empty(&format!("/api/v1/deliveries/{one}/replay"), &key)
        .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["status"], "paused", "{v}");
    let (s, v) = app
        .post(&format!("/api/v1/channels/{ch}/replay"), &key, &json!({}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["ids"], json!([two.to_string()]), "{v}");
    let (s, v) = app.get(&format!("/api/v1/deliveries/{two}"), &key).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "paused", "{v}");
    assert!(
        app.receiver
            .received("ep")
            .iter()
            .all(|r| r.answered != Some(200)),
        "nothing is sent to a paused channel"
    );

    let (s, v) = app
        .post_empty(&format!("/api/v1/channels/{ch}/resume"), &key)
        .await;
    assert_eq!(s, 200, "{v}");
    app.wait_delivery(one, "delivered", Duration::from_secs(10))
        .await;
    app.wait_delivery(two, "delivered", Duration::from_secs(10))
        .await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_closing_probe_replays_the_windows_dead_letters_once(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    let (s, v) = app
        .post(
            "/api/v1/channels",
            &key,
            &json!({ "url": app.receiver.url("ep"), "replay_dead_letters_on_close": true, "replay_window_ms": 600000, "cooldown_ms": 300 }),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let ch: Uuid = v["id"].as_str().unwrap().parse().unwrap();
    // Three deliveries die of a permanent error…
    app.receiver.set("ep", Behavior::Status(410, None));
    let dead = app.deliver_many(&key, ch, 3).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            let mut all = true;
            for id in &dead {
                all &= app.delivery_status(*id).await == "dead";
            }
            all
        })
        .await
    );
    // …then the endpoint goes down and the circuit opens…
    app.receiver.set("ep", Behavior::Status(503, None));
    app.deliver_many(&key, ch, 20).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            app.circuit_state(ch).await != "closed"
        })
        .await
    );
    // …and recovers: the probe closes the circuit and replays the three dead letters.
    app.receiver.set("ep", Behavior::Status(200, None));
    app.wait_circuit(ch, "closed", Duration::from_secs(15))
        .await;
    let app_ref = &app;
    for id in &dead {
        let id = *id;
        assert!(
            eventually(Duration::from_secs(10), || async move {
                app_ref.delivery_status(id).await == "delivered"
            })
            .await
        );
    }
    app.wait_settled(ch).await;
    for id in &dead {
        let n = app
            .receiver
            .received("ep")
            .iter()
            .filter(|r| {
                r.answered == Some(200) && r.webhook_id.as_deref() == Some(id.to_string().as_str())
            })
            .count();
        assert_eq!(n, 1, "dead letter {id} replayed once");
    }
    let replays = audit_rows(&pool, ch, "deliveries.replayed").await;
    assert_eq!(replays.len(), 1);
    assert_eq!(replays[0].0, "circuit_breaker");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn operators_see_and_steer_every_breaker(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (a_id, a) = app.tenant("alpha", "default").await;
    let (b_id, b) = app.tenant("beta", "bulk").await;
    let ca = app.channel(&a, "a").await;
    let cb = app.channel(&b, "b").await;

    // A tenant key cannot use operator routes.
    let (s, _) = app.get("/api/v1/admin/channels", &a).await;
    assert_eq!(s, 403);

    // Force open: parked, audited as operator, visible in the filtered list.
    let (s, v) = app
        .post_empty(
            &format!("/api/v1/admin/channels/{cb}/open?reason=incident-42"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["circuit"]["state"], "open");
    assert!(
        !v["url"].as_str().unwrap().ends_with("/b"),
        "origin only: {v}"
    );
    let (s, v) = app
        .get("/api/v1/admin/channels?state=open", OPERATOR_KEY)
        .await;
    assert_eq!(s, 200);
    let listed: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec![cb.to_string().as_str()]);
    assert_eq!(v["data"][0]["tenant_name"], "beta");
    assert_eq!(v["data"][0]["tier"], "bulk");
    // The operator sees each URL's origin only (a receiver's path and query may carry its
    // token); the tenant sees the whole URL.
    let full = app.receiver.url("b");
    let origin = full.trim_end_matches("/b").to_string();
    assert!(
        full.len() > origin.len() && full.starts_with(&origin),
        "{full}"
    );
    assert_eq!(v["data"][0]["url"], json!(origin));
    let (_, one) = app
        .get(&format!("/api/v1/admin/channels/{cb}"), OPERATOR_KEY)
        .await;
    assert_eq!(one["url"], json!(origin), "{one}");
    let (_, own) = app.get(&format!("/api/v1/channels/{cb}"), &b).await;
    assert_eq!(own["url"], json!(full), "{own}");
    // The same for a tenant's alert URL in the operator's tenant views.
    let alert = format!("{origin}/alerts?token=secret-token");
    let (s, v) = app
        .patch("/api/v1/tenant", &b, &json!({ "alert_url": alert }))
        .await;
    assert_eq!(
        (s, &v["alert_url"]),
        (200, &json!(alert)),
        "the tenant sees it: {v}"
    );
    let (_, list) = app.get("/api/v1/tenants", OPERATOR_KEY).await;
    assert!(!list.to_string().contains("secret-token"), "{list}");
    let (_, beta) = app
        .get(&format!("/api/v1/tenants/{b_id}"), OPERATOR_KEY)
        .await;
    assert_eq!(beta["alert_url"], json!(origin), "{beta}");
    let (_, v) = app
        .get(
            &format!("/api/v1/admin/channels?tenant_id={a_id}"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
    let (s, _) = app
        .get("/api/v1/admin/channels?state=melted", OPERATOR_KEY)
        .await;
    assert_eq!(s, 422);
    let rows = audit_rows(&pool, cb, "circuit.forced_open").await;
    assert_eq!(
        rows,
        vec![(
            "operator".to_string(),
            Some("closed".to_string()),
            Some("open".to_string())
        )]
    );

    // Deliveries to the forced-open channel are parked; force close releases them.
    app.deliver_many(&b, cb, 10).await;
    wait_until(
        Duration::from_secs(10),
        "the 10 jobs are parked",
        || async { all_parked(&pool, cb, 10).await },
    )
    .await;
    assert_eq!(app.receiver.count("b"), 0);
    let (s, v) = app
        .post_empty(&format!("/api/v1/admin/channels/{cb}/close"), OPERATOR_KEY)
        .await;
    assert_eq!((s, v["circuit"]["state"].as_str()), (200, Some("closed")));
    app.wait_received("b", 10, Duration::from_secs(10)).await;

    // Operator pause / resume of any tenant's channel.
    let (s, _) = app
        .post_empty(&format!("/api/v1/admin/channels/{ca}/pause"), OPERATOR_KEY)
        .await;
    assert_eq!(s, 200);
    assert_eq!(app.circuit_state(ca).await, "paused");
    let (s, _) = app
        .post_empty(&format!("/api/v1/admin/channels/{ca}/resume"), OPERATOR_KEY)
        .await;
    assert_eq!(s, 200);
    let (s, _) = app
        .post_empty(
            &format!("/api/v1/admin/channels/{ca}/explode"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 404);

    // Global defaults: edited at run time, effective where a channel has no override.
    let r = app
        .http
        .patch(format!("{}/api/v1/admin/circuit-defaults", app.api))
        .bearer_auth(OPERATOR_KEY)
        .json(&json!({ "failure_threshold": 2 }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (_, v) = app.get(&format!("/api/v1/channels/{ca}"), &a).await;
    assert_eq!(v["circuit"]["failure_threshold"], 2);
    app.receiver.set("a", Behavior::Status(503, None));
    app.deliver_many(&a, ca, 5).await;
    app.wait_circuit(ca, "open", Duration::from_secs(10)).await;
    let fails = consecutive_failures(&pool, ca).await;
    assert_eq!(fails, 2, "opened at the operator's threshold");

    // The operator reads the whole audit log; each tenant only its own.
    let (_, v) = app.get("/api/v1/admin/audit?limit=100", OPERATOR_KEY).await;
    let actions: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert!(
        actions.contains(&"circuit.forced_open")
            && actions.contains(&"channel.paused")
            && actions.contains(&"circuit_defaults.changed")
    );
    let (_, v) = app.get("/api/v1/audit", &a).await;
    assert!(
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["tenant_id"] == a_id.to_string()
                && (r["channel_id"].is_null() || r["channel_id"] == ca.to_string())),
        "{v}"
    );
    // Another tenant's channel is a 404, like one that does not exist.
    for other in [cb, Uuid::now_v7()] {
        let (s, v) = app
            .get(&format!("/api/v1/audit?channel_id={other}"), &a)
            .await;
        assert_eq!(s, 404, "another tenant's channel's audit is invisible: {v}");
        assert!(v["detail"].as_str().unwrap().contains("channel"), "{v}");
    }
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_tier_change_moves_waiting_jobs_without_duplicates(pool: PgPool) {
    // API only, so the jobs wait where the test can see them.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (tid, key) = app.tenant("acme", "bulk").await;
    let ch = app.channel(&key, "ep").await;
    app.deliver_many(&key, ch, 40).await;
    let r = app
        .http
        .patch(format!("{}/api/v1/tenants/{tid}", app.api))
        .bearer_auth(OPERATOR_KEY)
        .json(&json!({ "tier": "high" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["tier"], "high");
    assert_eq!(v["jobs_moved"], 40);
    let by_queue: Vec<(String, i64)> =
        sqlx::query_as("SELECT queue, count(*) FROM jobs GROUP BY queue")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(by_queue, vec![("deliveries_high".to_string(), 40)]);
    // New deliveries go to the new queue too, and each delivery still has exactly one job.
    app.deliver_many(&key, ch, 5).await;
    let dup: i64 = sqlx::query_scalar("SELECT count(*) FROM (SELECT unique_key FROM jobs GROUP BY unique_key HAVING count(*) > 1) d")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(dup, 0);
    let (s, _) = app.get(&format!("/api/v1/tenants/{tid}"), &key).await;
    assert_eq!(s, 403, "tenant keys cannot use operator routes");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn deliveries_to_a_paused_or_open_channel_are_parked_when_accepted(pool: PgPool) {
    // API only: no worker runs, so anything parked was parked by the enqueue itself.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (key, paused) = app.tenant_with_channel("p").await;
    let open = app.channel(&key, "o").await;
    let closed = app.channel(&key, "c").await;
    app.pause(&key, paused).await;
    let (s, _) = app
        .post_empty(&format!("/api/v1/admin/channels/{open}/open"), OPERATOR_KEY)
        .await;
    assert_eq!(s, 200);
    for ch in [paused, open, closed] {
        app.deliver_many(&key, ch, 20).await;
    }
    let parked = |ch: Uuid| {
        let pool = pool.clone();
        async move {
            let r: (i64, i64) = sqlx::query_as(
                "SELECT (SELECT count(*) FROM jobs j JOIN job_groups g ON g.group_id = j.group_id AND g.parked WHERE j.group_id = $1 AND j.state IN ('available', 'scheduled')),
                        (SELECT count(*) FROM deliveries WHERE channel_id = $1 AND status = 'paused')",
            )
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap();
            r
        }
    };
    assert_eq!(parked(paused).await, (20, 20));
    assert_eq!(parked(open).await, (20, 20));
    assert_eq!(
        parked(closed).await,
        (0, 0),
        "a closed channel's deliveries are due at once"
    );
    // Resume releases them in one UPDATE.
    let (s, v) = app
        .post_empty(&format!("/api/v1/channels/{paused}/resume"), &key)
        .await;
    assert_eq!((s, v["circuit"]["parked"].as_i64()), (200, Some(0)));
    assert_eq!(parked(paused).await, (0, 0));
    app.stop().await;
}

/// Deliveries counted by status, per channel (`deliveries::channel_status_counts`) and for every
/// channel (`deliveries::status_counts`), as the demo's summary reads them: typed statuses, 0
/// for a status none has.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn deliveries_are_counted_by_status_per_channel_and_in_all(pool: PgPool) {
    // API only: no worker runs, so the statuses are the enqueue's.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (key, paused) = app.tenant_with_channel("p").await;
    let closed = app.channel(&key, "c").await;
    app.pause(&key, paused).await;
    app.deliver_many(&key, paused, 3).await;
    app.deliver_many(&key, closed, 5).await;
    let p = deliveries::channel_status_counts(&pool, paused)
        .await
        .unwrap();
    assert_eq!(
        (p.get(Status::Paused), p.get(Status::Pending), p.total()),
        (3, 0, 3)
    );
    let c = deliveries::channel_status_counts(&pool, closed)
        .await
        .unwrap();
    assert_eq!(
        (
            c.get(Status::Pending),
            c.sum(&[Status::Pending, Status::Paused, Status::Pending]),
            c.total()
        ),
        (5, 5, 5),
        "a status listed twice counts once"
    );
    let all = deliveries::status_counts(&pool).await.unwrap();
    assert_eq!(
        (
            all.get(Status::Paused),
            all.get(Status::Pending),
            all.get(Status::Dead),
            all.total()
        ),
        (3, 5, 0, 8)
    );
    app.stop().await;
}

/// A delivery in flight when its channel is paused shows `paused` once its failure is recorded,
/// as every other delivery its channel holds: its retry waits in the parked group until the
/// resume, `?status=paused` lists it, and the resume delivers it (not `failed` while the
/// channel says `parked: 1`).
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_failure_recorded_after_a_pause_shows_paused(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (key, ch) = app.tenant_with_channel("late").await;
    app.receiver.set(
        "late",
        Behavior::Delayed(
            Duration::from_millis(1_500),
            Box::new(Behavior::Status(503, None)),
        ),
    );
    let id = app.deliver(&key, ch, json!({ "n": 1 })).await;
    app.wait_received("late", 1, Duration::from_secs(10)).await;
    app.pause(&key, ch).await;
    wait_until(
        Duration::from_secs(10),
        "the attempt in flight at the pause is recorded",
        || async {
            let (_, d) = app.get(&format!("/api/v1/deliveries/{id}"), &key).await;
            d["attempts"] == 1
        },
    )
    .await;
    assert_eq!(app.delivery_status(id).await, "paused");
    let (s, page) = app
        .get(
            &format!("/api/v1/channels/{ch}/deliveries?status=paused"),
            &key,
        )
        .await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(page["data"][0]["id"], json!(id), "{page}");
    let (_, v) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(v["circuit"]["parked"], 1, "{v}");
    assert_eq!(app.receiver.count("late"), 1, "nothing sent while paused");

    app.receiver.set("late", Behavior::Status(200, None));
    app.resume(&key, ch).await;
    app.wait_delivery(id, "delivered", Duration::from_secs(10))
        .await;
    assert_eq!(app.receiver.count("late"), 2);
    app.stop().await;
}

/// An operator's pause or force-open holds the circuit: the tenant's own pause and resume are
/// refused (409, nothing changes, nothing audited) until an operator resumes or closes it; a
/// tenant's resume of a channel its breaker opened is refused too (a probe closes it). So a
/// tenant's resume cannot undo an operator's pause a second later.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_tenant_cannot_undo_an_operators_pause_or_force_open(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let (key, ch) = app.tenant_with_channel("acme").await;
    let tenant = |action: &'static str| {
        let app = &app;
        let key = key.clone();
        async move {
            app.post_empty(&format!("/api/v1/channels/{ch}/{action}"), &key)
                .await
        }
    };
    let operator = |action: &'static str| {
        let app = &app;
        async move {
            app.post_empty(
                &format!("/api/v1/admin/channels/{ch}/{action}?reason=abuse"),
                OPERATOR_KEY,
            )
            .await
        }
    };
    let audited = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM audit_log WHERE channel_id = $1")
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap()
    };

    for (hold, state) in [("pause", "paused"), ("open", "open")] {
        let (s, v) = operator(hold).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["circuit"]["state"], state);
        assert_eq!(v["circuit"]["operator_hold"], true, "{v}");
        let rows = audited().await;
        for action in ["resume", "pause"] {
            let (s, v) = tenant(action).await;
            assert_eq!(
                s, 409,
                "tenant {action} while the operator's {hold} holds: {v}"
            );
            assert_eq!(v["code"], "conflict", "{v}");
            assert!(
                v["detail"].as_str().unwrap().contains("operator"),
                "the refusal says why: {v}"
            );
        }
        assert_eq!(app.circuit_state(ch).await, state, "nothing changed");
        assert_eq!(audited().await, rows, "nothing audited");
        // The operator ends the hold; the tenant may act again.
        let (s, v) = operator(if hold == "pause" { "resume" } else { "close" }).await;
        assert_eq!(
            (s, v["circuit"]["state"].as_str()),
            (200, Some("closed")),
            "{v}"
        );
        assert_eq!(v["circuit"]["operator_hold"], false, "{v}");
        let (s, v) = tenant("pause").await;
        assert_eq!(
            (s, v["circuit"]["state"].as_str()),
            (200, Some("paused")),
            "{v}"
        );
        let (s, v) = tenant("resume").await;
        assert_eq!(
            (s, v["circuit"]["state"].as_str()),
            (200, Some("closed")),
            "{v}"
        );
    }

    // The tenant paused first: the operator's pause of the paused channel still takes the hold
    // (audited, no transition).
    let (s, _) = tenant("pause").await;
    assert_eq!(s, 200);
    let (s, v) = operator("pause").await;
    assert_eq!(
        (s, v["circuit"]["operator_hold"].as_bool()),
        (200, Some(true)),
        "{v}"
    );
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE channel_id = $1 AND action = 'circuit.operator_hold'",
    )
    .bind(ch)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(held, 1);
    let (s, _) = tenant("resume").await;
    assert_eq!(s, 409);
    let (s, _) = operator("resume").await;
    assert_eq!(s, 200);

    // A circuit open without a hold (as its breaker opens it) is not paused: the tenant's
    // resume is a 409, not a silent 200 that changes nothing.
    let (s, _) = operator("open").await;
    assert_eq!(s, 200);
    sqlx::query("UPDATE channels SET operator_hold = false WHERE id = $1")
        .bind(ch)
        .execute(&pool)
        .await
        .unwrap();
    let (s, v) = tenant("resume").await;
    assert_eq!(s, 409, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("not paused"), "{v}");
    assert_eq!(app.circuit_state(ch).await, "open");
    // The operator's resume of an open circuit is refused too, pointing at close.
    let (s, v) = operator("resume").await;
    assert_eq!(s, 409, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("(close)"), "{v}");
    let (s, _) = operator("close").await;
    assert_eq!(s, 200);
    app.stop().await;
}
