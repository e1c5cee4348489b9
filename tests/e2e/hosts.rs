//! Host circuits end to end: one circuit per receiving host, shared by every
//! channel and tenant on it, on three worker nodes, with real HTTP and the real queue.

use breakwater::Role;
use breakwater_e2e::{
    audit_count, eventually, host_of, spawn_node_thread, spawn_workers, stop_all, test_settings,
    wait_until, Behavior, TestApp, OPERATOR_KEY,
};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::HashMap;
use std::time::Duration;

/// Host settings of these tests: 3 distinct channels open a host, 0.5 s cooldown doubling to
/// 1 s, a lease above the request timeout.
fn tune(s: &mut breakwater::config::Settings) {
    s.hosts.failure_threshold = 3;
    s.hosts.failure_window_ms = 60_000;
    s.hosts.cooldown_ms = 500;
    s.hosts.max_cooldown_ms = 1_000;
    s.hosts.probe_lease_ms = 5_000;
    s.worker.request_timeout_ms = 1_000;
    // Deliveries must outlive the outage: nothing may go dead while the host is down.
    s.worker.max_attempts = 25;
}

fn settings() -> breakwater::config::Settings {
    let mut s = test_settings();
    tune(&mut s);
    s
}

async fn host_state(pool: &PgPool, host: &str) -> String {
    sqlx::query_scalar("SELECT state FROM host_circuits WHERE host_key = $1")
        .bind(host)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Host audit rows (`action`, generation), oldest first.
async fn host_audit(pool: &PgPool, host: &str) -> Vec<(String, i64)> {
    sqlx::query_as(
        "SELECT action, (details->>'generation')::int8 FROM audit_log
         WHERE action LIKE 'host.%' AND details->>'host_key' = $1 ORDER BY id",
    )
    .bind(host)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Waits (up to 30 s) until every delivery of the test is delivered.
/// The operator forces `host`'s circuit `action` (`"open"` or `"close"`) through the API
/// (`POST /api/v1/admin/hosts/{host}/{action}`); asserts 200 and returns the host it answers.
async fn force_host(app: &TestApp, host: &str, action: &str) -> Value {
    let (s, v) = app
        .post(
            &format!("/api/v1/admin/hosts/{host}/{action}"),
            OPERATOR_KEY,
            &json!({}),
        )
        .await;
    assert_eq!(s, 200, "{action} host {host}: {v}");
    v
}

async fn all_delivered(pool: &PgPool) -> bool {
    eventually(Duration::from_secs(30), || async {
        let left: i64 =
            sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE status <> 'delivered'")
                .fetch_one(pool)
                .await
                .unwrap();
        left == 0
    })
    .await
}

/// Deliveries per channel in the 50-channel dead-host test.
const DELIVERIES_PER_CHANNEL: usize = 2;

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn fifty_channels_of_five_tenants_on_one_dead_host_open_it_once_and_recover_exactly_once(
    pool: PgPool,
) {
    // API here; three worker nodes, each on its own runtime and pool.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, tune).await;
    let mut node_settings = settings();
    node_settings.worker.pool_default = 4;
    // The per-host cap, cluster-wide: 4 in flight to the host across 12 workers on 3 nodes.
    node_settings.hosts.max_in_flight = Some(4);
    // One delivery in flight per channel, and retries not due before the host has opened: what
    // the host receives before opening is then bounded by the deliveries of the channels whose
    // failures open it, plus what was in flight (the bound below).
    node_settings.worker.channel_concurrency_initial = 1;
    // Even in the worst order below (one tenant's 20 requests, then one more, 4 at a time with
    // 1-s hangs: 6 rounds, about 6 s), no retry is due before the opening.
    node_settings.worker.backoff_base_ms = 8_000;
    node_settings.worker.backoff_cap_ms = 8_000;
    let in_flight_max = i64::from(node_settings.hosts.max_in_flight.unwrap());

    // 5 tenants × 10 channels, all on one receiver port (one host), different paths.
    let mut tenants = Vec::new();
    let mut channels = Vec::new();
    for t in 0..5 {
        let alert = format!("oncall-{t}");
        let (s, v) = app
            .post(
                "/api/v1/tenants",
                OPERATOR_KEY,
                &json!({ "name": format!("t{t}"), "alert_url": app.receiver.url(&alert) }),
            )
            .await;
        assert_eq!(s, 201, "{v}");
        app.receiver
            .set_secret(&alert, v["alert_secret"].as_str().unwrap());
        let key = v["api_key"].as_str().unwrap().to_string();
        for c in 0..10 {
            let ep = format!("ep-{t}-{c}");
            app.receiver.set(&ep, Behavior::Hang);
            channels.push((key.clone(), ep.clone(), app.channel(&key, &ep).await));
        }
        tenants.push((alert, key));
    }
    let host = host_of(&pool, channels[0].2).await;
    for (_, _, ch) in &channels {
        assert_eq!(host_of(&pool, *ch).await, host, "one host for all 50");
    }
    assert!(host.starts_with("127.0.0.1:"), "{host}");

    // Every tenant's deliveries wait before the workers start, so the order of the requests is
    // the fetch's (fair shares), not the order in which this test enqueued tenant after tenant
    // (a slow enqueue left the other tenants' deliveries still unsent while the first tenant's
    // requests failed round after round).
    let mut ids = Vec::new();
    for (key, _, ch) in &channels {
        ids.extend(app.deliver_many(key, *ch, DELIVERIES_PER_CHANNEL).await);
    }
    let nodes = spawn_workers(&pool, 3, &node_settings);

    assert!(
        eventually(Duration::from_secs(20), || async {
            host_state(&pool, &host).await != "closed"
        })
        .await,
        "the host opened"
    );
    // Watch the open host over a few cooldowns: probes only, one at a time. Three recorded host
    // probes take at least 3 × 1 s (each hangs to the timeout) plus two cooldowns.
    wait_until(
        Duration::from_secs(30),
        "three host probes were recorded",
        || async {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM delivery_attempts WHERE probe")
                .fetch_one(&pool)
                .await
                .unwrap()
                >= 3
        },
    )
    .await;
    let (non_probe, probes): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE NOT probe), count(*) FILTER (WHERE probe) FROM delivery_attempts",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let received: usize = channels
        .iter()
        .map(|(_, ep, _)| app.receiver.count(ep))
        .sum();
    println!(
        "dead host: {non_probe} requests before opening (threshold 3, in flight ≤ {in_flight_max}), {probes} host probes; receiver saw {received}"
    );
    assert_eq!(
        received as i64,
        non_probe + probes,
        "every request is an attempt"
    );
    assert!(non_probe >= 3, "{non_probe}");
    // The host opens on failures of 3 distinct channels of at least two tenants. In the worst
    // order every delivery of one tenant fails first (its 10 channels, each sending its
    // deliveries one at a time, the next as soon as the last one failed; retries not yet due,
    // see the backoff above), then one of another tenant's, plus what was in flight at the
    // opening. The fair-share fetch makes the order far better than that (5-6 requests).
    let one_tenants_deliveries = 10 * DELIVERIES_PER_CHANNEL as i64;
    assert!(
        non_probe <= one_tenants_deliveries + 1 + in_flight_max,
        "{non_probe} requests before opening: more than one tenant's deliveries + 1 + in flight (not 50 × 5)"
    );
    let opened_at: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
        "SELECT at FROM audit_log WHERE action = 'host.opened' AND details->>'host_key' = $1",
    )
    .bind(&host)
    .fetch_one(&pool)
    .await
    .unwrap();
    let late: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM delivery_attempts WHERE NOT probe AND started_at > $1 + interval '1 s'",
    )
    .bind(opened_at)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(late, 0, "nothing but host probes once the host is open");
    // One probe per cooldown: each probe hangs 1 s then re-opens for 0.5–1 s; never two at once.
    let starts: Vec<(chrono::DateTime<chrono::Utc>, i32)> = sqlx::query_as(
        "SELECT started_at, duration_ms FROM delivery_attempts WHERE probe ORDER BY started_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(probes >= 3, "{probes} host probes");
    let watched_ms = (starts.last().unwrap().0 - opened_at).num_milliseconds();
    assert!(
        probes <= watched_ms / 450 + 1,
        "{probes} host probes in {watched_ms} ms: more than one per cooldown"
    );
    for w in starts.windows(2) {
        let gap = (w[1].0 - w[0].0).num_milliseconds() - i64::from(w[0].1);
        assert!(
            gap >= 450,
            "a probe started {gap} ms after the last one ended"
        );
    }

    // Recovery: the next probe succeeds, the host closes, everything is delivered once.
    for (_, ep, _) in &channels {
        app.receiver.set(ep, Behavior::Status(200, None));
    }
    assert!(all_delivered(&pool).await, "every delivery delivered");
    stop_all(nodes);
    assert_eq!(host_state(&pool, &host).await, "closed");
    let mut ok: HashMap<String, usize> = HashMap::new();
    for (_, ep, _) in &channels {
        for r in app.receiver.received(ep) {
            if r.answered == Some(200) {
                *ok.entry(r.webhook_id.clone().unwrap()).or_default() += 1;
            }
        }
    }
    assert_eq!(ok.len(), ids.len(), "nothing lost");
    assert!(ok.values().all(|&n| n == 1), "no duplicates: {ok:?}");

    // One audit row per transition, one alert per transition and tenant.
    let audit = host_audit(&pool, &host).await;
    let opens = audit
        .iter()
        .filter(|(a, _)| a == "host.opened" || a == "host.reopened")
        .count();
    let closes = audit.iter().filter(|(a, _)| a == "host.closed").count();
    let mut gens: Vec<i64> = audit.iter().map(|(_, g)| *g).collect();
    gens.dedup();
    assert_eq!(gens.len(), audit.len(), "one row per generation: {audit:?}");
    assert_eq!(
        audit.iter().filter(|(a, _)| a == "host.opened").count(),
        1,
        "{audit:?}"
    );
    assert_eq!(closes, 1, "{audit:?}");
    for (alert, _) in &tenants {
        assert!(
            eventually(Duration::from_secs(10), || async {
                app.alerts_of(alert, "host.circuit_closed").len() == 1
            })
            .await
        );
        // One opened alert per outage: the opening pages, the failed probes' re-openings
        // (audited above) do not.
        let opened = app.alerts_of(alert, "host.circuit_opened");
        assert!(
            opens > 1,
            "the probes failed and re-opened the host: {audit:?}"
        );
        assert_eq!(opened.len(), 1, "{alert}: one opened alert per outage");
        assert_eq!(opened[0]["data"]["host_key"], json!(host));
        assert_eq!(opened[0]["data"]["channels"], json!(10));
    }
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn one_channels_failures_alone_never_open_the_host(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), tune).await;
    let (key, sick) = app.tenant_with_channel("sick").await;
    let fine = app.channel(&key, "fine").await;
    app.receiver.set("sick", Behavior::Status(503, None));
    app.deliver_many(&key, sick, 20).await;
    // The channel's own circuit opens.
    app.wait_circuit(sick, "open", Duration::from_secs(15))
        .await;
    let host = host_of(&pool, sick).await;
    assert_eq!(host, host_of(&pool, fine).await);
    assert_eq!(host_state(&pool, &host).await, "closed");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM host_failures WHERE host_key = $1")
        .bind(&host)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1, "one failing channel counted once");
    // The other channel on the host keeps delivering.
    let d = app.deliver(&key, fine, json!({})).await;
    app.wait_delivery(d, "delivered", Duration::from_secs(10))
        .await;
    assert!(host_audit(&pool, &host).await.is_empty());
    app.stop().await;
}

