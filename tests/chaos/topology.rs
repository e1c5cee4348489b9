//! The HA topology of `deploy/ha/` (etcd, three Postgres nodes under Patroni in strict
//! synchronous mode, HAProxy in front), driven through `deploy/ha/cluster.sh`: started for a
//! scenario, faulted by it, torn down when the handle is dropped (on a panic too, after copying
//! every component's log into the scenario's artifacts).

use sqlx::Connection;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The script that starts, faults and stops the topology.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/ha/cluster.sh");

/// How long `cluster.sh up` may take (first run: installing the Debian packages).
const UP_TIMEOUT_S: u64 = 600;

/// A running topology on loopback. Every scenario uses the script's default ports (they run one
/// at a time: the `ha-topology` test group of `.config/nextest.toml`).
pub struct Topology {
    /// The script's working directory (data, configs, logs): `HA_DIR`.
    dir: PathBuf,
    /// Where the components' logs are copied when the topology is torn down.
    artifacts: PathBuf,
    /// `postgres://…` through HAProxy's write listener: always the primary.
    pub url: String,
}

impl Topology {
    /// `cluster.sh up` with its data under `/tmp/breakwater-ha-chaos-<name>` (the postgres user
    /// must reach it): returns once a primary and a synchronous standby serve writes through
    /// HAProxy. Panics with the script's output when it fails.
    pub async fn up(name: &str, artifacts: &Path) -> Self {
        let dir = PathBuf::from(format!("/tmp/breakwater-ha-chaos-{name}"));
        let mut topology = Self {
            dir,
            artifacts: artifacts.join("ha"),
            url: String::new(),
        };
        // What an earlier, interrupted run left behind.
        topology.script(&["down"]).await;
        let started = Instant::now();
        let out = tokio::time::timeout(
            Duration::from_secs(UP_TIMEOUT_S),
            topology.command(&["up"]).output(),
        )
        .await
        .expect("cluster.sh up finished in time")
        .expect("running cluster.sh up");
        assert!(
            out.status.success(),
            "cluster.sh up failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        topology.url = topology.script(&["url"]).await;
        eprintln!(
            "ha: topology up in {:.1} s, {}",
            started.elapsed().as_secs_f64(),
            topology.script(&["status"]).await.replace('\n', "; ")
        );
        topology
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(SCRIPT);
        cmd.args(args).env("HA_DIR", &self.dir);
        cmd
    }

    /// Runs `cluster.sh <args>`; its stdout, trimmed (empty when it failed: the callers poll).
    pub async fn script(&self, args: &[&str]) -> String {
        match self.command(args).output().await {
            Ok(out) if out.status.success() => {
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            }
            Ok(out) => {
                eprintln!(
                    "ha: cluster.sh {args:?} exited {:?}: {}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                String::new()
            }
            Err(e) => panic!("running cluster.sh {args:?}: {e}"),
        }
    }

    /// The node Patroni names primary (leader, running), if any.
    pub async fn primary(&self) -> Option<String> {
        Some(self.script(&["primary"]).await).filter(|s| !s.is_empty())
    }

    /// The node Patroni names synchronous standby (running), if any.
    pub async fn sync_standby(&self) -> Option<String> {
        Some(self.script(&["sync"]).await).filter(|s| !s.is_empty())
    }

    /// `cluster.sh <fault> <node>` (`kill-postgres`, `kill-node`, `start-node`, `freeze`,
    /// `thaw`); panics when it fails.
    pub async fn fault(&self, fault: &str, node: &str) {
        let out = self
            .command(&[fault, node])
            .output()
            .await
            .expect("running cluster.sh");
        assert!(
            out.status.success(),
            "cluster.sh {fault} {node} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Waits until Patroni names a primary other than `old`; returns it. Panics after
    /// `timeout`.
    pub async fn new_primary(&self, old: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(p) = self.primary().await.filter(|p| p != old) {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "no primary other than {old} within {timeout:?}: {}",
                self.script(&["status"]).await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until a write through HAProxy commits (a transaction that takes a transaction id,
    /// so its commit waits for the synchronous standby), each try on a new connection bounded by
    /// 1 s; returns when it did. Panics after `timeout`.
    pub async fn wait_writes(&self, timeout: Duration) -> Instant {
        let deadline = Instant::now() + timeout;
        loop {
            let tried = tokio::time::timeout(Duration::from_secs(1), async {
                let mut conn = sqlx::PgConnection::connect(&self.url).await?;
                sqlx::query("SELECT pg_current_xact_id()")
                    .execute(&mut conn)
                    .await?;
                conn.close().await
            })
            .await;
            if let Ok(Ok(())) = tried {
                return Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "no write committed through HAProxy within {timeout:?} ({tried:?}): {}",
                self.script(&["status"]).await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = std::fs::create_dir_all(&self.artifacts);
        let logs = ["etcd/etcd.log", "haproxy.log"]
            .into_iter()
            .map(String::from)
            .chain(["pg1", "pg2", "pg3"].map(|n| format!("{n}/patroni.log")));
        for log in logs {
            let _ = std::fs::copy(
                self.dir.join(&log),
                self.artifacts.join(log.replace('/', "-")),
            );
        }
        let down = Command::new(SCRIPT)
            .arg("down")
            .env("HA_DIR", &self.dir)
            .status();
        if !down.as_ref().is_ok_and(|s| s.success()) {
            eprintln!(
                "ha: cluster.sh down failed ({down:?}); HA_DIR={}",
                self.dir.display()
            );
        }
    }
}
