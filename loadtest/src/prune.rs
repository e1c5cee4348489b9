//! Retention under load (`isolation --prune-rows N`): N old, finished deliveries (each with one
//! attempt and its completed job) are seeded with set-based SQL before the baseline, and the
//! retention pruner drains them while the loaded stream runs. The same run's baseline stream
//! (the rows present, no pruning) is the comparison.
//!
//! The pruner is the service's own code ([`breakwater_worker::retention::prune_once`], the
//! function every worker node's background task runs each interval), started by the harness on a
//! pool of its own at the moment the loaded stream starts, with the service's `[retention]`
//! batch size and pause; the service's own background pruner is turned off for the run, so that
//! pruning starts exactly then and only once.

use crate::clock::now_us;
use crate::receiver::{Sink, PHASE_LOADED};
use crate::stats::{new_hist, summarize, Summary};
use breakwater_worker::retention::{prune_once, PruneReport, RetentionConfig};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Rows seeded per statement.
const SEED_CHUNK: u64 = 100_000;

/// Seeds `n` finished deliveries to `channel_id` of `tenant_id`, accepted 40–41 days ago
/// (older than any retention of up to 40 days), each `delivered` with one attempt and one
/// completed job finalized then, in chunks of 100 000 rows per statement; then `ANALYZE`s the
/// three tables (autovacuum, which would do it in production, is off on the benchmark machine).
/// Returns the seconds it took.
pub async fn seed_old(
    pool: &PgPool,
    tenant_id: Uuid,
    channel_id: Uuid,
    n: u64,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut done = 0u64;
    while done < n {
        let k = (n - done).min(SEED_CHUNK);
        // One chunk: deliveries, then their attempts and jobs, in one transaction.
        let mut tx = pool.begin().await?;
        sqlx::query(
            "CREATE TEMP TABLE IF NOT EXISTS lt_seed (id uuid, at timestamptz) ON COMMIT DROP",
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO lt_seed (id, at)
             SELECT gen_random_uuid(),
                    now() - interval '41 days' + (($1 + g)::float8 / $2) * interval '1 day'
             FROM generate_series(1, $3) g",
        )
        .bind(done as i64)
        .bind(n.max(1) as f64)
        .bind(k as i64)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO deliveries (id, tenant_id, channel_id, event_type, payload, status,
                                     attempts, created_at, updated_at, delivered_at)
             SELECT id, $1, $2, 'lt.old', '{\"old\":true}', 'delivered', 1, at, at, at
             FROM lt_seed",
        )
        .bind(tenant_id)
        .bind(channel_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO delivery_attempts (delivery_id, channel_id, attempt, started_at,
                                            duration_ms, outcome, status_code, node_id)
             SELECT id, $1, 1, at, 5, 'success', 200, 'lt-seed' FROM lt_seed",
        )
        .bind(channel_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO jobs (queue, kind, args, state, attempt, max_attempts, scheduled_at,
                               attempted_at, unique_key, group_id, created_at, finalized_at)
             SELECT 'deliveries', 'deliver', jsonb_build_object('delivery_id', id), 'completed',
                    1, 12, at, at, 'delivery:' || id::text, $1, at, at
             FROM lt_seed",
        )
        .bind(channel_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        done += k;
    }
    sqlx::query("ANALYZE deliveries, delivery_attempts, jobs")
        .execute(pool)
        .await?;
    Ok(started.elapsed().as_secs_f64())
}

/// One pruning run under load: when it started and ended (harness µs) and what it deleted.
#[derive(Debug, Clone, Copy)]
pub struct PruneRun {
    /// Harness clock at its start.
    pub start_us: u64,
    /// Harness clock at its end.
    pub end_us: u64,
    /// What it deleted.
    pub report: PruneReport,
}

/// Runs one retention pass (everything due) on `pool` with `cfg`.
pub async fn run(pool: PgPool, cfg: RetentionConfig) -> anyhow::Result<PruneRun> {
    let start_us = now_us();
    let report = prune_once(&pool, &cfg, &CancellationToken::new()).await?;
    Ok(PruneRun {
        start_us,
        end_us: now_us(),
        report,
    })
}

/// Latency of the deliveries of `phase` whose enqueue request was sent within
/// `[from_us, to_us]` (harness clock).
pub fn window(sink: &Sink, phase: u8, from_us: u64, to_us: u64) -> Summary {
    sink.with(phase, |p| {
        let mut h = new_hist();
        for &(at, lat) in &p.timeline {
            let sent = at.saturating_sub(lat);
            if (from_us..=to_us).contains(&sent) {
                let _ = h.record(lat.max(1));
            }
        }
        summarize(&h)
    })
}

/// The report's `prune` section: what the pass did, and the loaded stream's latency while it
/// ran and after it ended, beside the baseline's.
pub fn report(
    rows: u64,
    seed_s: f64,
    cfg: &RetentionConfig,
    run: &PruneRun,
    loaded_end_us: u64,
    sink: &Sink,
    baseline: Summary,
) -> Value {
    let during = window(sink, PHASE_LOADED, run.start_us, run.end_us);
    let after = window(sink, PHASE_LOADED, run.end_us + 1, loaded_end_us);
    let secs = (run.end_us - run.start_us) as f64 / 1e6;
    let r = run.report;
    let total = r.deliveries + r.attempts + r.jobs;
    let per_s = |n: u64| (n as f64 / secs.max(1e-9)).round();
    json!({
        "rows_seeded": rows,
        "seed_s": (seed_s * 10.0).round() / 10.0,
        "batch_size": cfg.batch_size,
        "batch_pause_ms": cfg.batch_pause_ms,
        "deliveries_deleted": r.deliveries,
        "attempts_deleted": r.attempts,
        "jobs_deleted": r.jobs,
        "batches": r.batches,
        "seconds": (secs * 100.0).round() / 100.0,
        "deliveries_per_s": per_s(r.deliveries),
        "rows_per_s": per_s(total),
        "finished_before_loaded_stream_ended": run.end_us <= loaded_end_us,
        "healthy_while_pruning": during,
        "healthy_while_pruning_p95_over_baseline_p95": (baseline.p95_ms > 0.0)
            .then(|| (during.p95_ms / baseline.p95_ms * 100.0).round() / 100.0),
        "healthy_after_pruning": after,
        "healthy_while_pruning_p95_over_after_p95": (after.p95_ms > 0.0)
            .then(|| (during.p95_ms / after.p95_ms * 100.0).round() / 100.0),
        "definition": "pruning = one retention pass (breakwater_worker::retention::prune_once) started with the loaded stream; healthy_while_pruning = the loaded stream's deliveries whose enqueue request was sent while it ran; healthy_after_pruning = those sent after it ended (same stream, empty if pruning outlasted it)",
    })
}
