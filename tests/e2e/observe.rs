//! What an operator sees: `/metrics` after real traffic (healthy, dead, probed, rate-limited
//! channels), the operator's queue view, the admin page's delivery, and logs and spans that
//! carry ids but never secrets or payloads.
//!
//! Counters are per process and these tests compare them with exact numbers: nextest (the
//! README's runner) gives each test its own process.

use breakwater_e2e::http::get_text;
use breakwater_e2e::{eventually, Behavior, TestApp, OPERATOR_KEY};
use serde_json::{json, Value};
use sqlx::{Connection, PgPool};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

fn value(series: &BTreeMap<String, f64>, key: &str) -> f64 {
    series.get(key).copied().unwrap_or(f64::NAN)
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn metrics_show_deliveries_breaker_probes_queues_and_rate_limits_without_ids(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (acme, acme_key) = app.tenant("acme", "default").await;
    let (globex, globex_key) = app.tenant("globex", "high").await;
    let healthy = app.named_channel(&acme_key, "orders", json!({})).await;
    let limited = app
        .named_channel(&acme_key, "limited", json!({ "rate_limit": "5/s" }))
        .await;
    let dead = app.named_channel(&globex_key, "legacy", json!({})).await;
    app.receiver.set("legacy", Behavior::Status(503, None));

    app.deliver_many(&acme_key, healthy, 20).await;
    app.deliver_many(&acme_key, limited, 10).await;
    app.deliver_many(&globex_key, dead, 12).await;

    // The healthy and rate-limited channels deliver everything; the dead one opens, is probed
    // (cooldown 0.5 s in tests) and re-opens; then an operator pauses it, so that its state and
    // parked backlog hold still for the checks below.
    let delivered = || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM deliveries WHERE status = 'delivered' AND channel_id = ANY($1)",
        )
        .bind(vec![healthy, limited])
        .fetch_one(&pool)
        .await
        .unwrap();
        n == 30
    };
    assert!(eventually(Duration::from_secs(20), delivered).await);
    assert!(
        eventually(Duration::from_secs(20), || async {
            let (_, _, _, s) = app.scrape().await;
            value(&s, "breakwater_probe_results_total{outcome=\"transient\"}") >= 1.0
                && value(
                    &s,
                    "breakwater_circuit_transitions_total{from=\"half_open\",to=\"open\"}",
                ) >= 1.0
        })
        .await,
        "the dead channel was probed, and the probe failed"
    );
    let (s, _) = app
        .post_empty(
            &format!("/api/v1/admin/channels/{dead}/pause"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 200);
    let parked_now = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM jobs j JOIN job_groups g ON g.group_id = j.group_id AND g.parked WHERE j.group_id = $1 AND j.state IN ('available', 'scheduled')",
        )
        .bind(dead)
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    // The cluster gauges are read from the database at most every 5 s: wait for a read that
    // happened after the pause.
    assert!(
        eventually(Duration::from_secs(15), || async {
            let (_, _, _, s) = app.scrape().await;
            let parked = parked_now().await;
            parked >= 1
                && value(&s, "breakwater_deliveries_parked{tier=\"high\"}") == parked as f64
                && value(&s, "breakwater_circuit_channels{state=\"paused\"}") == 1.0
        })
        .await
    );

    let (status, content_type, text, s) = app.scrape().await;
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );

    // Attempts, statuses and histograms by tier.
    assert_eq!(
        value(
            &s,
            "breakwater_attempts_total{outcome=\"success\",tier=\"default\"}"
        ),
        30.0
    );
    assert_eq!(
        value(
            &s,
            "breakwater_deliveries_total{status=\"delivered\",tier=\"default\"}"
        ),
        30.0
    );
    assert_eq!(
        value(
            &s,
            "breakwater_delivery_latency_seconds_count{tier=\"default\"}"
        ),
        30.0
    );
    assert!(
        value(
            &s,
            "breakwater_delivery_latency_seconds_sum{tier=\"default\"}"
        ) > 0.0
    );
    assert_eq!(
        value(
            &s,
            "breakwater_attempt_duration_seconds_count{outcome=\"success\",tier=\"default\"}"
        ),
        30.0
    );
    assert!(
        value(
            &s,
            "breakwater_attempts_total{outcome=\"transient\",tier=\"high\"}"
        ) >= 5.0
    );
    assert!(
        value(
            &s,
            "breakwater_deliveries_total{status=\"failed\",tier=\"high\"}"
        ) >= 5.0
    );
    assert!(
        value(&s, "breakwater_attempt_duration_seconds_bucket{outcome=\"success\",tier=\"default\",le=\"+Inf\"}")
            == 30.0
    );
    // The rate limit snoozed some of the 10 deliveries (5/s), and the counter agrees with the
    // channel's own tally.
    let tally: i64 = sqlx::query_scalar("SELECT rate_limited_total FROM channels WHERE id = $1")
        .bind(limited)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(tally >= 1, "the rate limit held some deliveries back");
    assert_eq!(
        value(
            &s,
            "breakwater_deliveries_rate_limited_total{tier=\"default\"}"
        ),
        tally as f64
    );

    // The breaker: transitions by from/to, channels by state, probes, the parked backlog.
    assert_eq!(
        value(
            &s,
            "breakwater_circuit_transitions_total{from=\"closed\",to=\"open\"}"
        ),
        1.0
    );
    assert!(
        value(
            &s,
            "breakwater_circuit_transitions_total{from=\"open\",to=\"half_open\"}"
        ) >= 1.0
    );
    assert!(
        value(
            &s,
            "breakwater_circuit_transitions_total{from=\"half_open\",to=\"open\"}"
        ) >= 1.0
    );
    let to_paused: f64 = s
        .iter()
        .filter(|(k, _)| {
            k.starts_with("breakwater_circuit_transitions_total{") && k.contains("to=\"paused\"")
        })
        .map(|(_, v)| v)
        .sum();
    assert_eq!(to_paused, 1.0);
    assert_eq!(
        value(&s, "breakwater_circuit_channels{state=\"closed\"}"),
        2.0
    );
    assert_eq!(
        value(&s, "breakwater_circuit_channels{state=\"paused\"}"),
        1.0
    );
    assert_eq!(
        value(&s, "breakwater_circuit_channels{state=\"open\"}"),
        0.0
    );
    assert_eq!(
        value(&s, "breakwater_circuit_channels{state=\"half_open\"}"),
        0.0
    );
    assert!(value(&s, "breakwater_deliveries_parked{tier=\"high\"}") >= 1.0);
    assert_eq!(
        value(&s, "breakwater_deliveries_parked{tier=\"default\"}"),
        0.0
    );

    // Every queue is reported, with its depth, scheduled, in-flight and oldest-due age.
    for q in [
        "deliveries_high",
        "deliveries",
        "deliveries_bulk",
        "circuit",
        "alerts",
    ] {
        for m in [
            "breakwater_queue_depth",
            "breakwater_queue_scheduled",
            "breakwater_queue_executing",
            "breakwater_queue_oldest_available_age_seconds",
        ] {
            let k = format!("{m}{{queue=\"{q}\"}}");
            assert!(s.contains_key(&k), "missing {k}");
        }
    }
    assert_eq!(
        value(&s, "breakwater_pool_in_flight{queue=\"deliveries\"}"),
        0.0
    );

    // Units and kinds in the metadata.
    for meta in [
        "# TYPE breakwater_delivery_latency_seconds histogram",
        "# TYPE breakwater_attempt_duration_seconds histogram",
        "# TYPE breakwater_circuit_transitions_total counter",
        "# TYPE breakwater_circuit_channels gauge",
        "# TYPE breakwater_queue_oldest_available_age_seconds gauge",
    ] {
        assert!(text.contains(meta), "missing {meta:?}");
    }
    // Cardinality: no tenant, channel or delivery id anywhere.
    for id in [acme, globex, healthy, limited, dead] {
        assert!(
            !text.contains(&id.to_string()),
            "an id leaked into /metrics"
        );
    }
    assert!(!text.contains("tenant_id") && !text.contains("channel_id"));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn operator_queue_view_shows_depth_in_flight_and_parked(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (key, slow) = app.tenant_with_channel("slow").await;
    app.receiver.set("slow", Behavior::Hang);

    let (s, v) = app.get("/api/v1/admin/queues", "").await;
    assert_eq!(s, 401, "{v}");
    let (s, v) = app.get("/api/v1/admin/queues", &key).await;
    assert_eq!(s, 403, "a tenant key cannot read the queues: {v}");
    let (s, v) = app.get("/api/v1/admin/queues", OPERATOR_KEY).await;
    assert_eq!(s, 200, "{v}");
    let names: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "deliveries_high",
            "deliveries",
            "deliveries_bulk",
            "circuit",
            "alerts"
        ]
    );
    assert!(v["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|q| q["available"] == 0 && q["executing"] == 0));

    // A hanging endpoint keeps its deliveries in flight (the per-node cap holds the rest back).
    app.deliver_many(&key, slow, 3).await;
    let queue = |v: &Value, name: &str| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["queue"] == name)
            .cloned()
            .unwrap()
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            let (_, v) = app.get("/api/v1/admin/queues", OPERATOR_KEY).await;
            queue(&v, "deliveries")["executing"].as_i64().unwrap() >= 1
        })
        .await
    );
    let (_, _, _, s) = app.scrape().await;
    assert!(value(&s, "breakwater_pool_in_flight{queue=\"deliveries\"}") >= 1.0);
    assert!(value(&s, "breakwater_queue_executing{queue=\"deliveries\"}") >= 1.0);

    // Pausing parks the backlog: the view counts it as parked.
    let (s, _) = app
        .post_empty(
            &format!("/api/v1/admin/channels/{slow}/pause"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 200);
    assert!(
        eventually(Duration::from_secs(10), || async {
            let (_, v) = app.get("/api/v1/admin/queues", OPERATOR_KEY).await;
            queue(&v, "deliveries")["parked"].as_i64().unwrap() >= 1
        })
        .await
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn admin_page_is_served_without_a_key_and_holds_no_data(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let r = app
        .http
        .get(format!("{}/admin", app.api))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"));
    assert_eq!(h["referrer-policy"], "no-referrer");
    let html = r.text().await.unwrap();
    assert!(html.contains("id=\"key-input\"") && html.contains("type=\"password\""));
    assert!(!html.contains(OPERATOR_KEY));
    // Everything it needs comes from the binary itself: no other origin.
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("//cdn"));
    for (path, ty) in [
        ("/admin/admin.js", "text/javascript"),
        ("/admin/admin.css", "text/css"),
        ("/assets/common.js", "text/javascript"),
        ("/assets/common.css", "text/css"),
    ] {
        let r = app
            .http
            .get(format!("{}{path}", app.api))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with(ty));
        let body = r.text().await.unwrap();
        assert!(
            !body.contains("https://") && !body.contains("http://"),
            "{path} loads nothing from elsewhere"
        );
    }
    // The script sends the key as a header only, and never writes tenant text as HTML.
    let js = app
        .http
        .get(format!("{}/admin/admin.js", app.api))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(js.contains("Authorization: `Bearer ${key}`"));
    assert!(!js.contains("innerHTML") && !js.contains("insertAdjacentHTML"));
    app.stop().await;
}

