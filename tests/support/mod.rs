//! Shared harness of the end-to-end tests: start nodes (API + workers) against the test's own
//! database, a receiver on loopback, and small API helpers.
//!
//! Each test gets a fresh database from `#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]`.
//! Nodes get their own pools (and, with [`spawn_node_thread`], their own runtime), like separate
//! processes would. Waits poll a condition ([`wait_until`], [`eventually`]); no test sleeps a
//! fixed time.

use breakwater::config::Settings;
pub use breakwater::receiver::{Behavior, Receiver};
use breakwater::{Node, Role};
use serde_json::{json, Value};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub mod browser;
pub mod db;
pub mod gauge;
pub mod http;
pub mod nodes;
pub mod probe;
pub mod proxy;
pub mod routes;
pub mod wait;

pub use db::{
    active_keys, all_parked, audit_count, consecutive_failures, count_status, host_of,
    live_channels, live_jobs, live_jobs_of_kind,
};
pub use nodes::{spawn_node_thread, spawn_workers, stop_all, ThreadNode};
pub use wait::{eventually, eventually_every, wait_until};

/// The operator key of test nodes.
pub const OPERATOR_KEY: &str = "test-operator-key-0123456789";

/// Settings for tests: ephemeral port, private targets allowed, fast retries and upkeep, short
/// circuit cooldowns (0.5 s doubling to 1 s), parked jobs that sleep a minute (so only a release
/// brings them back within a test), and the health check left to the test to run.
pub fn test_settings() -> Settings {
    let mut s = breakwater::local_settings(OPERATOR_KEY);
    s.worker.backoff_base_ms = 50;
    s.worker.backoff_factor = 2.0;
    s.worker.backoff_cap_ms = 400;
    s.worker.backoff_jitter = 0.0;
    s.worker.max_attempts = 3;
    s.worker.poll_interval_ms = 200;
    s.worker.promote_interval_ms = 50;
    s.worker.connect_timeout_ms = 1_000;
    s.worker.request_timeout_ms = 2_000;
    s.worker.shutdown_grace_ms = 2_000;
    s.worker.heartbeat_interval_ms = 200;
    // A node silent for 5 s is presumed dead. Not less: on this disk a heartbeat's write can
    // stall past a second, and the other node of a test then rescued live runs (a rate-limit
    // test saw deliveries with two attempts). Tests of rescue name a node that never beats.
    s.worker.rescue_after_ms = 5_000;
    s.worker.rescue_interval_ms = 200;
    // Two pools per node (API, workers): keep parallel tests under the server's 100 connections.
    s.database.max_connections = 8;
    s.circuit.cooldown_ms = 500;
    s.circuit.max_cooldown_ms = 1_000;
    s.circuit.probe_lease_ms = 5_000;
    s.circuit.health_check_interval_ms = 3_600_000;
    s
}

/// A fresh pool on the same database as `pool` (a node's own pool).
pub async fn own_pool(pool: &PgPool, max: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(max)
        .connect_with((*pool.connect_options()).clone())
        .await
        .expect("connect a node pool")
}

/// A running test service: one node with API and workers, a receiver, an HTTP client.
pub struct TestApp {
    /// The test database.
    pub pool: PgPool,
    /// API base URL, e.g. `http://127.0.0.1:41234`.
    pub api: String,
    /// Base URL of `/metrics`' own address, when the node has one (`metrics_listen`).
    pub metrics: Option<String>,
    /// The receiver.
    pub receiver: Receiver,
    /// HTTP client.
    pub http: reqwest::Client,
    shutdown: CancellationToken,
    node: Option<Node>,
}

impl TestApp {
    /// Starts a node (API and workers) with [`test_settings`] changed by `tweak`.
    pub async fn spawn_with(pool: PgPool, tweak: impl FnOnce(&mut Settings)) -> Self {
        Self::spawn_role(pool, Role::All, tweak).await
    }

