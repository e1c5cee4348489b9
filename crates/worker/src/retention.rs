//! The retention pruner: every worker node deletes finished deliveries, their attempts and
//! finished jobs once they are older than `retention.deliveries_days`, in small batches.
//!
//! Each batch is one statement, so one short transaction that locks only the rows it deletes
//! (`FOR UPDATE SKIP LOCKED`): live work is never waited for or touched (see
//! [`breakwater_core::retention`] for the rules), and the pruners of several nodes split the
//! backlog between them instead of blocking each other. A pause between batches leaves the
//! database to the delivery path; a run stops between two batches when the node shuts down.

use breakwater_core::retention;
use serde::Deserialize;
use sqlx::PgPool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Retention settings (`[retention]` in `config/default.toml`; environment
/// `BREAKWATER_RETENTION__<FIELD>`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// Final deliveries (delivered, dead, cancelled) accepted and last changed more than this
    /// many days ago are deleted with their attempts, and so are finished jobs finalized that
    /// long ago (`worker.job_retention_ms` usually deletes those much sooner). 0 keeps
    /// everything (the pruner does not run).
    pub deliveries_days: u32,
    /// Rows per delete statement (each its own short transaction), 1–100 000.
    pub batch_size: u32,
    /// How often a node looks for rows to prune, ms; each look drains everything due, batch by
    /// batch.
    pub interval_ms: u64,
    /// Pause between two batches of one run, ms (0 = none): leaves the database to deliveries.
    pub batch_pause_ms: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            deliveries_days: 30,
            batch_size: 1_000,
            interval_ms: 300_000,
            batch_pause_ms: 50,
        }
    }
}

impl RetentionConfig {
    /// Checks the settings; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=100_000).contains(&self.batch_size) {
            return Err("retention.batch_size must be between 1 and 100000".into());
        }
        if self.interval_ms == 0 {
            return Err("retention.interval_ms must be greater than 0".into());
        }
        if self.deliveries_days > 36_500 {
            return Err("retention.deliveries_days must be at most 36500 (100 years)".into());
        }
        Ok(())
    }

    /// How old a finished row must be to go.
    pub fn older_than(&self) -> Duration {
        Duration::from_secs(u64::from(self.deliveries_days) * 86_400)
    }
}

/// What one [`prune_once`] run deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Deliveries deleted.
    pub deliveries: u64,
    /// Delivery attempts deleted.
    pub attempts: u64,
    /// Finished jobs deleted.
    pub jobs: u64,
    /// Delete statements run.
    pub batches: u64,
}

/// Drains everything due now: deliveries (with their attempts) batch by batch, oldest first,
/// then finished jobs, until a batch comes back short or `shutdown` fires. The cutoff is read
/// once from the database's clock, so a run ends even while rows keep ageing into it.
pub async fn prune_once(
    pool: &PgPool,
    cfg: &RetentionConfig,
    shutdown: &CancellationToken,
) -> Result<PruneReport, breakwater_core::Error> {
    let mut report = PruneReport::default();
    let older_than = cfg.older_than();
    let limit = i64::from(cfg.batch_size);
    let pause = Duration::from_millis(cfg.batch_pause_ms);
    let cutoff = retention::cutoff(pool, older_than).await?;
    let mut from = None;
    loop {
        let p = retention::prune_deliveries(pool, cutoff, from, limit).await?;
        report.batches += 1;
        report.deliveries += p.deliveries;
        report.attempts += p.attempts;
        // A short batch: the rest is live, locked elsewhere, or not old enough.
        if p.deliveries < limit as u64 || shutdown.is_cancelled() {
            break;
        }
        from = p.last_created_at.or(from);
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    while !shutdown.is_cancelled() {
        let n = breakwater_queue::maintenance::prune(pool, older_than, limit).await?;
        report.batches += 1;
        report.jobs += n;
        if n < limit as u64 {
            break;
        }
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    Ok(report)
}
