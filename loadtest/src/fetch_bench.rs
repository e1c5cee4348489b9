//! The fetch micro-benchmark: `breakwater_queue::fetch` (+ `complete`) of one queue with no
//! other backlog, then beside 100 000 jobs of one parked group, then beside 100 000 jobs of one
//! group at its concurrency cap, in the same run and database.
//!
//! Phases, in order, each on `iterations` fresh available jobs spread over 10 groups (plus a
//! warm-up):
//! 1. `none`: nothing else in the queue.
//! 2. `parked`: 100 000 jobs of one group, parked with `park_group` (the circuit breaker's path:
//!    a flag on the group's row; the jobs stay `available`), measured at once.
//! 3. `capped`: the parked jobs deleted (and `VACUUM jobs`), and 100 000 available jobs of another group whose
//!    cluster-wide cap is full (`max_in_flight = 1`, one job executing): a dead channel before
//!    its circuit opens, or a slow channel that never opens.
//! 4. `none_again`: those deleted and `VACUUM jobs` run (a control for drift).
//!
//! Each phase records `EXPLAIN (ANALYZE, BUFFERS)` of the whole fetch statement (rolled back)
//! after its measured fetches: the index entries of `jobs` it read, and its buffers.
//!
//! The goal ratios compare `parked` and `capped` with the faster of `none` and `none_again`, so
//! drift between phases cannot flatter them.

use crate::db::Database;
use crate::{machine, write_json, RunOptions};
use breakwater_queue::{
    complete, enqueue_many, explain_fetch, fetch, index_rows, park_group, GroupLimits, NewJob,
};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Instant;
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
    /// The run's database and `result.json` (the benchmark logs no progress).
    pub run: RunOptions,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            parked: 100_000,
            iterations: 2_000,
            limit: 1,
            run: RunOptions::default(),
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

async fn add_available(pool: &PgPool, groups: &[Uuid], n: u64) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await?;
    let mut left = n;
    while left > 0 {
        let k = left.min(5_000);
        let jobs: Vec<NewJob> = (0..k)
            .map(|i| {
                NewJob::new(QUEUE, "bench", json!({})).group(groups[i as usize % groups.len()])
            })
            .collect();
        enqueue_many(&mut conn, &jobs).await?;
        left -= k;
    }
    Ok(())
}

async fn explain(pool: &PgPool, limit: i64) -> anyhow::Result<Value> {
    let mut conn = pool.acquire().await?;
    let plan = explain_fetch(&mut conn, QUEUE, NODE, limit, &GroupLimits::default()).await?;
    let top = &plan[0];
    Ok(json!({
        "execution_ms": top["Execution Time"],
        "jobs_index_rows": index_rows(&plan),
        "shared_hit_blocks": top["Plan"]["Shared Hit Blocks"],
        "shared_read_blocks": top["Plan"]["Shared Read Blocks"],
    }))
}