/// One tenant's failing endpoints on a host other tenants also use (failing paths of a host that
/// answers everyone else) never open the host: the other tenant keeps delivering, and each
/// failing channel has its own circuit. A second tenant's failure on the host then opens it.
/// (Otherwise one tenant's three failing channels hold another tenant's healthy channel on the
/// same host for a cooldown.)
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn one_tenants_failing_channels_never_open_a_host_another_tenant_uses(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), tune).await;
    let (_, acme) = app.tenant("acme", "default").await;
    let (_, globex) = app.tenant("globex", "default").await;
    let sick: Vec<_> = {
        let mut v = Vec::new();
        for ep in ["a1", "a2", "a3", "a4"] {
            app.receiver.set(ep, Behavior::Status(503, None));
            v.push(app.channel(&acme, ep).await);
        }
        v
    };
    let fine = app.channel(&globex, "g-ok").await;
    let host = host_of(&pool, fine).await;
    for &ch in &sick {
        assert_eq!(host_of(&pool, ch).await, host, "one host");
        app.deliver_many(&acme, ch, 3).await;
    }
    let failing = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM host_failures WHERE host_key = $1")
            .bind(&host)
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    // All four of acme's channels fail (threshold 3 distinct channels), and the host stays closed.
    wait_until(
        Duration::from_secs(15),
        "acme's four channels' failures are counted",
        || async { failing().await == 4 },
    )
    .await;
    assert_eq!(host_state(&pool, &host).await, "closed");
    let d = app.deliver(&globex, fine, json!({})).await;
    app.wait_delivery(d, "delivered", Duration::from_secs(10))
        .await;
    assert!(
        host_audit(&pool, &host).await.is_empty(),
        "no host transition"
    );

    // Globex's endpoint fails too: failures of two tenants open the host.
    app.receiver.set("g-ok", Behavior::Status(503, None));
    app.deliver(&globex, fine, json!({ "again": true })).await;
    wait_until(Duration::from_secs(15), "the host opens", || async {
        host_state(&pool, &host).await == "open"
    })
    .await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn an_operator_forces_a_host_open_and_closed_and_a_tenant_cannot(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| {
        tune(s);
        s.hosts.cooldown_ms = 600_000;
        s.hosts.max_cooldown_ms = 600_000;
    })
    .await;
    let (_, a) = app.tenant("a", "default").await;
    let (tenant_b, b) = app.tenant("b", "default").await;
    let ca = app.channel(&a, "a").await;
    let cb = app.channel(&b, "b").await;
    let host = host_of(&pool, ca).await;
    let path = format!("/api/v1/admin/hosts/{host}");

    // A tenant sees none of it.
    for k in [&a, &b] {
        let (s, _) = app.get("/api/v1/admin/hosts", k).await;
        assert!(s == 403 || s == 404, "{s}");
        let (s, _) = app.get(&path, k).await;
        assert!(s == 403 || s == 404, "{s}");
        let (s, _) = app.post(&format!("{path}/open"), k, &json!({})).await;
        assert!(s == 403 || s == 404, "{s}");
    }

    let (s, v) = app.get("/api/v1/admin/hosts", OPERATOR_KEY).await;
    assert_eq!(s, 200, "{v}");
    let row = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host_key"] == json!(host))
        .cloned()
        .expect("the host is listed");
    assert_eq!(row["state"], "closed");
    assert_eq!(row["channels"], 2);
    assert_eq!(row["cap"], json!(64), "the default per-host cap");

    let v = force_host(&app, &host, "open").await;
    assert_eq!(v["state"], "open");
    let (s, _) = app
        .post(&format!("{path}/open"), OPERATOR_KEY, &json!({}))
        .await;
    assert_eq!(s, 200, "idempotent");
    assert_eq!(
        host_audit(&pool, &host).await,
        vec![("host.forced_open".to_string(), 1)],
        "one row for the change, none for the repeat"
    );
    // Channel JSON shows the host and its state.
    let (_, cv) = app.get(&format!("/api/v1/channels/{ca}"), &a).await;
    assert_eq!(cv["host_key"], json!(host));
    assert_eq!(cv["host_circuit_state"], "open");

    // While open, nothing is sent to either tenant's channel.
    let da = app.deliver(&a, ca, json!({"n": 1})).await;
    let db = app.deliver(&b, cb, json!({"n": 2})).await;
    let parked_seen = eventually(Duration::from_secs(5), || async {
        let (_, v) = app.get(&path, OPERATOR_KEY).await;
        v["parked"] == 2
    })
    .await;
    assert!(parked_seen, "both deliveries parked under the host");
    assert_eq!(app.receiver.count("a") + app.receiver.count("b"), 0);
    // Held by the host, they count as parked everywhere, not as a due backlog.
    let (_, cv) = app.get(&format!("/api/v1/channels/{ca}"), &a).await;
    assert_eq!(cv["circuit"]["parked"], 1, "{cv}");
    // The operator's channel list counts them too, though both channels' own circuits are
    // closed (it counted 0 for a closed channel before).
    let (s, lv) = app
        .get(
            &format!("/api/v1/admin/channels?tenant_id={tenant_b}"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 200, "{lv}");
    let row = &lv["data"][0];
    assert_eq!(
        (
            row["id"].clone(),
            row["circuit_state"].clone(),
            row["parked"].clone()
        ),
        (json!(cb), json!("closed"), json!(1)),
        "{lv}"
    );
    let (_, qv) = app.get("/api/v1/admin/queues", OPERATOR_KEY).await;
    let q = qv
        .as_array()
        .or_else(|| qv["data"].as_array())
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "deliveries")
        .cloned()
        .unwrap();
    assert_eq!(
        (q["parked"].clone(), q["available"].clone()),
        (json!(2), json!(0)),
        "{q}"
    );

    // Overrides, checked and audited.
    let (s, v) = app
        .patch(&path, OPERATOR_KEY, &json!({"max_in_flight": 0}))
        .await;
    assert_eq!(s, 422);
    assert!(v.to_string().contains("max_in_flight"));
    // One channel alone is its own circuit's job: a host threshold below 2 is refused.
    let (s, v) = app
        .patch(&path, OPERATOR_KEY, &json!({"failure_threshold": 1}))
        .await;
    assert_eq!(s, 422);
    assert!(v.to_string().contains("failure_threshold"));
    let (s, v) = app
        .patch(
            &path,
            OPERATOR_KEY,
            &json!({"max_in_flight": 4, "failure_threshold": 5}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["cap"], 4);
    assert_eq!(v["failure_threshold"], 5);

    let v = force_host(&app, &host, "close").await;
    assert_eq!(v["state"], "closed");
    for d in [da, db] {
        app.wait_delivery(d, "delivered", Duration::from_secs(10))
            .await;
    }
    let (s, _) = app
        .get("/api/v1/admin/hosts/nope.example", OPERATOR_KEY)
        .await;
    assert_eq!(s, 404);
    let (s, _) = app
        .post(&format!("{path}/explode"), OPERATOR_KEY, &json!({}))
        .await;
    assert_eq!(s, 404);
    let (s, _) = app
        .get("/api/v1/admin/hosts?state=weird", OPERATOR_KEY)
        .await;
    assert_eq!(s, 422);
    app.stop().await;
}

