//! Tenant cells (docs/cells.md): two cells, each its own Postgres server (a
//! [`Cluster`] on a throwaway Postgres) with its own `breakwater serve` node (`BREAKWATER_CELL`
//! `a` and `b`), and the router of `deploy/cells/` (HAProxy, [`Router`]) in front of both, all on
//! loopback. Every tenant and operator request of these scenarios goes through the router.
//!
//! - [`a_key_reaches_only_its_cell_and_the_operator_sees_both`]: every tenant route of the
//!   OpenAPI document, called through the router with cell A's key (and A's portal token) on B's
//!   objects, reaches A's cell and shows nothing of B's; B's objects are unchanged afterwards; a
//!   credential naming an unknown cell, or a forged one naming B, is refused (401); a key minted
//!   before cells reaches the home cell; the operator lists the cells and each cell's tenants by
//!   the `Breakwater-Cell` header, and an operator request naming no cell is refused (400).
//! - [`a_flood_in_one_cell_leaves_the_other_cells_p95`]: a probe tenant in B (and a control
//!   tenant in A) sends single deliveries at a steady rate in windows alternating between A idle
//!   and A flooded (a backlog to a dead endpoint and a slow one, enqueued in batches as fast as
//!   the router takes them); B's p95 (enqueue acknowledged, and enqueue to receipt) flooded over
//!   idle is printed and held to a loose bound. The cells share this machine's cores, so the
//!   ratio is an upper bound of what cells on their own hardware would show.
//! - [`a_tenant_moves_from_one_cell_to_another_under_load`]: `deploy/cells/move.sh` moves a
//!   tenant from A to B while 4 producer streams send it 40 deliveries/s with idempotency keys:
//!   lost 0, duplicates bounded, its old key works on B.
//! - [`a_host_gets_its_cap_from_each_cell`]: host caps are per cell: one slow host, a tenant in
//!   each cell, the host holds the cap from each.
//!
//! They need HAProxy (the Debian package `haproxy`; `deploy/cells/router.sh` installs it as root
//! or with sudo), so they are `#[ignore]`d in the ordinary chaos run: `deploy/cells/test.sh`
//! runs them.

use crate::cluster::{Cluster, Role, OPERATOR_KEY};
use breakwater::receiver::Behavior;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The script that starts and stops the router.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/cells/router.sh");

/// The request header an operator request names its cell in (`breakwater_api::cell::HEADER`).
const CELL_HEADER: &str = "Breakwater-Cell";

/// The router of `deploy/cells/` on a free loopback port, in front of the cells it was given;
/// stopped (`router.sh down`) when dropped, its log copied into the scenario's artifacts.
struct Router {
    dir: PathBuf,
    port: u16,
    artifacts: PathBuf,
    /// `http://127.0.0.1:<port>`.
    url: String,
}

