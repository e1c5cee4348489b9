//! Breakwater's load-test harness.
//!
//! Everything runs in one process on loopback: the service itself (K nodes, each on its own
//! thread with its own Tokio runtime and its own database pool, as separate processes would
//! have), lean receivers (a healthy one that measures latency, and a dead one), and the load
//! generator, which drives the service over its HTTP API only.
//!
//! - [`isolation`]: a dead channel of tenant A holds a backlog while tenant B's healthy channel in
//!   the same tier gets a steady stream; the same stream without the backlog is the baseline.
//!   The dead endpoint times out, refuses, answers 503, or (`slow`) answers 200 after a delay;
//!   the report gives the most requests it held at once.
//! - [`fairness`]: tenant A's backlog over many slow channels, then one delivery of tenant B in
//!   the same tier to a fast endpoint: B's latency, how many of A's went first, A's drain time
//!   and A's requests in flight at once, per endpoint and in all.
//! - [`prune`] (`isolation --prune-rows N`): the retention pruner deleting N old rows while the
//!   healthy stream runs.
//! - [`throughput`]: many deliveries to fast endpoints across many channels, deliveries/s end to
//!   end.
//! - [`fetch_bench`]: the queue's fetch (+ complete) with 0 and with 100 000 parked jobs.
//!
//! Latency is end to end: the sender writes the [`clock::now_us`] of the moment it sends the
//! enqueue request into the payload, and the receiver subtracts it from its own reading of the
//! same monotonic clock (same process).

#![recursion_limit = "256"]

pub mod api;
pub mod chart;
pub mod clock;
pub mod cpu;
pub mod db;
pub mod fairness;
pub mod fetch_bench;
pub mod isolation;
pub mod machine;
pub mod phases;
pub mod prune;
pub mod receiver;
pub mod service;
pub mod stats;
pub mod stream;
pub mod throughput;

use anyhow::Context;
use api::Api;
use breakwater::config::Settings;
use clock::now_us;
use db::Database;
use receiver::HealthyReceiver;
use serde_json::{json, Value};
use service::Service;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What every scenario is run with, whichever it is: where its database lives, where its report
/// goes, and whether it logs its progress. On the command line these are the global options
/// (before the scenario's name).
#[derive(Debug, Clone, clap::Args)]
pub struct RunOptions {
    /// Postgres server to create the run's database on (a fresh `bw_load_<random>`, dropped at
    /// the end). Unset: a throwaway Postgres is started.
    #[arg(long, global = true, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// Write `result.json` and the chart here.
    #[arg(long, global = true)]
    pub out: Option<PathBuf>,
    /// Print progress lines to stderr (always, from the command line, which also prints each
    /// scenario's human summary of its report).
    #[arg(skip = true)]
    pub print: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            database_url: None,
            out: None,
            print: true,
        }
    }
}

impl RunOptions {
    /// Prints one progress line to stderr, stamped with the harness clock (seconds), if `print`.
    pub fn log(&self, line: &str) {
        if self.print {
            eprintln!("[{:>7.1}s] {line}", now_us() as f64 / 1e6);
        }
    }
}

/// A report's `goals` (an object of booleans, `null` where a goal was not judged) in words:
/// `met: p95 under 100ms, lost zero; missed: p95 within 1.5× baseline; not judged: …`.
pub fn goals_line(goals: &Value) -> String {
    let Some(goals) = goals.as_object() else {
        return "none".into();
    };
    let words = |k: &str| -> String {
        let k = k.strip_prefix("goal_").unwrap_or(k);
        k.replace("_1_5x_", " 1.5× ").replace('_', " ")
    };
    let mut parts = Vec::new();
    for (label, want) in [
        ("met", Some(true)),
        ("missed", Some(false)),
        ("not judged", None),
    ] {
        let names: Vec<String> = goals
            .iter()
            .filter(|(_, v)| v.as_bool() == want)
            .map(|(k, _)| words(k))
            .collect();
        if !names.is_empty() {
            parts.push(format!("{label}: {}", names.join(", ")));
        }
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("; ")
    }
}

/// Writes `value` as pretty JSON to `dir/name`, creating `dir`.
pub fn write_json(dir: &Path, name: &str, value: &serde_json::Value) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    std::fs::write(dir.join(name), s)?;
    Ok(())
}

