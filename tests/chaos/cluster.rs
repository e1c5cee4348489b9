//! The chaos harness: a Postgres cluster of the test's own ([`TempPostgres`], so stopping it
//! touches nothing else, or the Patroni cluster of `deploy/ha/` for [`crate::ha`]), real
//! `breakwater serve` processes on it, a receiver on loopback, and the API calls and database
//! snapshots a scenario needs.
//!
//! A [`Cluster`] stops everything it started when it is dropped, on a panic too: nodes get
//! SIGKILL (a frozen one as well), the receiver stops, the database is shut down and deleted.
//! On a panic it first prints the tail of every node's log (the logs stay under
//! `<target>/test-artifacts/chaos/<scenario>/`).

use breakwater::receiver::{Behavior, Received, Receiver};
use breakwater::throwaway::TempPostgres;
use breakwater_e2e::{eventually_every, wait_until};
use serde_json::{json, Value};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The operator key of every node.
pub const OPERATOR_KEY: &str = "chaos-operator-key-0123456789";

/// How long a node may take from spawn to serving (API answering, worker heartbeating).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Settings of every node, as `breakwater` reads them from the environment. Chosen so each
/// scenario runs in seconds: heartbeats every 200 ms and rescue after 2 s of silence; each
/// channel's concurrency fixed at 8 (initial = ceiling, a latency tolerance no slowdown
/// reaches), so the number of jobs in flight is known; attempts enough (25, backoff 100 ms
/// doubling to 1 s) that no delivery dies while a fault lasts; circuits that cool down in
/// 0.5–1 s; no health check and no ingress limit to get in the way.
const BASE_ENV: &[(&str, &str)] = &[
    ("BREAKWATER_OPERATOR_KEY", OPERATOR_KEY),
    ("BREAKWATER_ALLOW_PRIVATE_TARGETS", "true"),
    ("BREAKWATER_LOG_FORMAT", "text"),
    ("RUST_LOG", "info"),
    ("BREAKWATER_DATABASE__MAX_CONNECTIONS", "10"),
    ("BREAKWATER_API__INGRESS_PER_SECOND", "0"),
    ("BREAKWATER_WORKER__POOL_DEFAULT", "64"),
    ("BREAKWATER_WORKER__POLL_INTERVAL_MS", "200"),
    ("BREAKWATER_WORKER__HEARTBEAT_INTERVAL_MS", "200"),
    ("BREAKWATER_WORKER__RESCUE_AFTER_MS", "2000"),
    ("BREAKWATER_WORKER__RESCUE_INTERVAL_MS", "200"),
    ("BREAKWATER_WORKER__CONNECT_TIMEOUT_MS", "1000"),
    ("BREAKWATER_WORKER__REQUEST_TIMEOUT_MS", "3000"),
    ("BREAKWATER_WORKER__SHUTDOWN_GRACE_MS", "2000"),
    ("BREAKWATER_WORKER__MAX_ATTEMPTS", "25"),
    ("BREAKWATER_WORKER__BACKOFF_BASE_MS", "100"),
    ("BREAKWATER_WORKER__BACKOFF_FACTOR", "2.0"),
    ("BREAKWATER_WORKER__BACKOFF_CAP_MS", "1000"),
    ("BREAKWATER_WORKER__BACKOFF_JITTER", "0.0"),
    ("BREAKWATER_WORKER__CHANNEL_CONCURRENCY_INITIAL", "8"),
    ("BREAKWATER_WORKER__CHANNEL_CONCURRENCY_CEILING", "8"),
    ("BREAKWATER_WORKER__CHANNEL_LATENCY_TOLERANCE", "1000"),
    ("BREAKWATER_CIRCUIT__COOLDOWN_MS", "500"),
    ("BREAKWATER_CIRCUIT__MAX_COOLDOWN_MS", "1000"),
    ("BREAKWATER_CIRCUIT__PROBE_LEASE_MS", "8000"),
    ("BREAKWATER_CIRCUIT__HEALTH_CHECK_INTERVAL_MS", "3600000"),
];

