//! `breakwater`: serve | migrate | doctor | demo | openapi.

use anyhow::Context;
use breakwater::config::Settings;
use breakwater::telemetry;
use breakwater::Role;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "breakwater",
    version,
    about = "Multi-tenant webhook delivery with per-channel circuit breakers"
)]
struct Cli {
    /// Extra configuration file, merged over the defaults and under the environment.
    #[arg(long, global = true, env = "BREAKWATER_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the API and/or the workers against DATABASE_URL until SIGINT/SIGTERM.
    Serve {
        /// What this node runs; several nodes may share one database.
        #[arg(long, value_enum, default_value = "all")]
        role: Role,
        /// Do not apply migrations at start.
        #[arg(long)]
        no_migrate: bool,
    },
    /// Apply the database migrations to DATABASE_URL and exit.
    Migrate,
    /// Check the invariants between deliveries, their jobs and the queue's bookkeeping on
    /// DATABASE_URL (read only), print what is broken as JSON lines, and with --repair fix it.
    /// Exits 0 when nothing is (or remains) broken, 1 otherwise.
    Doctor {
        /// Repair what is found (each repair in its own transaction, re-checked there).
        #[arg(long)]
        repair: bool,
        /// At most this many findings of each kind per pass.
        #[arg(long, default_value_t = 1000)]
        limit: i64,
    },
    /// Run the demo: a service, a receiver with a healthy and a failing endpoint, two tenants,
    /// a few hundred signed deliveries, and a summary. Uses DATABASE_URL, or a throwaway Postgres
    /// when it is unset. Exits 0 only if every healthy delivery arrived with a valid signature.
    Demo {
        /// Deliveries to each channel.
        #[arg(long, default_value_t = 150)]
        per_channel: usize,
        /// Give up waiting after this many seconds.
        #[arg(long, default_value_t = 90)]
        timeout_secs: u64,
        /// After the summary, keep the service running (until Ctrl-C) and print the admin page,
        /// metrics URL and operator key, to look at `/admin` and `/metrics`.
        #[arg(long)]
        keep_running: bool,
    },
    /// Print the API's OpenAPI 3.1 document (JSON), exactly as `GET /api/v1/openapi.json`
    /// serves it. Needs no database or configuration; regenerate the committed copy with
    /// `cargo run -p breakwater -- openapi > docs/openapi.json`.
    Openapi,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::Openapi = cli.command {
        print!("{}", breakwater_api::openapi::json());
        return Ok(());
    }
    let settings = Settings::load(cli.config.as_deref()).map_err(anyhow::Error::msg)?;
    match cli.command {
        Command::Serve { role, no_migrate } => {
            let _telemetry = telemetry::init(&settings, telemetry::DEFAULT_LOG_FILTER)?;
            let pool = database(&settings, settings.database.max_connections).await?;
            if settings.database.migrate_on_start && !no_migrate {
                breakwater::migrate(&pool).await?;
            }
            let shutdown = breakwater::shutdown_on_signals();
            let node = breakwater::start_node(&settings, pool, role, shutdown).await?;
            tracing::info!(node_id = %node.node_id, ?role, "breakwater serving");
            node.wait().await
        }
        Command::Migrate => {
            let _telemetry = telemetry::init(&settings, telemetry::DEFAULT_LOG_FILTER)?;
            let pool = database(&settings, 2).await?;
            breakwater::migrate(&pool).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Doctor { repair, limit } => {
            let _telemetry = telemetry::init(&settings, telemetry::DEFAULT_LOG_FILTER)?;
            let pool = database(&settings, 2).await?;
            let mut conn = pool.acquire().await?;
            let findings = breakwater_core::doctor::check(&mut conn, limit).await?;
            for f in &findings {
                println!("{}", serde_json::to_string(f)?);
            }
            let mut broken = findings.len();
            if repair && !findings.is_empty() {
                let n = breakwater_core::doctor::repair(
                    &mut conn,
                    &findings,
                    settings.worker.max_attempts,
                )
                .await?;
                broken = breakwater_core::doctor::check(&mut conn, limit)
                    .await?
                    .len();
                println!("{{\"repaired\":{n},\"still_broken\":{broken}}}");
            } else {
                println!("{{\"found\":{broken}}}");
            }
            if broken > 0 {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Demo {
            per_channel,
            timeout_secs,
            keep_running,
        } => {
            let _telemetry = telemetry::init(&settings, "error")?;
            let ok = breakwater::demo::run(
                settings,
                per_channel,
                std::time::Duration::from_secs(timeout_secs),
                keep_running,
            )
            .await?;
            if ok {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        Command::Openapi => unreachable!("handled before the settings are loaded"),
    }
}

/// A pool of `max` connections to the configured database (`DATABASE_URL`).
async fn database(settings: &Settings, max: u32) -> anyhow::Result<sqlx::PgPool> {
    let url = settings
        .database_url
        .as_ref()
        .context("DATABASE_URL is not set")?;
    breakwater::connect(&url.0, max).await
}