/// A `MakeWriter` that appends everything to a shared buffer.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn logs_and_spans_carry_ids_and_outcomes_but_never_secrets_or_payloads(pool: PgPool) {
    // JSON logs at debug, with every span's fields on each event and a line per closed span.
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_env_filter("debug,sqlx=warn,hyper=info,hyper_util=info,reqwest=info,h2=info")
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_current_span(true)
        .with_span_list(true)
        .with_writer(capture.clone())
        .finish();
    // This test binary's other tests install no subscriber; under nextest each test is its own
    // process anyway.
    let _ = tracing::subscriber::set_global_default(subscriber);

    let app = TestApp::spawn(pool.clone()).await;
    let (s, t) = app
        .post(
            "/api/v1/tenants",
            OPERATOR_KEY,
            &json!({ "name": "acme", "alert_url": app.receiver.url("alerts") }),
        )
        .await;
    assert_eq!(s, 201, "{t}");
    let (tenant, key) = (
        t["id"].as_str().unwrap().to_string(),
        t["api_key"].as_str().unwrap().to_string(),
    );
    let alert_secret = t["alert_secret"].as_str().unwrap().to_string();
    let (s, c) = app
        .post(
            "/api/v1/channels",
            &key,
            &json!({ "url": app.receiver.url("hooks"), "name": "orders" }),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    let channel: Uuid = c["id"].as_str().unwrap().parse().unwrap();
    let signing_secret = c["signing_secret"].as_str().unwrap().to_string();
    app.receiver.set_secret("hooks", &signing_secret);
    app.receiver.set_secret("alerts", &alert_secret);

    let marker = "payload-marker-7f3a9c";
    let ok = app.deliver(&key, channel, json!({ "card": marker })).await;
    app.wait_delivery(ok, "delivered", Duration::from_secs(10))
        .await;
    // A failing endpoint too: error paths log more.
    app.receiver.set("hooks", Behavior::Status(503, None));
    let failing = app.deliver(&key, channel, json!({ "card": marker })).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM delivery_attempts WHERE delivery_id = $1",
            )
            .bind(failing)
            .fetch_one(&pool)
            .await
            .unwrap()
                >= 1
        })
        .await
    );
    // An endpoint that refuses connections, with a token in its URL: request errors name the
    // URL, and they reach the attempt rows, the circuit's reason, the audit log and the logs.
    let token = "url-token-5e1b7d";
    let (s, c) = app
        .post(
            "/api/v1/channels",
            &key,
            &json!({ "url": format!("http://127.0.0.1:1/hook?token={token}"), "name": "down" }),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    let down: Uuid = c["id"].as_str().unwrap().parse().unwrap();
    app.deliver_many(&key, down, 6).await;
    // Five connect errors open the circuit.
    app.wait_circuit(down, "open", Duration::from_secs(10))
        .await;
    app.stop().await;
    let leaked: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM delivery_attempts WHERE error LIKE '%' || $1 || '%')
              + (SELECT count(*) FROM audit_log WHERE reason LIKE '%' || $1 || '%')
              + (SELECT count(*) FROM channels WHERE last_failure_reason LIKE '%' || $1 || '%')",
    )
    .bind(token)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        leaked, 0,
        "the URL's token is kept out of errors and reasons"
    );

    let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("http://127.0.0.1:1/…"),
        "the failing endpoint is named by its origin"
    );
    // The ids and outcomes are there (so this capture did see the delivery paths)…
    assert!(logs.contains("\"webhook.attempt\""), "attempt span closed");
    assert!(logs.contains(&ok.to_string()) && logs.contains(&failing.to_string()));
    assert!(logs.contains(&channel.to_string()) && logs.contains(&tenant));
    assert!(logs.contains("\"outcome\":\"success\"") && logs.contains("\"outcome\":\"transient\""));
    assert!(logs.contains("\"http.response.status_code\":503"));
    // …and no secret, key or payload is.
    for (what, secret) in [
        ("payload", marker),
        ("signing secret", signing_secret.as_str()),
        (
            "signing secret body",
            signing_secret.trim_start_matches("whsec_"),
        ),
        ("alert secret", alert_secret.as_str()),
        ("tenant API key", key.as_str()),
        ("operator key", OPERATOR_KEY),
        ("token in a channel URL", token),
    ] {
        assert!(!logs.contains(secret), "the {what} appears in the logs");
    }
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn scrapes_read_the_cluster_gauges_at_most_once_per_interval(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app.named_channel(&key, "held", json!({})).await;
    app.pause(&key, ch).await;
    app.deliver_many(&key, ch, 5).await;
    let parked =
        |s: &BTreeMap<String, f64>| value(s, "breakwater_deliveries_parked{tier=\"default\"}");
    let (_, _, _, first) = app.scrape().await;
    assert_eq!(parked(&first), 5.0);
    // More parked work, then a burst of scrapes: they are served from the last read (a scrape
    // loop costs the database nothing more), until the gauges are older than the interval.
    app.deliver_many(&key, ch, 5).await;
    for _ in 0..20 {
        let (status, _, _, s) = app.scrape().await;
        assert_eq!(status, 200);
        if parked(&s) == 10.0 {
            break; // the interval passed on a slow machine: fine, checked below
        }
        assert_eq!(
            parked(&s),
            5.0,
            "a scrape within the interval re-read the database"
        );
    }
    assert!(
        eventually(Duration::from_secs(12), || async {
            let (_, _, _, s) = app.scrape().await;
            parked(&s) == 10.0
        })
        .await,
        "the gauges are read again once older than the interval"
    );
    app.stop().await;
}