/// Arrival times and the fixed answer delay give each request's interval at the receiver; the
/// most intervals overlapping at any arrival is the most requests the host had at once.
fn max_concurrent(app: &TestApp, endpoints: &[String], delay: Duration) -> usize {
    let mut at: Vec<std::time::Instant> = endpoints
        .iter()
        .flat_map(|e| app.receiver.received(e).into_iter().map(|r| r.at))
        .collect();
    at.sort();
    (0..at.len())
        .map(|i| (0..=i).filter(|&j| at[i] < at[j] + delay).count())
        .max()
        .unwrap_or(0)
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_host_cap_holds_across_channels_of_several_tenants_on_three_nodes(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |s| {
        tune(s);
        s.hosts.max_in_flight = Some(4);
    })
    .await;
    let mut node_settings = settings();
    node_settings.worker.pool_default = 4;
    node_settings.hosts.max_in_flight = Some(4);
    let delay = Duration::from_millis(200);
    let mut endpoints = Vec::new();
    let mut work = Vec::new();
    for t in 0..3 {
        let (_, key) = app.tenant(&format!("t{t}"), "default").await;
        for c in 0..4 {
            let ep = format!("slow-{t}-{c}");
            app.receiver.set(&ep, Behavior::Delay(delay, 200));
            let ch = app.channel(&key, &ep).await;
            endpoints.push(ep);
            work.push((key.clone(), ch));
        }
    }
    let host = host_of(&pool, work[0].1).await;
    let nodes = spawn_workers(&pool, 3, &node_settings);
    let mut n = 0;
    for (key, ch) in &work {
        n += app.deliver_many(key, *ch, 5).await.len();
    }
    assert!(all_delivered(&pool).await, "all delivered");
    for node in nodes {
        node.stop();
    }
    let received: usize = endpoints.iter().map(|e| app.receiver.count(e)).sum();
    assert_eq!(received, n, "each once");
    let most = max_concurrent(&app, &endpoints, delay);
    println!("host cap 4: at most {most} requests at once at the receiver ({n} deliveries, 12 channels, 3 tenants, 12 workers)");
    assert!(most <= 4, "{most} requests at once: over the host cap");
    assert_eq!(most, 4, "the cap is used, not undershot");
    let (_, v) = app
        .get(&format!("/api/v1/admin/hosts/{host}"), OPERATOR_KEY)
        .await;
    assert_eq!(v["cap"], 4);
    assert_eq!(v["in_flight"], 0);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_host_opened_with_nothing_waiting_probes_with_the_next_arrival_and_writes_no_row_per_lease(
    pool: PgPool,
) {
    use breakwater_core::hosts::{self, WatchStep};
    // The API only at first: the test steps the watcher itself.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |s| {
        tune(s);
        s.hosts.cooldown_ms = 1;
    })
    .await;
    let mut cfg = settings().hosts;
    cfg.cooldown_ms = 1;
    let (key, ch) = app.tenant_with_channel("idle").await;
    let host = host_of(&pool, ch).await;
    force_host(&app, &host, "open").await;
    assert!(
        eventually(Duration::from_secs(5), || async {
            let mut tx = pool.begin().await.unwrap();
            let step = hosts::watch_step(&mut tx, &host, &cfg).await.unwrap();
            tx.commit().await.unwrap();
            matches!(step, WatchStep::Wait(_)) && host_state(&pool, &host).await == "half_open"
        })
        .await,
        "the cooldown passes and the host goes half-open with nothing to probe"
    );
    let rows = host_audit(&pool, &host).await;
    assert_eq!(
        rows.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>(),
        ["host.forced_open", "host.probe_started"]
    );
    // Leases expire (moved into the past on the database clock) with no probe ever chosen: the
    // watcher writes nothing and moves no generation.
    for _ in 0..3 {
        sqlx::query(
            "UPDATE host_circuits SET probe_deadline = now() - interval '1 s' WHERE host_key = $1",
        )
        .bind(&host)
        .execute(&pool)
        .await
        .unwrap();
        let mut tx = pool.begin().await.unwrap();
        let step = hosts::watch_step(&mut tx, &host, &cfg).await.unwrap();
        tx.commit().await.unwrap();
        assert!(matches!(step, WatchStep::Wait(_)));
    }
    assert_eq!(
        host_audit(&pool, &host).await,
        rows,
        "no row per lease expiry"
    );
    assert_eq!(host_state(&pool, &host).await, "half_open");

    // The next delivery that arrives is the probe; it succeeds and closes the host.
    let node = spawn_node_thread((*pool.connect_options()).clone(), settings(), Role::Worker);
    let d = app.deliver(&key, ch, json!({"first": true})).await;
    app.wait_delivery(d, "delivered", Duration::from_secs(10))
        .await;
    assert!(
        eventually(Duration::from_secs(5), || async {
            host_state(&pool, &host).await == "closed"
        })
        .await
    );
    let probe: bool =
        sqlx::query_scalar("SELECT probe FROM delivery_attempts WHERE delivery_id = $1")
            .bind(d)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(probe, "the first arrival was the host probe");
    let actions: Vec<String> = host_audit(&pool, &host)
        .await
        .into_iter()
        .map(|(a, _)| a)
        .collect();
    assert_eq!(
        actions,
        ["host.forced_open", "host.probe_started", "host.closed"]
    );
    node.stop();
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_reconciler_repairs_a_host_gate_that_disagrees_with_its_circuit(pool: PgPool) {
    use breakwater_core::hosts;
    let app = TestApp::spawn_role(pool.clone(), Role::Api, tune).await;
    let (_, ch) = app.tenant_with_channel("r").await;
    let host = host_of(&pool, ch).await;
    let parked = |pool: PgPool, host: String| async move {
        breakwater_queue::gate_state(&pool, &host)
            .await
            .unwrap()
            .is_some_and(|g| g.parked)
    };
    // A closed host whose gate was left parked: released.
    let mut conn = pool.acquire().await.unwrap();
    breakwater_queue::park_gate(&mut conn, &host).await.unwrap();
    assert!(parked(pool.clone(), host.clone()).await);
    let r = hosts::reconcile_gates(&mut conn).await.unwrap();
    assert_eq!((r.released, r.parked), (1, 0));
    assert!(!parked(pool.clone(), host.clone()).await);
    // An open host whose gate is not parked: parked.
    sqlx::query("UPDATE host_circuits SET state = 'open', next_probe_at = now() + interval '1 h' WHERE host_key = $1")
        .bind(&host)
        .execute(&pool)
        .await
        .unwrap();
    let r = hosts::reconcile_gates(&mut conn).await.unwrap();
    assert_eq!((r.released, r.parked), (0, 1));
    assert!(parked(pool.clone(), host.clone()).await);
    // Nothing left to repair.
    let r = hosts::reconcile_gates(&mut conn).await.unwrap();
    assert_eq!((r.released, r.parked), (0, 0));
    drop(conn);
    // Leave it consistent for the doctor.
    force_host(&app, &host, "close").await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_channel_probe_waits_quietly_while_its_host_is_held(pool: PgPool) {
    use breakwater_core::circuit::{self, CircuitConfig, Manual, ProbeStep};
    use breakwater_e2e::probe::probe_step;
    // The API only: the test steps the channel's probe watcher itself.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, tune).await;
    let (key, ch) = app.tenant_with_channel("held-by-host").await;
    app.deliver_many(&key, ch, 3).await;
    let host = host_of(&pool, ch).await;
    let cfg = CircuitConfig {
        cooldown_ms: 1,
        ..CircuitConfig::default()
    };
    // The channel's own circuit opens, then its host's.
    let mut tx = pool.begin().await.unwrap();
    circuit::apply_manual(
        &mut tx,
        ch,
        Manual::ForceOpen,
        circuit::ManualBy::Operator,
        "operator",
        "test",
        &cfg,
    )
    .await
    .unwrap()
    .expect("opened");
    tx.commit().await.unwrap();
    force_host(&app, &host, "open").await;
    let probes = || audit_count(&pool, ch, &["circuit.probe_started"]);
    // The channel's cooldown is long over (database clock), again and again: while the host is
    // held no channel probe is started — it could never be fetched through the parked host.
    for _ in 0..3 {
        sqlx::query("UPDATE channels SET next_probe_at = now() - interval '1 s' WHERE id = $1")
            .bind(ch)
            .execute(&pool)
            .await
            .unwrap();
        let step = probe_step(&pool, ch, &cfg).await;
        assert!(matches!(step, ProbeStep::Wait(w) if w >= Duration::from_secs(1)));
    }
    assert_eq!(
        probes().await,
        0,
        "no probe, no audit row, while the host is held"
    );
    assert_eq!(app.circuit_state(ch).await, "open");

    // The host closes: the channel's own probe goes ahead.
    force_host(&app, &host, "close").await;
    let step = probe_step(&pool, ch, &cfg).await;
    assert!(
        matches!(
            step,
            ProbeStep::Started {
                delivery_id: Some(_),
                ..
            }
        ),
        "{step:?}"
    );
    assert_eq!(probes().await, 1);
    assert_eq!(app.circuit_state(ch).await, "half_open");
    app.stop().await;
}

/// A whole-host outage's usual end state: every channel on the host has opened its own circuit
/// too, so when the host goes half-open no closed channel has a delivery waiting to be its probe
/// (the host's probe is chosen among closed channels). Each channel's own probe then tests the
/// host as well; its success closes both, and the whole backlog is delivered once, rather than
/// the channels' probes waiting for the host and the host for a closed channel, for good.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_host_whose_every_channel_is_open_is_tested_by_a_channel_probe(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), tune).await;
    let (_, key) = app.tenant("acme", "default").await;
    let endpoints = ["h1", "h2", "h3"];
    let mut channels = Vec::new();
    for ep in endpoints {
        let ch = app
            .channel_with(&key, ep, json!({ "cooldown_ms": 500 }))
            .await;
        let (s, v) = app
            .post(
                &format!("/api/v1/admin/channels/{ch}/open"),
                OPERATOR_KEY,
                &json!({}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        channels.push(ch);
    }
    let host = host_of(&pool, channels[0]).await;
    assert_eq!(host_of(&pool, channels[2]).await, host, "one host");
    force_host(&app, &host, "open").await;
    for &ch in &channels {
        app.deliver_many(&key, ch, 4).await;
    }
    // The endpoints answer 200 all along: only the probes decide.
    assert!(
        all_delivered(&pool).await,
        "every parked delivery is delivered once the probes find the host and channels healthy"
    );
    assert_eq!(host_state(&pool, &host).await, "closed");
    for &ch in &channels {
        app.wait_circuit(ch, "closed", Duration::from_secs(10))
            .await;
    }
    for ep in endpoints {
        assert_eq!(app.receiver.count(ep), 4, "{ep}: each delivery once");
    }
    let both: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE action = 'host.closed' AND details->>'host_key' = $1",
    )
    .bind(&host)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(both, 1, "the host closed once, by a probe");
    app.stop().await;
}

/// Two tenants' channels on one host, 3 deliveries waiting on each: acme's to `first` (no
/// failures) and globex's to `second`, which has failed 4 times in a row (its circuit still
/// closed) and whose deliveries are the older (first in fetch order). Returns `(first, second,
/// host key)`.
async fn two_channels_on_one_host(
    app: &TestApp,
    first: &str,
    second: &str,
) -> (uuid::Uuid, uuid::Uuid, String) {
    let (_, key_a) = app.tenant("acme", "default").await;
    let (_, key_b) = app.tenant("globex", "default").await;
    let a = app.channel_with(&key_a, first, json!({})).await;
    let b = app.channel_with(&key_b, second, json!({})).await;
    let host = host_of(&app.pool, a).await;
    assert_eq!(host_of(&app.pool, b).await, host, "one host");
    app.deliver_many(&key_b, b, 3).await;
    app.deliver_many(&key_a, a, 3).await;
    sqlx::query("UPDATE channels SET consecutive_failures = 4 WHERE id = $1")
        .bind(b)
        .execute(&app.pool)
        .await
        .unwrap();
    (a, b, host)
}

/// The operator opens `host`, its cooldown is made over, and one step of its probe watcher
/// (run here, not by a worker) makes it half-open with a probe chosen.
async fn start_host_probe(app: &TestApp, host: &str) {
    use breakwater_core::hosts;
    force_host(app, host, "open").await;
    sqlx::query(
        "UPDATE host_circuits SET next_probe_at = now() - interval '1 s' WHERE host_key = $1",
    )
    .bind(host)
    .execute(&app.pool)
    .await
    .unwrap();
    let mut tx = app.pool.begin().await.unwrap();
    hosts::watch_step(&mut tx, host, &hosts::HostsConfig::default())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(host_state(&app.pool, host).await, "half_open");
}

/// The host probe's channel and delivery, once chosen.
async fn host_probe(pool: &PgPool, host: &str) -> (Option<uuid::Uuid>, Option<uuid::Uuid>) {
    sqlx::query_as(
        "SELECT probe_channel_id, probe_delivery_id FROM host_circuits WHERE host_key = $1",
    )
    .bind(host)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// A host's probe is a delivery of its healthiest channel: here one channel has been failing on
/// its own (4 consecutive failures, its circuit still closed) and its deliveries are the oldest,
/// yet the host's probe is the healthy channel's. (The oldest delivery of the whole host would be
/// a failing channel's again and again, and healthy channels of another tenant would wait
/// minutes for the host to close.)
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_host_is_probed_with_a_delivery_of_its_healthiest_channel(pool: PgPool) {
    // The API only: the test steps the host's probe watcher itself.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, tune).await;
    let (healthy, _failing, host) = two_channels_on_one_host(&app, "healthy", "failing").await;
    for round in 0..2 {
        start_host_probe(&app, &host).await;
        assert_eq!(
            host_probe(&pool, &host).await.0,
            Some(healthy),
            "round {round}"
        );
        force_host(&app, &host, "close").await;
    }
    app.stop().await;
}

/// The host probe's delivery fails (a transient failure, as from a host still down), as the
/// worker records it: one more consecutive failure of its channel, and the host's result, which
/// re-opens it; then its cooldown is made over and one step of the watcher chooses the next
/// probe. Returns the new probe's channel.
async fn fail_host_probe_and_probe_again(pool: &PgPool, host: &str) -> Option<uuid::Uuid> {
    use breakwater_core::{hosts, outcome::Class, testing};
    let (channel, generation): (uuid::Uuid, i64) = sqlx::query_as(
        "SELECT probe_channel_id, generation FROM host_circuits WHERE host_key = $1",
    )
    .bind(host)
    .fetch_one(pool)
    .await
    .unwrap();
    let cfg = hosts::HostsConfig::default();
    let mut tx = pool.begin().await.unwrap();
    let before: i32 = sqlx::query_scalar(
        "UPDATE channels SET consecutive_failures = consecutive_failures + 1 WHERE id = $1
         RETURNING consecutive_failures - 1",
    )
    .bind(channel)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    let t = testing::record_result(
        &mut tx,
        channel,
        Some(generation),
        Class::Transient,
        before,
        "503",
        &cfg,
    )
    .await
    .unwrap();
    assert_eq!(
        t.map(|t| t.to),
        Some(hosts::State::Open),
        "the host re-opens"
    );
    sqlx::query(
        "UPDATE host_circuits SET next_probe_at = now() - interval '1 s' WHERE host_key = $1",
    )
    .bind(host)
    .execute(&mut *tx)
    .await
    .unwrap();
    hosts::watch_step(&mut tx, host, &cfg).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(host_state(pool, host).await, "half_open");
    host_probe(pool, host).await.0
}

/// The channels of a host take its probe in turn: the healthiest first, and after each failed
/// probe a channel not tried yet, then the one tried longest ago, even though a failed probe
/// leaves the healthiest channel with fewer failures than the others. (By failures alone the
/// probe would stay on channels with few failures that fail for themselves, while a channel that
/// has recovered, with more failures, waits minutes as the cooldown doubles.) A close
/// starts the turn again.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_channels_of_a_host_take_its_probe_in_turn(pool: PgPool) {
    // The API only: the test steps the host's probe watcher and the probes' results itself.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, tune).await;
    // `first` has no failure, `second` 4, `third` 8.
    let (first, second, host) = two_channels_on_one_host(&app, "first", "second").await;
    let (_, key_c) = app.tenant("initech", "default").await;
    let third = app.channel_with(&key_c, "third", json!({})).await;
    assert_eq!(host_of(&pool, third).await, host, "one host");
    app.deliver_many(&key_c, third, 3).await;
    sqlx::query("UPDATE channels SET consecutive_failures = 8 WHERE id = $1")
        .bind(third)
        .execute(&pool)
        .await
        .unwrap();

    start_host_probe(&app, &host).await;
    let mut turns = vec![host_probe(&pool, &host).await.0];
    for _ in 0..3 {
        turns.push(fail_host_probe_and_probe_again(&pool, &host).await);
    }
    assert_eq!(
        turns,
        vec![Some(first), Some(second), Some(third), Some(first)],
        "first={first} second={second} third={third}"
    );
    // A close (here the operator's) starts the turn again with the healthiest channel.
    force_host(&app, &host, "close").await;
    start_host_probe(&app, &host).await;
    assert_eq!(host_probe(&pool, &host).await.0, Some(first));
    app.stop().await;
}

/// Attempts of channel `channel` that started after `after`.
async fn attempts_since(pool: &PgPool, channel: uuid::Uuid, after: DateTime<Utc>) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM delivery_attempts WHERE channel_id = $1 AND started_at > $2",
    )
    .bind(channel)
    .bind(after)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Host transitions that opened it (by a count or a failed probe), since audit row `after_id`.
