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
