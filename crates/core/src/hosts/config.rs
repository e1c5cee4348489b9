//! Host circuit settings and the host key of a channel URL.

use serde::{Deserialize, Serialize};
use url::{Host, Url};
/// How channels are grouped into host circuits (`[hosts] granularity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// The URL's host plus an explicit, non-default port.
    #[default]
    Host,
    /// The registrable domain (Public Suffix List); IPs and names without one use `Host`.
    Domain,
}

/// Default per-host cap (`hosts.max_in_flight`), deliveries in flight at once to one host,
/// cluster-wide. Below a node's default pool (200) on purpose: measured, 50 channels of 5
/// tenants on one host that hangs filled the whole pool for a request timeout (15 s) before any
/// circuit could open, and a healthy tenant on another host waited: p95 13 s (BENCHMARKS.md,
/// "Dead host"). With the cap the host holds at most this many slots.
pub const DEFAULT_HOST_MAX_IN_FLIGHT: i32 = 64;

/// Host circuit settings (`[hosts]` in `config/default.toml`; environment
/// `BREAKWATER_HOSTS__<FIELD>`). Threshold, cooldown and cap can be overridden per host.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostsConfig {
    /// `host` or `domain` (see the module doc).
    pub granularity: Granularity,
    /// Distinct channels with a transient failure within the window that open the host.
    pub failure_threshold: i32,
    /// The window of that count, ms.
    pub failure_window_ms: i64,
    /// Wait from opening to the first host probe, ms.
    pub cooldown_ms: i64,
    /// Largest cooldown while host probes keep failing (it doubles each time), ms.
    pub max_cooldown_ms: i64,
    /// How long a host probe may take before another may take over, ms (should exceed the
    /// request timeout).
    pub probe_lease_ms: i64,
    /// Default cluster-wide cap of deliveries in flight to one host, across all its channels;
    /// `None` (absent, the default): no default cap, a host is capped only by its own override
    /// (`PATCH /api/v1/admin/hosts/{host}`). Opt-in because of its cost: every result of a
    /// capped host's deliveries updates that host's one gate row, so its results serialize on
    /// it (see `breakwater_queue::fetch`). If set, ≥ 1.
    pub max_in_flight: Option<i32>,
}

impl Default for HostsConfig {
    fn default() -> Self {
        Self {
            granularity: Granularity::Host,
            failure_threshold: 3,
            failure_window_ms: 60_000,
            cooldown_ms: 30_000,
            max_cooldown_ms: 600_000,
            probe_lease_ms: 60_000,
            max_in_flight: Some(DEFAULT_HOST_MAX_IN_FLIGHT),
        }
    }
}

impl HostsConfig {
    /// The default per-host cap in force: `max_in_flight`, with 0 meaning none.
    pub fn default_cap(&self) -> Option<i32> {
        self.max_in_flight.filter(|&m| m > 0)
    }

    /// Checks the settings; the error names the key.
    pub fn validate(&self) -> std::result::Result<(), String> {
        for (name, v) in [
            ("hosts.failure_threshold", self.failure_threshold as i64),
            ("hosts.failure_window_ms", self.failure_window_ms),
            ("hosts.cooldown_ms", self.cooldown_ms),
            ("hosts.max_cooldown_ms", self.max_cooldown_ms),
            ("hosts.probe_lease_ms", self.probe_lease_ms),
        ] {
            if v <= 0 {
                return Err(format!("{name} must be greater than 0"));
            }
        }
        if self.max_in_flight.is_some_and(|m| m < 0) {
            return Err(
                "hosts.max_in_flight must not be negative (0: no default per-host cap)".into(),
            );
        }
        if self.failure_threshold < 2 {
            return Err("hosts.failure_threshold must be at least 2 (one channel's failures are the channel circuit's job)".into());
        }
        if self.max_cooldown_ms < self.cooldown_ms {
            return Err("hosts.max_cooldown_ms must be at least hosts.cooldown_ms".into());
        }
        Ok(())
    }
}

/// The host key of channel URL `url` at granularity `g` (see the module doc), or a message for
/// the `url` field when it has no host.
pub fn host_key(url: &str, g: Granularity) -> std::result::Result<String, String> {
    let u = Url::parse(url).map_err(|e| format!("not a valid absolute URL ({e})"))?;
    let host = u.host().ok_or_else(|| "the URL has no host".to_string())?;
    // `Url::port` is None when the port is absent or the scheme's default.
    let with_port = |h: String| match u.port() {
        Some(p) => format!("{h}:{p}"),
        None => h,
    };
    Ok(match host {
        Host::Domain(d) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            match g {
                Granularity::Domain => match psl::domain_str(&d) {
                    Some(reg) => reg.to_string(),
                    None => with_port(d),
                },
                Granularity::Host => with_port(d),
            }
        }
        Host::Ipv4(a) => with_port(a.to_string()),
        Host::Ipv6(a) => with_port(format!("[{a}]")),
    })
}
