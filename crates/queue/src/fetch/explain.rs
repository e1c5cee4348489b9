//! What a fetch reads: its plan, and the index entries in it.

use super::{plan, FETCH};
use crate::{GroupLimits, Result};

/// `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` of [`fetch`]'s full statement (the one that handles
/// counted gates; the lean one reads the same index entries) with the same arguments and the
/// same text (the values written in, as the fetch sends it: `plan.rs`), run in a
/// transaction that is rolled back (nothing is claimed). For tests and benchmarks that check
/// what a fetch reads: see [`index_rows`].
pub async fn explain_fetch(
    conn: &mut sqlx::PgConnection,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
) -> Result<serde_json::Value> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let class = plan::size_class(&mut *tx).await?;
    let text = plan::text(FETCH, queue, node_id, limit, limits, class);
    let sql = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {text}");
    let (plan,): (serde_json::Value,) = sqlx::query_as(&sql)
        .persistent(false)
        .fetch_one(&mut *tx)
        .await?;
    tx.rollback().await?;
    Ok(plan)
}

/// Index entries of `jobs` a plan from [`explain_fetch`] read to choose its jobs: over every
/// scan of a `jobs` index other than the primary key (whose lookups are one per claimed job),
/// the rows it returned plus the rows its filter removed, times its loops.
pub fn index_rows(plan: &serde_json::Value) -> u64 {
    fn walk(node: &serde_json::Value) -> u64 {
        let here = match node["Node Type"].as_str() {
            Some("Index Scan" | "Index Only Scan")
                if node["Relation Name"] == "jobs" && node["Index Name"] != "jobs_pkey" =>
            {
                let loops = node["Actual Loops"].as_f64().unwrap_or(1.0);
                let rows = node["Actual Rows"].as_f64().unwrap_or(0.0)
                    + node["Rows Removed by Filter"].as_f64().unwrap_or(0.0);
                (rows * loops).round() as u64
            }
            _ => 0,
        };
        here + node["Plans"]
            .as_array()
            .into_iter()
            .flatten()
            .map(walk)
            .sum::<u64>()
    }
    plan.as_array()
        .and_then(|a| a.first())
        .map_or(0, |top| walk(&top["Plan"]))
}