impl Router {
    /// Writes a cells file (`cell <id> <addr>` per cell, `home` = the first), runs
    /// `router.sh up` and returns once it answers. Panics with the script's output if it fails.
    fn up(name: &str, cells: &[(&str, &str)], artifacts: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = PathBuf::from(format!("/tmp/breakwater-cells-test-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the router's directory");
        let mut conf = String::new();
        for (cell, api) in cells {
            let addr = api.trim_start_matches("http://");
            conf.push_str(&format!("cell {cell} {addr}\n"));
        }
        conf.push_str(&format!("home {}\n", cells[0].0));
        std::fs::write(dir.join("cells.conf"), conf).expect("writing cells.conf");
        let router = Self {
            url: format!("http://127.0.0.1:{port}"),
            dir,
            port,
            artifacts: artifacts.to_path_buf(),
        };
        let out = router.command("up").output().expect("running router.sh up");
        assert!(
            out.status.success(),
            "router.sh up failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        router
    }

    fn command(&self, arg: &str) -> Command {
        let mut cmd = Command::new(SCRIPT);
        cmd.arg(arg).envs(self.env());
        cmd
    }

    /// The environment that names this router to the scripts of `deploy/cells/`.
    fn env(&self) -> [(&'static str, String); 3] {
        [
            (
                "CELLS_CONF",
                self.dir.join("cells.conf").display().to_string(),
            ),
            ("CELLS_PORT", self.port.to_string()),
            ("CELLS_DIR", self.dir.join("run").display().to_string()),
        ]
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = std::fs::copy(
            self.dir.join("run/haproxy.log"),
            self.artifacts.join("router-haproxy.log"),
        );
        let _ = self.command("down").status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Two cells and the router: cell `a` (the home cell) and cell `b`, one node each (API and
/// workers in one process), each on its own Postgres server.
struct Cells {
    a: Cluster,
    b: Cluster,
    router: Router,
    http: reqwest::Client,
}

/// What a request through the router answered.
struct Answer {
    status: u16,
    body: Value,
    text: String,
}

impl Cells {
    async fn start(a: &'static str, b: &'static str) -> Self {
        Self::start_with(a, b, false, &[]).await
    }

    /// [`Cells::start`]; with `logical`, cell a's Postgres runs `wal_level = logical` (the
    /// source of a tenant move: a restart before its node starts); `env` adds to both cells'
    /// node settings.
    async fn start_with(
        a: &'static str,
        b: &'static str,
        logical: bool,
        env: &[(&str, &str)],
    ) -> Self {
        let with = |cell| {
            let mut e = vec![("BREAKWATER_CELL", cell)];
            e.extend_from_slice(env);
            e
        };
        let mut ca = Cluster::start(a, &with("a")).await;
        let mut cb = Cluster::start(b, &with("b")).await;
        if logical {
            sqlx::query("ALTER SYSTEM SET wal_level = logical")
                .execute(&ca.db)
                .await
                .expect("setting wal_level");
            ca.pg().stop().await.expect("stopping cell a's postgres");
            ca.pg()
                .restart()
                .await
                .expect("restarting cell a's postgres");
        }
        let ia = ca.spawn(Role::All).await;
        let ib = cb.spawn(Role::All).await;
        let api_a = ca.node(ia).api.clone().expect("an API node");
        let api_b = cb.node(ib).api.clone().expect("an API node");
        let artifacts = crate::cluster::artifact_dir(&format!("{a}_router"));
        let router = Router::up(a, &[("a", &api_a), ("b", &api_b)], &artifacts);
        Self {
            a: ca,
            b: cb,
            router,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("an HTTP client"),
        }
    }

    /// `method path` through the router with bearer `key` and, if given, `Breakwater-Cell:
    /// cell`; a JSON `body` for anything but GET and DELETE.
    async fn call(
        &self,
        method: &str,
        path: &str,
        key: &str,
        cell: Option<&str>,
        body: Option<&Value>,
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.router.url))
            .bearer_auth(key);
        if let Some(cell) = cell {
            req = req.header(CELL_HEADER, cell);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req.send().await.expect("a request through the router");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        Answer {
            status,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
            text,
        }
    }

    /// `POST path` as the operator on `cell`, expecting `expect`; the body.
    async fn operator_post(&self, cell: &str, path: &str, body: Value, expect: u16) -> Value {
        let a = self
            .call("POST", path, OPERATOR_KEY, Some(cell), Some(&body))
            .await;
        assert_eq!(a.status, expect, "POST {path} on cell {cell}: {}", a.text);
        a.body
    }

    /// `POST path` with tenant credential `key`, expecting `expect`; the body.
    async fn post(&self, key: &str, path: &str, body: Value, expect: u16) -> Value {
        let a = self.call("POST", path, key, None, Some(&body)).await;
        assert_eq!(a.status, expect, "POST {path}: {}", a.text);
        a.body
    }

    /// `GET path` with `key` (and `cell`), expecting 200; the body.
    async fn get(&self, key: &str, cell: Option<&str>, path: &str) -> Value {
        let a = self.call("GET", path, key, cell, None).await;
        assert_eq!(a.status, 200, "GET {path}: {}", a.text);
        a.body
    }
}

/// Every object a tenant made in [`populate`], by the kind of path parameter that names it.
struct Objects {
    tenant: Uuid,
    key: String,
    key_id: String,
    channel: Uuid,
    delivery: String,
    message: String,
    session: String,
    token: String,
    event_type: String,
}

impl Objects {
    /// Every identifier of these objects, as it would appear in a response body.
    fn identifiers(&self) -> Vec<String> {
        vec![
            self.tenant.to_string(),
            self.key_id.clone(),
            self.channel.to_string(),
            self.delivery.clone(),
            self.message.clone(),
            self.session.clone(),
            self.event_type.clone(),
        ]
    }

    /// `path` of the OpenAPI document with its parameter filled in with this tenant's object
    /// of that kind, or `None` for a parameter this does not know.
    fn fill(&self, path: &str) -> Option<String> {
        let id = if path.starts_with("/api/v1/channels/{id}") {
            self.channel.to_string()
        } else if path.starts_with("/api/v1/deliveries/{id}") {
            self.delivery.clone()
        } else if path.starts_with("/api/v1/messages/{id}") {
            self.message.clone()
        } else if path.starts_with("/api/v1/tenant/keys/{id}") {
            self.key_id.clone()
        } else if path.starts_with("/api/v1/tenant/portal-sessions/{id}") {
            self.session.clone()
        } else if path.starts_with("/api/v1/event-types/{name}") {
            return Some(path.replace("{name}", &self.event_type));
        } else if !path.contains('{') {
            return Some(path.to_string());
        } else {
            return None;
        };
        Some(path.replace("{id}", &id))
    }
}

/// A tenant on `cell` (created by the operator through the router) with one of each object a
/// tenant route can name: a channel to `endpoint` of the cell's receiver, a delivery, a message,
/// a second API key, a portal session, an event type.
async fn populate(cells: &Cells, c: &Cluster, cell: &str, endpoint: &str) -> Objects {
    let t = cells
        .operator_post(
            cell,
            "/api/v1/tenants",
            json!({ "name": format!("tenant-{cell}") }),
            201,
        )
        .await;
    let key = t["api_key"].as_str().expect("api_key").to_string();
    assert!(
        key.starts_with(&format!("bw_{cell}_")),
        "a key of cell {cell} names it: {}",
        &key[..8]
    );
    let tenant: Uuid = t["id"].as_str().expect("id").parse().expect("a uuid");
    let channel = c
        .channel_on(&c.receiver, &key, endpoint, Behavior::Status(200, None))
        .await;
    // Through the router, not the node: the channel above was made on the node directly by the
    // cluster's helper, so make the rest through the router.
    let delivery = cells
        .post(
            &key,
            &format!("/api/v1/channels/{channel}/deliveries"),
            json!({ "event_type": "cells.test", "payload": { "cell": cell } }),
            202,
        )
        .await["id"]
        .as_str()
        .expect("delivery id")
        .to_string();
    let message = cells
        .post(
            &key,
            "/api/v1/messages",
            json!({ "event_type": "cells.test", "payload": { "cell": cell } }),
            202,
        )
        .await["id"]
        .as_str()
        .expect("message id")
        .to_string();
    let k2 = cells
        .post(
            &key,
            "/api/v1/tenant/keys",
            json!({ "name": "second" }),
            201,
        )
        .await;
    assert!(k2["api_key"]
        .as_str()
        .unwrap()
        .starts_with(&format!("bw_{cell}_")));
    let s = cells
        .post(
            &key,
            "/api/v1/tenant/portal-sessions",
            json!({ "scope": "manage" }),
            201,
        )
        .await;
    let token = s["url"]
        .as_str()
        .and_then(|u| u.split_once("#token="))
        .expect("the token in the url's fragment")
        .1
        .to_string();
    assert!(
        token.starts_with(&format!("bwp_{cell}_")),
        "a token of cell {cell} names it"
    );
    let event_type = format!("cells.only-{cell}");
    cells
        .post(
            &key,
            "/api/v1/event-types",
            json!({ "name": event_type, "schema": { "type": "object" } }),
            201,
        )
        .await;
    Objects {
        tenant,
        key,
        key_id: k2["id"].as_str().expect("key id").to_string(),
        channel,
        delivery,
        message,
        session: s["id"].as_str().expect("session id").to_string(),
        token,
        event_type,
    }
}

/// The tenant routes of the OpenAPI document the router serves: (method, path) of every
/// operation whose security is the tenant key.
async fn tenant_routes(cells: &Cells) -> Vec<(String, String)> {
    let doc = cells.get("", None, "/api/v1/openapi.json").await;
    let mut routes = Vec::new();
    for (path, ops) in doc["paths"].as_object().expect("paths") {
        for (method, op) in ops.as_object().expect("operations") {
            let tenant = op["security"]
                .as_array()
                .is_some_and(|s| s.iter().any(|r| r.get("tenant_key").is_some()));
            if tenant {
                routes.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    routes
}

/// Calls every tenant route with `key` (a credential of tenant `own`) on `other`'s objects:
/// each must reach `own`'s cell (no 401: `other`'s cell does not know the key) and show none of
/// `other`'s identifiers. Returns how many routes were called.
async fn probe_isolation(
    cells: &Cells,
    routes: &[(String, String)],
    key: &str,
    other: &Objects,
) -> usize {
    let forbidden = other.identifiers();
    let mut called = 0;
    for (method, path) in routes {
        let filled = other
            .fill(path)
            .unwrap_or_else(|| panic!("no object of B for {path}: add it to Objects::fill"));
        let body = (method != "GET" && method != "DELETE").then(|| json!({}));
        let a = cells.call(method, &filled, key, None, body.as_ref()).await;
        called += 1;
        assert_ne!(
            a.status, 401,
            "{method} {filled} with a key of cell a did not reach cell a: {}",
            a.text
        );
        if path.contains('{') {
            assert!(
                (400..500).contains(&a.status),
                "{method} {filled} (B's object) with A's credential answered {}: {}",
                a.status,
                a.text
            );
        }
        for id in &forbidden {
            assert!(
                !a.text.contains(id.as_str()),
                "{method} {filled} with A's credential shows B's {id}: {}",
                a.text
            );
        }
    }
    called
}

/// A cell-A key never reaches cell B's data; forged and unknown cell prefixes are refused; a key
/// minted before cells reaches the home cell; the operator sees both cells.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs HAProxy: run by deploy/cells/test.sh"]
async fn a_key_reaches_only_its_cell_and_the_operator_sees_both() {
    let cells = Cells::start("cells_isolation_a", "cells_isolation_b").await;
    let a = populate(&cells, &cells.a, "a", "a").await;
    let b = populate(&cells, &cells.b, "b", "b").await;

    // 1. Every tenant route, with A's key and with A's portal token, on B's objects.
    let routes = tenant_routes(&cells).await;
    assert!(
        routes.len() >= 30,
        "the document lists the tenant routes: {routes:?}"
    );
    let by_key = probe_isolation(&cells, &routes, &a.key, &b).await;
    let by_token = probe_isolation(&cells, &routes, &a.token, &b).await;
    // B's objects are all still there and unchanged, seen with B's key through the router.
    let ch = cells
        .get(&b.key, None, &format!("/api/v1/channels/{}", b.channel))
        .await;
    assert_eq!(ch["circuit_state"], "closed", "B's channel untouched: {ch}");
    cells
        .get(&b.key, None, &format!("/api/v1/deliveries/{}", b.delivery))
        .await;
    cells
        .get(&b.key, None, &format!("/api/v1/messages/{}", b.message))
        .await;
    cells
        .get(
            &b.key,
            None,
            &format!("/api/v1/event-types/{}", b.event_type),
        )
        .await;
    let keys = cells.get(&b.key, None, "/api/v1/tenant/keys").await;
    assert_eq!(
        keys["data"].as_array().map(Vec::len),
        Some(2),
        "B's keys: {keys}"
    );
    cells.get(&b.token, None, "/api/v1/channels").await;
    // And A's own lists hold A's objects (the calls reached A's cell and found A there).
    let mine = cells.get(&a.key, None, "/api/v1/channels").await;
    assert!(mine.to_string().contains(&a.channel.to_string()), "{mine}");
    let me = cells.get(&a.key, Some("b"), "/api/v1/tenant").await;
    assert_eq!(
        me["id"],
        a.tenant.to_string(),
        "a tenant key's cell wins over the header"
    );

    // 2. Credentials that name no cell of the deployment, or forge B's prefix.
    let random = &a.key["bw_a_".len()..];
    for forged in [
        format!("bw_zz_{random}"),
        format!("bwp_zz_{}", &a.token["bwp_a_".len()..]),
    ] {
        let r = cells
            .call("GET", "/api/v1/channels", &forged, None, None)
            .await;
        assert_eq!(r.status, 401, "unknown cell: {}", r.text);
        assert_eq!(r.body["code"], "unknown_cell", "{}", r.text);
    }
    let forged_b = format!("bw_b_{random}");
    let r = cells
        .call("GET", "/api/v1/channels", &forged_b, None, None)
        .await;
    assert_eq!(
        r.status, 401,
        "A's secret under B's prefix is no key of B: {}",
        r.text
    );
    assert_eq!(r.body["code"], "unauthorized", "{}", r.text);

    // 3. A key minted before the deployment had cells (`bw_` + 32) reaches the home cell, a.
    let mut conn = cells.a.db.acquire().await.expect("a connection to cell a");
    let legacy = breakwater_core::tenants::create(
        &mut conn,
        &breakwater_core::tenants::NewTenant {
            name: "before-cells".into(),
            tier: breakwater_core::Tier::default(),
            alert_url: None,
            cell: None,
        },
        "operator",
    )
    .await
    .expect("a tenant made before cells");
    drop(conn);
    assert_eq!(legacy.api_key.len(), 35, "a key without a cell");
    let me = cells.get(&legacy.api_key, None, "/api/v1/tenant").await;
    assert_eq!(me["id"], legacy.tenant.id.to_string());

    // 4. The operator: the cells, each cell's tenants by the header, and refusals.
    let list = cells.get("", None, "/api/v1/cells").await;
    let ids: Vec<&str> = list["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"], "{list}");
    let mut seen = BTreeSet::new();
    for (cell, own, other) in [("a", &a, &b), ("b", &b, &a)] {
        let tenants = cells
            .get(OPERATOR_KEY, Some(cell), "/api/v1/tenants?limit=100")
            .await;
        let text = tenants.to_string();
        assert!(
            text.contains(&own.tenant.to_string()),
            "cell {cell} lists its tenant: {text}"
        );
        assert!(
            !text.contains(&other.tenant.to_string()),
            "cell {cell} lists only its own"
        );
        seen.extend(
            tenants["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].to_string()),
        );
        cells
            .get(OPERATOR_KEY, Some(cell), "/api/v1/admin/channels")
            .await;
        cells
            .get(OPERATOR_KEY, Some(cell), "/api/v1/admin/hosts")
            .await;
    }
    assert_eq!(
        seen.len(),
        3,
        "the operator sees every cell's tenants (a, the legacy one, b)"
    );
    let r = cells
        .call("GET", "/api/v1/tenants", OPERATOR_KEY, None, None)
        .await;
    assert_eq!(
        (r.status, r.body["code"].as_str()),
        (400, Some("cell_required")),
        "{}",
        r.text
    );
    let r = cells
        .call("GET", "/api/v1/tenants", OPERATOR_KEY, Some("zz"), None)
        .await;
    assert_eq!(
        (r.status, r.body["code"].as_str()),
        (400, Some("unknown_cell")),
        "{}",
        r.text
    );
    // The admin page, served by any cell's node; a node refuses a request meant for another.
    let page = cells
        .http
        .get(format!("{}/admin", cells.router.url))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let api_a = cells.a.api();
    let r = cells
        .http
        .get(format!("{api_a}/api/v1/tenants"))
        .bearer_auth(OPERATOR_KEY)
        .header(CELL_HEADER, "b")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        421,
        "a node of cell a refuses a request meant for b"
    );
    admin_page_shows_each_cell(&cells, &a, &b).await;
    eprintln!(
        "cells: {by_key} tenant routes with A's key and {by_token} with A's portal token on B's \
         objects: none reached B; unknown and forged cells refused; operator saw {} tenants in 2 \
         cells",
        seen.len()
    );
}

/// The admin page through the router, in a real browser: a cell picker listing both cells, a
/// Cells card with a row per cell, and the channels of the cell chosen only (A's, then B's after
/// "Show" on B's row); a screenshot `admin-cells.png` in the scenario's artifacts.
async fn admin_page_shows_each_cell(cells: &Cells, a: &Objects, b: &Objects) {
    use breakwater_e2e::browser::{admin_key_prompt, click, js, start_driver};
    let (_driver, c) = start_driver().await;
    let input = admin_key_prompt(&c, &format!("{}/admin", cells.router.url)).await;
    input.send_keys(OPERATOR_KEY).await.unwrap();
    click(&c, "#key-submit").await;
    let shows = |ch: Uuid| {
        let c = c.clone();
        async move {
            let script = format!(
                "return document.querySelector('#channels tr[data-channel-id=\"{ch}\"]') !== null"
            );
            js(&c, &script).await == json!(true)
        }
    };
    let seen_a = breakwater_e2e::eventually(Duration::from_secs(10), || shows(a.channel)).await;
    assert!(seen_a, "the page shows cell a's channel first");
    assert!(!shows(b.channel).await, "and not cell b's");
    let picker = js(
        &c,
        "return [document.getElementById('cell-picker').hidden, \
         [...document.querySelectorAll('#cell option')].map(o => o.value), \
         document.querySelectorAll('#cells tbody tr').length]",
    )
    .await;
    assert_eq!(
        picker,
        json!([false, ["a", "b"], 2]),
        "the picker and the Cells card"
    );
    click(&c, "#cells tr[data-cell=\"b\"] button").await;
    let seen_b = breakwater_e2e::eventually(Duration::from_secs(10), || shows(b.channel)).await;
    assert!(
        seen_b,
        "after Show on cell b, the page shows cell b's channel"
    );
    assert!(!shows(a.channel).await, "and no longer cell a's");
    let png = c.screenshot().await.expect("a screenshot");
    std::fs::write(cells.router.artifacts.join("admin-cells.png"), png)
        .expect("writing the screenshot");
    c.close().await.expect("closing the browser session");
}

/// The steady single-delivery probe of one tenant: every `gap`, one enqueue through the router;
/// the time to its acknowledgement and to its receipt at the tenant's receiver.
struct Probe {
    key: String,
    channel: Uuid,
}

/// One window of a probe: (delivery id, when sent, acknowledgement latency).
type Window = Vec<(String, Instant, Duration)>;

impl Probe {
    async fn run(&self, cells: &Cells, gap: Duration, length: Duration) -> Window {
        let mut out = Vec::new();
        let end = Instant::now() + length;
        let mut next = Instant::now();
        while Instant::now() < end {
            let sent = Instant::now();
            let a = cells
                .call(
                    "POST",
                    &format!("/api/v1/channels/{}/deliveries", self.channel),
                    &self.key,
                    None,
                    Some(&json!({ "event_type": "cells.probe", "payload": { "n": out.len() } })),
                )
                .await;
            assert_eq!(a.status, 202, "probe enqueue: {}", a.text);
            let id = a.body["id"].as_str().expect("id").to_string();
            out.push((id, sent, sent.elapsed()));
            next += gap;
            tokio::time::sleep_until(next.into()).await;
        }
        out
    }
}

/// The p95 of `v` (nearest rank), ms.
fn p95(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "no samples");
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * 0.95).ceil() as usize).clamp(1, v.len()) - 1]
}

/// A window's p95s (acknowledgement, enqueue to receipt), ms, once every delivery of it arrived
/// at `c`'s receiver; panics if one does not within 30 s.
async fn window_p95(c: &Cluster, endpoint: &str, w: &Window) -> (f64, f64) {
    let ids: BTreeSet<&str> = w.iter().map(|(id, _, _)| id.as_str()).collect();
    let arrived = breakwater_e2e::eventually_every(
        Duration::from_secs(30),
        Duration::from_millis(50),
        || {
            let got: BTreeSet<String> = c
                .receiver
                .received(endpoint)
                .into_iter()
                .filter_map(|r| r.webhook_id)
                .collect();
            let all = ids.iter().all(|id| got.contains(*id));
            async move { all }
        },
    )
    .await;
    assert!(arrived, "every probe delivery arrives at {endpoint}");
    let received = c.receiver.received(endpoint);
    let e2e = w
        .iter()
        .map(|(id, sent, _)| {
            let r = received
                .iter()
                .find(|r| r.webhook_id.as_deref() == Some(id.as_str()))
                .expect("received");
            r.at.duration_since(*sent).as_secs_f64() * 1000.0
        })
        .collect();
    let ack = w.iter().map(|(_, _, d)| d.as_secs_f64() * 1000.0).collect();
    (p95(ack), p95(e2e))
}

/// The per-host cap of [`a_host_gets_its_cap_from_each_cell`], and how long its endpoint takes
/// to answer.
const HOST_CAP: usize = 2;
const HOST_DELAY: Duration = Duration::from_millis(1500);

/// Host caps are per cell (docs/cells.md, "What becomes per cell"): with `hosts.max_in_flight`
/// = [`HOST_CAP`] in both cells and a tenant of each sending a backlog to one slow host, that
/// host gets [`HOST_CAP`] requests at once from each cell: twice the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs HAProxy: run by deploy/cells/test.sh"]
async fn a_host_gets_its_cap_from_each_cell() {
    let cap = HOST_CAP.to_string();
    let cells = Cells::start_with(
        "cells_host_a",
        "cells_host_b",
        false,
        &[("BREAKWATER_HOSTS__MAX_IN_FLIGHT", &cap)],
    )
    .await;
    // One host: cell a's receiver, for both cells' channels.
    let host = &cells.a.receiver;
    let mut backlog = Vec::new();
    for (cell, c) in [("a", &cells.a), ("b", &cells.b)] {
        let t = cells
            .operator_post(
                cell,
                "/api/v1/tenants",
                json!({ "name": format!("host-{cell}") }),
                201,
            )
            .await;
        let key = t["api_key"].as_str().unwrap().to_string();
        let endpoint = format!("slow-{cell}");
        let ch = c
            .channel_on(host, &key, &endpoint, Behavior::Delay(HOST_DELAY, 200))
            .await;
        backlog.push((key, ch, endpoint));
    }
    for (key, ch, _) in &backlog {
        let items: Vec<Value> = (0..10)
            .map(|i| json!({ "event_type": "cells.host", "payload": { "i": i } }))
            .collect();
        cells
            .post(
                key,
                &format!("/api/v1/channels/{ch}/deliveries/batch"),
                json!({ "deliveries": items }),
                202,
            )
            .await;
    }
    // The most requests the host holds at once, from each cell and together: each request is
    // held HOST_DELAY from its arrival.
    let arrived = breakwater_e2e::eventually_every(
        Duration::from_secs(30),
        Duration::from_millis(50),
        || {
            let n: usize = backlog.iter().map(|(_, _, e)| host.count(e)).sum();
            async move { n >= 4 * HOST_CAP }
        },
    )
    .await;
    assert!(arrived, "the host got requests from both cells");
    let peak = |endpoints: &[&str]| {
        let at: Vec<Instant> = endpoints
            .iter()
            .flat_map(|e| host.received(e))
            .map(|r| r.at)
            .collect();
        at.iter()
            .map(|&t| at.iter().filter(|&&u| u <= t && t < u + HOST_DELAY).count())
            .max()
            .unwrap_or(0)
    };
    let (pa, pb, both) = (
        peak(&["slow-a"]),
        peak(&["slow-b"]),
        peak(&["slow-a", "slow-b"]),
    );
    eprintln!(
        "cells: host cap {HOST_CAP} in each cell: the host held at most {pa} requests from cell a, \
         {pb} from cell b, {both} at once in all"
    );
    assert_eq!(
        (pa, pb),
        (HOST_CAP, HOST_CAP),
        "each cell holds the host to its cap"
    );
    assert_eq!(
        both,
        2 * HOST_CAP,
        "together the host gets the cap from each cell"
    );
}

/// Requests per second of each probe (one every 50 ms), how long each measured window lasts,
/// how many windows of each kind (idle, flooded: alternating), and how long the flood is on or
/// off before a window opens (so each window sees one state).
const PROBE_GAP: Duration = Duration::from_millis(50);
const WINDOW: Duration = Duration::from_secs(5);
const ROUNDS: usize = 3;
const SETTLE: Duration = Duration::from_secs(1);

/// Most deliveries the flood enqueues in cell A (two loops of batches of 1000): a bound the
/// flooded windows do not reach on 2 cores, so A is flooded for the whole of each.
const FLOOD_MAX: usize = 200_000;

/// The loose bound on cell B's p95 flooded over idle (both the acknowledgement and the
/// delivery). The cells share two cores here, so A's flood takes CPU from B; the bound fails a
/// router or a shared component that serialises the cells, not the cost of sharing cores.
const MAX_RATIO: f64 = 4.0;

/// Below this, a p95 is noise on this shared 2-core loopback: a ratio is taken over at least
/// this, ms. A healthy delivery's p95 is 4–7 ms here with nothing else running (the isolation
/// runs' baselines), so a quiet idle window of 6 ms and a flooded one of 21 ms read as ×3.4 over
/// 5 ms, near the bound, for what is the cost of sharing the cores; a router or a component
/// that serialised the cells would put B's requests behind A's 1000-delivery batches, p95s of
/// 100 ms and more, still far past the bound over 10 ms.
const FLOOR_MS: f64 = 10.0;

/// A flood in cell A leaves cell B's p95 (nearly) unchanged: B's probe measured with A idle and
/// with A flooded in one run, the windows alternating ([`ROUNDS`] of each, idle first) so that a
/// change of the machine's own load over the run (other processes on these shared cores) falls
/// on both alike; A's own control probe shows what the flood does to its cell.
///
/// The flood: two loops enqueueing batches of 1000 through the router, to a dead endpoint (503)
/// and a slow one (1 s), as fast as they are taken, while it is on. An idle window after the
/// first flooded one has A taking no new work, its backlog from the floods before waiting
/// (mostly parked behind the dead endpoint's open circuit).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs HAProxy: run by deploy/cells/test.sh"]
async fn a_flood_in_one_cell_leaves_the_other_cells_p95() {
    let cells = Cells::start("cells_flood_a", "cells_flood_b").await;
    let t = cells
        .operator_post("b", "/api/v1/tenants", json!({ "name": "probe-b" }), 201)
        .await;
    let key_b = t["api_key"].as_str().unwrap().to_string();
    let ch_b = cells
        .b
        .channel_on(
            &cells.b.receiver,
            &key_b,
            "probe",
            Behavior::Status(200, None),
        )
        .await;
    let t = cells
        .operator_post("a", "/api/v1/tenants", json!({ "name": "control-a" }), 201)
        .await;
    let key_ctl = t["api_key"].as_str().unwrap().to_string();
    let ch_ctl = cells
        .a
        .channel_on(
            &cells.a.receiver,
            &key_ctl,
            "control",
            Behavior::Status(200, None),
        )
        .await;
    let t = cells
        .operator_post("a", "/api/v1/tenants", json!({ "name": "flood-a" }), 201)
        .await;
    let key_flood = t["api_key"].as_str().unwrap().to_string();
    let dead = cells
        .a
        .channel_on(
            &cells.a.receiver,
            &key_flood,
            "dead",
            Behavior::Status(503, None),
        )
        .await;
    let slow = cells
        .a
        .channel_on(
            &cells.a.receiver,
            &key_flood,
            "slow",
            Behavior::Delay(Duration::from_secs(1), 200),
        )
        .await;
    let probe_b = Probe {
        key: key_b,
        channel: ch_b,
    };
    let probe_ctl = Probe {
        key: key_ctl,
        channel: ch_ctl,
    };

    // Warm-up (connections, caches), not measured.
    tokio::join!(
        probe_b.run(&cells, PROBE_GAP, Duration::from_secs(2)),
        probe_ctl.run(&cells, PROBE_GAP, Duration::from_secs(2))
    );

    // The flood's loops run for the whole test and enqueue while `on` says so.
    let (on, _) = tokio::sync::watch::channel(false);
    let stop = CancellationToken::new();
    let flood = |channel: Uuid| {
        let (http, url, key, stop, mut on) = (
            cells.http.clone(),
            cells.router.url.clone(),
            key_flood.clone(),
            stop.clone(),
            on.subscribe(),
        );
        tokio::spawn(async move {
            let mut sent = 0usize;
            while !stop.is_cancelled() && sent < FLOOD_MAX / 2 {
                if !*on.borrow() {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = on.changed() => continue,
                    }
                }
                let items: Vec<Value> = (0..1000)
                    .map(|i| json!({ "event_type": "cells.flood", "payload": { "i": i } }))
                    .collect();
                let r = http
                    .post(format!("{url}/api/v1/channels/{channel}/deliveries/batch"))
                    .bearer_auth(&key)
                    .json(&json!({ "deliveries": items }))
                    .send()
                    .await;
                if r.is_ok_and(|r| r.status().is_success()) {
                    sent += 1000;
                }
            }
            sent
        })
    };
    let floods = [flood(dead), flood(slow)];
    let (mut idle_b, mut idle_ctl, mut flooded_b, mut flooded_ctl) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut flooded_for = Duration::ZERO;
    for _ in 0..ROUNDS {
        for flooding in [false, true] {
            on.send_replace(flooding);
            tokio::time::sleep(SETTLE).await;
            let started = Instant::now();
            let (b, ctl) = tokio::join!(
                probe_b.run(&cells, PROBE_GAP, WINDOW),
                probe_ctl.run(&cells, PROBE_GAP, WINDOW)
            );
            let (to_b, to_ctl) = if flooding {
                flooded_for += started.elapsed() + SETTLE;
                (&mut flooded_b, &mut flooded_ctl)
            } else {
                (&mut idle_b, &mut idle_ctl)
            };
            to_b.extend(b);
            to_ctl.extend(ctl);
        }
    }
    stop.cancel();
    let mut flooded = 0;
    for f in floods {
        flooded += f.await.expect("a flood loop");
    }
    let backlog: i64 =
        sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE status <> 'delivered'")
            .fetch_one(&cells.a.db)
            .await
            .expect("cell a's backlog");

    let (ib_ack, ib_e2e) = window_p95(&cells.b, "probe", &idle_b).await;
    let (fb_ack, fb_e2e) = window_p95(&cells.b, "probe", &flooded_b).await;
    let (ic_ack, ic_e2e) = window_p95(&cells.a, "control", &idle_ctl).await;
    let (fc_ack, fc_e2e) = window_p95(&cells.a, "control", &flooded_ctl).await;
    let ratio = |flooded: f64, idle: f64| flooded.max(FLOOR_MS) / idle.max(FLOOR_MS);
    let (rb_ack, rb_e2e) = (ratio(fb_ack, ib_ack), ratio(fb_e2e, ib_e2e));
    eprintln!(
        "cells: flood of {flooded} deliveries in cell a over {:.1} s ({backlog} of cell a's \
         deliveries not delivered at the end); {ROUNDS} idle and {ROUNDS} flooded windows of {} s \
         alternating, probes at {}/s in each cell ({} + {} requests idle, {} + {} flooded).\n\
         cells: cell b p95 idle/flooded: acknowledged {ib_ack:.1}/{fb_ack:.1} ms (x{rb_ack:.2}), \
         delivered {ib_e2e:.1}/{fb_e2e:.1} ms (x{rb_e2e:.2})\n\
         cells: cell a (the flooded cell's own control tenant) p95 idle/flooded: acknowledged \
         {ic_ack:.1}/{fc_ack:.1} ms (x{:.2}), delivered {ic_e2e:.1}/{fc_e2e:.1} ms (x{:.2})",
        flooded_for.as_secs_f64(),
        WINDOW.as_secs(),
        1000 / PROBE_GAP.as_millis(),
        idle_b.len(),
        idle_ctl.len(),
        flooded_b.len(),
        flooded_ctl.len(),
        ratio(fc_ack, ic_ack),
        ratio(fc_e2e, ic_e2e),
    );
    assert!(
        flooded >= 10_000,
        "the flood was a flood: {flooded} deliveries"
    );
    assert!(
        rb_ack <= MAX_RATIO && rb_e2e <= MAX_RATIO,
        "cell b's p95 under cell a's flood over idle: acknowledged x{rb_ack:.2}, delivered \
         x{rb_e2e:.2} (bound x{MAX_RATIO})"
    );
}

/// The mover's producer: this many streams, each sending one request every
/// [`MOVE_STREAM_GAP`] (40 requests/s together), so that requests are in flight at every moment
/// of the cut-over.
const MOVE_STREAMS: usize = 4;
const MOVE_STREAM_GAP: Duration = Duration::from_millis(100);

/// One request of the move's producer: its idempotency key, the delivery id it was answered
/// with, and how many tries it took.
struct Sent {
    id: String,
    tries: u32,
    acked: Instant,
}

/// Stream `stream` of the mover's producer: single deliveries to `channel` with `key` through
/// the router, one every [`MOVE_STREAM_GAP`], each with its own `Idempotency-Key`, retried with
/// it every 100 ms on any answer but 200/202 (the router's 503 `tenant_moving` during the
/// cut-over, a node's 5xx, a connection cut) until `stop`; returns what was acknowledged, in
/// order.
fn produce(
    cells: &Cells,
    key: String,
    channel: Uuid,
    stream: usize,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<Vec<Sent>> {
    let (http, url) = (cells.http.clone(), cells.router.url.clone());
    tokio::spawn(async move {
        let mut sent = Vec::new();
        let mut next = Instant::now();
        for n in 0.. {
            if stop.is_cancelled() {
                break;
            }
            let idem = format!("move-{stream}-{n}");
            let mut tries = 0;
            let id = loop {
                tries += 1;
                let r = http
                    .post(format!("{url}/api/v1/channels/{channel}/deliveries"))
                    .bearer_auth(&key)
                    .header("Idempotency-Key", &idem)
                    .json(&json!({ "event_type": "cells.move", "payload": { "n": n } }))
                    .send()
                    .await;
                if let Ok(r) = r {
                    if matches!(r.status().as_u16(), 200 | 202) {
                        let v: Value = r.json().await.expect("a JSON answer");
                        break v["id"].as_str().expect("id").to_string();
                    }
                }
                assert!(
                    tries < 600,
                    "request {idem} not acknowledged after 60 s of retries"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            sent.push(Sent {
                id,
                tries,
                acked: Instant::now(),
            });
            next += MOVE_STREAM_GAP;
            tokio::time::sleep_until(next.into()).await;
        }
        sent
    })
}

/// A tenant moves from cell a to cell b under load (deploy/cells/move.sh: logical replication
/// with row filters, then the cut-over): every delivery acknowledged before, during and after
/// the move is delivered (lost 0), duplicates are bounded by what was in flight, the tenant's old
/// key works on its new cell and its new keys name it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs HAProxy: run by deploy/cells/test.sh"]
async fn a_tenant_moves_from_one_cell_to_another_under_load() {
    let cells = Cells::start_with("cells_move_a", "cells_move_b", true, &[]).await;
    // A cell's own identity ranges (docs/cells.md, creating a cell): the moved tenant's audit
    // rows and attempts keep their ids, which must not collide with the target's own.
    sqlx::raw_sql(
        "ALTER TABLE audit_log ALTER COLUMN id RESTART WITH 1000000000000;
         ALTER TABLE delivery_attempts ALTER COLUMN id RESTART WITH 1000000000000;
         ALTER TABLE jobs ALTER COLUMN id RESTART WITH 1000000000000;",
    )
    .execute(&cells.b.db)
    .await
    .expect("cell b's identity range");
    let t = cells
        .operator_post("a", "/api/v1/tenants", json!({ "name": "mover" }), 201)
        .await;
    let key = t["api_key"].as_str().unwrap().to_string();
    let tenant = t["id"].as_str().unwrap().to_string();
    let channel = cells
        .a
        .channel_on(
            &cells.a.receiver,
            &key,
            "moving",
            // Slower than the load (8 at once, 300 ms each: about 27/s against 40/s), so a
            // backlog waits when the move starts and its jobs must be rebuilt on cell b.
            Behavior::Delay(Duration::from_millis(300), 200),
        )
        .await;
    let stop = CancellationToken::new();
    let producers: Vec<_> = (0..MOVE_STREAMS)
        .map(|i| produce(&cells, key.clone(), channel, i, stop.clone()))
        .collect();
    tokio::time::sleep(Duration::from_secs(4)).await;

    let started = Instant::now();
    let out = tokio::process::Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/cells/move.sh"
    ))
    .args([tenant.as_str(), "a", "b"])
    .envs(cells.router.env())
    .env("FROM_DATABASE_URL", &cells.a.url)
    .env("TO_DATABASE_URL", &cells.b.url)
    .env("BREAKWATER_OPERATOR_KEY", OPERATOR_KEY)
    .env("MOVE_BIN", crate::cluster::breakwater_bin())
    .output()
    .await
    .expect("running move.sh");
    let took = started.elapsed();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "move.sh failed:\n{log}{}",
        String::from_utf8_lossy(&out.stdout)
    );
    eprint!("{log}");

    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.cancel();
    let mut streams = Vec::new();
    for p in producers {
        streams.push(p.await.expect("a producer stream"));
    }
    // The longest time a stream waited between two acknowledgements: the hold, as a client saw
    // it.
    let hold = streams
        .iter()
        .flat_map(|s| s.windows(2).map(|w| w[1].acked.duration_since(w[0].acked)))
        .max()
        .unwrap_or_default();
    let sent: Vec<Sent> = streams.into_iter().flatten().collect();

    // The tenant lives on cell b now: its old key (`bw_a_…`) reaches it there, a new key names b.
    let me = cells.get(&key, None, "/api/v1/tenant").await;
    assert_eq!(me["id"], tenant.as_str());
    let on_b: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tenants WHERE id = $1::uuid AND deleted_at IS NULL",
    )
    .bind(&tenant)
    .fetch_one(&cells.b.db)
    .await
    .unwrap();
    assert_eq!(on_b, 1, "the tenant is live on cell b");
    let k = cells
        .post(&key, "/api/v1/tenant/keys", json!({ "name": "after" }), 201)
        .await;
    assert!(
        k["api_key"].as_str().unwrap().starts_with("bw_b_"),
        "a new key names cell b"
    );
    let on_a: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tenants WHERE id = $1::uuid AND deleted_at IS NULL",
    )
    .bind(&tenant)
    .fetch_one(&cells.a.db)
    .await
    .unwrap();
    assert_eq!(on_a, 0, "the tenant is deleted on cell a");

