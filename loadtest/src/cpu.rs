//! CPU cost of a phase of a run: CPU seconds of the service and of Postgres, and per 1 000
//! deliveries, read from `/proc` at the phase's start and end ([`Probe::start`],
//! [`Probe::finish`]).
//!
//! - **Service**: the nodes run inside the harness process ([`crate::service`]), each on threads
//!   named `bw-node<i>` (its runtime's workers and blocking threads and the thread that drives
//!   it). Their CPU is the sum of `utime + stime` of `/proc/self/task/<tid>/stat` over those
//!   threads, per thread (end − start, a thread born in the phase from 0). A thread that exits
//!   during the phase loses its share; the node runtimes keep their blocking threads alive for
//!   the run so that none does, and `exited_threads_cpu_s` (the process's own total minus its
//!   live threads) shows what was lost anyway. `harness_process_cpu_s` is the whole process
//!   (service + load generator + receivers + monitors).
//! - **Postgres**: every process of the server the run's database lives on: the postmaster
//!   (the parent of the harness's own backend) and its children. Backends come and go, so the
//!   sum is the postmaster's `utime + stime + cutime + cstime` (children it has reaped) plus
//!   `utime + stime` of its live children; the difference of two such sums counts a backend
//!   that exited in between once (its time moved from "live" into the postmaster's `cutime`).
//!   This is the whole server: another client of it adds to the figure.
//!   `postgres_run_db_backends_cpu_s` is the part of the live backends connected to the run's
//!   database at the phase's end (the service's pools and the harness's monitors), from their
//!   start figure (or 0 if born in the phase); one that exited in the phase is missing from it.
//! - **Deliveries**: delivery attempts the service recorded in the phase (rows of
//!   `delivery_attempts` with an id above the largest at the start; any outcome), by node.

use serde::Serialize;
use sqlx::PgPool;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

/// How the service's CPU is measured, for the report.
pub const SERVICE_SOURCE: &str = "in-process: utime+stime of the harness process's threads named bw-node<i> (the service's nodes run inside the harness, each on its own runtime), per thread, end − start";
/// How Postgres's CPU is measured, for the report.
pub const POSTGRES_SOURCE: &str = "the whole server: postmaster utime+stime+cutime+cstime (reaped backends) + utime+stime of its live children, end − start";

/// Clock ticks per second of `/proc` times (`getconf CLK_TCK`, else 100).
fn ticks_per_s() -> f64 {
    static TCK: OnceLock<f64> = OnceLock::new();
    *TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .filter(|&t: &f64| t > 0.0)
            .unwrap_or(100.0)
    })
}

/// The fields of a `/proc/…/stat` line that matter here.
#[derive(Debug, Clone, PartialEq)]
struct Stat {
    comm: String,
    ppid: i32,
    /// utime + stime, ticks.
    own: u64,
    /// cutime + cstime (waited-for children), ticks.
    children: u64,
}

/// Parses a `/proc/<pid>/stat` (or task) line: `pid (comm) state ppid … utime stime cutime
/// cstime …` (fields 14–17); `comm` may hold spaces and parentheses, so the fields are counted
/// from the last `)`.
fn parse_stat(line: &str) -> Option<Stat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let comm = line.get(open + 1..close)?.to_string();
    let f: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        comm,
        ppid: f.get(1)?.parse().ok()?,
        own: n(11)? + n(12)?,
        children: n(13)? + n(14)?,
    })
}

fn read_stat(path: &str) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// The harness process's live threads: tid → (name, ticks).
fn threads() -> HashMap<i32, (String, u64)> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(s) = read_stat(&format!("/proc/self/task/{tid}/stat")) {
            out.insert(tid, (s.comm, s.own));
        }
    }
    out
}

/// The postmaster `pm`'s total (itself and every child it has reaped) plus its live children,
/// ticks; and each live child's own ticks.
fn postgres(pm: i32) -> Option<(u64, HashMap<i32, u64>)> {
    let p = read_stat(&format!("/proc/{pm}/stat"))?;
    let mut live = HashMap::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(s) = read_stat(&format!("/proc/{pid}/stat")) {
            if s.ppid == pm {
                live.insert(pid, s.own);
            }
        }
    }
    Some((p.own + p.children + live.values().sum::<u64>(), live))
}

/// Reads the run's figures at the start and end of phases (see the module docs).
#[derive(Debug, Clone)]
pub struct Probe {
    /// The postmaster's pid, if the server's processes are visible here.
    postmaster: Option<i32>,
}

/// What [`Probe::start`] read.
#[derive(Debug, Clone)]
pub struct PhaseStart {
    at: std::time::Instant,
    threads: HashMap<i32, (String, u64)>,
    process: u64,
    postgres: Option<(u64, HashMap<i32, u64>)>,
    last_attempt_id: i64,
}

