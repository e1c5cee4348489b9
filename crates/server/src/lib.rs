//! The `breakwater` binary's library: configuration, starting a node (API and/or workers), the
//! demo, a throwaway Postgres for the demo, and a signature-checking webhook receiver (used by
//! the demo and the end-to-end tests).

pub mod config;
pub mod demo;
pub mod http;
pub mod receiver;
pub mod telemetry;
pub mod throwaway;

use anyhow::Context;
use breakwater_api::{ApiConfig, AppSettings, AppState, OperatorKey};
use config::Settings;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// What a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// The HTTP API only.
    Api,
    /// The workers only.
    Worker,
    /// Both.
    All,
}

impl Role {
    fn api(self) -> bool {
        matches!(self, Role::Api | Role::All)
    }
    fn worker(self) -> bool {
        matches!(self, Role::Worker | Role::All)
    }
}

/// Opens a pool of `max_connections` to `url`.
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await
        .with_context(|| "connecting to the database (check DATABASE_URL)")
}

/// What [`migrate`] did to the database's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// How many migrations this call applied (0: the schema was already current). Counted from
    /// sqlx's bookkeeping before and after, so a node migrating at the same moment may have
    /// applied some of them (sqlx's advisory lock makes the two take turns).
    pub applied: usize,
    /// The newest migration's version (its file name's number, e.g. `20261201000000`), which
    /// the schema is now at; `None` only for a binary without migrations.
    pub version: Option<i64>,
}

/// Applies the embedded migrations, and logs (info) how many it applied and the version the
/// schema is at, or that it was already current: an operator reading a node's start-up sees
/// which schema it runs against. Errors: the database's, or a migration's.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<Migrated> {
    let before = applied_versions(pool)
        .await
        .context("reading the applied migrations")?;
    breakwater_core::MIGRATOR
        .run(pool)
        .await
        .context("applying migrations")?;
    let ups = || {
        breakwater_core::MIGRATOR
            .iter()
            .filter(|m| !m.migration_type.is_down_migration())
    };
    let done = Migrated {
        applied: ups().filter(|m| !before.contains(&m.version)).count(),
        version: ups().map(|m| m.version).max(),
    };
    if done.applied == 0 {
        tracing::info!(version = done.version, "database schema already current");
    } else {
        tracing::info!(
            applied = done.applied,
            version = done.version,
            "applied database migrations"
        );
    }
    Ok(done)
}

/// The versions sqlx has recorded as applied in `_sqlx_migrations`, its own table (none before
/// the first run creates it). Read with unchecked SQL: the table is sqlx's, not in our schema.
async fn applied_versions(pool: &PgPool) -> sqlx::Result<Vec<i64>> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await?;
    if !exists {
        return Ok(Vec::new());
    }
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
        .fetch_all(pool)
        .await
}

/// A running node.
pub struct Node {
    /// Where the API listens, when this node runs it.
    pub api_addr: Option<SocketAddr>,
    /// Where `/metrics` listens, when it has its own address (`metrics_listen`).
    pub metrics_addr: Option<SocketAddr>,
    /// This node's id (in `queue_nodes`, `jobs.attempted_by`, `delivery_attempts.node_id`).
    pub node_id: String,
    tasks: JoinSet<anyhow::Result<()>>,
}

