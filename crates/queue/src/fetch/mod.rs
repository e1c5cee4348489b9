//! Claiming jobs: fair across shares and groups, capped per group cluster-wide, at a cost that
//! does not grow with any one group's backlog.
//!
//! - this file: [`fetch`] and its variants, which run the statements and read their rows;
//! - `sql`: the two fetch statements' text (`FETCH`, `FETCH_LEAN`), built at compile time with
//!   `concat!` from shared fragments, so they run as `sqlx::query_as` (not `query_as!`, which
//!   takes only literals);
//! - `plan`: the text each call sends, with its values written in, so that Postgres caches the
//!   plan made for them (prepared, planned once per connection and text);
//! - `explain`: [`explain_fetch`] and [`index_rows`], what a fetch reads, for tests and
//!   benchmarks.

mod explain;
mod plan;
mod sql;

pub use explain::{explain_fetch, index_rows};
use sql::{FETCH, FETCH_LEAN};

use crate::{GroupLimits, Job, Result};
use sqlx::PgExecutor;
use uuid::Uuid;

/// Claims up to `limit` available jobs of `queue` for node `node_id`.
///
/// **Order.** Lowest priority number first ([`crate::PRIORITY_URGENT`] before
/// [`crate::PRIORITY_NORMAL`]). Among equal priorities the jobs are shared out fairly:
/// - across **shares** (a group's `share_key`; for Breakwater, the tenant) by the fewest jobs in
///   flight cluster-wide, counting each job this fetch gives a share as one more (max-min fair
///   share of the slots: a share with many groups or a huge burst gets its turn and no more
///   while others wait);
/// - inside a share, across its **groups** the same way;
/// - inside a group, oldest first (`priority, scheduled_at, id`).
///
/// Jobs without a group are each their own share.
///
/// **Caps.** A group never has more than its cap in state `executing`, cluster-wide: the cap is
/// its adaptive limit ([`crate::adapt_limit`]; `limits.initial` until it has one) clamped to
/// `[limits.floor, max_in_flight or limits.ceiling]`, rounded down, 1 for a FIFO group (the SQL
/// function `group_cap`; [`crate::GroupLimits::cap`] in Rust). The fetch locks the rows of the groups it
/// serves (`FOR UPDATE SKIP LOCKED`: another fetch skips them rather than waiting), re-checks the
/// cap on the current row, and raises `in_flight` in the same statement; a trigger lowers it when
/// a job leaves `executing` by any path, including rescue, so a crashed node's slots come back
/// when its jobs are rescued. A **parked** group ([`crate::park_group`]) gives none of its jobs,
/// except up to its `probe_slots` ([`crate::wake_one`]).
///
/// **Fifo groups** ([`crate::set_group_fifo`]). A fifo group is served only while its *head*,
/// its oldest live job by id (`available`, `scheduled` or `executing`; one entry of
/// `jobs_group_order_idx`, read for fifo groups only), is available in this queue; then the fetch
/// takes that job and no other, and its cap is 1. So a head waiting for a retry or a snooze, or
/// executing, holds back every later job of the group, on every node: the group row's lock and
/// the cap re-checked under it keep two fetches from taking two of its jobs, and a fetch whose
/// snapshot still shows the head live takes nothing. A blocked fifo group costs a fetch its head
/// entry and that one index probe, and is not served, counted in the turns, or reported
/// 'waiting' (a head that waits is woken by its promotion; one that executes makes the group
/// 'capped').
///
/// **Gates.** A group in a gate ([`crate::set_group_gate`]) is served only if its gate lets it
/// too. A gate is **counted** only when it is parked ([`crate::park_gate`]) or capped (its
/// `max_in_flight`, else `limits.gate_ceiling`; both optional): then the fetch locks its row
/// after the group rows (`FOR UPDATE SKIP LOCKED`, like the group rows: a gate row another
/// transaction holds is skipped and its groups reported waiting, see **Never waits** below),
/// re-checks it on the current row (not parked, or a probe slot that
/// is unbound or bound to this group, [`crate::wake_one_in_gate`]; under its cap), raises its
/// `in_flight` and stamps each job it takes with the gate (`jobs.gate_slot`) in the same
/// statement; the slot-release trigger lowers exactly the stamped gate's count. Inside a counted
/// gate its room goes to its candidates in water-filling order: across shares by the jobs each
/// runs *in that gate*, then across a share's groups, so a share with many groups in a gate, or
/// one busy elsewhere, gets its turn and no more. A gate that is neither parked nor capped is
/// not locked, not re-checked and not counted: its groups cost what groups without a gate cost,
/// and its row is never written by claims or results (a host shared by many tenants is not one
/// hot row). A fetch whose snapshot predates a park or a cap may still take such a gate's jobs
/// uncounted; a fetch that starts after [`crate::park_gate`] or [`crate::set_gate_max_in_flight`]
/// returned never does.
///
/// **Cost.** The fetch reads one index entry per group with due work (a loose index scan of
/// `jobs_fetch_group_idx`), the group rows of those, then at most `room` index entries of each
/// group it serves. It never walks the jobs waiting behind a group's head, so a group that is
/// parked, at its cap, or holding 100 000 jobs costs it one index probe, not 100 000 rows; the
/// same for every group of a gate that is parked or at its cap.
///
/// **Never waits**. Every row either statement locks or writes is locked `SKIP
/// LOCKED` first (jobs, group rows, gate rows); the updates that follow touch only rows the
/// statement already holds, and no trigger fires on a claim. So a transaction holding any of
/// those rows — a result transaction of a node frozen inside it — never stalls a fetch: the
/// groups it holds (and the groups of a gate it holds) are reported waiting, and every other
/// group is served as usual. Counters are bounded: a job at the largest `attempt` keeps it
/// (saturating), and `in_flight` sums are computed in `bigint`, so one bad row cannot make the
/// statement fail for its whole queue.
///
/// **Two statements, one claim.** A lean statement runs first (`FETCH_LEAN`: no gate row locked
/// or written, about 0.35 ms less planning); only when some group of a counted gate could run
/// does it claim nothing and the full one (`FETCH`) run instead, so the fair order is always
/// computed over every group at once. Each is one statement: the jobs are locked `FOR UPDATE
/// SKIP LOCKED` and re-checked as `available`, so two fetchers (on this node or any other) never
/// get the same job. Each claimed job gets a
/// fresh fencing token ([`Job::claim_token`]) and its `attempt` counted.
///
/// The returned jobs are in [`fair_order`].
pub async fn fetch<'c>(
    exec: impl PgExecutor<'c> + Copy,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
) -> Result<Vec<Job>> {
    Ok(fetch_batch(exec, queue, node_id, limit, limits).await?.jobs)
}