async fn host_openings_since(pool: &PgPool, host: &str, after_id: i64) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM audit_log
         WHERE action IN ('host.opened', 'host.reopened') AND details->>'host_key' = $1 AND id > $2",
    )
    .bind(host)
    .bind(after_id)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Two tenants' failing paths open a host; its probe, a delivery of a third tenant's healthy
/// channel, closes it; the failing channels' backlog, released with the host, keeps failing and
/// does not re-open it: they were failing when the host was proven up, so they are excused (they
/// fail for themselves). The healthy channel keeps delivering, rather than the host re-opening
/// the moment each probe closes it, every cooldown, and the healthy channel waiting each time.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_host_closed_by_its_probe_is_not_reopened_by_the_channels_already_failing(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), tune).await;
    let (_, acme) = app.tenant("acme", "default").await;
    let (_, globex) = app.tenant("globex", "default").await;
    let (_, initech) = app.tenant("initech", "default").await;
    // Their own circuits stay closed throughout: only the host could hold them.
    let own = json!({ "failure_threshold": 1000 });
    let mut failing = Vec::new();
    for (key, ep) in [(&acme, "a-503"), (&acme, "a2-503"), (&globex, "g-503")] {
        app.receiver.set(ep, Behavior::Status(503, None));
        failing.push((key, app.channel_with(key, ep, own.clone()).await));
    }
    let healthy = app.channel(&initech, "i-ok").await;
    let host = host_of(&pool, healthy).await;
    for (key, ch) in &failing {
        assert_eq!(host_of(&pool, *ch).await, host, "one host");
        app.deliver_many(key, *ch, 5).await;
    }
    wait_until(Duration::from_secs(15), "the host opens", || async {
        host_state(&pool, &host).await == "open"
    })
    .await;
    // Held by the host until its probe: a delivery of the healthiest channel, which answers.
    let d = app.deliver(&initech, healthy, json!({})).await;
    app.wait_delivery(d, "delivered", Duration::from_secs(15))
        .await;
    wait_until(
        Duration::from_secs(15),
        "the host's probe closes it",
        || async {
            host_audit(&pool, &host)
                .await
                .iter()
                .any(|(action, _)| action == "host.closed")
        },
    )
    .await;
    let (closed_at, closed_id): (DateTime<Utc>, i64) = sqlx::query_as(
        "SELECT at, id FROM audit_log WHERE action = 'host.closed' AND details->>'host_key' = $1
         ORDER BY id DESC LIMIT 1",
    )
    .bind(&host)
    .fetch_one(&pool)
    .await
    .unwrap();
    // The released backlog fails again, on every failing channel (3 distinct, 2 tenants: the
    // threshold), and the host stays closed.
    wait_until(
        Duration::from_secs(20),
        "every failing channel fails 3 more times after the close (or the host re-opens)",
        || async {
            if host_openings_since(&pool, &host, closed_id).await > 0 {
                return true;
            }
            for (_, ch) in &failing {
                if attempts_since(&pool, *ch, closed_at).await < 3 {
                    return false;
                }
            }
            true
        },
    )
    .await;
    assert_eq!(
        host_openings_since(&pool, &host, closed_id).await,
        0,
        "the channels that were failing at the close re-opened the host"
    );
    assert_eq!(host_state(&pool, &host).await, "closed");
    let excused: i64 =
        sqlx::query_scalar("SELECT count(*) FROM host_failures WHERE host_key = $1 AND excused")
            .bind(&host)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(excused, 3, "each failing channel is excused");
    let d = app
        .deliver(&initech, healthy, json!({ "after": true }))
        .await;
    app.wait_delivery(d, "delivered", Duration::from_secs(10))
        .await;

    // A channel that recovers loses its excuse: its next failure streak counts again.
    app.receiver.set("a-503", Behavior::Status(200, None));
    wait_until(
        Duration::from_secs(15),
        "acme's first channel recovers",
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM host_failures WHERE host_key = $1 AND channel_id = $2",
            )
            .bind(&host)
            .bind(failing[0].1)
            .fetch_one(&pool)
            .await
            .unwrap()
                == 0
        },
    )
    .await;
    app.stop().await;
}

