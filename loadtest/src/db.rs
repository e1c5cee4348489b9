//! A database of the run's own: a fresh `bw_load_<random>` database on the `DATABASE_URL`
//! server (dropped at the end), or a throwaway Postgres when no URL is given.

use anyhow::Context;
use breakwater::throwaway::TempPostgres;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, Executor, PgConnection, PgPool};
use std::str::FromStr;
use std::time::Duration;

enum Cleanup {
    Drop {
        admin: Box<PgConnectOptions>,
        name: String,
    },
    Temp(Box<TempPostgres>),
}

/// The run's database.
pub struct Database {
    /// How to connect to it.
    pub options: PgConnectOptions,
    /// What it is, for the report (`bw_load_… on host:port` or `throwaway`).
    pub label: String,
    cleanup: Cleanup,
}

impl Database {
    /// Creates a fresh database on the server of `url`, or starts a throwaway Postgres when
    /// `url` is `None`.
    pub async fn create(url: Option<&str>) -> anyhow::Result<Self> {
        match url.filter(|u| !u.trim().is_empty()) {
            Some(url) => {
                let admin = PgConnectOptions::from_str(url).context("parsing DATABASE_URL")?;
                let name = format!("bw_load_{:016x}", rand::random::<u64>());
                let mut conn = PgConnection::connect_with(&admin)
                    .await
                    .context("connecting to DATABASE_URL")?;
                conn.execute(format!("CREATE DATABASE {name}").as_str())
                    .await
                    .with_context(|| format!("creating database {name}"))?;
                conn.close().await?;
                let label = format!("{name} on {}:{}", admin.get_host(), admin.get_port());
                Ok(Self {
                    options: admin.clone().database(&name),
                    label,
                    cleanup: Cleanup::Drop {
                        admin: Box::new(admin),
                        name,
                    },
                })
            }
            None => {
                let temp = TempPostgres::start().await?;
                Ok(Self {
                    options: PgConnectOptions::from_str(&temp.url)?,
                    label: "throwaway Postgres (fsync off)".into(),
                    cleanup: Cleanup::Temp(Box::new(temp)),
                })
            }
        }
    }

    /// A pool of at most `max` connections.
    pub async fn pool(&self, max: u32) -> anyhow::Result<PgPool> {
        PgPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(self.options.clone())
            .await
            .context("connecting to the run's database")
    }

    /// Drops the database (or stops the throwaway server). Call after every pool is closed.
    pub async fn cleanup(self) -> anyhow::Result<()> {
        match self.cleanup {
            Cleanup::Drop { admin, name } => {
                let mut conn = PgConnection::connect_with(&admin).await?;
                conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                    .await
                    .with_context(|| format!("dropping database {name}"))?;
                conn.close().await?;
            }
            Cleanup::Temp(t) => drop(t),
        }
        Ok(())
    }
}
