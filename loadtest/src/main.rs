//! `breakwater-loadtest`: isolation | fairness | throughput | fetch-bench. See the crate docs
//! and BENCHMARKS.md.

use breakwater_loadtest::isolation::DeadOrdering;
use breakwater_loadtest::receiver::DeadMode;
use breakwater_loadtest::service::ServiceOptions;
use breakwater_loadtest::{fairness, fetch_bench, isolation, throughput, RunOptions};
use clap::{Parser, Subcommand};
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "breakwater-loadtest",
    version,
    about = "Load tests of Breakwater on loopback: isolation under a dead (or slow) channel's backlog, fairness between two tenants of a tier, throughput, and the queue fetch micro-benchmark. Each run uses a fresh database (on DATABASE_URL's server, dropped at the end) or a throwaway Postgres, starts the service itself, and stops by itself."
)]
struct Cli {
    #[command(flatten)]
    run: RunOptions,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A healthy channel's latency while another tenant's dead channel holds a backlog, and the
    /// same stream without it (baseline), in one run.
    Isolation {
        /// Deliveries enqueued to the dead channel before the measured stream.
        #[arg(long, default_value_t = 10_000)]
        backlog: u64,
        /// Dead channels, all on the one dead endpoint (one host: paths /dead/<i> of one port),
        /// the backlog split evenly over them (at least 1 each). 1: the single dead channel.
        #[arg(long, default_value_t = 1)]
        dead_channels: usize,
        /// Tenants the dead channels are spread over (round robin), ≤ --dead-channels.
        #[arg(long, default_value_t = 1)]
        dead_tenants: usize,
        /// How the dead endpoint fails: timeout (never answers), refuse (nothing listens), 503,
        /// or slow (answers 200 after --slow-ms, so its circuit never opens).
        #[arg(long, value_enum, default_value = "timeout")]
        dead_mode: DeadMode,
        /// The dead channels' `ordering`: none (parallel, the default) or fifo (one at a time in
        /// the order accepted: the failing head blocks the whole backlog behind it).
        #[arg(long, value_enum, default_value = "none")]
        dead_ordering: DeadOrdering,
        /// With --dead-mode slow: how long the dead endpoint takes to answer 200, ms.
        #[arg(long, default_value_t = 2000)]
        slow_ms: u64,
        /// Healthy deliveries per second.
        #[arg(long, default_value_t = 50.0)]
        rate: f64,
        /// Seconds of each stream (baseline, then loaded).
        #[arg(long, default_value_t = 60)]
        duration: u64,
        /// Seconds to wait for a stream's deliveries after it ends.
        #[arg(long, default_value_t = 60)]
        drain_timeout: u64,
        /// Deliveries per backlog batch request (≤ 1000).
        #[arg(long, default_value_t = 1000)]
        backlog_batch: usize,
        /// Seed this many old finished deliveries (with attempts and completed jobs) before
        /// the baseline, and prune them with the retention pruner while the loaded stream runs.
        #[arg(long, default_value_t = 0)]
        prune_rows: u64,
        #[command(flatten)]
        service: ServiceOptions,
    },
    /// Fairness inside a tier: tenant A's backlog over many slow channels, then one delivery of
    /// tenant B to a fast endpoint; B's latency, A's deliveries before it, A's drain time and
    /// A's requests in flight at once.
    Fairness {
        /// Tenant A's channels (each its own endpoint; channels are created --concurrency at a
        /// time).
        #[arg(long, default_value_t = 5)]
        channels: usize,
        /// How long A's endpoints take to answer 200, ms.
        #[arg(long, default_value_t = 200)]
        a_latency_ms: u64,
        /// A's deliveries per round, round-robin over its channels (batch requests of ≤ 1000).
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// From A's last accepted batch to B's one delivery, ms.
        #[arg(long, default_value_t = 1000)]
        b_delay_ms: u64,
        /// Rounds, each on a fresh backlog of A's after the previous one drained; each is
        /// reported.
        #[arg(long, default_value_t = 1)]
        rounds: u64,
        /// API requests in flight at once (creating A's channels, enqueueing its batches).
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Seconds a round waits for its arrivals after B's delivery was accepted.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// Keep the service's per-tenant ingress limit (api.ingress_per_second); by default the
        /// run turns it off so A's backlog is in before B's delivery whatever --channels.
        #[arg(long)]
        keep_ingress_limit: bool,
        #[command(flatten)]
        service: ServiceOptions,
    },
    /// Deliveries/s end to end: many deliveries to fast endpoints across many channels.
    Throughput {
        /// Deliveries in all.
        #[arg(long, default_value_t = 20_000)]
        count: u64,
        /// Channels.
        #[arg(long, default_value_t = 50)]
        channels: usize,
        /// Tenants the channels are spread over.
        #[arg(long, default_value_t = 5)]
        tenants: usize,
        /// Deliveries per batch request (≤ 1000).
        #[arg(long, default_value_t = 100)]
        batch: usize,
        /// Batch requests in flight at once.
        #[arg(long, default_value_t = 4)]
        enqueue_concurrency: usize,
        /// Open loop instead of the burst: one single enqueue every 1/RATE s (round robin over
        /// the channels), --count in all, not waiting for earlier ones; reports the latency
        /// (p50/p95/p99) at that rate. --batch and --enqueue-concurrency do not apply.
        #[arg(long)]
        rate: Option<f64>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        #[command(flatten)]
        service: ServiceOptions,
    },
    /// The queue's fetch (+ complete) with no parked jobs and with N parked jobs, same run.
    FetchBench {
        /// Parked jobs.
        #[arg(long, default_value_t = 100_000)]
        parked: u64,
        /// Measured fetches per phase.
        #[arg(long, default_value_t = 2_000)]
        iterations: u64,
        /// Jobs per fetch.
        #[arg(long, default_value_t = 1)]
        limit: i64,
    },
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn,sqlx=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal, as the service's own text log.
        .with_ansi(breakwater::telemetry::ansi_colours())
        .init();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing();
    let out = cli.run.out.clone();
    let started = std::time::SystemTime::now();
    breakwater_loadtest::clock::epoch();
    // Each scenario returns its report (already written to `--out`); its summary is printed here.
    let (report, summary): (_, fn(&serde_json::Value)) = match cli.command {
        Command::Isolation {
            backlog,
            dead_channels,
            dead_tenants,
            dead_mode,
            dead_ordering,
            slow_ms,
            rate,
            duration,
            drain_timeout,
            backlog_batch,
            prune_rows,
            service,
        } => {
            let report = isolation::run(&isolation::Options {
                backlog,
                dead_channels,
                dead_tenants,
                dead_mode,
                dead_ordering,
                slow: Duration::from_millis(slow_ms),
                rate,
                duration: Duration::from_secs(duration),
                drain_timeout: Duration::from_secs(drain_timeout),
                backlog_batch,
                prune_rows,
                service,
                run: cli.run,
            })
            .await?;
            (report, isolation::print_summary)
        }
        Command::Fairness {
            channels,
            a_latency_ms,
            count,
            b_delay_ms,
            rounds,
            concurrency,
            timeout,
            keep_ingress_limit,
            service,
        } => {
            let report = fairness::run(&fairness::Options {
                channels,
                a_latency: Duration::from_millis(a_latency_ms),
                count,
                b_delay: Duration::from_millis(b_delay_ms),
                rounds,
                concurrency,
                timeout: Duration::from_secs(timeout),
                keep_ingress_limit,
                service,
                run: cli.run,
            })
            .await?;
            (report, fairness::print_summary)
        }
        Command::Throughput {
            count,
            channels,
            tenants,
            batch,
            enqueue_concurrency,
            rate,
            timeout,
            service,
        } => {
            let report = throughput::run(&throughput::Options {
                count,
                channels,
                tenants,
                batch,
                enqueue_concurrency,
                rate,
                timeout: Duration::from_secs(timeout),
                service,
                run: cli.run,
            })
            .await?;
            (report, throughput::print_summary)
        }
        Command::FetchBench {
            parked,
            iterations,
            limit,
        } => {
            let report = fetch_bench::run(&fetch_bench::Options {
                parked,
                iterations,
                limit,
                run: cli.run,
            })
            .await?;
            (report, fetch_bench::print_summary)
        }
    };
    summary(&report);
    print_written(out.as_deref(), started);
    // A run that lost deliveries is a failed run.
    if report["lost"].as_u64().unwrap_or(0) > 0 {
        eprintln!("LOST DELIVERIES: {}", report["lost"]);
        std::process::exit(2);
    }
    Ok(())
}

/// Says where the run's files are: `result.json` and the charts this run wrote in `--out`
/// (a chart left there by an earlier run is not named), or that nothing was written.
fn print_written(out: Option<&std::path::Path>, started: std::time::SystemTime) {
    let Some(dir) = out else {
        println!("nothing written: give --out DIR for result.json and the chart");
        return;
    };
    let written: Vec<String> = ["result.json", "latency.svg", "throughput.svg"]
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| {
            std::fs::metadata(p)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= started)
        })
        .map(|p| p.display().to_string())
        .collect();
    if written.is_empty() {
        println!("nothing written in {}", dir.display());
    } else {
        println!("wrote {}", written.join(", "));
    }
}