/// A 429 is the answer of a live host that limits one endpoint, not a host failure: with acme's
/// 503 path and globex's 429 and 503 paths on one host (threshold 3 distinct channels), only the
/// two 503 channels count, and the host stays closed.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_429_never_counts_against_the_host(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), tune).await;
    let (_, acme) = app.tenant("acme", "default").await;
    let (_, globex) = app.tenant("globex", "default").await;
    let own = json!({ "failure_threshold": 1000 });
    let mut channels = Vec::new();
    for (key, ep, status) in [
        (&acme, "a-503", 503),
        (&globex, "g-429", 429),
        (&globex, "g-503", 503),
    ] {
        app.receiver.set(ep, Behavior::Status(status, None));
        let ch = app.channel_with(key, ep, own.clone()).await;
        app.deliver_many(key, ch, 3).await;
        channels.push(ch);
    }
    let host = host_of(&pool, channels[0]).await;
    let epoch = DateTime::<Utc>::UNIX_EPOCH;
    wait_until(
        Duration::from_secs(20),
        "each channel fails 4 times (or the host opens)",
        || async {
            if host_state(&pool, &host).await != "closed" {
                return true;
            }
            for ch in &channels {
                if attempts_since(&pool, *ch, epoch).await < 4 {
                    return false;
                }
            }
            true
        },
    )
    .await;
    assert_eq!(
        host_state(&pool, &host).await,
        "closed",
        "{:?}",
        host_audit(&pool, &host).await
    );
    let counted: Vec<uuid::Uuid> = sqlx::query_scalar(
        "SELECT channel_id FROM host_failures WHERE host_key = $1 ORDER BY channel_id",
    )
    .bind(&host)
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut want = vec![channels[0], channels[2]];
    want.sort();
    assert_eq!(
        counted, want,
        "the two 503 channels count, the 429 one does not"
    );
    app.stop().await;
}