/// The outer frame of a scenario that runs the service (inside [`on_service`]): the harness
/// clock started ([`clock::epoch`]), a fresh database on `run.database_url`'s server (or a throwaway Postgres), the scenario on it,
/// the database dropped whatever happened, then the report completed with what it ran on
/// (`machine`, with the load average at the end, `postgres`, `database`, `wall_s`,
/// `git_commit`, `cores`) and written to `run.out/result.json`.
async fn on_fresh_db(
    run: &RunOptions,
    scenario: impl AsyncFnOnce(&Database) -> anyhow::Result<Value>,
) -> anyhow::Result<Value> {
    clock::epoch();
    let wall_start = Instant::now();
    let machine = machine::describe();
    let db = Database::create(run.database_url.as_deref()).await?;
    let r = match scenario(&db).await {
        Ok(mut v) => match db.pool(1).await {
            Ok(pool) => {
                v["postgres"] = machine::postgres(&pool).await;
                v["database"] = json!(db.label);
                pool.close().await;
                Ok(v)
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    let cleaned = db.cleanup().await;
    let mut report = r?;
    cleaned?;
    report["machine"] = machine;
    report["machine"]["load_avg_end"] = json!(machine::load_avg());
    report["wall_s"] = json!(wall_start.elapsed().as_secs_f64().round());
    report["git_commit"] = report["machine"]["git_commit"].clone();
    report["cores"] = report["machine"]["cores"].clone();
    if let Some(dir) = &run.out {
        write_json(dir, "result.json", &report)?;
    }
    Ok(report)
}

/// What a scenario that runs the service runs against (see [`on_service`]).
pub(crate) struct Stage<'a> {
    /// The run's database (the harness opens pools of its own on it, to read what the service
    /// wrote).
    pub db: &'a Database,
    /// A client of the service's API (node 0's), with the operator key.
    pub api: Api,
    /// A healthy receiver: endpoints that answer 200 at once and record every arrival.
    pub healthy: &'a HealthyReceiver,
}

/// The frame of a scenario that runs the service: on a fresh database ([`on_fresh_db`]), a
/// healthy receiver and `nodes` nodes of the service with `settings` are started, `scenario` runs
/// against them, and then, whatever it returned, the nodes stop (graceful, see
/// [`Service::stop`]) and after them the healthy receiver, so that deliveries still in flight
/// are answered. A receiver of the scenario's own that holds requests open (dead, slow) must be
/// stopped by `scenario` before it returns, so the nodes' graceful stop does not wait for it.
/// The scenario's error comes before the stop's.
pub(crate) async fn on_service(
    run: &RunOptions,
    nodes: usize,
    settings: &Settings,
    scenario: impl AsyncFnOnce(&Stage<'_>) -> anyhow::Result<Value>,
) -> anyhow::Result<Value> {
    on_fresh_db(run, async |db| {
        let healthy = HealthyReceiver::start().await?;
        let service = Service::start(settings, db, nodes).await?;
        let r = async {
            let api = Api::new(&service.api, &service.operator_key)?;
            scenario(&Stage {
                db,
                api,
                healthy: &healthy,
            })
            .await
        }
        .await;
        let stopped = service.stop().await;
        healthy.stop().await;
        let v = r?;
        stopped.context("stopping the service")?;
        Ok(v)
    })
    .await
}

/// Runs `task(i)` for every `i` in `0..n`, at most `concurrency` at once (each on its own Tokio
/// task), and returns the results in index order. Every task runs to the end; then the error of
/// the lowest failed index, if any, is returned.
pub(crate) async fn join_bounded<T, F, Fut>(
    n: usize,
    concurrency: usize,
    task: F,
) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        // Taken before the spawn, so at most `concurrency` tasks exist at once.
        let permit = slots.clone().acquire_owned().await?;
        let fut = task(i);
        set.spawn(async move {
            let r = fut.await;
            drop(permit);
            (i, r)
        });
    }
    let mut out: Vec<Option<anyhow::Result<T>>> = (0..n).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        let (i, r) = joined.context("a task panicked")?;
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.context("a task did not finish")?)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::goals_line;
    use serde_json::json;

    #[test]
    fn goals_are_said_in_words_grouped_by_verdict() {
        let goals = json!({
            "goal_p95_under_100ms": true,
            "goal_p95_within_1_5x_baseline": false,
            "dead_requests_within_budget": null,
            "lost_zero": true,
        });
        assert_eq!(
            goals_line(&goals),
            "met: p95 under 100ms, lost zero; missed: p95 within 1.5× baseline; \
             not judged: dead requests within budget"
        );
        assert_eq!(goals_line(&json!(null)), "none");
    }
}
