//! The row locks a statement that ends many jobs' runs at once takes before it releases their
//! slots (rescue, hand-back).

use crate::Result;
use uuid::Uuid;

/// Locks the rows whose slots a multi-job statement is about to release (its jobs leaving
/// `executing`): the groups', then the gates', each in key order. The slot-release trigger
/// takes a group's row and then its gate's row for every job; in one statement over many jobs
/// that would hold one job's gate while waiting for the next job's group, against a result that
/// holds that group and waits for the gate — a deadlock. Taken up front, in the order everyone
/// uses (group rows before gate rows), the trigger then finds them held.
pub(crate) async fn lock_slots(
    tx: &mut sqlx::PgConnection,
    groups: impl Iterator<Item = Uuid>,
    gates: impl Iterator<Item = String>,
) -> Result<()> {
    let mut groups: Vec<Uuid> = groups.collect();
    groups.sort();
    groups.dedup();
    let mut gates: Vec<String> = gates.collect();
    gates.sort();
    gates.dedup();
    if !groups.is_empty() {
        lock_rows!(
            &mut *tx,
            "job_groups",
            "group_id = ANY($1) ORDER BY group_id",
            &groups
        );
    }
    if !gates.is_empty() {
        lock_rows!(
            &mut *tx,
            "job_gates",
            "gate_key = ANY($1) ORDER BY gate_key",
            &gates
        );
    }
    Ok(())
}

/// The slot rows [`try_lock_slots`] could not take: another transaction holds them.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Groups whose row another transaction holds.
    pub groups: Vec<Uuid>,
    /// Gates whose row another transaction holds.
    pub gates: Vec<String>,
}

impl Held {
    /// Whether a job of group `group` counted in gate `gate` may have its slots released now:
    /// neither row is held by another transaction.
    pub fn frees(&self, group: Option<Uuid>, gate: Option<&str>) -> bool {
        !group.is_some_and(|g| self.groups.contains(&g))
            && !gate.is_some_and(|g| self.gates.iter().any(|h| h == g))
    }
}

/// [`lock_slots`] for work that runs beside live work and must never wait for it (the
/// rescuer): the same rows in the same order (groups, then gates, each in key order), each
/// taken `FOR UPDATE SKIP LOCKED`. A row another transaction holds — a result in progress, or
/// one a frozen node left open — is not waited for but returned in [`Held`]; the caller leaves
/// the jobs that would release a slot there for a later round. Rows that do not exist are not
/// held (the slot-release trigger finds nothing to update there either).
pub(crate) async fn try_lock_slots(
    tx: &mut sqlx::PgConnection,
    groups: impl Iterator<Item = Uuid>,
    gates: impl Iterator<Item = String>,
) -> Result<Held> {
    let mut groups: Vec<Uuid> = groups.collect();
    groups.sort();
    groups.dedup();
    let mut gates: Vec<String> = gates.collect();
    gates.sort();
    gates.dedup();
    let mut held = Held::default();
    if !groups.is_empty() {
        // The rows that exist (plain read) minus those locked here are the held ones.
        held.groups = sqlx::query_scalar!(
            r#"WITH locked AS MATERIALIZED (
                 SELECT group_id FROM job_groups WHERE group_id = ANY($1)
                 ORDER BY group_id
                 FOR UPDATE SKIP LOCKED)
             SELECT g.group_id AS "group_id!" FROM job_groups g
             WHERE g.group_id = ANY($1)
               AND g.group_id NOT IN (SELECT group_id FROM locked)"#,
            &groups
        )
        .fetch_all(&mut *tx)
        .await?;
    }
    if !gates.is_empty() {
        held.gates = sqlx::query_scalar!(
            r#"WITH locked AS MATERIALIZED (
                 SELECT gate_key FROM job_gates WHERE gate_key = ANY($1)
                 ORDER BY gate_key
                 FOR UPDATE SKIP LOCKED)
             SELECT x.gate_key AS "gate_key!" FROM job_gates x
             WHERE x.gate_key = ANY($1)
               AND x.gate_key NOT IN (SELECT gate_key FROM locked)"#,
            &gates
        )
        .fetch_all(&mut *tx)
        .await?;
    }
    Ok(held)
}