/// One phase's cost (a `cpu.phases.<name>` object of `result.json`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseCost {
    /// Wall time of the phase, s.
    pub seconds: f64,
    /// Delivery attempts recorded in the phase (any outcome).
    pub deliveries: i64,
    /// Of those, the successful ones.
    pub delivered: i64,
    /// Attempts by the node that made them (`delivery_attempts.node_id`).
    pub deliveries_by_node: BTreeMap<String, i64>,
    /// CPU of the service's node threads, s.
    pub service_cpu_s: f64,
    /// The same by node thread name (`bw-node0`, …), s.
    pub service_cpu_s_by_node: BTreeMap<String, f64>,
    /// Postgres, the whole server, s (null if its processes are not visible).
    pub postgres_cpu_s: Option<f64>,
    /// The live backends connected to the run's database (a lower bound of its share), s.
    pub postgres_run_db_backends_cpu_s: Option<f64>,
    /// The whole harness process (service, load generator, receivers, monitors), s.
    pub harness_process_cpu_s: f64,
    /// CPU of harness threads that exited in the phase (process total − live threads), s;
    /// lost to `service_cpu_s` if they were the service's.
    pub exited_threads_cpu_s: f64,
    /// `service_cpu_s` per 1 000 `deliveries`.
    pub service_cpu_s_per_1000_deliveries: Option<f64>,
    /// `postgres_cpu_s` per 1 000 `deliveries`.
    pub postgres_cpu_s_per_1000_deliveries: Option<f64>,
    /// `harness_process_cpu_s` per 1 000 `deliveries`.
    pub harness_process_cpu_s_per_1000_deliveries: Option<f64>,
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

impl Probe {
    /// Finds the postmaster of `pool`'s server: the parent of this connection's backend, if it
    /// is a process visible here (the server runs on this machine, in this PID namespace).
    pub async fn new(pool: &PgPool) -> Self {
        let backend: Option<i32> = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(pool)
            .await
            .ok();
        let postmaster = backend
            .and_then(|pid| read_stat(&format!("/proc/{pid}/stat")))
            .map(|s| s.ppid)
            .filter(|&pm| read_stat(&format!("/proc/{pm}/stat")).is_some());
        Self { postmaster }
    }

    /// Reads the start of a phase.
    pub async fn start(&self, pool: &PgPool) -> anyhow::Result<PhaseStart> {
        let last_attempt_id: i64 =
            sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM delivery_attempts")
                .fetch_one(pool)
                .await?;
        Ok(PhaseStart {
            at: std::time::Instant::now(),
            threads: threads(),
            process: read_stat("/proc/self/stat").map_or(0, |s| s.own),
            postgres: self.postmaster.and_then(postgres),
            last_attempt_id,
        })
    }

    /// Waits until the service has recorded at least `n` delivery attempts since `start` (a
    /// receiver sees a request before its attempt is committed), at most `timeout`; returns
    /// how many it saw.
    pub async fn wait_recorded(
        &self,
        pool: &PgPool,
        start: &PhaseStart,
        n: u64,
        timeout: std::time::Duration,
    ) -> anyhow::Result<u64> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let c: i64 = sqlx::query_scalar("SELECT count(*) FROM delivery_attempts WHERE id > $1")
                .bind(start.last_attempt_id)
                .fetch_one(pool)
                .await?;
            if c as u64 >= n || tokio::time::Instant::now() >= deadline {
                return Ok(c as u64);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Reads the end of the phase that `start` began, and the cost in between.
    pub async fn finish(&self, pool: &PgPool, start: &PhaseStart) -> anyhow::Result<PhaseCost> {
        // /proc first, the database after: the reads cost CPU of their own.
        let seconds = start.at.elapsed().as_secs_f64();
        let threads_end = threads();
        let process_end = read_stat("/proc/self/stat").map_or(0, |s| s.own);
        let pg_end = self.postmaster.and_then(postgres);
        let tck = ticks_per_s();

        let mut by_node: BTreeMap<String, f64> = BTreeMap::new();
        let mut live_delta = 0u64;
        for (tid, (name, end)) in &threads_end {
            let d = end.saturating_sub(start.threads.get(tid).map_or(0, |t| t.1));
            live_delta += d;
            if name.starts_with("bw-node") {
                *by_node.entry(name.clone()).or_default() += d as f64 / tck;
            }
        }
        let process = process_end.saturating_sub(start.process);
        let service = by_node.values().sum::<f64>();

        let run_db_pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()",
        )
        .fetch_all(pool)
        .await?;
        let (postgres_s, run_db_s) = match (&start.postgres, &pg_end) {
            (Some((a, live_a)), Some((b, live_b))) => {
                let own: u64 = run_db_pids
                    .iter()
                    .filter_map(|pid| {
                        live_b
                            .get(pid)
                            .map(|e| e.saturating_sub(live_a.get(pid).copied().unwrap_or(0)))
                    })
                    .sum();
                (
                    Some(b.saturating_sub(*a) as f64 / tck),
                    Some(own as f64 / tck),
                )
            }
            _ => (None, None),
        };

        let rows: Vec<(Option<String>, i64, i64)> = sqlx::query_as(
            "SELECT node_id, count(*), count(*) FILTER (WHERE outcome = 'success')
             FROM delivery_attempts WHERE id > $1 GROUP BY node_id ORDER BY node_id",
        )
        .bind(start.last_attempt_id)
        .fetch_all(pool)
        .await?;
        let deliveries: i64 = rows.iter().map(|r| r.1).sum();
        let per_1000 =
            |cpu: f64| (deliveries > 0).then(|| round3(cpu * 1000.0 / deliveries as f64));
        Ok(PhaseCost {
            seconds: (seconds * 10.0).round() / 10.0,
            deliveries,
            delivered: rows.iter().map(|r| r.2).sum(),
            deliveries_by_node: rows
                .iter()
                .map(|r| (r.0.clone().unwrap_or_else(|| "?".into()), r.1))
                .collect(),
            service_cpu_s: round3(service),
            service_cpu_s_by_node: by_node.into_iter().map(|(k, v)| (k, round3(v))).collect(),
            postgres_cpu_s: postgres_s.map(round3),
            postgres_run_db_backends_cpu_s: run_db_s.map(round3),
            harness_process_cpu_s: round3(process as f64 / tck),
            exited_threads_cpu_s: round3(process.saturating_sub(live_delta) as f64 / tck),
            service_cpu_s_per_1000_deliveries: per_1000(service),
            postgres_cpu_s_per_1000_deliveries: postgres_s.and_then(per_1000),
            harness_process_cpu_s_per_1000_deliveries: per_1000(process as f64 / tck),
        })
    }
}