impl Node {
    /// Waits until every part of the node has stopped (after the shutdown token fires).
    pub async fn wait(mut self) -> anyhow::Result<()> {
        let mut first_err = None;
        while let Some(r) = self.tasks.join_next().await {
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "node part failed");
                    first_err.get_or_insert(e);
                }
                Err(e) => {
                    first_err.get_or_insert(anyhow::anyhow!("node task panicked: {e}"));
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// Starts a node on `pool` with `settings`: the API on `settings.listen` (port 0 picks one)
/// and/or the workers, until `shutdown` fires. The API drains open requests on shutdown; the
/// workers stop fetching and finish or hand back in-flight jobs within the grace period.
pub async fn start_node(
    settings: &Settings,
    pool: PgPool,
    role: Role,
    shutdown: CancellationToken,
) -> anyhow::Result<Node> {
    let node_id = breakwater_worker::node_id();
    // The alert policy is cluster-wide (decided in the transactions of any node): every node
    // writes its `[alerts]` settings at start, so they all decide with the same numbers.
    breakwater_core::alerts::install_policy(&pool, &settings.alerts)
        .await
        .context("writing the [alerts] policy to the database")?;
    let mut tasks = JoinSet::new();
    let mut api_addr = None;
    let mut metrics_addr = None;
    // One API-side pool (connections open lazily): the API's handlers and /metrics' gauges.
    let api_pool = session_pool(&pool, &settings.database, Side::Api);
    let metrics = breakwater_api::Metrics::new(
        api_pool.clone(),
        settings.metrics_token.as_ref().map(|t| t.0.clone()),
    );
    if let Some(listen) = settings.metrics_listen {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding /metrics to {listen} (BREAKWATER_METRICS_LISTEN)"))?;
        metrics_addr = Some(spawn_server(
            &mut tasks,
            listener,
            metrics.app(),
            Duration::from_millis(settings.api.header_read_timeout_ms),
            shutdown.clone(),
            "metrics",
        )?);
    }
    if role.api() {
        let pool = api_pool.clone();
        let key = settings
            .operator_key
            .as_ref()
            .context("BREAKWATER_OPERATOR_KEY is not set: the API needs an operator key (at least 16 characters)")?;
        let key = OperatorKey::new(key.0.clone()).map_err(anyhow::Error::msg)?;
        let state = AppState::new(
            pool.clone(),
            AppSettings {
                operator_key: key,
                config: settings.api.clone(),
                allow_private_targets: settings.allow_private_targets,
                max_attempts: settings.worker.max_attempts,
                circuit: settings.circuit.clone(),
                channel_limits: settings.worker.channel_limits(),
                hosts: settings.hosts.clone(),
                retry: breakwater_core::retry_policy::ServiceRetry {
                    max_attempts: settings.worker.max_attempts,
                    backoff: settings.worker.backoff(),
                    request_timeout: Duration::from_millis(settings.worker.request_timeout_ms),
                },
                connect_timeout_ms: settings.worker.connect_timeout_ms,
                retention_days: settings.retention.deliveries_days,
                cell: settings.cell().map_err(anyhow::Error::msg)?,
            },
        )
        .with_metrics(settings.metrics_listen.is_none().then(|| metrics.clone()));
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .with_context(|| {
                format!("binding the API to {} (BREAKWATER_LISTEN)", settings.listen)
            })?;
        api_addr = Some(spawn_server(
            &mut tasks,
            listener,
            breakwater_api::app(state),
            Duration::from_millis(settings.api.header_read_timeout_ms),
            shutdown.clone(),
            "API",
        )?);
    }
    if settings.telemetry.otlp().is_some() {
        // OTLP pushes on its own schedule, so keep the cluster-wide gauges fresh for it (a
        // Prometheus scrape of /metrics refreshes them itself).
        let every = Duration::from_millis(settings.telemetry.otlp_metrics_interval_ms);
        let (pool, token) = (pool.clone(), shutdown.clone());
        tasks.spawn(async move {
            refresh_gauges(pool, every, token).await;
            Ok(())
        });
    }
    if role.worker() {
        for (key, queue) in settings.worker.empty_pools() {
            tracing::warn!(
                %key, %queue,
                "this node runs no worker on {queue} ({key} = 0): only other nodes serve it"
            );
        }
        let params = breakwater_worker::NodeParams {
            worker: settings.worker.clone(),
            circuit: settings.circuit.clone(),
            hosts: settings.hosts.clone(),
            node_id: node_id.clone(),
            allow_private_targets: settings.allow_private_targets,
            retention: settings.retention.clone(),
        };
        // The workers get a pool of their own, so they can never take the API's connections
        // (and the other way round), with server-side bounds on every statement and
        // transaction (DatabaseConfig).
        let worker_pool = session_pool(&pool, &settings.database, Side::Worker);
        let token = shutdown.clone();
        tasks.spawn(async move {
            breakwater_worker::run_node(worker_pool, params, token)
                .await
                .map_err(anyhow::Error::msg)
        });
    }
    Ok(Node {
        api_addr,
        metrics_addr,
        node_id,
        tasks,
    })
}

/// Serves `app` on `listener` as a task of `tasks` until `shutdown` fires (graceful: requests in
/// flight finish), giving each client `header_read_timeout` to send a request's headers
/// ([`http::serve`]), and logs "`what` listening" with the address (`what`: `"API"`,
/// `"metrics"`). Returns the bound address.
fn spawn_server(
    tasks: &mut JoinSet<anyhow::Result<()>>,
    listener: tokio::net::TcpListener,
    app: axum::Router,
    header_read_timeout: Duration,
    shutdown: CancellationToken,
    what: &'static str,
) -> anyhow::Result<SocketAddr> {
    let addr = listener.local_addr()?;
    tasks.spawn(async move {
        http::serve(listener, app, header_read_timeout, shutdown).await;
        Ok(())
    });
    tracing::info!(%addr, "{what} listening");
    Ok(addr)
}

/// Which side of a node a pool serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Api,
    Worker,
}

/// A pool of `db.max_connections` on the same database as `pool`, whose sessions carry the
/// server-side timeouts of `side` (Postgres settings sent at connect):
/// - both: `statement_timeout` (`db.statement_timeout_ms`) and
///   `idle_in_transaction_session_timeout` (`db.idle_in_transaction_timeout_ms`), so a frozen
///   worker or client cannot hold row locks for longer than that;
/// - the API: `lock_timeout` (`db.api_lock_timeout_ms`): a request never waits long for a row
///   another transaction holds; it answers 503 with `Retry-After` instead.
///
/// Connections open lazily, on first use.
fn session_pool(pool: &PgPool, db: &config::DatabaseConfig, side: Side) -> PgPool {
    let ms = |v: u64| format!("{v}ms");
    let mut params = vec![
        ("statement_timeout", ms(db.statement_timeout_ms)),
        (
            "idle_in_transaction_session_timeout",
            ms(db.idle_in_transaction_timeout_ms),
        ),
    ];
    if side == Side::Api {
        params.push(("lock_timeout", ms(db.api_lock_timeout_ms)));
    }
    let opts = (*pool.connect_options()).clone().options(params);
    PgPoolOptions::new()
        .max_connections(db.max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(opts)
}

/// Reads the cluster-wide metric gauges from the database every `every` until `shutdown`.
async fn refresh_gauges(pool: PgPool, every: Duration, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = breakwater_api::refresh_cluster_gauges(&pool).await {
            tracing::warn!(error = %e, "reading the cluster gauges for OTLP failed");
        }
    }
}

/// Settings for tests and the demo: the defaults with `listen` on an ephemeral loopback port,
/// private targets allowed, and the given operator key.
pub fn local_settings(operator_key: &str) -> Settings {
    let mut s = Settings::load(None).expect("embedded defaults are valid");
    s.listen = "127.0.0.1:0".parse().expect("valid address");
    s.allow_private_targets = true;
    s.operator_key = Some(config::Secret(operator_key.to_string()));
    s.api = ApiConfig::default();
    s
}

/// A token that fires on SIGINT or SIGTERM.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => tracing::info!("SIGINT: shutting down"),
            _ = term => tracing::info!("SIGTERM: shutting down"),
        }
        t.cancel();
    });
    token
}
