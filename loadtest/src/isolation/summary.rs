//! The human summary of an isolation report, printed by the command line.

use crate::stats::Summary;
use serde_json::Value;

/// Prints the human summary of an isolation report (`run`'s) to stdout.
pub fn print_summary(r: &Value) {
    let s = |k: &str| -> Summary { serde_json::from_value(r[k].clone()).unwrap_or_default() };
    println!(
        "isolation: backlog {} ({}), {} node(s), {} /s for {} s",
        r["backlog"],
        r["dead_mode"].as_str().unwrap_or("?"),
        r["nodes"],
        r["rate_per_s"],
        r["duration_s"]
    );
    println!("  baseline  {}", s("baseline"));
    println!("  healthy   {}", s("healthy"));
    println!(
        "  p95 ratio to baseline: {}   breaker opened after {} ms (from the backlog's first enqueue)",
        r["healthy_p95_over_baseline_p95"], r["breaker_opened_after_ms"]
    );
    let slow = &r["slow"]["healthy"];
    // When none was over 100 ms there is no last one to name.
    let last = match slow["last_over_100ms_enqueued_at_s"].as_f64() {
        Some(at) => format!(", the last one enqueued at {at} s"),
        None => String::new(),
    };
    println!(
        "  healthy over 100 ms: {}, over 1 s: {}{last}",
        slow["over_100ms"], slow["over_1s"],
    );
    // A slow endpoint never fails: no breaker, so no budget.
    let budget = if r["dead_endpoint_budget"]["within"].is_null() {
        String::new()
    } else {
        format!(
            " (budget {}: threshold {} + in flight at open {} + probes {})",
            r["dead_endpoint_budget"]["budget"],
            r["dead_endpoint_budget"]["failure_threshold"],
            r["dead_endpoint_budget"]["in_flight_at_open"],
            r["dead_endpoint_budget"]["probes_allowed"]
        )
    };
    for line in crate::cpu::summary_lines(r) {
        println!("{line}");
    }
    let labels = [("0", "warm-up"), ("1", "baseline"), ("2", "healthy")];
    for line in crate::phases::summary_lines(&r["healthy_phases"], &labels) {
        println!("{line}");
    }
    if !r["slow_drain"].is_null() {
        let d = &r["slow_drain"];
        println!(
            "  slow channel drain: {} received in {} s ({} /s); in flight (job_groups.in_flight, {} 1-s samples) max {} mean {}; executing jobs max {} mean {}; endpoint held max {} mean {}",
            d["received"],
            d["window_s"],
            d["received_per_s"],
            d["samples"],
            d["in_flight"]["max"],
            d["in_flight"]["mean"],
            d["executing_jobs"]["max"],
            d["executing_jobs"]["mean"],
            d["endpoint_in_flight"]["max"],
            d["endpoint_in_flight"]["mean"],
        );
    }
    println!(
        "  dead endpoint: {} requests, at most {} in flight at once{budget}",
        r["dead_endpoint_requests"], r["dead_max_in_flight"],
    );
    if !r["dead_host"].is_null() {
        let h = &r["dead_host"];
        println!(
            "  dead host {}: {} channels of {} tenants; host opened after {} ms; requests {} before it opened, {} in all (budget {}: host threshold {} + in-flight cap {} + host probes {}; without host circuit ≥ {})",
            h["host_key"].as_str().unwrap_or("?"),
            h["channels"],
            h["tenants"],
            h["host_opened_after_ms"],
            h["requests_before_host_open"],
            h["requests_total"],
            h["budget"]["budget"],
            h["budget"]["host_failure_threshold"],
            h["budget"]["in_flight_cap"],
            h["budget"]["host_probes_allowed"],
            h["budget"]["without_host_circuit"],
        );
        println!(
            "  in flight at host open {}; channel circuits opened {}; host probes {}; channel probes {}",
            h["in_flight_at_host_open"],
            h["channel_circuits_opened"],
            h["host_probes_started"],
            h["channel_probes_started"],
        );
    }
    println!(
        "  lost {}  duplicates {}  enqueue errors {}  backlog accounted {}",
        r["lost"], r["duplicates"], r["enqueue_errors"], r["backlog_accounted"]
    );
    if !r["prune"].is_null() {
        let p = &r["prune"];
        println!(
            "  pruned {} deliveries + {} attempts + {} jobs in {} s ({} rows/s, {} batches); finished within the stream: {}",
            p["deliveries_deleted"],
            p["attempts_deleted"],
            p["jobs_deleted"],
            p["seconds"],
            p["rows_per_s"],
            p["batches"],
            p["finished_before_loaded_stream_ended"]
        );
        let during: Summary =
            serde_json::from_value(p["healthy_while_pruning"].clone()).unwrap_or_default();
        println!(
            "  healthy while pruning {during}  p95 ratio to baseline: {}",
            p["healthy_while_pruning_p95_over_baseline_p95"]
        );
        let after: Summary =
            serde_json::from_value(p["healthy_after_pruning"].clone()).unwrap_or_default();
        println!(
            "  healthy after pruning {after}  while ÷ after p95: {}",
            p["healthy_while_pruning_p95_over_after_p95"]
        );
    }
    println!("  goals: {}", crate::goals_line(&r["goals"]));
}
