//! The API's routes, read from its router source and asked of a running node.

use crate::TestApp;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// The Rust sources under `dir`, its subdirectories included.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the API's route sources") {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// Every path registered with `.route("…")` in the API's route modules
/// (`crates/api/src/routes/` and its subdirectories).
pub fn router_paths() -> BTreeSet<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/api/src/routes");
    let mut paths = BTreeSet::new();
    for file in sources(Path::new(dir)) {
        let source = std::fs::read_to_string(file).unwrap();
        for (_, rest) in source
            .match_indices(".route(")
            .map(|(i, _)| source.split_at(i + 7))
        {
            let rest = rest.trim_start();
            if let Some(lit) = rest.strip_prefix('"') {
                paths.insert(lit[..lit.find('"').unwrap()].to_string());
            }
        }
    }
    assert!(paths.len() > 10, "found too few routes: {paths:?}");
    paths
}

/// The (method, path) pairs among `methods` × [`router_paths`] that the running API serves:
/// each path with its `{…}` segments filled is sent each method without credentials, and
/// anything but 405 is a route.
pub async fn served_routes(app: &TestApp, methods: &[&str]) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for path in router_paths() {
        let concrete = path
            .split('/')
            .map(|seg| match seg {
                "{action}" => "open".to_string(),
                s if s.starts_with('{') => Uuid::nil().to_string(),
                s => s.to_string(),
            })
            .collect::<Vec<_>>()
            .join("/");
        for method in methods {
            let r = app
                .http
                .request(method.parse().unwrap(), format!("{}{concrete}", app.api))
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            if r.status().as_u16() != 405 {
                routes.insert((method.to_string(), path.clone()));
            }
        }
    }
    routes
}