    /// Starts a node running `role` (it must include the API) with [`test_settings`] changed by
    /// `tweak`.
    pub async fn spawn_role(pool: PgPool, role: Role, tweak: impl FnOnce(&mut Settings)) -> Self {
        collect_problems();
        let mut settings = test_settings();
        tweak(&mut settings);
        let shutdown = CancellationToken::new();
        let node_pool = own_pool(&pool, 10).await;
        let node = breakwater::start_node(&settings, node_pool, role, shutdown.clone())
            .await
            .expect("start node");
        let api = format!("http://{}", node.api_addr.expect("api addr"));
        let metrics = node.metrics_addr.map(|a| format!("http://{a}"));
        Self {
            pool,
            api,
            metrics,
            receiver: Receiver::start().await.expect("receiver"),
            http: reqwest::Client::new(),
            shutdown,
            node: Some(node),
        }
    }

    /// Starts a node with [`test_settings`].
    pub async fn spawn(pool: PgPool) -> Self {
        Self::spawn_with(pool, |_| {}).await
    }

    /// Stops the node (graceful) and the receiver, then checks the invariants between
    /// deliveries, jobs and the queue's bookkeeping (`breakwater doctor`): every e2e test that
    /// stops its app ends with none broken.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(n) = self.node.take() {
            n.wait().await.expect("node stopped cleanly");
        }
        self.receiver.stop();
        let mut conn = self
            .pool
            .acquire()
            .await
            .expect("a connection for the doctor");
        let findings = breakwater_core::doctor::check(&mut conn, 20)
            .await
            .expect("the doctor's check runs");
        assert!(
            findings.is_empty(),
            "invariants broken at the end of the test: {findings:?}"
        );
        let leaks: Vec<(String, Vec<String>)> = problems()
            .into_iter()
            .filter_map(|body| {
                let found = internal_addresses(&body);
                (!found.is_empty()).then_some((body, found))
            })
            .collect();
        assert!(
            leaks.is_empty(),
            "problem bodies that name internal addresses: {leaks:?}"
        );
    }

    /// `POST {api}{path}` with a bearer key and a JSON body; returns status and JSON body.
    pub async fn post(&self, path: &str, key: &str, body: &Value) -> (u16, Value) {
        post_json(&self.http, &format!("{}{path}", self.api), key, body).await
    }

    /// `GET {api}{path}` with a bearer key; returns status and JSON body.
    pub async fn get(&self, path: &str, key: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.api))
            .bearer_auth(key)
            .send()
            .await
            .expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Creates a tenant through the operator API; returns (tenant id, api key).
    pub async fn tenant(&self, name: &str, tier: &str) -> (Uuid, String) {
        let (s, v) = self
            .post(
                "/api/v1/tenants",
                OPERATOR_KEY,
                &json!({ "name": name, "tier": tier }),
            )
            .await;
        assert_eq!(s, 201, "create tenant: {v}");
        (
            v["id"].as_str().unwrap().parse().unwrap(),
            v["api_key"].as_str().unwrap().to_string(),
        )
    }

    /// Creates another API key of the calling tenant (`POST /api/v1/tenant/keys` with `key` and
    /// `body`, e.g. `{"name": "ci"}`); asserts 201 and returns the created key (its `api_key`,
    /// shown this once, and `id`, `prefix`, `name` …).
    pub async fn create_key(&self, key: &str, body: Value) -> Value {
        let (s, v) = self.post("/api/v1/tenant/keys", key, &body).await;
        assert_eq!(s, 201, "create key: {v}");
        v
    }

    /// Creates tenant `acme` (tier `default`) with one channel to receiver endpoint `endpoint`
    /// (its secret registered with the receiver); returns (api key, channel id).
    pub async fn tenant_with_channel(&self, endpoint: &str) -> (String, Uuid) {
        let (_, key) = self.tenant("acme", "default").await;
        let channel = self.channel(&key, endpoint).await;
        (key, channel)
    }

    /// Creates a channel to receiver endpoint `endpoint` and registers its secret with the
    /// receiver; returns the channel id.
    pub async fn channel(&self, key: &str, endpoint: &str) -> Uuid {
        self.channel_with(key, endpoint, json!({})).await
    }

    /// Creates a tenant with an alert URL on the receiver's `endpoint` and registers the alert
    /// secret with the receiver; returns (tenant id, api key).
    pub async fn tenant_with_alerts(&self, name: &str, endpoint: &str) -> (Uuid, String) {
        let (s, v) = self
            .post(
                "/api/v1/tenants",
                OPERATOR_KEY,
                &json!({ "name": name, "alert_url": self.receiver.url(endpoint) }),
            )
            .await;
        assert_eq!(s, 201, "create tenant: {v}");
        self.receiver
            .set_secret(endpoint, v["alert_secret"].as_str().unwrap());
        (
            v["id"].as_str().unwrap().parse().unwrap(),
            v["api_key"].as_str().unwrap().to_string(),
        )
    }

    /// Creates a channel to `url` with the extra fields of `extra` (a JSON object) merged into
    /// the body; returns the created channel (201's body). Registers no secret.
    pub async fn create_channel(&self, key: &str, url: &str, extra: Value) -> Value {
        let mut body = json!({ "url": url });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().expect("extra is an object").clone());
        let (s, v) = self.post("/api/v1/channels", key, &body).await;
        assert_eq!(s, 201, "create channel: {v}");
        v
    }

    /// Creates a channel to `url` (not the receiver's) with the extra fields; returns its id.
    pub async fn channel_to(&self, key: &str, url: &str, extra: Value) -> Uuid {
        let v = self.create_channel(key, url, extra).await;
        v["id"].as_str().unwrap().parse().unwrap()
    }

    /// Creates a channel to receiver endpoint `endpoint` with the extra fields of `extra` (a JSON
    /// object, e.g. `{"rate_limit": "5/s"}`) and registers its secret with the receiver;
    /// returns its id.
    pub async fn channel_with(&self, key: &str, endpoint: &str, extra: Value) -> Uuid {
        let v = self
            .create_channel(key, &self.receiver.url(endpoint), extra)
            .await;
        self.receiver
            .set_secret(endpoint, v["signing_secret"].as_str().unwrap());
        v["id"].as_str().unwrap().parse().unwrap()
    }

    /// Like [`TestApp::channel_with`], with the channel named after its endpoint.
    pub async fn named_channel(&self, key: &str, endpoint: &str, mut extra: Value) -> Uuid {
        extra
            .as_object_mut()
            .expect("extra is an object")
            .insert("name".into(), json!(endpoint));
        self.channel_with(key, endpoint, extra).await
    }

    /// `method {api}{path}` with a bearer key and an optional JSON body; returns the status, the
    /// JSON body (`null` when empty or not JSON) and the content type (empty when none).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value, String) {
        let mut req = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.api))
            .bearer_auth(key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.expect("request");
        let status = r.status().as_u16();
        let ct = http::content_type(&r);
        (status, r.json().await.unwrap_or(Value::Null), ct)
    }

    /// Opens a portal session for `tenant` with the operator key (`scope`: `manage` or `read`,
    /// default lifetime); returns its id and its token (from the URL's `#token=` fragment).
    pub async fn portal_session(&self, tenant: Uuid, scope: &str) -> (Uuid, String) {
        let (s, v) = self
            .post(
                &format!("/api/v1/tenants/{tenant}/portal-sessions"),
                OPERATOR_KEY,
                &json!({ "scope": scope }),
            )
            .await;
        assert_eq!(s, 201, "open portal session: {v}");
        let url = v["url"].as_str().expect("a url");
        let token = url
            .split_once("#token=")
            .expect("the token is in the URL's fragment")
            .1
            .to_string();
        (v["id"].as_str().unwrap().parse().unwrap(), token)
    }

    /// `DELETE {api}{path}` with a bearer key; returns the status, the JSON body and the content
    /// type, as [`TestApp::call`].
    pub async fn delete(&self, path: &str, key: &str) -> (u16, Value, String) {
        self.call("DELETE", path, key, None).await
    }

    /// Cancels delivery `id` (`POST /api/v1/deliveries/{id}/cancel` with `key`); returns the
    /// status, the JSON body and the content type, as [`TestApp::call`].
    pub async fn cancel(&self, key: &str, id: Uuid) -> (u16, Value, String) {
        self.call(
            "POST",
            &format!("/api/v1/deliveries/{id}/cancel"),
            key,
            None,
        )
        .await
    }

    /// `PATCH {api}{path}` with a bearer key and a JSON body; returns status and JSON body.
    pub async fn patch(&self, path: &str, key: &str, body: &Value) -> (u16, Value) {
        let (s, v, _) = self.call("PATCH", path, key, Some(body.clone())).await;
        (s, v)
    }

    /// `PATCH /api/v1/channels/{channel}` with `body`; returns status and JSON body.
    pub async fn patch_channel(&self, key: &str, channel: Uuid, body: Value) -> (u16, Value) {
        self.patch(&format!("/api/v1/channels/{channel}"), key, &body)
            .await
    }

    /// `POST {api}{path}` with a bearer key and no body; returns status and JSON body.
    pub async fn post_empty(&self, path: &str, key: &str) -> (u16, Value) {
        let (s, v, _) = self.call("POST", path, key, None).await;
        (s, v)
    }

    /// Every alert webhook the receiver accepted (answered 200) at `endpoint`, in arrival order,
    /// whatever its type.
    pub fn alerts(&self, endpoint: &str) -> Vec<Value> {
        self.receiver
            .received(endpoint)
            .iter()
            .filter(|r| r.answered == Some(200))
            .map(|r| serde_json::from_slice::<Value>(&r.body).expect("an alert is JSON"))
            .collect()
    }

    /// The alerts of [`TestApp::alerts`] whose `type` is `event` (e.g. `"channel.opened"`).
    pub fn alerts_of(&self, endpoint: &str, event: &str) -> Vec<Value> {
        self.alerts(endpoint)
            .into_iter()
            .filter(|b| b["type"] == event)
            .collect()
    }

    /// Enqueues one delivery; returns its id.
    pub async fn deliver(&self, key: &str, channel: Uuid, payload: Value) -> Uuid {
        let (s, v) = self
            .post(
                &format!("/api/v1/channels/{channel}/deliveries"),
                key,
                &json!({ "event_type": "test.event", "payload": payload }),
            )
            .await;
        assert_eq!(s, 202, "enqueue: {v}");
        v["id"].as_str().unwrap().parse().unwrap()
    }

    /// Enqueues `n` deliveries to `channel` in batches of up to 500; returns their ids.
    pub async fn deliver_many(&self, key: &str, channel: Uuid, n: usize) -> Vec<Uuid> {
        enqueue_batches(&self.http, &self.api, key, channel, n, "test.bulk").await
    }

    /// Enqueues `n` deliveries to `channel` one at a time, `gap` apart; returns when each was
    /// accepted (by delivery id), for [`TestApp::latencies_ms`].
    pub async fn stream(
        &self,
        key: &str,
        channel: Uuid,
        n: usize,
        gap: Duration,
    ) -> HashMap<String, Instant> {
        let mut sent_at = HashMap::with_capacity(n);
        for i in 0..n {
            let id = self.deliver(key, channel, json!({ "i": i })).await;
            sent_at.insert(id.to_string(), Instant::now());
            tokio::time::sleep(gap).await;
        }
        sent_at
    }

    /// End-to-end latencies (enqueue accepted → received at `endpoint`), ms, sorted, of the
    /// deliveries in `sent_at`.
    pub fn latencies_ms(&self, endpoint: &str, sent_at: &HashMap<String, Instant>) -> Vec<u128> {
        let mut v: Vec<u128> = self
            .receiver
            .received(endpoint)
            .iter()
            .filter_map(|r| {
                Some(
                    r.at.duration_since(*sent_at.get(r.webhook_id.as_ref()?)?)
                        .as_millis(),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// `GET {api}/metrics` without a key: the status, the content type, the text and the series
    /// as `name{labels}` → value.
    pub async fn scrape(&self) -> (u16, String, String, std::collections::BTreeMap<String, f64>) {
        let (status, ct, text) =
            http::get_text(&self.http, &format!("{}/metrics", self.api), None).await;
        let series = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect();
        (status, ct, text, series)
    }

    /// Jobs running in this process's worker pools now, every queue and node of the process
    /// together (`breakwater_pool_in_flight`: a job counts until its result, fenced or not, is
    /// written). Nodes on [`spawn_node_thread`] share the process's metrics, so they count too.
    pub async fn in_flight(&self) -> f64 {
        let (s, _, text, series) = self.scrape().await;
        assert_eq!(s, 200, "scrape /metrics: {text}");
        series
            .iter()
            .filter(|(k, _)| k.starts_with("breakwater_pool_in_flight"))
            .map(|(_, v)| v)
            .sum()
    }

    /// Waits (up to 10 s) until `channel` has no live job and no job runs in the process: no
    /// request to its endpoint is in flight or can still be sent, so what the receiver got is
    /// final. Negative checks ("each sent once", "no retry") wait on this instead of a sleep.
    pub async fn wait_settled(&self, channel: Uuid) {
        wait_until(
            Duration::from_secs(10),
            &format!("channel {channel} has no live job and nothing is in flight"),
            || async { live_jobs(&self.pool, channel).await == 0 && self.in_flight().await == 0.0 },
        )
        .await;
    }

    /// Waits up to `timeout` until the receiver has got `n` requests at `endpoint`, and asserts
    /// that it has exactly `n` then (not more).
    pub async fn wait_received(&self, endpoint: &str, n: usize, timeout: Duration) {
        let got = self.receiver.wait_for(endpoint, n, timeout).await;
        assert_eq!(got, n, "requests at {endpoint} within {timeout:?}");
    }

    /// Waits up to `timeout` until `channel`'s circuit state column is `state` (`"open"`,
    /// `"half_open"`, `"closed"`, `"paused"`); panics when it is not by then.
    pub async fn wait_circuit(&self, channel: Uuid, state: &str, timeout: Duration) {
        wait_until(
            timeout,
            &format!("channel {channel}'s circuit is {state}"),
            || async { self.circuit_state(channel).await == state },
        )
        .await;
    }

    /// Waits up to `timeout` until delivery `id`'s status column is `status` (`"delivered"`,
    /// `"dead"` …); panics when it is not by then.
    pub async fn wait_delivery(&self, id: Uuid, status: &str, timeout: Duration) {
        wait_until(timeout, &format!("delivery {id} is {status}"), || async {
            self.delivery_status(id).await == status
        })
        .await;
    }

    /// Waits up to `timeout` until `n` deliveries of `channel` have `status` ([`count_status`]);
    /// panics when they do not by then.
    pub async fn wait_deliveries(&self, channel: Uuid, status: &str, n: i64, timeout: Duration) {
        wait_until(
            timeout,
            &format!("{n} deliveries of channel {channel} are {status}"),
            || async { count_status(&self.pool, channel, status).await == n },
        )
        .await;
    }

    /// Pauses `channel` as its tenant (`POST /api/v1/channels/{channel}/pause` with `key`);
    /// asserts 200 and returns the channel it answers.
    pub async fn pause(&self, key: &str, channel: Uuid) -> Value {
        self.manual(key, channel, "pause").await
    }

    /// Resumes `channel` as its tenant (`POST /api/v1/channels/{channel}/resume` with `key`);
    /// asserts 200 and returns the channel it answers.
    pub async fn resume(&self, key: &str, channel: Uuid) -> Value {
        self.manual(key, channel, "resume").await
    }

    /// `POST /api/v1/channels/{channel}/{action}` with `key` and no body, asserting 200.
    async fn manual(&self, key: &str, channel: Uuid, action: &str) -> Value {
        let (s, v) = self
            .post_empty(&format!("/api/v1/channels/{channel}/{action}"), key)
            .await;
        assert_eq!(s, 200, "{action} channel {channel}: {v}");
        v
    }

    /// The channel's circuit state column.
    pub async fn circuit_state(&self, channel: Uuid) -> String {
        sqlx::query_scalar("SELECT circuit_state FROM channels WHERE id = $1")
            .bind(channel)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// The delivery's status column.
    pub async fn delivery_status(&self, id: Uuid) -> String {
        sqlx::query_scalar("SELECT status FROM deliveries WHERE id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }
}

/// Problem bodies the API answered in this process (see [`collect_problems`]).
static PROBLEMS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A `tracing` layer that keeps the `body` of every event under the API's problem target.
struct ProblemLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ProblemLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Body(Option<String>);
        impl tracing::field::Visit for Body {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "body" {
                    self.0 = Some(format!("{v:?}"));
                }
            }
        }
        if event.metadata().target() == breakwater_api::error::PROBLEM_LOG_TARGET {
            let mut body = Body(None);
            event.record(&mut body);
            if let Some(b) = body.0 {
                PROBLEMS.lock().unwrap_or_else(|e| e.into_inner()).push(b);
            }
        }
    }
}

/// Installs (once per process) the subscriber that collects every problem body the API answers,
/// so that [`TestApp::stop`] can check that none names an internal address. A test that installs
/// its own global subscriber first simply goes unchecked.
pub fn collect_problems() {
    use tracing_subscriber::layer::SubscriberExt;
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::filter::Targets::new().with_target(
            breakwater_api::error::PROBLEM_LOG_TARGET,
            tracing::Level::DEBUG,
        );
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::Layer::with_filter(ProblemLayer, filter));
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// The problem bodies collected so far in this process.
pub fn problems() -> Vec<String> {
    PROBLEMS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The internal addresses named in `text`: IPv4 loopback, private (RFC 1918), link-local,
/// shared (RFC 6598, 100.64/10) and unspecified addresses; IPv6 loopback, unique-local and
/// link-local ones; and the name `localhost`.
pub fn internal_addresses(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let internal_v4 = |v4: std::net::Ipv4Addr| {
        let [a, b, ..] = v4.octets();
        v4.is_private()
            || v4.is_loopback()
            || v4.is_link_local()
            || v4.is_unspecified()
            || (a == 100 && (64..128).contains(&b))
    };
    for token in text.split(|c: char| !(c.is_ascii_hexdigit() || c == '.' || c == ':')) {
        let token = token.trim_matches('.');
        if let Ok(v6) = token.parse::<std::net::Ipv6Addr>() {
            let first = v6.segments()[0];
            let mapped = v6.to_ipv4_mapped().is_some_and(internal_v4);
            if v6.is_loopback()
                || mapped
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
            {
                found.push(token.to_string());
            }
            continue;
        }
        // An IPv4 address, alone or with a port (`10.0.0.1:80`).
        for part in token.split(':') {
            if part.parse::<std::net::Ipv4Addr>().is_ok_and(internal_v4) {
                found.push(part.to_string());
            }
        }
    }
    if text.to_ascii_lowercase().contains("localhost") {
        found.push("localhost".to_string());
    }
    found
}

/// `POST {url}` with a bearer key and a JSON body; returns the status and the JSON body (`null`
/// when it is not JSON).
pub async fn post_json(http: &reqwest::Client, url: &str, key: &str, body: &Value) -> (u16, Value) {
    let r = http
        .post(url)
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .expect("an API request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Enqueues `n` deliveries of `event_type` (payload `{"i": n}`) to `channel` through the API at
/// `api` in batches of up to 500; returns the accepted ids, in order.
pub async fn enqueue_batches(
    http: &reqwest::Client,
    api: &str,
    key: &str,
    channel: Uuid,
    n: usize,
    event_type: &str,
) -> Vec<Uuid> {
    let url = format!("{api}/api/v1/channels/{channel}/deliveries/batch");
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        let k = (n - ids.len()).min(500);
        let items: Vec<Value> = (0..k)
            .map(|i| json!({ "event_type": event_type, "payload": { "i": ids.len() + i } }))
            .collect();
        let (s, v) = post_json(http, &url, key, &json!({ "deliveries": items })).await;
        assert_eq!(s, 202, "batch enqueue: {v}");
        ids.extend(
            v["data"]
                .as_array()
                .expect("data")
                .iter()
                .map(|d| d["id"].as_str().expect("id").parse::<Uuid>().expect("uuid")),
        );
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::internal_addresses;

    #[test]
    fn internal_addresses_are_found_and_public_ones_are_not() {
        let text = r#"{"detail":"host vm resolves to 127.0.0.1, 10.1.2.3:80, 172.20.0.1, 192.168.1.1, 169.254.169.254, 100.64.0.1, [::1], fd00::1 and fe80::1 or localhost"}"#;
        assert_eq!(
            internal_addresses(text),
            [
                "127.0.0.1",
                "10.1.2.3",
                "172.20.0.1",
                "192.168.1.1",
                "169.254.169.254",
                "100.64.0.1",
                "::1",
                "fd00::1",
                "fe80::1",
                "localhost"
            ]
        );
        let public = r#"{"detail":"must be between 1 and 10000; 8.8.8.8, 2001:db8::1, 1.5 s, urn:breakwater:problem:invalid"}"#;
        assert!(internal_addresses(public).is_empty());
    }
}
