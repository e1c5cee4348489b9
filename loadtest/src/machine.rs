//! What the figures were measured on: commit, cores, load, Postgres settings.

use serde_json::{json, Value};
use sqlx::PgPool;
use std::process::Command;

/// The 1-, 5- and 15-minute load averages (from `/proc/loadavg`), if readable.
pub fn load_avg() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

fn git(args: &[&str]) -> Option<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Git commit, dirty flag, cores, CPU model, OS, load average.
pub fn describe() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
    });
    let mem_gib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| (kb / 1024.0 / 1024.0 * 10.0).round() / 10.0)
    });
    // Built from a `git archive` snapshot (no .git), the commit comes from the environment.
    let (commit, dirty) = match git(&["rev-parse", "HEAD"]) {
        Some(c) => (
            Some(c),
            git(&["status", "--porcelain"]).map(|s| !s.is_empty()),
        ),
        None => (std::env::var("LOADTEST_GIT_COMMIT").ok(), None),
    };
    json!({
        "git_commit": commit,
        "git_dirty": dirty,
        "source_dir": concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu,
        "mem_gib": mem_gib,
        "os": std::env::consts::OS,
        "load_avg_start": load_avg(),
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
    })
}

/// The Postgres version and the settings that move the figures.
pub async fn postgres(pool: &PgPool) -> Value {
    let mut v = serde_json::Map::new();
    for name in [
        "server_version",
        "fsync",
        "synchronous_commit",
        "shared_buffers",
        "autovacuum",
        "max_connections",
    ] {
        let r: Result<String, _> = sqlx::query_scalar(&format!("SHOW {name}"))
            .fetch_one(pool)
            .await;
        v.insert(name.into(), r.map(Value::String).unwrap_or(Value::Null));
    }
    Value::Object(v)
}
