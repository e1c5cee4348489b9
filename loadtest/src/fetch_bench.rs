//! The fetch micro-benchmark: `breakwater_queue::fetch` (+ `complete`) of one queue with no
//! parked jobs, then with 100 000 parked jobs of the same queue, in the same run and database.
//!
//! Phases, in order, each on `iterations` fresh available jobs (plus a warm-up):
//! 1. `none`: no parked jobs.
//! 2. `parked`: 100 000 jobs of one group enqueued to the same queue and parked with
//!    `park_group` (the circuit breaker's path: available → scheduled, priority 3), measured at
//!    once, as the workers would meet them right after a breaker opened.
//! 3. `parked_vacuumed`: the same after `VACUUM jobs` (what autovacuum would do).
//! 4. `none_again`: the parked jobs deleted and vacuumed (a control for drift).
//! 5. `excluded_available`: as many jobs, not parked but available, of one group that the
//!    fetch excludes (`fetch_excluding`, as the runner does for a channel at its per-node cap):
//!    not the goal, but the cost a capped, not-yet-parked backlog puts on every fetch.
//!
//! Each phase records its first fetch alone (right after parking it pays for walking the dead
//! index entries the park left behind) and, after the measured fetches, `EXPLAIN (ANALYZE,
//! BUFFERS)` of the fetch's inner SELECT (rolled back), to show where the time goes.
//!
//! The goal ratio compares `parked` with the faster of `none` and `none_again`, so drift
//! between phases cannot flatter it.

use crate::db::Database;
use crate::{machine, write_json};
use breakwater_queue::{complete, enqueue_many, fetch_excluding, park_group, NewJob};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use sqlx::{Acquire, PgPool};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use uuid::Uuid;

const QUEUE: &str = "bench";
const NODE: &str = "fetch-bench";

/// Options of the benchmark.
#[derive(Debug, Clone)]
pub struct Options {
    /// Parked jobs in the loaded phases.
    pub parked: u64,
    /// Measured fetches per phase.
    pub iterations: u64,
    /// Jobs per fetch (`limit`).
    pub limit: i64,
    /// Postgres server; `None`: a throwaway Postgres.
    pub database_url: Option<String>,
    /// Where to write `result.json`.
    pub out: Option<PathBuf>,
    /// Print the summary.
    pub print: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            parked: 100_000,
            iterations: 2_000,
            limit: 1,
            database_url: None,
            out: None,
            print: true,
        }
    }
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

fn us_summary(h: &Histogram<u64>) -> Value {
    json!({
        "count": h.len(),
        "p50_us": h.value_at_quantile(0.5),
        "p95_us": h.value_at_quantile(0.95),
        "p99_us": h.value_at_quantile(0.99),
        "max_us": h.max(),
        "mean_us": h.mean().round(),
    })
}

async fn add_available(pool: &PgPool, n: u64) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await?;
    let mut left = n;
    while left > 0 {
        let k = left.min(5_000);
        let jobs: Vec<NewJob> = (0..k)
            .map(|_| NewJob::new(QUEUE, "bench", json!({})))
            .collect();
        enqueue_many(&mut conn, &jobs).await?;
        left -= k;
    }
    Ok(())
}

async fn explain(pool: &PgPool, limit: i64, exclude: &[Uuid]) -> anyhow::Result<Value> {
    let mut conn = pool.acquire().await?;
    let mut tx = conn.begin().await?;
    let plan: (Value,) = sqlx::query_as(
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
         SELECT id FROM jobs WHERE state = 'available' AND queue = $1
           AND (group_id IS NULL OR group_id <> ALL($3))
         ORDER BY priority, scheduled_at, id LIMIT $2 FOR UPDATE SKIP LOCKED",
    )
    .bind(QUEUE)
    .bind(limit)
    .bind(exclude)
    .fetch_one(&mut *tx)
    .await?;
    tx.rollback().await?;
    let top = &plan.0[0];
    let mut node = &top["Plan"];
    // Walk down to the index scan (LockRows → Limit → Index Scan).
    while node["Node Type"] != "Index Scan" && node["Plans"][0].is_object() {
        node = &node["Plans"][0];
    }
    Ok(json!({
        "execution_ms": top["Execution Time"],
        "scan": node["Node Type"],
        "index": node["Index Name"],
        "shared_hit_blocks": top["Plan"]["Shared Hit Blocks"],
        "shared_read_blocks": top["Plan"]["Shared Read Blocks"],
    }))
}

