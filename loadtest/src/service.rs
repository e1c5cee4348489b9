//! Running the service: K nodes on one database, in this process.
//!
//! Node 0 runs the API and the workers (`serve --role all`); nodes 1..K run workers only
//! (`serve --role worker`). Each node has its own thread, its own multi-threaded Tokio runtime
//! (threads named `bw-node<i>`) and its own connection pool of `database.max_connections`, so
//! nodes share nothing but Postgres, as separate processes would.

use crate::db::Database;
use anyhow::Context;
use breakwater::config::{Secret, Settings};
use breakwater::Role;
use breakwater_core::Tier;
use sqlx::postgres::PgPoolOptions;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The service a scenario runs: how many nodes, the tier of its tenants, and its configuration.
#[derive(Debug, Clone, clap::Args)]
pub struct ServiceOptions {
    /// Service nodes on the one database: node 0 runs the API and workers, the others workers
    /// only (each with its own runtime thread pool and connection pool).
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Tier of the tenants: high | default | bulk.
    #[arg(long, default_value = "default")]
    pub tier: String,
    /// Service configuration file, merged over the defaults (then `BREAKWATER_*` from the
    /// environment), as for `breakwater serve`.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        Self {
            nodes: 1,
            tier: "default".into(),
            config: None,
        }
    }
}

impl ServiceOptions {
    /// `tier` parsed; an unknown one is an error naming `--tier`.
    pub fn parse_tier(&self) -> anyhow::Result<Tier> {
        Tier::from_str(&self.tier).map_err(|e| anyhow::anyhow!("--tier: {e}"))
    }

    /// The run's [`settings`] from `config`.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        settings(self.config.as_deref())
    }
}

/// The service's settings for a run: the embedded defaults, then `config` (a file), then the
/// `BREAKWATER_*` environment — exactly as `breakwater serve` loads them — with the API on an
/// ephemeral loopback port, loopback targets allowed, a fresh operator key, and the tenant
/// quotas out of the way (below; unless `LOADTEST_KEEP_QUOTAS` is set).
pub fn settings(config: Option<&Path>) -> anyhow::Result<Settings> {
    let mut s = Settings::load(config).map_err(anyhow::Error::msg)?;
    // The runs measure the service, not its quotas: a throughput or isolation run enqueues tens
    // of thousands of deliveries per tenant within seconds (over the default 5000/s), and a
    // fairness or dead-host run may create more channels than the default 1000. So the delivery
    // quotas are off (0) and the channel quota far above any run, for every tenant of the run.
    // The ingress limit (requests, per tenant) is kept as configured. With
    // `LOADTEST_KEEP_QUOTAS=1` the quotas stay as configured too, to measure what
    // they cost (BENCHMARKS.md).
    if std::env::var_os("LOADTEST_KEEP_QUOTAS").is_none() {
        s.api.quota_deliveries_per_second = 0;
        s.api.quota_deliveries_per_day = 0;
        s.api.quota_channels = s.api.quota_channels.max(1_000_000);
    }
    s.listen = "127.0.0.1:0".parse().expect("valid address");
    s.allow_private_targets = true;
    s.operator_key = Some(Secret(format!("lt-op-{:032x}", rand::random::<u128>())));
    Ok(s)
}

/// Deliveries in flight at once per node on `tier`'s queue (`worker.pool_high`,
/// `pool_default` or `pool_bulk`).
pub fn tier_pool(settings: &Settings, tier: Tier) -> usize {
    match tier {
        Tier::High => settings.worker.pool_high,
        Tier::Default => settings.worker.pool_default,
        Tier::Bulk => settings.worker.pool_bulk,
    }
}

type NodeThread = std::thread::JoinHandle<anyhow::Result<()>>;

/// A running service.
pub struct Service {
    /// API base URL (`http://127.0.0.1:<port>`).
    pub api: String,
    /// The operator key.
    pub operator_key: String,
    /// Node ids, node 0 first.
    pub node_ids: Vec<String>,
    shutdown: CancellationToken,
    threads: Vec<NodeThread>,
}

impl Service {
    /// Applies the migrations and starts `nodes` nodes.
    pub async fn start(settings: &Settings, db: &Database, nodes: usize) -> anyhow::Result<Self> {
        anyhow::ensure!(nodes >= 1, "--nodes must be at least 1");
        let pool = db.pool(2).await?;
        breakwater::migrate(&pool).await?;
        pool.close().await;

        let shutdown = CancellationToken::new();
        let mut me = Self {
            api: String::new(),
            operator_key: settings
                .operator_key
                .as_ref()
                .map(|k| k.0.clone())
                .unwrap_or_default(),
            node_ids: Vec::new(),
            shutdown: shutdown.clone(),
            threads: Vec::new(),
        };
        for i in 0..nodes {
            let role = if i == 0 { Role::All } else { Role::Worker };
            let (tx, rx) =
                tokio::sync::oneshot::channel::<Result<(Option<SocketAddr>, String), String>>();
            let settings = settings.clone();
            let options = db.options.clone();
            let token = shutdown.clone();
            let thread = std::thread::Builder::new()
                .name(format!("bw-node{i}"))
                .spawn(move || -> anyhow::Result<()> {
                    let rt = tokio::runtime::Builder::new_multi_thread()
                        .enable_all()
                        .thread_name(format!("bw-node{i}"))
                        // Blocking threads stay for the run (the default lets one go after
                        // 10 s idle), so that the CPU of the node's threads read from /proc
                        // (crate::cpu) does not lose an exited thread's share.
                        .thread_keep_alive(Duration::from_secs(24 * 3600))
                        .build()?;
                    rt.block_on(async move {
                        let started = async {
                            let pool = PgPoolOptions::new()
                                .max_connections(settings.database.max_connections)
                                .acquire_timeout(Duration::from_secs(10))
                                .connect_with(options)
                                .await
                                .context("connecting a node's pool")?;
                            let node = breakwater::start_node(&settings, pool.clone(), role, token)
                                .await?;
                            anyhow::Ok((node, pool))
                        }
                        .await;
                        match started {
                            Ok((node, pool)) => {
                                let _ = tx.send(Ok((node.api_addr, node.node_id.clone())));
                                let r = node.wait().await;
                                pool.close().await;
                                r
                            }
                            Err(e) => {
                                let _ = tx.send(Err(format!("{e:#}")));
                                Err(e)
                            }
                        }
                    })
                })?;
            me.threads.push(thread);
            let started = rx.await.context("a node thread died while starting")?;
            let (addr, node_id) = match started {
                Ok(v) => v,
                Err(e) => {
                    me.stop().await.ok();
                    anyhow::bail!("node {i} did not start: {e}");
                }
            };
            if let Some(addr) = addr {
                me.api = format!("http://{addr}");
            }
            me.node_ids.push(node_id);
        }
        Ok(me)
    }

    /// Stops every node (graceful: in-flight deliveries get `worker.shutdown_grace_ms`) and
    /// waits for them, at most 60 s per node.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let mut first_err = None;
        for t in self.threads {
            let joined = tokio::time::timeout(
                Duration::from_secs(60),
                tokio::task::spawn_blocking(move || t.join()),
            )
            .await;
            match joined {
                Ok(Ok(Ok(Ok(())))) => {}
                Ok(Ok(Ok(Err(e)))) => {
                    first_err.get_or_insert(e);
                }
                Ok(Ok(Err(_))) | Ok(Err(_)) => {
                    first_err.get_or_insert(anyhow::anyhow!("a node thread panicked"));
                }
                Err(_) => {
                    first_err.get_or_insert(anyhow::anyhow!("a node did not stop within 60 s"));
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}