/// `/metrics` on its own address behind a bearer token (the production setup): the API's
/// address no longer serves it, the metrics address serves only it, a missing or wrong token
/// gets 401 problem+json, and the right one gets the metrics.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn metrics_on_their_own_address_behind_a_token(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
        s.metrics_token = Some(breakwater::config::Secret("scrape-token-1".into()));
    })
    .await;
    let metrics = app.metrics.clone().expect("a metrics address");
    let get = |url: String, token: Option<&'static str>| {
        let http = app.http.clone();
        async move { get_text(&http, &url, token).await }
    };
    let (s, _, _) = get(format!("{}/metrics", app.api), Some("scrape-token-1")).await;
    assert_eq!(s, 404, "the API's address has no /metrics");
    let (s, ct, body) = get(format!("{metrics}/metrics"), None).await;
    assert_eq!(s, 401, "{body}");
    assert_eq!(ct, "application/problem+json");
    let (s, _, _) = get(format!("{metrics}/metrics"), Some("scrape-token-2")).await;
    assert_eq!(s, 401);
    let (s, ct, body) = get(format!("{metrics}/metrics"), Some("scrape-token-1")).await;
    assert_eq!(s, 200);
    assert!(ct.starts_with("text/plain"), "{ct}");
    assert!(body.contains("breakwater_"), "{body}");
    let (s, _, _) = get(format!("{metrics}/api/v1/channels"), Some("scrape-token-1")).await;
    assert_eq!(s, 404, "the metrics address serves only /metrics");
    app.stop().await;
}

