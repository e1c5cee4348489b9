//! CI smoke test of the harness: a small isolation scenario (backlog 500, 10 s streams, dead
//! endpoint answering 503, 3 000 old rows pruned during the loaded stream) end to end, on its
//! own database; and a tiny open-loop throughput run (`throughput --rate`). It checks that the harness works (every accepted healthy delivery arrived, the
//! breaker opened and the monitor saw the backlog parked, the dead endpoint stayed within its
//! budget, the pruner deleted every seeded row, the report and chart were written), not the
//! latency goals: those are benchmarks, recorded in BENCHMARKS.md, not assertions on a shared
//! CI machine.

use breakwater_loadtest::isolation::{run, Options};
use breakwater_loadtest::receiver::DeadMode;
use breakwater_loadtest::{throughput, RunOptions};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_isolation_scenario_runs_end_to_end() {
    // The service's warnings (an API 503's cause, say) go to the test's output, which nextest
    // shows when the test fails; sqlx's slow-statement warnings do not (as in the harness).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn,sqlx=error"))
        .with_test_writer()
        .try_init();
    let out = std::env::temp_dir().join(format!("bw-loadtest-smoke-{}", std::process::id()));
    let o = Options {
        backlog: 500,
        dead_mode: DeadMode::Status503,
        rate: 50.0,
        duration: Duration::from_secs(10),
        drain_timeout: Duration::from_secs(30),
        run: RunOptions {
            database_url: std::env::var("DATABASE_URL").ok(),
            out: Some(out.clone()),
            print: false,
        },
        prune_rows: 3_000,
        ..Options::default()
    };
    let r = run(&o).await.expect("the isolation scenario runs");

    assert_eq!(r["scenario"], "isolation");
    assert_eq!(r["backlog"], 500);
    assert_eq!(
        r["lost"], 0,
        "accepted healthy deliveries never arrived: {r:#}"
    );
    assert_eq!(r["enqueue_errors"], 0, "{r:#}");
    let expected = 50 * 10;
    assert_eq!(r["baseline"]["count"], expected, "{r:#}");
    assert_eq!(r["healthy"]["count"], expected, "{r:#}");
    for k in ["p50_ms", "p95_ms", "p99_ms", "max_ms"] {
        assert!(
            r["healthy"][k].as_f64().is_some_and(|v| v > 0.0),
            "{k}: {r:#}"
        );
        assert!(
            r["baseline"][k].as_f64().is_some_and(|v| v > 0.0),
            "{k}: {r:#}"
        );
    }
    assert!(
        r["breaker_opened_after_ms"].as_f64().is_some(),
        "the dead channel's breaker never opened: {r:#}"
    );
    assert!(
        r["backlog_all_parked_after_s"].as_f64().is_some(),
        "no queue sample saw the dead channel's backlog parked whole: {r:#}"
    );
    assert_eq!(r["backlog_enqueued"], 500);
    assert_eq!(r["backlog_accounted"], true, "{r:#}");
    assert_eq!(r["dead_endpoint_budget"]["within"], true, "{r:#}");
    // The retention pass during the loaded stream deleted every seeded row.
    for k in ["deliveries_deleted", "attempts_deleted", "jobs_deleted"] {
        assert_eq!(r["prune"][k], 3_000, "{k}: {r:#}");
    }
    assert!(r["git_commit"].is_string() || r["git_commit"].is_null());
    assert!(r["cores"].as_u64().is_some_and(|c| c >= 1));
    // The CPU of both phases: the service's threads were found and the deliveries counted
    // (Postgres's processes may not be visible from here: null then).
    for phase in ["baseline", "loaded"] {
        let c = &r["cpu"]["phases"][phase];
        assert!(
            c["deliveries"].as_i64().is_some_and(|n| n >= expected),
            "{phase}: {c:#}"
        );
        assert!(
            c["service_cpu_s"].as_f64().is_some_and(|s| s > 0.0),
            "{phase}: {c:#}"
        );
        assert!(
            c["postgres_cpu_s"].is_number() || c["postgres_cpu_s"].is_null(),
            "{c:#}"
        );
    }
    assert!(
        r["slow_drain"].is_null(),
        "only a slow run reports its drain"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(json["healthy"], r["healthy"]);
    let svg = std::fs::read_to_string(out.join("latency.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("circuit.opened"),
        "chart lacks the breaker marker"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// The dead-host variant, small: 6 channels of 2 tenants on one endpoint answering
/// 503, 3-s streams. Checks that the harness sees the host circuit open (the report's
/// `dead_host`), that the requests before it are counted, and that nothing else changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_dead_host_scenario_reports_the_host_circuit() {
    let o = Options {
        backlog: 60,
        dead_channels: 6,
        dead_tenants: 2,
        dead_mode: DeadMode::Status503,
        rate: 20.0,
        duration: Duration::from_secs(3),
        drain_timeout: Duration::from_secs(30),
        run: RunOptions {
            database_url: std::env::var("DATABASE_URL").ok(),
            out: None,
            print: false,
        },
        ..Options::default()
    };
    let r = run(&o).await.expect("the dead-host scenario runs");
    let h = &r["dead_host"];
    assert_eq!(r["dead_channels"], 6, "{r:#}");
    assert_eq!(h["tenants"], 2, "{r:#}");
    assert_eq!(r["lost"], 0, "{r:#}");
    assert_eq!(r["backlog_enqueued"], 60);
    assert_eq!(r["backlog_accounted"], true, "{r:#}");
    assert!(
        h["host_opened_after_ms"].as_f64().is_some(),
        "the host circuit never opened: {h:#}"
    );
    assert_eq!(h["host_transitions_by_action"]["host.opened"], 1, "{h:#}");
    assert!(
        h["host_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("127.0.0.1:")),
        "{h:#}"
    );
    // The host opens on failures from 3 distinct channels, so at least 3 were hit first.
    assert!(
        h["channels_with_requests_before_host_open"]
            .as_u64()
            .is_some_and(|n| n >= 3),
        "{h:#}"
    );
    let before = h["requests_before_host_open"].as_u64().unwrap();
    assert!(
        before >= 3 && before <= h["requests_total"].as_u64().unwrap(),
        "{h:#}"
    );
    assert_eq!(h["budget"]["within"], true, "{h:#}");
    assert_eq!(r["goals"]["dead_requests_within_budget"], true, "{r:#}");
}

/// `throughput --rate 50 --count 100` over 5 channels: the open loop sends every delivery,
/// each arrives once, and the report has the latency at that rate and the run's CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_open_loop_throughput_reports_latency_at_the_rate() {
    let o = throughput::Options {
        count: 100,
        channels: 5,
        tenants: 2,
        rate: Some(50.0),
        timeout: Duration::from_secs(60),
        run: RunOptions {
            database_url: std::env::var("DATABASE_URL").ok(),
            out: None,
            print: false,
        },
        ..throughput::Options::default()
    };
    let r = throughput::run(&o)
        .await
        .expect("the throughput scenario runs");
    assert_eq!(r["scenario"], "throughput");
    assert_eq!(r["rate_per_s"], 50.0, "{r:#}");
    assert_eq!(r["lost"], 0, "{r:#}");
    assert_eq!(r["enqueue_errors"], 0, "{r:#}");
    assert_eq!(r["received"], 100, "{r:#}");
    let ol = &r["open_loop"];
    assert_eq!(ol["scheduled"], 100, "{ol:#}");
    assert_eq!(ol["accepted"], 100, "{ol:#}");
    assert_eq!(ol["skipped"], 0, "{ol:#}");
    assert_eq!(r["latency"]["count"], 100, "{r:#}");
    for k in ["p50_ms", "p95_ms", "p99_ms"] {
        assert!(
            r["latency"][k].as_f64().is_some_and(|v| v > 0.0),
            "{k}: {r:#}"
        );
    }
    // 100 at 50/s: about 2 s of sending, not a burst.
    assert!(r["enqueue_s"].as_f64().is_some_and(|s| s >= 1.5), "{r:#}");
    let c = &r["cpu"]["phases"]["run"];
    assert_eq!(c["deliveries"], 100, "{c:#}");
    assert_eq!(c["delivered"], 100, "{c:#}");
    assert!(
        c["service_cpu_s"].as_f64().is_some_and(|s| s > 0.0),
        "{c:#}"
    );
    assert!(
        c["harness_process_cpu_s"].as_f64().is_some_and(|s| s > 0.0),
        "{c:#}"
    );
}
