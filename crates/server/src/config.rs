//! Typed, layered configuration: `config/default.toml` (embedded in the binary) → an optional
//! file (`--config` / `BREAKWATER_CONFIG`) → the environment. Validated once at start; a bad
//! value stops start-up with a message naming the key.

use breakwater_api::ApiConfig;
use breakwater_core::alerts::AlertConfig;
use breakwater_core::circuit::CircuitConfig;
use breakwater_core::hosts::HostsConfig;
use breakwater_worker::{RetentionConfig, WorkerConfig};
use figment::providers::{Env, Format, Toml};
use figment::Figment;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::Path;

/// The embedded defaults.
pub const DEFAULT_TOML: &str = include_str!("../../../config/default.toml");

/// A secret string: `Debug` never prints it.
#[derive(Clone, Deserialize, Default)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Database settings (`[database]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// Connections per pool: a node running the API and the workers has two pools of this size
    /// (the workers never take the API's connections).
    pub max_connections: u32,
    /// Apply migrations when `serve` starts.
    pub migrate_on_start: bool,
    /// Server-side `statement_timeout` of every session, ms.
    pub statement_timeout_ms: u64,
    /// Server-side `idle_in_transaction_session_timeout`, ms: a session frozen inside a
    /// transaction (a paused process, a stuck client) is ended and its locks released.
    pub idle_in_transaction_timeout_ms: u64,
    /// The API's `lock_timeout`, ms: a request waits no longer for a row another transaction
    /// holds; it answers 503 with `Retry-After` and changes nothing. A request's `COMMIT` is not
    /// held to it (it may queue for Postgres's notification lock behind other commits; the API's
    /// `CallTx::commit`), only to `statement_timeout_ms`.
    pub api_lock_timeout_ms: u64,
}

/// Telemetry settings (`[telemetry]`): where OpenTelemetry data is pushed. The Prometheus text
/// at `GET /metrics` is always served; logs go to stderr (`log_format`, level via `RUST_LOG`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Base URL of an OTLP/HTTP collector (protobuf), e.g. `http://127.0.0.1:4318`: metrics are
    /// pushed to `<url>/v1/metrics`, traces to `<url>/v1/traces`. Empty = no OTLP export. Plain
    /// `http` only (no TLS client is built in): point it at a local collector or sidecar.
    pub otlp_endpoint: String,
    /// How often metrics are pushed over OTLP, ms.
    pub otlp_metrics_interval_ms: u64,
    /// Fraction of new traces exported over OTLP, 0.0–1.0 (a span follows its parent's choice).
    pub otlp_trace_sample_ratio: f64,
}

impl TelemetryConfig {
    /// The OTLP base URL without a trailing `/`, or `None` when OTLP export is off.
    pub fn otlp(&self) -> Option<&str> {
        let e = self.otlp_endpoint.trim().trim_end_matches('/');
        (!e.is_empty()).then_some(e)
    }

    fn validate(&self) -> Result<(), String> {
        if let Some(e) = self.otlp() {
            if !e.starts_with("http://") || e.len() <= "http://".len() {
                return Err(format!(
                    "telemetry.otlp_endpoint must be an http:// URL (no TLS client is built in), got {e:?}"
                ));
            }
        }
        if self.otlp_metrics_interval_ms == 0 {
            return Err("telemetry.otlp_metrics_interval_ms must be greater than 0".into());
        }
        if !(0.0..=1.0).contains(&self.otlp_trace_sample_ratio) {
            return Err("telemetry.otlp_trace_sample_ratio must be between 0.0 and 1.0".into());
        }
        Ok(())
    }
}

/// All settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Postgres URL (`DATABASE_URL`). `None` only matters for `demo`, which then starts a
    /// throwaway Postgres.
    pub database_url: Option<Secret>,
    /// API address (`BREAKWATER_LISTEN`).
    pub listen: SocketAddr,
    /// Operator key (`BREAKWATER_OPERATOR_KEY`), at least 16 characters; required by `serve`.
    pub operator_key: Option<Secret>,
    /// Serve `/metrics` on this address only (`BREAKWATER_METRICS_LISTEN`, e.g. `0.0.0.0:9090`),
    /// not on the API's; works on a worker-only node too. Unset: `/metrics` is on the API's
    /// address (and a worker-only node has none).
    pub metrics_listen: Option<SocketAddr>,
    /// Bearer token `/metrics` requires (`BREAKWATER_METRICS_TOKEN`); unset or empty: open.
    pub metrics_token: Option<Secret>,
    /// Allow internal targets (`BREAKWATER_ALLOW_PRIVATE_TARGETS`), off by default.
    pub allow_private_targets: bool,
    /// `text` or `json`.
    pub log_format: String,
    /// This node's cell (`BREAKWATER_CELL`, docs/cells.md): 1 to 8 characters `a`–`z`, `0`–`9`, the
    /// same on every node of one cell (one Postgres or Patroni cluster). Unset or empty (the
    /// default): a deployment without cells, keys `bw_…`. Set: new API keys are `bw_<cell>_…`
    /// and portal tokens `bwp_<cell>_…`, so the router in front of the cells (deploy/cells/)
    /// sends a tenant's requests to its cell; keys made before stay valid in their cell.
    pub cell: Option<String>,
    /// `[database]`.
    pub database: DatabaseConfig,
    /// `[api]`.
    pub api: ApiConfig,
    /// `[worker]`.
    pub worker: WorkerConfig,
    /// `[circuit]`.
    pub circuit: CircuitConfig,
    /// `[alerts]`: the alert policy (flapping).
    pub alerts: AlertConfig,
    /// `[hosts]`: host circuits and the per-host cap.
    pub hosts: HostsConfig,
    /// `[telemetry]`.
    pub telemetry: TelemetryConfig,
    /// `[retention]`.
    pub retention: RetentionConfig,
}