/// Unauthenticated routes cost O(1) whatever the rate: `/readyz` checks the database at most
/// once per second and answers from that check in between. Shown by making the database refuse
/// the API right after a check: the next answers still say ready (no query was made), and once
/// the second has passed, not ready; then ready again when the database is back.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn readiness_is_checked_at_most_once_a_second(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), breakwater::Role::Api, |_| {}).await;
    let ready = || async {
        app.http
            .get(format!("{}/readyz", app.api))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let db: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&pool)
        .await
        .unwrap();
    // From another database: a session cannot bar connections to its own.
    let mut admin =
        sqlx::PgConnection::connect_with(&(*pool.connect_options()).clone().database("postgres"))
            .await
            .unwrap();
    assert_eq!(ready().await, 200);
    let checked = std::time::Instant::now();
    sqlx::query(&format!("ALTER DATABASE \"{db}\" ALLOW_CONNECTIONS false"))
        .execute(&mut admin)
        .await
        .unwrap();
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = $1",
    )
    .bind(&db)
    .execute(&mut admin)
    .await
    .unwrap();
    for _ in 0..50 {
        assert_eq!(ready().await, 200, "answered from the last check");
    }
    assert!(
        checked.elapsed() < breakwater_api::READY_MAX_AGE,
        "the burst took {:?}; the cache window was missed, the test proves nothing",
        checked.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(5), || async { ready().await == 503 }).await,
        "not ready once the check is redone"
    );
    sqlx::query(&format!("ALTER DATABASE \"{db}\" ALLOW_CONNECTIONS true"))
        .execute(&mut admin)
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async { ready().await == 200 }).await,
        "ready again"
    );
    drop(admin);
    app.stop().await;
}