/// The `cpu` object of `result.json`: how each figure is measured, and each phase's cost in
/// the order given.
pub fn report(phases: &[(&str, &PhaseCost)]) -> serde_json::Value {
    let mut p = serde_json::Map::new();
    for (name, cost) in phases {
        p.insert(
            (*name).to_string(),
            serde_json::to_value(cost).unwrap_or_default(),
        );
    }
    serde_json::json!({
        "service_source": SERVICE_SOURCE,
        "postgres_source": POSTGRES_SOURCE,
        "deliveries_definition": "delivery attempts recorded in the phase (delivery_attempts rows, any outcome)",
        "phases": p,
    })
}

/// The summary lines of a report's `cpu` object (one per phase), for the scenarios' summaries.
pub fn summary_lines(report: &serde_json::Value) -> Vec<String> {
    let cpu = &report["cpu"];
    let Some(phases) = cpu["phases"].as_object() else {
        return Vec::new();
    };
    let f = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{x:.3}"));
    let mut lines = Vec::new();
    for (name, c) in phases {
        lines.push(format!(
                "  cpu per 1000 deliveries ({name}: {} deliveries in {} s): service {} s, postgres {} s (run db's backends {} s), harness process {} s; in all service {} s, postgres {} s [service = bw-node* threads in the harness process]",
                c["deliveries"],
                c["seconds"],
                f(&c["service_cpu_s_per_1000_deliveries"]),
                f(&c["postgres_cpu_s_per_1000_deliveries"]),
                c["postgres_run_db_backends_cpu_s"]
                    .as_f64()
                    .zip(c["deliveries"].as_f64().filter(|&d| d > 0.0))
                    .map_or("-".into(), |(s, d)| format!("{:.3}", s * 1000.0 / d)),
                f(&c["harness_process_cpu_s_per_1000_deliveries"]),
                f(&c["service_cpu_s"]),
                f(&c["postgres_cpu_s"]),
        ));
        // Several nodes: each one's share (threads by node index, attempts by node id).
        let by_node = c["service_cpu_s_by_node"].as_object();
        if by_node.is_some_and(|m| m.len() > 1) {
            let join = |m: Option<&serde_json::Map<String, serde_json::Value>>| {
                m.into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            lines.push(format!(
                "  by node ({name}): service cpu s {}; deliveries {}",
                join(by_node),
                join(c["deliveries_by_node"].as_object()),
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_from_the_last_parenthesis() {
        let line = "4242 (postgres: a (b)) S 2269 4242 4242 0 -1 4194560 100 0 0 0 \
                    17 5 3 2 20 0 1 0 100 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.comm, "postgres: a (b)");
        assert_eq!(s.ppid, 2269);
        assert_eq!(s.own, 22);
        assert_eq!(s.children, 5);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn this_process_and_its_threads_are_readable() {
        let me = read_stat("/proc/self/stat").expect("/proc/self/stat");
        assert!(me.ppid > 0);
        assert!(!threads().is_empty());
    }
}