/// The host probe is never a delivery of a channel under a `Retry-After` hold (it would not be
/// sent before the hold ends, up to an hour, and the whole host would wait), even the healthiest;
/// and a held delivery that meets the role in the admission hands it on at once. (A new-user
/// trial saw a host half-open for 5 minutes, its probe re-taken by one held delivery at every
/// lease.)
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_host_probe_is_never_a_delivery_under_a_retry_after_hold(pool: PgPool) {
    use breakwater_core::circuit;
    // The API only: the test steps the host's probe watcher and the admission itself.
    let app = TestApp::spawn_role(pool.clone(), Role::Api, tune).await;
    // `held` is the healthiest (no failures), `other` has failed 4 times.
    let (held, other, host) = two_channels_on_one_host(&app, "held", "other").await;
    let set_hold = |on: bool| {
        let pool = pool.clone();
        async move {
            sqlx::query(
                "UPDATE channels SET retry_after_until = CASE WHEN $2 THEN now() + interval '1 hour' END
                 WHERE id = $1",
            )
            .bind(held)
            .bind(on)
            .execute(&pool)
            .await
            .unwrap();
        }
    };

    // Under a hold, the healthiest channel is passed over.
    set_hold(true).await;
    start_host_probe(&app, &host).await;
    assert_eq!(
        host_probe(&pool, &host).await.0,
        Some(other),
        "the held channel was chosen"
    );
    force_host(&app, &host, "close").await;

    // Chosen without a hold, then held before it is sent: the admission hands the role on.
    set_hold(false).await;
    start_host_probe(&app, &host).await;
    let (channel, delivery) = host_probe(&pool, &host).await;
    assert_eq!(channel, Some(held), "the healthiest channel without a hold");
    set_hold(true).await;
    let mut conn = pool.acquire().await.unwrap();
    let admission = circuit::admit(
        &mut conn,
        held,
        delivery.unwrap(),
        &circuit::CircuitConfig::default(),
    )
    .await
    .unwrap();
    assert!(
        matches!(admission, circuit::Admission::Wait(_)),
        "{admission:?}"
    );
    assert_eq!(
        host_probe(&pool, &host).await.0,
        Some(other),
        "the role was handed on"
    );
    assert_eq!(host_state(&pool, &host).await, "half_open");
    app.stop().await;
}

