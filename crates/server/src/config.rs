//! Typed, layered configuration: `config/default.toml` (embedded in the binary) → an optional
//! file (`--config` / `BREAKWATER_CONFIG`) → the environment. Validated once at start; a bad
//! value stops start-up with a message naming the key.

use breakwater_api::ApiConfig;
use breakwater_core::circuit::CircuitConfig;
use breakwater_worker::WorkerConfig;
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
    /// Connections per node.
    pub max_connections: u32,
    /// Apply migrations when `serve` starts.
    pub migrate_on_start: bool,
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
    /// Allow internal targets (`BREAKWATER_ALLOW_PRIVATE_TARGETS`), off by default.
    pub allow_private_targets: bool,
    /// `text` or `json`.
    pub log_format: String,
    /// `[database]`.
    pub database: DatabaseConfig,
    /// `[api]`.
    pub api: ApiConfig,
    /// `[worker]`.
    pub worker: WorkerConfig,
    /// `[circuit]`.
    pub circuit: CircuitConfig,
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
        s.validate()?;
        Ok(s)
    }

    fn validate(&self) -> Result<(), String> {
        self.worker.validate()?;
        self.circuit.validate()?;
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
        Ok(())
    }
}