/// Measures one phase: adds `iterations + warm-up` available jobs over `groups`, then fetches
/// and completes them one fetch at a time.
async fn phase(pool: &PgPool, o: &Options, name: &str, groups: &[Uuid]) -> anyhow::Result<Value> {
    let warmup = 200u64;
    // A few more than are fetched, so the closing EXPLAIN finds a job where the fetch would.
    add_available(pool, groups, (o.iterations + warmup) * o.limit as u64 + 10).await?;
    let (mut f, mut fc) = (hist(), hist());
    let started = Instant::now();
    let mut first_fetch_us = None;
    for i in 0..(o.iterations + warmup) {
        let t = Instant::now();
        let jobs = fetch(pool, QUEUE, NODE, o.limit, &GroupLimits::default()).await?;
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
    let explain_steady = explain(pool, o.limit).await?;
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
    let db = Database::create(o.run.database_url.as_deref()).await?;
    let r = with_db(o, &db).await;
    let cleaned = db.cleanup().await;
    let mut report = r?;
    cleaned?;
    report["machine"] = machine;
    report["machine"]["load_avg_end"] = json!(machine::load_avg());
    report["git_commit"] = report["machine"]["git_commit"].clone();
    report["cores"] = report["machine"]["cores"].clone();
    if let Some(dir) = &o.run.out {
        write_json(dir, "result.json", &report)?;
    }
    Ok(report)
}

/// Prints the human summary of a fetch-bench report (`run`'s) to stdout.
pub fn print_summary(report: &Value) {
    println!(
        "fetch micro-benchmark: limit {}, {} fetches per phase",
        report["limit"], report["iterations"]
    );
    for p in report["phases"].as_array().into_iter().flatten() {
        println!(
            "  {:<16} fetch p50 {:>6} µs p95 {:>6} µs mean {:>6} µs | fetch+complete p50 {:>6} µs | first fetch {:>7} µs | plan: {} blocks, {} index rows of jobs",
            p["phase"].as_str().unwrap_or("?"),
            p["fetch"]["p50_us"], p["fetch"]["p95_us"], p["fetch"]["mean_us"],
            p["fetch_complete"]["p50_us"], p["first_fetch_us"],
            p["explain_after"]["shared_hit_blocks"],
            p["explain_after"]["jobs_index_rows"],
        );
    }
    println!("  ratios: {}", report["ratios"]);
    println!(
        "  goals (parked, capped ≤ 1.2 × none): {}",
        crate::goals_line(&report["goals"])
    );
}

async fn with_db(o: &Options, db: &Database) -> anyhow::Result<Value> {
    let pool = db.pool(2).await?;
    let r = async {
        breakwater_core::MIGRATOR.run(&pool).await?;
        let groups: Vec<Uuid> = (0..10).map(|_| Uuid::new_v4()).collect();
        let none = phase(&pool, o, "none", &groups).await?;

        let big = |tag: &'static str, group: Uuid| {
            let pool = pool.clone();
            async move {
                let mut conn = pool.acquire().await?;
                let mut left = o.parked;
                while left > 0 {
                    let k = left.min(5_000);
                    let jobs: Vec<NewJob> = (0..k)
                        .map(|_| NewJob::new(QUEUE, "bench", json!({ tag: true })).group(group))
                        .collect();
                    enqueue_many(&mut conn, &jobs).await?;
                    left -= k;
                }
                anyhow::Ok(())
            }
        };
        let parked_group = Uuid::new_v4();
        let t = Instant::now();
        big("parked", parked_group).await?;
        let insert_ms = t.elapsed().as_millis() as u64;
        let t = Instant::now();
        let parked_n = {
            let mut conn = pool.acquire().await?;
            park_group(&mut conn, parked_group).await?
        };
        let park_ms = t.elapsed().as_millis() as u64;
        let parked = phase(&pool, o, "parked", &groups).await?;
        // The parked jobs go, and VACUUM clears their index entries: a bench artifact that the
        // next phase must not measure (no scenario deletes 100 000 jobs at once).
        sqlx::query("DELETE FROM jobs WHERE group_id = $1")
            .bind(parked_group)
            .execute(&pool)
            .await?;
        sqlx::query("VACUUM jobs").execute(&pool).await?;

        // A group at its cap: one job executing, max_in_flight 1, 100 000 more available.
        let capped_group = Uuid::new_v4();
        big("capped", capped_group).await?;
        sqlx::query(
            "UPDATE jobs SET state = 'executing', attempt = 1, claim_token = gen_random_uuid(),
                    attempted_by = 'elsewhere'
             WHERE id = (SELECT min(id) FROM jobs WHERE group_id = $1)",
        )
        .bind(capped_group)
        .execute(&pool)
        .await?;
        sqlx::query("UPDATE job_groups SET in_flight = 1, max_in_flight = 1 WHERE group_id = $1")
            .bind(capped_group)
            .execute(&pool)
            .await?;
        let capped = phase(&pool, o, "capped", &groups).await?;
        sqlx::query("DELETE FROM jobs WHERE group_id = $1")
            .bind(capped_group)
            .execute(&pool)
            .await?;

        sqlx::query("VACUUM jobs").execute(&pool).await?;
        let none_again = phase(&pool, o, "none_again", &groups).await?;

        let best_none = if none_again["fetch"]["p50_us"].as_u64() < none["fetch"]["p50_us"].as_u64()
        {
            &none_again
        } else {
            &none
        };
        let r_parked = ratio(&parked, best_none, "fetch", "p50_us");
        let r_capped = ratio(&capped, best_none, "fetch", "p50_us");
        let within = |r: &Value| r.as_f64().is_some_and(|r| r <= 1.2);
        let postgres = machine::postgres(&pool).await;
        anyhow::Ok(json!({
            "scenario": "fetch_bench",
            "parked": o.parked,
            "waiting_in_parked_group": parked_n,
            "parked_insert_ms": insert_ms,
            "park_group_ms": park_ms,
            "iterations": o.iterations,
            "limit": o.limit,
            "phases": [none, parked, capped, none_again],
            "ratios": {
                "fetch_p50_parked_over_best_none": r_parked,
                "fetch_p50_capped_over_best_none": r_capped,
                "fetch_mean_parked_over_best_none": ratio(&parked, best_none, "fetch", "mean_us"),
                "fetch_mean_capped_over_best_none": ratio(&capped, best_none, "fetch", "mean_us"),
                "fetch_p50_none_again_over_none": ratio(&none_again, &none, "fetch", "p50_us"),
            },
            "goals": {
                "fetch_parked_within_1_2x": within(&r_parked),
                "fetch_capped_within_1_2x": within(&r_capped),
            },
            "postgres": postgres,
            "database": db.label,
        }))
    }
    .await;
    pool.close().await;
    r
}