/// Late answers of a host a channel has moved away from count for neither host: three channels
/// of two tenants whose requests hang at one host move (`PATCH`) to another while in flight, and
/// the old host's late 503s open neither the new host (where a third tenant's channel keeps
/// delivering) nor the old one: they must not park the uninvolved tenant.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn late_failures_of_an_old_host_open_no_host(pool: PgPool) {
    let app = TestApp::spawn_with(pool.clone(), |s| {
        tune(s);
        s.worker.request_timeout_ms = 5_000;
        s.hosts.probe_lease_ms = 10_000;
    })
    .await;
    let other = breakwater_e2e::Receiver::start().await.unwrap();
    let (_, a) = app.tenant("a", "default").await;
    let (_, b) = app.tenant("b", "default").await;
    let (_, c) = app.tenant("c", "default").await;
    let slow_503 = Behavior::Delayed(
        Duration::from_secs(3),
        Box::new(Behavior::Status(503, None)),
    );
    let mut moved = Vec::new();
    for (key, ep) in [(&a, "a1"), (&a, "a2"), (&b, "b1")] {
        app.receiver.set(ep, slow_503.clone());
        let ch = app.channel(key, ep).await;
        moved.push((key, ch, ep, app.deliver(key, ch, json!({ "ep": ep })).await));
    }
    let old_host = host_of(&pool, moved[0].1).await;
    let staying = app.create_channel(&c, &other.url("c1"), json!({})).await;
    let staying: uuid::Uuid = staying["id"].as_str().unwrap().parse().unwrap();
    let new_host = host_of(&pool, staying).await;
    assert_ne!(old_host, new_host);
    for (_, _, ep, _) in &moved {
        app.wait_received(ep, 1, Duration::from_secs(10)).await;
    }
    for (key, ch, ep, _) in &moved {
        let (s, v) = app
            .patch_channel(key, *ch, json!({ "url": other.url(ep) }))
            .await;
        assert_eq!(s, 200, "{v}");
    }
    for (_, _, _, id) in &moved {
        app.wait_delivery(*id, "delivered", Duration::from_secs(20))
            .await;
    }
    // The third tenant's channel on the new host was never held.
    let id = app.deliver(&c, staying, json!({ "c": 1 })).await;
    app.wait_delivery(id, "delivered", Duration::from_secs(10))
        .await;
    assert_eq!(
        (
            host_state(&pool, &new_host).await,
            host_state(&pool, &old_host).await
        ),
        ("closed".to_string(), "closed".to_string())
    );
    assert!(host_audit(&pool, &new_host).await.is_empty());
    assert!(host_audit(&pool, &old_host).await.is_empty());
    other.stop();
    app.stop().await;
}

