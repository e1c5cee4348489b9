//! A throwaway Postgres for the demo, started from the installed server binaries.
//!
//! (The `pgtemp` crate does this too, but as root it runs the server through `sudo`, which
//! minimal machines lack; this module uses `runuser`, part of util-linux, instead.)

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running throwaway server; stopped and deleted on drop. [`TempPostgres::stop`] and
/// [`TempPostgres::restart`] take it down and bring it back on the same data and port (for
/// tests of a database outage).
pub struct TempPostgres {
    /// Connection URL (`postgres://postgres@127.0.0.1:<port>/postgres`).
    pub url: String,
    dir: PathBuf,
    child: Child,
    /// Where `postgres` is installed.
    bin: PathBuf,
    /// Whether the server runs as the `postgres` user (we are root).
    as_postgres: bool,
    port: u16,
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.trim_ascii() == b"0")
        .unwrap_or(false)
}

/// Finds `initdb` and `postgres`: `pg_config --bindir`, then the newest
/// `/usr/lib/postgresql/*/bin`, then `PATH`.
fn find_bin_dir() -> Option<PathBuf> {
    let has = |d: &Path| d.join("initdb").exists() && d.join("postgres").exists();
    if let Ok(o) = Command::new("pg_config").arg("--bindir").output() {
        let d = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        if has(&d) {
            return Some(d);
        }
    }
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<(u32, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                Some((
                    e.file_name().to_string_lossy().parse::<u32>().ok()?,
                    e.path().join("bin"),
                ))
            })
            .filter(|(_, d)| has(d))
            .collect();
        versions.sort();
        if let Some((_, d)) = versions.pop() {
            return Some(d);
        }
    }
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).find(|d| has(d)))
}

fn command(bin: &Path, as_postgres: bool) -> Command {
    if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    }
}

impl TempPostgres {
    /// Initializes a cluster in a fresh temporary directory and starts it on a free loopback
    /// port, tuned for speed over durability (fsync off). Errors say what to install when no
    /// server binaries are found.
    pub async fn start() -> anyhow::Result<Self> {
        let Some(bin) = find_bin_dir() else {
            bail!(
                "no PostgreSQL server binaries (initdb, postgres) found. Install them \
                 (Debian/Ubuntu: `apt-get install postgresql`) or set DATABASE_URL to an existing database"
            );
        };
        let root = is_root();
        let dir = std::env::temp_dir().join(format!(
            "breakwater-pg-{}-{:08x}",
            std::process::id(),
            rand_u32()
        ));
        std::fs::create_dir_all(&dir).context("creating the throwaway data directory")?;
        if root {
            // Postgres refuses to run as root: hand the directory to the postgres user.
            let ok = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status()?
                .success();
            if !ok {
                bail!(
                    "running as root, but could not chown {} to the postgres user",
                    dir.display()
                );
            }
        }
        let data = dir.join("data");
        let out = command(&bin.join("initdb"), root)
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("running initdb")?;
        if !out.status.success() {
            bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            l.local_addr()?.port()
        };
        let child = spawn_server(&bin, root, &dir, port)?;
        let me = Self {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
            child,
            bin,
            as_postgres: root,
            port,
        };
        me.wait_ready().await?;
        Ok(me)
    }

    /// Stops the server with a fast shutdown (open sessions are ended and their transactions
    /// rolled back), keeping its data directory and port for [`TempPostgres::restart`]. Returns
    /// once the server has exited (within 30 s); a server already stopped is left as it is.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        let Some(pid) = self.postmaster_pid() else {
            bail!("the throwaway postgres is running but has no postmaster.pid");
        };
        let ok = Command::new("kill")
            .args(["-INT", &pid])
            .status()?
            .success();
        if !ok {
            bail!("could not signal the throwaway postgres (pid {pid})");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                bail!("the throwaway postgres did not stop within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Starts the server again after [`TempPostgres::stop`], on the same data directory and port
    /// (so [`TempPostgres::url`] stays valid); returns once it accepts connections (within 30 s).
    /// Errors if it is still running, or if something else took the port meanwhile.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_none() {
            bail!("the throwaway postgres is still running: stop it first");
        }
        self.child = spawn_server(&self.bin, self.as_postgres, &self.dir, self.port)?;
        self.wait_ready().await
    }

    /// Waits until the server accepts connections (30 s at most).
    async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(pool) = sqlx::PgPool::connect(&self.url).await {
                pool.close().await;
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the throwaway postgres did not accept connections within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The postmaster's pid (the first line of `postmaster.pid`), while it runs. With runuser in
    /// between, signalling our child would not reach it.
    fn postmaster_pid(&self) -> Option<String> {
        std::fs::read_to_string(self.dir.join("data/postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next().map(str::trim).map(str::to_string))
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    }
}

/// Starts `postgres` on the cluster in `dir/data`, listening on 127.0.0.1:`port` and a socket in
/// `dir`, tuned for speed over durability (fsync off).
fn spawn_server(bin: &Path, as_postgres: bool, dir: &Path, port: u16) -> anyhow::Result<Child> {
    command(&bin.join("postgres"), as_postgres)
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
        .arg("-c")
        .arg(format!("unix_socket_directories={}", dir.display()))
        .args([
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ])
        .args(["-c", "max_connections=200"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting postgres")
}

fn rand_u32() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.subsec_nanos() ^ (t.as_secs() as u32)
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        // Stop the postmaster itself (see `postmaster_pid`). SIGINT is a fast shutdown, right
        // for throwaway data.
        let pid = self.postmaster_pid();
        if let Some(pid) = &pid {
            let _ = Command::new("kill").args(["-INT", pid]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(pid) = &pid {
            // Still there after 10 s: make sure it does not outlive us.
            let _ = Command::new("kill")
                .args(["-KILL", pid])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
