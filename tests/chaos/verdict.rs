//! How every scenario ends: once its faults are over and its endpoints healthy, every accepted
//! delivery reaches `delivered` within a bounded wait (0 lost), the invariants hold (the
//! doctor, in process and as `breakwater doctor`, finds nothing), the receiver got each one
//! with a valid signature, and a delivery it got more than once (answered 2xx more than once)
//! was in flight at the fault.

use crate::cluster::{breakwater_bin, Cluster};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// What a scenario measured.
#[derive(Debug)]
pub struct Verdict {
    /// Deliveries the API accepted (all of them delivered).
    pub accepted: usize,
    /// Requests the receiver got, 2xx or not.
    pub requests: usize,
    /// Deliveries the receiver got (answered 2xx) more than once, with how often.
    pub duplicates: BTreeMap<Uuid, usize>,
    /// Deliveries in flight at the fault (the set duplicates must come from).
    pub in_flight: usize,
    /// From the end of the fault until every delivery was delivered.
    pub settled_after: Duration,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} accepted, all delivered {:.1} s after the fault ended; {} requests; {} in flight \
             at the fault; {} duplicated (all among them){}",
            self.accepted,
            self.settled_after.as_secs_f64(),
            self.requests,
            self.in_flight,
            self.duplicates.len(),
            if self.duplicates.is_empty() {
                String::new()
            } else {
                format!(
                    ", at most {} copies",
                    self.duplicates.values().max().copied().unwrap_or(0)
                )
            }
        )
    }
}

/// Asserts that the rescuer took back exactly `held`, the jobs of the node the fault stopped
/// (`victim`, e.g. "the killed node"), each once: no live node lost a job. Returns how many it
/// took back.
pub async fn assert_rescued_exactly(
    cluster: &Cluster,
    held: &BTreeSet<Uuid>,
    victim: &str,
) -> usize {
    let rescued = cluster.rescued().await;
    assert!(
        rescued.keys().eq(held.iter()) && rescued.values().all(|n| *n == 1),
        "rescued {rescued:?}, but {victim} held {held:?}"
    );
    rescued.len()
}

/// Waits up to `timeout` after `fault_over` for all of `accepted` to be `delivered`, then checks
/// the invariants, the receiver's view and the duplicates against `in_flight`; panics with the
/// rows and requests of every offending delivery.
pub async fn settle(
    cluster: &Cluster,
    endpoints: &[&str],
    accepted: &[Uuid],
    in_flight: &BTreeSet<Uuid>,
    fault_over: Instant,
    timeout: Duration,
) -> Verdict {
    let settled_after = wait_delivered(cluster, endpoints, accepted, fault_over, timeout).await;
    check_store(cluster, accepted.len()).await;
    let received = cluster.received(endpoints);
    let copies = answered_copies(cluster, endpoints, accepted, &HashMap::new()).await;
    let duplicates: BTreeMap<Uuid, usize> = copies.into_iter().filter(|(_, n)| *n > 1).collect();
    let outside: Vec<Uuid> = duplicates
        .keys()
        .filter(|id| !in_flight.contains(id))
        .copied()
        .collect();
    assert!(
        outside.is_empty(),
        "{} of {} duplicated deliveries were not in flight at the fault ({} were):\n{}",
        outside.len(),
        duplicates.len(),
        in_flight.len(),
        describe(cluster, endpoints, &outside[..outside.len().min(10)]).await
    );
    Verdict {
        accepted: accepted.len(),
        requests: received.len(),
        duplicates,
        in_flight: in_flight.len(),
        settled_after,
    }
}