/// A host probe's answer that comes from the host its channel has just left (a `PATCH` to
/// another host while the probe was in flight) hands the old host's probe role on at once to a
/// delivery of a channel still there, instead of the old host waiting for the probe's lease
/// (`hosts.probe_lease_ms`, 60 s by default) before its watcher chooses again. The answer is
/// recorded as the worker records it ([`circuit::after_attempt`]); the API runs, the test steps
/// the watcher, so the old host is not left half-open with no probe for the lease.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_host_probe_answered_after_its_channel_moved_hands_the_role_on(pool: PgPool) {
    use breakwater_core::circuit::{self, AttemptResult, CircuitConfig};
    use breakwater_core::deliveries::{self, Status};
    use breakwater_core::hosts::HostsConfig;
    use breakwater_core::outcome::{classify, Observed};
    let app = TestApp::spawn_role(pool.clone(), Role::Api, tune).await;
    let other = breakwater_e2e::Receiver::start().await.unwrap();
    let (_, key_a) = app.tenant("acme", "default").await;
    let (_, key_b) = app.tenant("globex", "default").await;
    let moving = app.channel_with(&key_a, "moving", json!({})).await;
    let staying = app.channel_with(&key_b, "staying", json!({})).await;
    let host = host_of(&pool, moving).await;
    app.deliver_many(&key_a, moving, 2).await;
    let waiting = app.deliver_many(&key_b, staying, 2).await;
    // The staying channel has failed on its own: the moving one is the healthiest, the probe.
    sqlx::query("UPDATE channels SET consecutive_failures = 4 WHERE id = $1")
        .bind(staying)
        .execute(&pool)
        .await
        .unwrap();
    start_host_probe(&app, &host).await;
    let (channel, delivery) = host_probe(&pool, &host).await;
    assert_eq!(channel, Some(moving));
    let generation: i64 =
        sqlx::query_scalar("SELECT generation FROM host_circuits WHERE host_key = $1")
            .bind(&host)
            .fetch_one(&pool)
            .await
            .unwrap();
    // The probe's request goes out (the delivery is read with the old URL), then the PATCH.
    let sent = deliveries::begin_attempt(&pool, delivery.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sent.host_key.as_deref(), Some(host.as_str()));
    let (s, v) = app
        .patch_channel(&key_a, moving, json!({ "url": other.url("moving") }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_ne!(host_of(&pool, moving).await, host);

    // The old host answers the probe (a 503: its delivery is retried at the new URL, and its
    // job stays live, as no worker runs here), recorded as the worker records it.
    let mut tx = pool.begin().await.unwrap();
    let after = circuit::after_attempt(
        &mut tx,
        &AttemptResult {
            dispatch: &sent,
            observed: Observed::Status(503),
            class: classify(Observed::Status(503)),
            duration: Duration::from_millis(5),
            probe_generation: None,
            host_probe: Some(generation),
            failures_before: 0,
            error: "",
            response_excerpt: None,
            retry_after: None,
            node_id: "test",
            last_attempt: false,
            token_failure: false,
        },
        &CircuitConfig::default(),
        &HostsConfig::default(),
        25,
    )
    .await
    .unwrap()
    .expect("the delivery is not cancelled");
    assert_eq!(
        (
            after.status,
            after.endpoint.url_changed,
            after.endpoint.host_changed
        ),
        (Status::Failed, true, true)
    );
    tx.commit().await.unwrap();
    let (channel, delivery) = host_probe(&pool, &host).await;
    assert_eq!(
        channel,
        Some(staying),
        "the role went to a channel still on the host"
    );
    assert!(
        waiting.contains(&delivery.unwrap()),
        "a waiting delivery of it"
    );
    assert_eq!(host_state(&pool, &host).await, "half_open");
    let same: i64 = sqlx::query_scalar("SELECT generation FROM host_circuits WHERE host_key = $1")
        .bind(&host)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(same, generation, "the same probe generation, no takeover");
    // The gate's probe slot is bound to the staying channel's group, and the woken delivery's
    // job is fetchable now, at the urgent priority.
    let (group, slots): (Option<uuid::Uuid>, i32) =
        sqlx::query_as("SELECT probe_group, probe_slots FROM job_gates WHERE gate_key = $1")
            .bind(&host)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((group, slots), (Some(staying), 1));
    let (state, priority): (String, i16) =
        sqlx::query_as("SELECT state, priority FROM jobs WHERE args->>'delivery_id' = $1")
            .bind(delivery.unwrap().to_string())
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((state.as_str(), priority), ("available", 0));
    other.stop();
    app.stop().await;
}