impl Settings {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Self, String> {
        let mut fig = Figment::from(Toml::string(DEFAULT_TOML));
        if let Some(f) = file {
            if !f.exists() {
                return Err(format!("config file {} does not exist", f.display()));
            }
            fig = fig.merge(Toml::file(f));
        }
        fig = fig
            .merge(
                Env::raw()
                    .only(&["DATABASE_URL"])
                    .map(|_| "database_url".into()),
            )
            .merge(
                Env::prefixed("BREAKWATER_")
                    .ignore(&["CONFIG"])
                    .split("__")
                    .map(|k| k.as_str().to_ascii_lowercase().into()),
            );
        let mut s: Settings = fig
            .extract()
            .map_err(|e| format!("configuration error: {e}"))?;
        // An empty DATABASE_URL means "not configured".
        if s.database_url
            .as_ref()
            .is_some_and(|u| u.0.trim().is_empty())
        {
            s.database_url = None;
        }
        if s.operator_key.as_ref().is_some_and(|k| k.0.is_empty()) {
            s.operator_key = None;
        }
        if s.cell.as_deref().is_some_and(|c| c.trim().is_empty()) {
            s.cell = None;
        }
        if s.metrics_token.as_ref().is_some_and(|k| k.0.is_empty()) {
            s.metrics_token = None;
        }
        s.validate()?;
        Ok(s)
    }

    /// The cell (`cell`), checked; `None` without one.
    pub fn cell(&self) -> Result<Option<breakwater_core::api_key::Cell>, String> {
        self.cell
            .as_deref()
            .map(|c| breakwater_core::api_key::Cell::new(c).map_err(|e| format!("cell: {e}")))
            .transpose()
    }