/// Waits up to `timeout` after `fault_over` until every one of `accepted` is `delivered`;
/// returns how long after `fault_over` that was. Panics at once when one is `dead`, and at the
/// deadline, with the rows and requests of the first of them.
pub async fn wait_delivered(
    cluster: &Cluster,
    endpoints: &[&str],
    accepted: &[Uuid],
    fault_over: Instant,
    timeout: Duration,
) -> Duration {
    let deadline = fault_over + timeout;
    loop {
        let stuck: Vec<(Uuid, String)> = sqlx::query_as(
            "SELECT id, status FROM deliveries WHERE id = ANY($1) AND status <> 'delivered'",
        )
        .bind(accepted)
        .fetch_all(&cluster.db)
        .await
        .expect("reading delivery statuses");
        if stuck.is_empty() {
            break;
        }
        let dead: Vec<Uuid> = stuck
            .iter()
            .filter(|(_, s)| s == "dead")
            .map(|(id, _)| *id)
            .collect();
        if !dead.is_empty() || Instant::now() >= deadline {
            let shown: Vec<Uuid> = if dead.is_empty() {
                stuck.iter().map(|(id, _)| *id).collect()
            } else {
                dead.clone()
            };
            panic!(
                "{} of {} deliveries not delivered {:?} after the fault ended ({} dead); \
                 statuses {:?}; the first of them:\n{}",
                stuck.len(),
                accepted.len(),
                fault_over.elapsed(),
                dead.len(),
                cluster.statuses().await,
                describe(cluster, endpoints, &shown[..shown.len().min(10)]).await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fault_over.elapsed()
}

/// The database holds exactly `accepted` deliveries (none the API did not report accepting: a
/// request retried with its idempotency key made no second row), and the invariants hold (the
/// doctor, in process and as `breakwater doctor`, finds nothing).
pub async fn check_store(cluster: &Cluster, accepted: usize) {
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries")
        .fetch_one(&cluster.db)
        .await
        .expect("counting deliveries");
    assert_eq!(
        total as usize, accepted,
        "the database holds deliveries the API did not report accepting"
    );

    let mut conn = cluster.db.acquire().await.expect("a connection");
    let findings = breakwater_core::doctor::check(&mut conn, 100)
        .await
        .expect("the doctor's check runs");
    drop(conn);
    assert!(
        findings.is_empty(),
        "invariants broken after the run: {findings:?}"
    );
    doctor_cli(cluster).await;
}

/// The receiver's view of `accepted`: every request on `endpoints` is for one of them and
/// arrived with a valid signature, and each of them was answered 2xx at least once (none lost);
/// returns how many times each was answered 2xx. A request's `webhook-id` is the delivery id, or
/// a key of `aliases` (a message id, the `webhook-id` of the message's deliveries), which maps it
/// to the delivery id. Panics with the rows and requests of the offending deliveries.
pub async fn answered_copies(
    cluster: &Cluster,
    endpoints: &[&str],
    accepted: &[Uuid],
    aliases: &HashMap<Uuid, Uuid>,
) -> HashMap<Uuid, usize> {
    let received = cluster.received(endpoints);
    let known: BTreeSet<Uuid> = accepted.iter().copied().collect();
    let mut ok_copies: HashMap<Uuid, usize> = HashMap::new();
    for r in &received {
        let id: Uuid = r
            .webhook_id
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("a request without a delivery id as webhook-id: {r:?}"));
        let id = aliases.get(&id).copied().unwrap_or(id);
        assert!(
            known.contains(&id),
            "a request for an unknown delivery {id}"
        );
        assert_eq!(
            r.signature_ok,
            Some(true),
            "delivery {id} arrived with a bad signature"
        );
        if r.answered.is_some_and(|s| (200..300).contains(&s)) {
            *ok_copies.entry(id).or_default() += 1;
        }
    }
    let never: Vec<Uuid> = accepted
        .iter()
        .filter(|id| !ok_copies.contains_key(id))
        .copied()
        .collect();
    assert!(
        never.is_empty(),
        "{} deliveries are `delivered` but the receiver never answered them 2xx:\n{}",
        never.len(),
        describe(cluster, endpoints, &never[..never.len().min(10)]).await
    );

    ok_copies
}

/// `breakwater doctor` against the scenario's database must exit 0.
async fn doctor_cli(cluster: &Cluster) {
    let mut cmd = tokio::process::Command::new(breakwater_bin());
    cmd.arg("doctor");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("BREAKWATER_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .env("DATABASE_URL", &cluster.url)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .expect("running breakwater doctor");
    assert!(
        out.status.success(),
        "`breakwater doctor` exited {:?}:\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A delivery as [`describe`] reads it: id, status, attempts, last error, its jobs and its
/// attempts (JSON arrays).
type DeliveryRow = (Uuid, String, i32, Option<String>, String, String);

/// Each delivery's row, jobs and attempts (from the database) and the requests the receiver got
/// for it (seconds since the cluster started, status answered), one paragraph each.
pub async fn describe(cluster: &Cluster, endpoints: &[&str], ids: &[Uuid]) -> String {
    let rows: sqlx::Result<Vec<DeliveryRow>> = sqlx::query_as(
        r#"
        SELECT d.id, d.status, d.attempts, d.last_error,
               (SELECT coalesce(json_agg(json_build_object(
                           'job', j.id, 'state', j.state, 'attempt', j.attempt,
                           'by', j.attempted_by, 'at', j.attempted_at, 'errors', j.errors)
                       ORDER BY j.id), '[]')
                FROM jobs j WHERE j.unique_key = 'delivery:' || d.id)::text,
               (SELECT coalesce(json_agg(json_build_object(
                           'attempt', a.attempt, 'node', a.node_id, 'started', a.started_at,
                           'ms', a.duration_ms, 'outcome', a.outcome, 'status', a.status_code,
                           'error', a.error)
                       ORDER BY a.id), '[]')
                FROM delivery_attempts a WHERE a.delivery_id = d.id)::text
        FROM deliveries d WHERE d.id = ANY($1)
        "#,
    )
    .bind(ids)
    .fetch_all(&cluster.db)
    .await;
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => return format!("(could not read the rows of {ids:?}: {e})"),
    };
    let received = cluster.received(endpoints);
    let mut out = String::new();
    for (id, status, attempts, last_error, jobs, tries) in rows {
        let seen: Vec<String> = received
            .iter()
            .filter(|r| r.webhook_id.as_deref() == Some(&id.to_string()))
            .map(|r| {
                format!(
                    "{:.3}s→{:?}",
                    r.at.duration_since(cluster.started).as_secs_f64(),
                    r.answered
                )
            })
            .collect();
        out.push_str(&format!(
            "delivery {id}: {status}, {attempts} attempts, last error {last_error:?}\n  jobs: \
             {jobs}\n  attempts: {tries}\n  received: {seen:?}\n"
        ));
    }
    out
}