/// What a node process runs (`breakwater serve --role …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The API only.
    Api,
    /// The workers only.
    Worker,
    /// Both, as one process.
    All,
}

impl Role {
    fn arg(self) -> &'static str {
        match self {
            Role::Api => "api",
            Role::Worker => "worker",
            Role::All => "all",
        }
    }

    fn api(self) -> bool {
        matches!(self, Role::Api | Role::All)
    }

    fn worker(self) -> bool {
        matches!(self, Role::Worker | Role::All)
    }
}

/// `target/<profile>`: the test executable is `target/<profile>/deps/chaos-<hash>`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps")
        .to_path_buf()
}

fn modified(p: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// The `breakwater` binary next to this test executable (`target/<profile>/breakwater`, built
/// by `cargo nextest run --workspace`). When it is missing, or older than this test executable
/// (so perhaps built from older sources), `cargo build -p breakwater --bin breakwater` runs
/// once per test process, into the same target directory and profile.
pub fn breakwater_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = profile_dir();
        let bin = dir.join("breakwater");
        let exe = std::env::current_exe().expect("the test executable's path");
        let stale = match (modified(&bin), modified(&exe)) {
            (Some(b), Some(e)) => b < e,
            _ => true,
        };
        if stale {
            let target = dir.parent().expect("target/<profile> has a parent");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-p", "breakwater", "--bin", "breakwater"])
                .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
                .env("CARGO_TARGET_DIR", target);
            match dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") => {}
                Some("release") => {
                    cmd.arg("--release");
                }
                Some(profile) => {
                    cmd.args(["--profile", profile]);
                }
                None => {}
            }
            eprintln!("chaos: building the breakwater binary: {cmd:?}");
            let ok = cmd.status().expect("running cargo build").success();
            assert!(ok, "cargo build -p breakwater --bin breakwater failed");
        }
        assert!(bin.exists(), "no breakwater binary at {}", bin.display());
        bin
    })
}

/// `<target>/test-artifacts/chaos/<name>`, emptied.
pub fn artifact_dir(name: &str) -> PathBuf {
    let artifacts = profile_dir()
        .parent()
        .expect("target dir")
        .join("test-artifacts/chaos")
        .join(name);
    let _ = std::fs::remove_dir_all(&artifacts);
    std::fs::create_dir_all(&artifacts).expect("creating the artifact directory");
    artifacts
}

/// A free loopback port (bound and released; another process could take it in between, which
/// the node's start-up would report).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// One `breakwater serve` process.
pub struct Node {
    /// `node-<n>-<role>`, also the name of its log file.
    pub name: String,
    /// What it runs.
    pub role: Role,
    /// API base URL (`http://127.0.0.1:<port>`), for an API node.
    pub api: Option<String>,
    /// Its worker node id (`<host>-<pid>-<hex>`, as in `jobs.attempted_by`), for a worker
    /// node, read from `queue_nodes` once it heartbeats.
    pub node_id: Option<String>,
    /// Its stdout and stderr.
    pub log: PathBuf,
    child: Child,
    /// Whether it exited (and was reaped).
    exited: Option<ExitStatus>,
}

impl Node {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The worker node id; panics for an API node.
    pub fn id(&self) -> &str {
        self.node_id
            .as_deref()
            .expect("a worker node has a node id")
    }

    /// Sends `signal` (a `kill` name: `STOP`, `CONT`, `TERM`).
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("running kill")
            .success();
        assert!(ok, "kill -{signal} {} ({}) failed", self.pid(), self.name);
    }

    /// SIGKILL, and reap it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        self.exited = self.child.wait().ok();
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited.is_none()
    }

    /// Waits up to `timeout` for it to exit; its exit status, or `None` if it still runs.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        eventually_every(timeout, Duration::from_millis(20), || {
            let exited = !self.running();
            async move { exited }
        })
        .await;
        self.exited
    }

    /// Asserts that it still runs after `fault` (e.g. "the outage"), with its log's tail if not.
    pub fn assert_survived(&mut self, fault: &str) {
        assert!(
            self.running(),
            "{} died in {fault}:\n{}",
            self.name,
            self.tail(40)
        );
    }

    /// The last `n` lines of its log.
    pub fn tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// The deliveries whose jobs are `executing` now in `db`, on `node_id` or (None) on any node.
