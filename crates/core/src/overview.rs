//! The operator's overview of the cluster, read from Postgres: every queue's live jobs and
//! channels per circuit state. It feeds the scrape-time metric gauges and the operator's queue
//! view, so both are right however many nodes share the database.

use crate::circuit::State;
use crate::jobs::QUEUES;
use crate::{Result, Tier};
use breakwater_queue::stats::{queue_stats, QueueStats};
use sqlx::PgPool;

/// Live-job counts of every known queue (zeros where a queue has none), then any other queue
/// that has live jobs.
pub async fn queues(pool: &PgPool) -> Result<Vec<QueueStats>> {
    let mut found = queue_stats(pool).await?;
    let mut out: Vec<QueueStats> = QUEUES
        .into_iter()
        .map(|name| match found.iter().position(|s| s.queue == name) {
            Some(i) => found.swap_remove(i),
            None => QueueStats {
                queue: name.to_string(),
                ..Default::default()
            },
        })
        .collect();
    found.sort_by(|a, b| a.queue.cmp(&b.queue));
    out.extend(found);
    Ok(out)
}

/// Channels per circuit state, every state present (0 when empty).
pub async fn channels_by_state(pool: &PgPool) -> Result<Vec<(String, i64)>> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as(
            "SELECT circuit_state, count(*) FROM channels WHERE deleted_at IS NULL GROUP BY circuit_state",
        )
            .fetch_all(pool)
            .await?;
    Ok(State::ALL
        .iter()
        .map(|s| {
            let n = rows
                .iter()
                .find(|(k, _)| k == s.as_str())
                .map_or(0, |(_, n)| *n);
            (s.as_str().to_string(), n)
        })
        .collect())
}

/// The cluster-wide facts behind the scrape-time metric gauges (plain data; the caller hands
/// them to its metrics).
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    /// Channels per circuit state, every state present.
    pub channels_by_state: Vec<(String, i64)>,
    /// Parked delivery jobs per tier (`high`, `default`, `bulk`).
    pub parked_by_tier: Vec<(String, i64)>,
    /// Live-job counts of every known queue, then any other queue with live jobs.
    pub queues: Vec<QueueStats>,
}

/// Reads the cluster-wide facts behind the scrape-time gauges (two aggregate queries).
pub async fn gauges(pool: &PgPool) -> Result<Gauges> {
    let queues = queues(pool).await?;
    let channels_by_state = channels_by_state(pool).await?;
    let parked_by_tier = Tier::ALL
        .iter()
        .map(|t| {
            let n = queues
                .iter()
                .find(|q| q.queue == t.queue())
                .map_or(0, |q| q.parked);
            (t.as_str().to_string(), n)
        })
        .collect();
    Ok(Gauges {
        channels_by_state,
        parked_by_tier,
        queues,
    })
}