/// Measures one phase: adds `iterations + warm-up` available jobs, then fetches and completes
/// them one fetch at a time (skipping the jobs of the groups in `exclude`, as the runner does
/// for channels at their per-node cap).
async fn phase(pool: &PgPool, o: &Options, name: &str, exclude: &[Uuid]) -> anyhow::Result<Value> {
    let warmup = 200u64;
    // A few more than are fetched, so the closing EXPLAIN finds a job where the fetch would.
    add_available(pool, (o.iterations + warmup) * o.limit as u64 + 10).await?;
    let (mut f, mut fc) = (hist(), hist());
    let started = Instant::now();
    let mut first_fetch_us = None;
    for i in 0..(o.iterations + warmup) {
        let t = Instant::now();
        let jobs = fetch_excluding(pool, QUEUE, NODE, o.limit, exclude).await?;
        let fetched = t.elapsed();
        anyhow::ensure!(!jobs.is_empty(), "{name}: the queue ran dry");
        for j in &jobs {
            complete(pool, j.id, j.claim_token).await?;
        }
        let both = t.elapsed();
        if i == 0 {
            first_fetch_us = Some(fetched.as_micros() as u64);
        }
        if i >= warmup {
            f.saturating_record((fetched.as_micros() as u64).max(1));
            fc.saturating_record((both.as_micros() as u64).max(1));
        }
    }
    let elapsed = started.elapsed();
    let explain_steady = explain(pool, o.limit, exclude).await?;
    Ok(json!({
        "phase": name,
        "fetch": us_summary(&f),
        "fetch_complete": us_summary(&fc),
        "first_fetch_us": first_fetch_us,
        "elapsed_ms": elapsed.as_millis() as u64,
        "explain_after": explain_steady,
    }))
}

fn ratio(a: &Value, b: &Value, what: &str, stat: &str) -> Value {
    let x = a[what][stat].as_f64().unwrap_or(0.0);
    let y = b[what][stat].as_f64().unwrap_or(0.0);
    if y > 0.0 {
        json!((x / y * 100.0).round() / 100.0)
    } else {
        Value::Null
    }
}

/// Runs the benchmark and returns its report.
pub async fn run(o: &Options) -> anyhow::Result<Value> {
    anyhow::ensure!(
        o.iterations > 0 && o.limit > 0,
        "iterations and limit must be positive"
    );
    let machine = machine::describe();
    let db = Database::create(o.database_url.as_deref()).await?;
    let r = with_db(o, &db).await;
    let cleaned = db.cleanup().await;
    let mut report = r?;
    cleaned?;
    report["machine"] = machine;
    report["machine"]["load_avg_end"] = json!(machine::load_avg());
    report["git_commit"] = report["machine"]["git_commit"].clone();
    report["cores"] = report["machine"]["cores"].clone();
    if let Some(dir) = &o.out {
        write_json(dir, "result.json", &report)?;
    }
    if o.print {
        println!(
            "fetch micro-benchmark: limit {}, {} fetches per phase",
            o.limit, o.iterations
        );
        for p in report["phases"].as_array().into_iter().flatten() {
            println!(
                "  {:<16} fetch p50 {:>6} µs p95 {:>6} µs mean {:>6} µs | fetch+complete p50 {:>6} µs | first fetch {:>7} µs | plan: {} blocks",
                p["phase"].as_str().unwrap_or("?"),
                p["fetch"]["p50_us"], p["fetch"]["p95_us"], p["fetch"]["mean_us"],
                p["fetch_complete"]["p50_us"], p["first_fetch_us"],
                p["explain_after"]["shared_hit_blocks"],
            );
        }
        println!("  ratios: {}", report["ratios"]);
        println!("  goal (parked ≤ 1.2 × none): {}", report["goals"]);
    }
    Ok(report)
}