async fn executing(db: &PgPool, node_id: Option<&str>) -> BTreeSet<Uuid> {
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT args->>'delivery_id' FROM jobs
         WHERE state = 'executing' AND kind = 'deliver'
           AND ($1::text IS NULL OR attempted_by = $1)",
    )
    .bind(node_id)
    .fetch_all(db)
    .await
    .expect("reading executing jobs");
    ids.iter()
        .map(|s| s.parse().expect("a delivery id"))
        .collect()
}

/// A watch of what a node holds ([`Cluster::watch_holding`]).
pub struct Holding {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<BTreeSet<Uuid>>,
}

impl Holding {
    /// Ends the watch; every delivery the node was seen holding.
    pub async fn stop(self) -> BTreeSet<Uuid> {
        self.stop.cancel();
        self.task.await.expect("the holding watch")
    }
}

/// Everything one scenario runs: its database, its nodes, its receiver.
pub struct Cluster {
    /// The scenario's name (its artifact directory).
    pub name: &'static str,
    /// The nodes, in start order; [`Cluster::node`] by index.
    nodes: Vec<Node>,
    /// The throwaway Postgres ([`Cluster::pg`]), when the cluster runs on one.
    temp: Option<TempPostgres>,
    /// The database every node uses (`postgres://…`).
    pub url: String,
    /// A pool on it, for snapshots and checks (reconnects after an outage).
    pub db: PgPool,
    /// The receiver every channel points at.
    pub receiver: Receiver,
    /// HTTP client for the API.
    pub http: reqwest::Client,
    /// Per-scenario settings, over [`BASE_ENV`], for every node.
    env: Vec<(String, String)>,
    /// Where nodes spawned from now on reach the database, if not directly
    /// ([`Cluster::route_through`]).
    node_db: Option<String>,
    artifacts: PathBuf,
    /// When the cluster started.
    pub started: Instant,
}

impl Cluster {
    /// Starts a throwaway Postgres with the schema applied and a receiver; `env` adds to or
    /// overrides [`BASE_ENV`] for every node this cluster starts.
    pub async fn start(name: &'static str, env: &[(&str, &str)]) -> Self {
        let started = Instant::now();
        let artifacts = artifact_dir(name);
        let pg = TempPostgres::start().await.expect("a throwaway postgres");
        let url = pg.url.clone();
        Self::on(name, url, Some(pg), env, started, artifacts).await
    }

    /// [`Cluster::start`] on the database at `url` (e.g. the HA cluster's HAProxy), which the
    /// caller started and stops; the schema is applied to it.
    pub async fn start_on(name: &'static str, url: &str, env: &[(&str, &str)]) -> Self {
        let (started, artifacts) = (Instant::now(), artifact_dir(name));
        Self::on(name, url.to_string(), None, env, started, artifacts).await
    }

    async fn on(
        name: &'static str,
        url: String,
        temp: Option<TempPostgres>,
        env: &[(&str, &str)],
        started: Instant,
        artifacts: PathBuf,
    ) -> Self {
        let bin = breakwater_bin();
        let db = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(10))
            .connect(&url)
            .await
            .expect("connecting to the scenario's postgres");
        breakwater::migrate(&db).await.expect("migrations");
        eprintln!(
            "chaos[{name}]: binary {}, postgres {url}, logs {}",
            bin.display(),
            artifacts.display()
        );
        Self {
            name,
            nodes: Vec::new(),
            temp,
            url,
            db,
            receiver: Receiver::start().await.expect("a receiver"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .expect("an HTTP client"),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            node_db: None,
            artifacts,
            started,
        }
    }