/// What one [`fetch_batch`] claimed, and what it left waiting.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    /// The claimed jobs in the order a runner should start them ([`fair_order`]).
    pub jobs: Vec<Job>,
    /// Groups with due jobs that were at their cap: one of their running jobs finishing frees
    /// a slot, so a runner fetches again when one of *its* jobs of these groups finishes.
    pub capped: Vec<Uuid>,
    /// Gates ([`crate::set_group_gate`]) with due jobs that were at their cap: one of their
    /// running jobs (of any of their groups) finishing frees a slot, so a runner fetches again
    /// when one of *its* jobs of these gates finishes. Each gate once.
    pub capped_gates: Vec<String>,
    /// Whether some group with due jobs, under its cap, got nothing (another transaction held
    /// its row or its counted gate's row, or the limit was reached): fetch again soon.
    pub waiting: bool,
    /// Whether counted gates (capped or parked) took part: this fetch claimed a job counted in
    /// a gate, or left a gate at its cap. A runner passes it as `full_first` to its next
    /// [`fetch_batch_from`] of the same queue, so a queue busy with a capped host runs the
    /// full statement at once instead of the lean one and then the full one.
    pub counted_gates: bool,
}

#[derive(sqlx::FromRow)]
struct FetchRow {
    id: Option<i64>,
    queue: Option<String>,
    kind: Option<String>,
    args: Option<serde_json::Value>,
    priority: Option<i16>,
    attempt: Option<i32>,
    max_attempts: Option<i32>,
    claim_token: Option<Uuid>,
    unique_key: Option<String>,
    group_id: Option<Uuid>,
    created_at: Option<chrono::DateTime<chrono::Utc>>,
    gate_key: Option<String>,
    held: Option<String>,
    counted: Option<bool>,
}

/// [`fetch`], also telling which groups it left waiting (for a runner's decision when to fetch
/// again, see [`Fetched`]).
pub async fn fetch_batch<'c>(
    exec: impl PgExecutor<'c> + Copy,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
) -> Result<Fetched> {
    fetch_batch_from(exec, queue, node_id, limit, limits, false).await
}