async fn with_db(o: &Options, db: &Database) -> anyhow::Result<Value> {
    let pool = db.pool(2).await?;
    let r = async {
        breakwater_core::MIGRATOR.run(&pool).await?;
        let none = phase(&pool, o, "none", &[]).await?;

        let group = Uuid::new_v4();
        let t = Instant::now();
        {
            let mut conn = pool.acquire().await?;
            let mut left = o.parked;
            while left > 0 {
                let k = left.min(5_000);
                let jobs: Vec<NewJob> = (0..k)
                    .map(|_| NewJob::new(QUEUE, "bench", json!({"parked": true})).group(group))
                    .collect();
                enqueue_many(&mut conn, &jobs).await?;
                left -= k;
            }
        }
        let insert_ms = t.elapsed().as_millis() as u64;
        let t = Instant::now();
        let parked_n = {
            let mut conn = pool.acquire().await?;
            park_group(
                &mut conn,
                group,
                Duration::from_secs(600),
                Duration::from_secs(60),
            )
            .await?
        };
        let park_ms = t.elapsed().as_millis() as u64;
        let parked = phase(&pool, o, "parked", &[]).await?;

        sqlx::query("VACUUM jobs").execute(&pool).await?;
        let parked_vacuumed = phase(&pool, o, "parked_vacuumed", &[]).await?;

        sqlx::query("DELETE FROM jobs WHERE group_id = $1")
            .bind(group)
            .execute(&pool)
            .await?;
        sqlx::query("VACUUM jobs").execute(&pool).await?;
        let none_again = phase(&pool, o, "none_again", &[]).await?;

        // Not parked but excluded: the same number of jobs, available, of one group that the
        // fetch skips (a channel at its per-node cap whose backlog is not parked yet).
        let capped = Uuid::new_v4();
        {
            let mut conn = pool.acquire().await?;
            let mut left = o.parked;
            while left > 0 {
                let k = left.min(5_000);
                let jobs: Vec<NewJob> = (0..k)
                    .map(|_| NewJob::new(QUEUE, "bench", json!({"capped": true})).group(capped))
                    .collect();
                enqueue_many(&mut conn, &jobs).await?;
                left -= k;
            }
        }
        let excluded = phase(&pool, o, "excluded_available", &[capped]).await?;

        let best_none = if none_again["fetch"]["p50_us"].as_u64() < none["fetch"]["p50_us"].as_u64() {
            &none_again
        } else {
            &none
        };
        let r_fetch = ratio(&parked, best_none, "fetch", "p50_us");
        let goal = r_fetch.as_f64().is_some_and(|r| r <= 1.2);
        let postgres = machine::postgres(&pool).await;
        anyhow::Ok(json!({
            "scenario": "fetch_bench",
            "parked": o.parked,
            "parked_by_park_group": parked_n,
            "parked_insert_ms": insert_ms,
            "park_group_ms": park_ms,
            "iterations": o.iterations,
            "limit": o.limit,
            "phases": [none, parked, parked_vacuumed, none_again, excluded],
            "ratios": {
                "fetch_p50_parked_over_best_none": r_fetch,
                "fetch_p50_parked_over_none": ratio(&parked, &none, "fetch", "p50_us"),
                "fetch_mean_parked_over_best_none": ratio(&parked, best_none, "fetch", "mean_us"),
                "fetch_complete_p50_parked_over_best_none": ratio(&parked, best_none, "fetch_complete", "p50_us"),
                "fetch_p50_parked_vacuumed_over_best_none": ratio(&parked_vacuumed, best_none, "fetch", "p50_us"),
                "fetch_p50_none_again_over_none": ratio(&none_again, &none, "fetch", "p50_us"),
                "fetch_p50_excluded_available_over_best_none": ratio(&excluded, best_none, "fetch", "p50_us"),
            },
            "goals": { "fetch_parked_within_1_2x": goal },
            "postgres": postgres,
            "database": db.label,
        }))
    }
    .await;
    pool.close().await;
    r
}