    /// Spawns `breakwater serve --role <role> --no-migrate` on its own port and log file, and
    /// waits until it serves; returns its index.
    pub async fn spawn(&mut self, role: Role) -> usize {
        let index = self.nodes.len();
        let name = format!("node-{}-{}", index + 1, role.arg());
        let log = self.artifacts.join(format!("{name}.log"));
        let out = File::create(&log).expect("creating a node log");
        let err = out.try_clone().expect("cloning a log handle");
        let port = free_port();
        let mut cmd = Command::new(breakwater_bin());
        cmd.args(["serve", "--role", role.arg(), "--no-migrate"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // Nothing from the test's own environment configures the node (nor NO_COLOR: a log
        // redirected to a file must be plain text without it).
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("BREAKWATER_") {
                cmd.env_remove(k);
            }
        }
        cmd.env_remove("NO_COLOR");
        // Its connections carry its name (`pg_stat_activity.application_name`), so that what it
        // still runs on the database can be seen ([`Cluster::wait_disconnected`],
        // [`Cluster::frozen_holding`]).
        let db_url = self.node_db.as_deref().unwrap_or(&self.url);
        cmd.env("DATABASE_URL", format!("{db_url}?application_name={name}"))
            .env("BREAKWATER_LISTEN", format!("127.0.0.1:{port}"));
        for (k, v) in BASE_ENV {
            cmd.env(k, v);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawning breakwater");
        self.nodes.push(Node {
            name,
            role,
            api: role.api().then(|| format!("http://127.0.0.1:{port}")),
            node_id: None,
            log,
            child,
            exited: None,
        });
        self.wait_serving(index).await;
        if role.worker() {
            // It heartbeats, so it is connected: the waits on its sessions rest on their name.
            assert!(
                self.sessions(index, false).await > 0,
                "no connection of {} carries its name",
                self.nodes[index].name
            );
        }
        index
    }

    /// Waits until node `i` serves: its API answers `/healthz`, and its worker heartbeats (then
    /// its node id is read from `queue_nodes`: ids are `<host>-<pid>-<hex>`).
    async fn wait_serving(&mut self, i: usize) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let node = &mut self.nodes[i];
            assert!(
                node.running(),
                "{} exited at start ({:?}):\n{}",
                node.name,
                node.exited,
                node.tail(40)
            );
            let pid = node.pid();
            let role = node.role;
            let api_ready = match node.api.as_deref() {
                Some(api) => self
                    .http
                    .get(format!("{api}/healthz"))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success()),
                None => true,
            };
            let ready = api_ready
                && (!role.worker() || {
                    let id: Option<String> = sqlx::query_scalar(
                        "SELECT id FROM queue_nodes WHERE id ~ ('-' || $1 || '-[0-9a-f]{8}$')",
                    )
                    .bind(pid.to_string())
                    .fetch_optional(&self.db)
                    .await
                    .expect("reading queue_nodes");
                    let found = id.is_some();
                    self.nodes[i].node_id = id;
                    found
                });
            if ready {
                return;
            }
            let node = &self.nodes[i];
            assert!(
                Instant::now() < deadline,
                "{} did not serve within {START_TIMEOUT:?}:\n{}",
                node.name,
                node.tail(40)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The database server's `host:port` (what a proxy in front of it forwards to).
    pub fn pg_addr(&self) -> String {
        breakwater_e2e::proxy::Proxy::upstream_of(&self.db)
    }

    /// Nodes spawned from now on reach the database through a proxy on loopback port `port`
    /// (in front of [`Cluster::pg_addr`]); the cluster's own checks still go directly.
    pub fn route_through(&mut self, port: u16) {
        let direct = format!(":{}/", self.db.connect_options().get_port());
        assert!(self.url.contains(&direct), "{} names its port", self.url);
        self.node_db = Some(self.url.replace(&direct, &format!(":{port}/")));
    }

    /// The throwaway Postgres; panics for a cluster started on another database
    /// ([`Cluster::start_on`]).
    pub fn pg(&mut self) -> &mut TempPostgres {
        self.temp
            .as_mut()
            .expect("the scenario runs on a throwaway postgres")
    }

    /// Node `i`.
    pub fn node(&mut self, i: usize) -> &mut Node {
        &mut self.nodes[i]
    }

    /// An API node and two worker nodes (the first of them the victim of the scenario's fault),
    /// a tenant with `per_channel` deliveries to each of `endpoints` (a channel each, answered
    /// in 200 ms), running until 150 requests have arrived and the victim holds at least 4 jobs
    /// (both workers are busy, so it always holds work). Returns the victim's index and node id
    /// and the accepted delivery ids.
    pub async fn two_busy_workers(
        &mut self,
        endpoints: &[&str],
        per_channel: usize,
    ) -> (usize, String, Vec<Uuid>) {
        self.spawn(Role::Api).await;
        let victim = self.spawn(Role::Worker).await;
        self.spawn(Role::Worker).await;
        let ids = self
            .load(
                endpoints,
                Behavior::Delay(Duration::from_millis(200), 200),
                per_channel,
            )
            .await;
        self.wait_received(endpoints, 150, Duration::from_secs(20))
            .await;
        let victim_id = self.node(victim).id().to_string();
        self.wait_holding(&victim_id, 4, Duration::from_secs(10))
            .await;
        (victim, victim_id, ids)
    }

    /// How many connections node `i` has on the database (`pg_stat_activity`, by the
    /// application name its connections carry); with `running`, only those running a statement
    /// that does not wait for a lock.
    async fn sessions(&self, i: usize, running: bool) -> i64 {
        sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = $1
               AND (NOT $2 OR (state = 'active' AND wait_event_type IS DISTINCT FROM 'Lock'))",
        )
        .bind(&self.nodes[i].name)
        .bind(running)
        .fetch_one(&self.db)
        .await
        .expect("reading pg_stat_activity")
    }

    /// Waits until killed node `i` has no connection left on the database: the server ends a
    /// dead client's session once the statement it runs is done (rolling back a transaction left
    /// open), so from then on nothing the node sent can change a row. Panics after `timeout`.
    pub async fn wait_disconnected(&self, i: usize, timeout: Duration) {
        wait_until(
            timeout,
            &format!("{} has no connection left", self.nodes[i].name),
            || async { self.sessions(i, false).await == 0 },
        )
        .await;
    }

    /// What frozen worker node `i` (id `node_id`) holds once it stands still: none of its
    /// connections runs a statement (one waiting for a lock aside: it waits for a transaction to
    /// end, perhaps the node's own) and two reads of its delivery jobs 250 ms apart agree. One quiet read is not enough: what the node wrote just before the
    /// `SIGSTOP` (a `COMMIT` already in its socket) is in the server's hands but may not have
    /// been read yet, and lands a moment later. Panics after `timeout`.
    pub async fn frozen_holding(
        &self,
        i: usize,
        node_id: &str,
        timeout: Duration,
    ) -> BTreeSet<Uuid> {
        let last = std::sync::Mutex::new(None::<BTreeSet<Uuid>>);
        wait_until(
            timeout,
            &format!("{} stands still", self.nodes[i].name),
            || async {
                tokio::time::sleep(Duration::from_millis(250)).await;
                if self.sessions(i, true).await != 0 {
                    *last.lock().unwrap() = None;
                    return false;
                }
                let now = self.executing(Some(node_id)).await;
                let mut last = last.lock().unwrap();
                let still = last.as_ref() == Some(&now);
                *last = Some(now);
                still
            },
        )
        .await;
        last.into_inner().unwrap().expect("a read that agreed")
    }

    /// The first API node's base URL.
    pub fn api(&self) -> &str {
        self.nodes
            .iter()
            .find_map(|n| n.api.as_deref())
            .expect("the cluster runs an API node")
    }

    /// `POST {api}{path}` with `key`; status and JSON body.
    async fn post(&self, path: &str, key: &str, body: &Value) -> (u16, Value) {
        breakwater_e2e::post_json(&self.http, &format!("{}{path}", self.api()), key, body).await
    }

    /// Creates a tenant through the operator API; returns its API key.
    pub async fn tenant(&self) -> String {
        let (s, v) = self
            .post(
                "/api/v1/tenants",
                OPERATOR_KEY,
                &json!({ "name": self.name, "tier": "default" }),
            )
            .await;
        assert_eq!(s, 201, "create tenant: {v}");
        v["api_key"].as_str().expect("api_key").to_string()
    }

    /// Creates a channel to receiver endpoint `endpoint`, which answers as `behavior` and checks
    /// the channel's signatures; returns the channel id.
    pub async fn channel(&self, key: &str, endpoint: &str, behavior: Behavior) -> Uuid {
        self.channel_on(&self.receiver, key, endpoint, behavior)
            .await
    }

    /// [`Cluster::channel`] to an endpoint of `receiver` (another receiver than the cluster's
    /// is another host: another host circuit and gate).
    pub async fn channel_on(
        &self,
        receiver: &Receiver,
        key: &str,
        endpoint: &str,
        behavior: Behavior,
    ) -> Uuid {
        receiver.set(endpoint, behavior);
        let (s, v) = self
            .post(
                "/api/v1/channels",
                key,
                &json!({ "url": receiver.url(endpoint) }),
            )
            .await;
        assert_eq!(s, 201, "create channel: {v}");
        receiver.set_secret(
            endpoint,
            v["signing_secret"].as_str().expect("signing_secret"),
        );
        v["id"].as_str().expect("id").parse().expect("a uuid")
    }

    /// A tenant with `per_channel` deliveries enqueued to each of `endpoints` (a channel each,
    /// answering as `behavior`); returns the accepted delivery ids.
    pub async fn load(
        &self,
        endpoints: &[&str],
        behavior: Behavior,
        per_channel: usize,
    ) -> Vec<Uuid> {
        let key = self.tenant().await;
        let mut ids = Vec::new();
        for ep in endpoints {
            let ch = self.channel(&key, ep, behavior.clone()).await;
            ids.extend(self.enqueue(&key, ch, per_channel).await);
        }
        ids
    }

    /// Enqueues `n` deliveries to `channel` through the batch API; returns the accepted ids.
    pub async fn enqueue(&self, key: &str, channel: Uuid, n: usize) -> Vec<Uuid> {
        breakwater_e2e::enqueue_batches(&self.http, self.api(), key, channel, n, "chaos.load").await
    }

    /// Every request the receiver got, on any endpoint.
    pub fn received(&self, endpoints: &[&str]) -> Vec<Received> {
        endpoints
            .iter()
            .flat_map(|ep| self.receiver.received(ep))
            .collect()
    }

    /// Waits until the receiver has got at least `n` requests on `endpoints` together; panics
    /// after `timeout`.
    pub async fn wait_received(&self, endpoints: &[&str], n: usize, timeout: Duration) {
        let count = || {
            endpoints
                .iter()
                .map(|e| self.receiver.count(e))
                .sum::<usize>()
        };
        let arrived = eventually_every(timeout, Duration::from_millis(10), || async {
            count() >= n
        })
        .await;
        assert!(
            arrived,
            "only {} of {n} requests arrived within {timeout:?}",
            count()
        );
    }

    /// The deliveries whose jobs are `executing` now, on `node_id` or (None) on any node.
    pub async fn executing(&self, node_id: Option<&str>) -> BTreeSet<Uuid> {
        executing(&self.db, node_id).await
    }

    /// Starts noting every delivery worker node `node_id` holds (its jobs `executing`), polled
    /// every 10 ms in a task of its own until [`Holding::stop`]: what a node may claim from now
    /// on, while the scenario goes on.
    pub fn watch_holding(&self, node_id: &str) -> Holding {
        let (db, node_id) = (self.db.clone(), node_id.to_string());
        let stop = tokio_util::sync::CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let mut held = BTreeSet::new();
            while !token.is_cancelled() {
                held.extend(executing(&db, Some(&node_id)).await);
                tokio::select! {
                    _ = token.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                }
            }
            held
        });
        Holding { stop, task }
    }

    /// Waits until worker node `node_id` holds at least `min` delivery jobs (the fetch hands a
    /// node as many as it has room for, so one node may hold them all for a moment); returns
    /// them. Panics after `timeout`.
    pub async fn wait_holding(
        &self,
        node_id: &str,
        min: usize,
        timeout: Duration,
    ) -> BTreeSet<Uuid> {
        let held = std::sync::Mutex::new(BTreeSet::new());
        // Polled often: a node may hold that many only for a moment.
        let found = eventually_every(timeout, Duration::from_millis(5), || async {
            let now = self.executing(Some(node_id)).await;
            let enough = now.len() >= min;
            *held.lock().unwrap() = now;
            enough
        })
        .await;
        assert!(found, "{node_id} never held {min} jobs within {timeout:?}");
        held.into_inner().unwrap()
    }

    /// The database's clock now.
    pub async fn db_now(&self) -> chrono::DateTime<chrono::Utc> {
        sqlx::query_scalar("SELECT now()")
            .fetch_one(&self.db)
            .await
            .expect("the database's time")
    }

    /// Waits until node `node_id` has recorded a delivery attempt started after `since`
    /// (database time): it works again. Panics after `timeout`.
    pub async fn wait_attempt_since(
        &self,
        node_id: &str,
        since: chrono::DateTime<chrono::Utc>,
        timeout: Duration,
    ) {
        wait_until(
            timeout,
            &format!("{node_id} records an attempt of its own"),
            || async {
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM delivery_attempts WHERE node_id = $1 AND started_at > $2",
                )
                .bind(node_id)
                .bind(since)
                .fetch_one(&self.db)
                .await
                .expect("counting attempts")
                    > 0
            },
        )
        .await;
    }

    /// Delivery counts by status.
    pub async fn statuses(&self) -> HashMap<String, i64> {
        sqlx::query_as::<_, (String, i64)>(
            "SELECT status, count(*) FROM deliveries GROUP BY status",
        )
        .fetch_all(&self.db)
        .await
        .expect("counting deliveries")
        .into_iter()
        .collect()
    }

    /// The deliveries whose jobs were rescued (taken back from a node presumed dead, or from a
    /// run that outlived the longest a run may take), with how often: read from the jobs'
    /// error logs, where each rescue leaves an entry `rescued: …`.
    pub async fn rescued(&self) -> BTreeMap<Uuid, usize> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT j.args->>'delivery_id', count(*)
             FROM jobs j, jsonb_array_elements(j.errors) e
             WHERE j.kind = 'deliver' AND e->>'error' LIKE 'rescued:%'
             GROUP BY 1",
        )
        .fetch_all(&self.db)
        .await
        .expect("reading rescues");
        rows.into_iter()
            .map(|(id, n)| (id.parse().expect("a delivery id"), n as usize))
            .collect()
    }

    /// SIGTERM to every node still running; each must exit with status 0 within `timeout`.
    pub async fn stop_all(&mut self, timeout: Duration) {
        // Nodes the scenario killed already are not judged here.
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].running())
            .collect();
        for &i in &live {
            self.nodes[i].signal("TERM");
        }
        for &i in &live {
            let node = &mut self.nodes[i];
            let status = node.wait_exit(timeout).await;
            assert!(
                status.is_some_and(|s| s.success()),
                "{} did not stop cleanly on SIGTERM within {timeout:?} ({status:?}):\n{}",
                node.name,
                node.tail(40)
            );
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for node in &self.nodes {
                eprintln!(
                    "----- chaos[{}]: last lines of {} ({}) -----\n{}",
                    self.name,
                    node.name,
                    node.log.display(),
                    node.tail(40)
                );
            }
        }
        for node in &mut self.nodes {
            if node.running() {
                node.kill9();
            }
        }
        self.receiver.stop();
        // `pg` is dropped after this: fast shutdown, data directory deleted.
    }
}