/// [`fetch_batch`], starting with the full statement when `full_first` (the previous fetch's
/// [`Fetched::counted_gates`]) instead of the lean one. Same claims either way: only the cost
/// differs (one statement instead of two while counted gates keep having work; the lean one
/// again once they have none).
pub async fn fetch_batch_from<'c>(
    exec: impl PgExecutor<'c> + Copy,
    queue: &str,
    node_id: &str,
    limit: i64,
    limits: &GroupLimits,
    full_first: bool,
) -> Result<Fetched> {
    // A prepared statement whose text carries every value the plan depends on (plan.rs): the
    // cached plan is the one Postgres would make for this call, without planning it each time.
    let class = plan::size_class(exec).await?;
    let run = |template: &'static str| {
        let sql = plan::text(template, queue, node_id, limit, limits, class);
        async move { sqlx::query_as::<_, FetchRow>(&sql).fetch_all(exec).await }
    };
    // The lean statement first; the full one only when a counted gate has a group that could
    // run (then the lean one claimed nothing).
    let mut rows: Vec<FetchRow> = run(if full_first { FETCH } else { FETCH_LEAN }).await?;
    if !full_first && rows.iter().any(|r| r.held.as_deref() == Some("full")) {
        rows = run(FETCH).await?;
    }
    let mut out = Fetched::default();
    for r in rows {
        match (r.held.as_deref(), r.id) {
            (Some(held), _) => {
                match held {
                    "capped" => out.capped.extend(r.group_id),
                    "gate_capped" => {}
                    _ => out.waiting = true,
                }
                if let Some(gate) = r.gate_key {
                    if !out.capped_gates.contains(&gate) {
                        out.capped_gates.push(gate);
                    }
                }
            }
            (None, Some(id)) => {
                out.counted_gates |= r.counted == Some(true);
                out.jobs.push(Job {
                    id,
                    queue: r.queue.unwrap_or_default(),
                    kind: r.kind.unwrap_or_default(),
                    args: r.args.unwrap_or_default(),
                    priority: r.priority.unwrap_or_default(),
                    attempt: r.attempt.unwrap_or_default(),
                    max_attempts: r.max_attempts.unwrap_or_default(),
                    claim_token: r.claim_token.unwrap_or_default(),
                    unique_key: r.unique_key,
                    group_id: r.group_id,
                    gate_key: r.gate_key,
                    created_at: r.created_at.unwrap_or_default(),
                })
            }
            (None, None) => {}
        }
    }
    out.counted_gates |= !out.capped_gates.is_empty();
    fair_order(&mut out.jobs);
    Ok(out)
}

/// Orders claimed jobs as the fetch's turns go: by priority, then a group's k-th job of that
/// priority after every group's (k-1)-th, then id (so a group's own jobs stay oldest first). A job without a
/// group is its own group.
///
/// A runner starts its jobs in this order, and each then waits for a database connection in
/// the order it started. Sorted by id alone, a group that refills many slots at once (a slow
/// endpoint whose whole window of requests ends together) went first with all of them, and a
/// job of another tenant claimed in the same fetch waited for every one of their statements:
/// the isolation run's slow mode showed it as the neighbour's wait (BENCHMARKS.md).
pub(crate) fn fair_order(jobs: &mut [Job]) {
    jobs.sort_by_key(|j| (j.priority, j.id));
    let mut taken: std::collections::HashMap<(i16, Uuid), u32> = std::collections::HashMap::new();
    let ranks: std::collections::HashMap<i64, u32> = jobs
        .iter()
        .map(|j| {
            let rank = j.group_id.map_or(0, |g| {
                let n = taken.entry((j.priority, g)).or_default();
                *n += 1;
                *n - 1
            });
            (j.id, rank)
        })
        .collect();
    jobs.sort_by_key(|j| (j.priority, ranks[&j.id], j.id));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: i64, priority: i16, group: Option<u128>) -> Job {
        Job {
            id,
            queue: "q".into(),
            kind: "k".into(),
            args: serde_json::Value::Null,
            priority,
            attempt: 1,
            max_attempts: 1,
            claim_token: Uuid::nil(),
            unique_key: None,
            group_id: group.map(Uuid::from_u128),
            gate_key: None,
            created_at: chrono::DateTime::<chrono::Utc>::default(),
        }
    }

    #[test]
    fn a_group_that_refills_many_slots_does_not_go_first_with_all_of_them() {
        // Group 1 (a slow endpoint's old backlog: low ids) refills four slots; group 2 (another
        // tenant's new delivery, a higher id) and an ungrouped job were claimed with them.
        let mut jobs = vec![
            job(1, 1, Some(1)),
            job(2, 1, Some(1)),
            job(3, 1, Some(1)),
            job(4, 1, Some(1)),
            job(90, 1, Some(2)),
            job(95, 1, None),
            job(50, 0, Some(1)),
        ];
        fair_order(&mut jobs);
        let order: Vec<i64> = jobs.iter().map(|j| j.id).collect();
        // Priority first; then each group's first job of the priority, then the seconds, …;
        // a group's own jobs stay oldest first.
        assert_eq!(order, vec![50, 1, 90, 95, 2, 3, 4]);
    }
}