    // Lost 0: every acknowledged delivery arrives; duplicates counted.
    let acked: BTreeSet<&str> = sent.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(acked.len(), sent.len(), "one delivery per idempotency key");
    let arrived = breakwater_e2e::eventually_every(
        Duration::from_secs(60),
        Duration::from_millis(100),
        || {
            let got: BTreeSet<String> = cells
                .a
                .receiver
                .received("moving")
                .into_iter()
                .filter_map(|r| r.webhook_id)
                .collect();
            let all = acked.iter().all(|id| got.contains(*id));
            async move { all }
        },
    )
    .await;
    let received = cells.a.receiver.received("moving");
    let mut times = std::collections::HashMap::<String, usize>::new();
    for r in received.iter().filter(|r| r.answered == Some(200)) {
        if let Some(id) = &r.webhook_id {
            *times.entry(id.clone()).or_default() += 1;
        }
    }
    let lost = acked.iter().filter(|id| !times.contains_key(**id)).count();
    let duplicates = times.values().filter(|&&n| n > 1).count();
    let retried = sent.iter().filter(|s| s.tries > 1).count();
    // Cell b's books agree: every acknowledged delivery is `delivered` there (the last status
    // writes may trail the receipts by a moment).
    let delivered_b = std::sync::atomic::AtomicI64::new(0);
    breakwater_e2e::eventually_every(
        Duration::from_secs(30),
        Duration::from_millis(100),
        || async {
            let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM deliveries WHERE tenant_id = $1::uuid AND status = 'delivered'",
        )
        .bind(&tenant)
        .fetch_one(&cells.b.db)
        .await
        .unwrap();
            delivered_b.store(n, std::sync::atomic::Ordering::Relaxed);
            n as usize >= sent.len()
        },
    )
    .await;
    let delivered_b = delivered_b.into_inner();
    let held_tries = sent.iter().map(|s| s.tries - 1).sum::<u32>();
    eprintln!(
        "cells: move of a tenant from cell a to cell b under {}/s: {} acknowledged ({retried} \
         after a retry, {held_tries} retries in all), move.sh {:.1} s, longest gap between \
         acknowledgements {:.2} s; lost {lost}; duplicates {duplicates}; {delivered_b} \
         delivered on cell b's books",
        MOVE_STREAMS as u128 * 1000 / MOVE_STREAM_GAP.as_millis(),
        sent.len(),
        took.as_secs_f64(),
        hold.as_secs_f64()
    );
    assert!(
        arrived && lost == 0,
        "lost {lost} of {} acknowledged deliveries",
        sent.len()
    );
    // In flight at the pause at most: a channel's concurrency (8 here).
    assert!(
        duplicates <= 8,
        "{duplicates} deliveries arrived more than once"
    );
}