    fn validate(&self) -> Result<(), String> {
        self.cell()?;
        self.worker.validate()?;
        self.circuit.validate()?;
        self.alerts.validate()?;
        self.hosts.validate()?;
        self.telemetry.validate()?;
        self.retention.validate()?;
        for (name, v) in [
            (
                "database.statement_timeout_ms",
                self.database.statement_timeout_ms,
            ),
            (
                "database.idle_in_transaction_timeout_ms",
                self.database.idle_in_transaction_timeout_ms,
            ),
            (
                "database.api_lock_timeout_ms",
                self.database.api_lock_timeout_ms,
            ),
        ] {
            if v == 0 {
                return Err(format!("{name} must be greater than 0"));
            }
        }
        if self.database.max_connections < 2 {
            return Err("database.max_connections must be at least 2".into());
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err("log_format must be \"text\" or \"json\"".into());
        }
        if self.api.max_payload_bytes == 0 || self.api.max_batch_size == 0 {
            return Err(
                "api.max_payload_bytes and api.max_batch_size must be greater than 0".into(),
            );
        }
        for (key, v) in [
            ("api.quota_channels", self.api.quota_channels),
            ("api.quota_active_keys", self.api.quota_active_keys),
            (
                "api.quota_deliveries_per_second",
                self.api.quota_deliveries_per_second,
            ),
            (
                "api.quota_deliveries_per_day",
                self.api.quota_deliveries_per_day,
            ),
        ] {
            if v < 0 {
                return Err(format!("{key} must be 0 or more, not {v}"));
            }
        }
        if self.api.header_read_timeout_ms == 0 || self.api.body_read_timeout_ms == 0 {
            return Err(
                "api.header_read_timeout_ms and api.body_read_timeout_ms must be greater than 0"
                    .into(),
            );
        }
        breakwater_api::check_frame_ancestors(&self.api.portal_frame_ancestors)?;
        let public_url = self.api.public_url.trim();
        let web = public_url.starts_with("https://") || public_url.starts_with("http://");
        if !(public_url.is_empty() || web) {
            return Err(format!(
                "api.public_url must be an http(s) URL like https://hooks.example.com, or empty, not {public_url:?}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `config/default.toml` is what operators read and what the binary loads; each section's
    /// `Default` is what the library crates and their tests use. They must be the same values.
    #[test]
    fn the_embedded_file_and_each_sections_default_agree() {
        let s = Settings::load(None).expect("embedded defaults are valid");
        let same = |section: &str, file: String, code: String| {
            assert_eq!(
                file, code,
                "[{section}] in config/default.toml differs from its Default"
            );
        };
        same(
            "worker",
            format!("{:?}", s.worker),
            format!("{:?}", WorkerConfig::default()),
        );
        same(
            "circuit",
            format!("{:?}", s.circuit),
            format!("{:?}", CircuitConfig::default()),
        );
        same(
            "alerts",
            format!("{:?}", s.alerts),
            format!("{:?}", AlertConfig::default()),
        );
        same(
            "hosts",
            format!("{:?}", s.hosts),
            format!("{:?}", HostsConfig::default()),
        );
        same(
            "retention",
            format!("{:?}", s.retention),
            format!("{:?}", RetentionConfig::default()),
        );
        same(
            "api",
            format!("{:?}", s.api),
            format!("{:?}", ApiConfig::default()),
        );
    }

    #[test]
    fn host_defaults_are_loaded_and_checked() {
        let mut s = Settings::load(None).expect("embedded defaults are valid");
        assert_eq!(s.hosts.failure_threshold, 3);
        assert_eq!(s.hosts.failure_window_ms, 60_000);
        assert_eq!(
            s.hosts.max_in_flight,
            Some(breakwater_core::testing::DEFAULT_HOST_MAX_IN_FLIGHT),
            "a default per-host cap below the pools"
        );
        s.hosts.probe_lease_ms = 0;
        assert!(s.validate().unwrap_err().contains("hosts.probe_lease_ms"));
    }

    #[test]
    fn retention_defaults_to_30_days_in_batches_of_1000() {
        let mut s = Settings::load(None).expect("embedded defaults are valid");
        assert_eq!(s.retention.deliveries_days, 30);
        assert_eq!(s.retention.batch_size, 1_000);
        s.retention.batch_size = 0;
        assert!(s.validate().unwrap_err().contains("retention.batch_size"));
    }

    #[test]
    fn the_defaults_turn_otlp_off_and_an_otlp_endpoint_must_be_plain_http() {
        let mut s = Settings::load(None).expect("embedded defaults are valid");
        assert_eq!(s.telemetry.otlp(), None);
        s.telemetry.otlp_endpoint = "http://127.0.0.1:4318/".into();
        assert_eq!(s.telemetry.otlp(), Some("http://127.0.0.1:4318"));
        assert!(s.validate().is_ok());
        s.telemetry.otlp_endpoint = "https://collector.example:4318".into();
        let e = s.validate().unwrap_err();
        assert!(e.contains("telemetry.otlp_endpoint"), "{e}");
        s.telemetry.otlp_endpoint = String::new();
        s.telemetry.otlp_trace_sample_ratio = 1.5;
        assert!(s
            .validate()
            .unwrap_err()
            .contains("otlp_trace_sample_ratio"));
    }

    #[test]
    fn the_portal_keys_default_to_self_framing_and_are_checked() {
        let mut s = Settings::load(None).expect("embedded defaults are valid");
        assert_eq!(s.api.portal_frame_ancestors, "'self'");
        assert_eq!(s.api.public_url, "");
        s.api.portal_frame_ancestors = "'self' https://dashboard.example.com".into();
        s.api.public_url = "https://hooks.example.com".into();
        assert!(s.validate().is_ok());
        s.api.portal_frame_ancestors = "'self'; script-src *".into();
        let e = s.validate().unwrap_err();
        assert!(e.contains("api.portal_frame_ancestors"), "{e}");
        s.api.portal_frame_ancestors = "'none'".into();
        s.api.public_url = "hooks.example.com".into();
        let e = s.validate().unwrap_err();
        assert!(e.contains("api.public_url"), "{e}");
    }

    #[test]
    fn no_cell_by_default_and_a_cell_id_is_checked() {
        let mut s = Settings::load(None).expect("embedded defaults are valid");
        assert_eq!(s.cell().unwrap(), None, "a deployment without cells");
        s.cell = Some("eu1".into());
        assert_eq!(s.cell().unwrap().unwrap().as_str(), "eu1");
        for bad in ["EU1", "a_b", "abcdefghi"] {
            s.cell = Some(bad.into());
            let e = s.validate().unwrap_err();
            assert!(e.starts_with("cell: "), "{e}");
        }
    }
}
