//! An event type's JSON Schema: checking and compiling it (draft 2020-12, with the `jsonschema`
//! crate), validating a payload against it, and the per-node [`Cache`] of compiled schemas that
//! keeps an enqueue from compiling anything.

use super::Violation;
use crate::{Error, Result};
use jsonschema::Validator;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// Largest schema, and largest example, as compact JSON text: 64 KiB.
pub(crate) const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Most schema violations a refusal names (the first ones found).
pub(crate) const MAX_VIOLATIONS: usize = 5;
/// The only `$schema` a schema may declare (or none): JSON Schema draft 2020-12.
pub(crate) const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// Compiles `schema` as a draft 2020-12 JSON Schema, or the error on `schema`.
///
/// Rules: an object or a boolean of at most [`MAX_SCHEMA_BYTES`]; a `$schema`, when given, must
/// be [`DRAFT_2020_12`]; the schema must be valid against the draft's meta-schema; `$ref`s
/// resolve only inside the schema (nothing is fetched: the crate is built without its HTTP and
/// file resolvers, so a remote `$ref` is refused here). `pattern`s use the `regex` crate's
/// linear-time engine (no backtracking: a pattern cannot make one validation slow); one that
/// needs look-around or back-references is refused. `format` is an annotation, not checked
/// (the draft's default).
pub(crate) fn compile(schema: &Value) -> Result<Validator> {
    if !(schema.is_object() || schema.is_boolean()) {
        return Err(Error::invalid(
            "schema",
            "must be a JSON Schema: an object (or true/false)",
        ));
    }
    let size = serde_json::to_string(schema).map(|s| s.len()).unwrap_or(0);
    if size > MAX_SCHEMA_BYTES {
        return Err(Error::invalid(
            "schema",
            format!("is {size} bytes as JSON; the limit is {MAX_SCHEMA_BYTES}"),
        ));
    }
    if let Some(declared) = schema.get("$schema") {
        if declared.as_str() != Some(DRAFT_2020_12) {
            return Err(Error::invalid(
                "schema",
                format!("$schema must be \"{DRAFT_2020_12}\" (draft 2020-12) or absent"),
            ));
        }
    }
    jsonschema::draft202012::options()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(schema)
        .map_err(|e| {
            Error::invalid(
                "schema",
                format!("is not a valid draft 2020-12 schema: {e}"),
            )
        })
}

/// The first [`MAX_VIOLATIONS`] places where `instance` fails `validator` (none when it is
/// valid). Each names the failing part by JSON pointer (`/amount`, `/lines/0/sku`; `""` is the
/// whole payload) with a message that never quotes the payload's values (masked: a payload may
/// carry data the logs should not).
pub fn violations(validator: &Validator, instance: &Value) -> Vec<Violation> {
    if validator.is_valid(instance) {
        return Vec::new();
    }
    validator
        .iter_errors(instance)
        .take(MAX_VIOLATIONS)
        .map(|e| Violation {
            pointer: e.instance_path().as_str().to_string(),
            message: e.masked().to_string(),
        })
        .collect()
}

/// What the catalog says of one event type, as cached.
#[derive(Clone)]
pub(super) struct Found {
    /// The row's `revision` (the tenant's catalog version at its last write).
    pub(super) revision: i64,
    /// Its compiled schema, if it has one.
    pub(super) validator: Option<Arc<Validator>>,
}

/// One cached answer: valid while the tenant's `event_catalog_version` is `version`.
#[derive(Clone)]
struct Entry {
    version: i64,
    found: Option<Found>,
}

/// Most entries one node keeps; past it the cache starts again empty (a tenant sending many
/// distinct unknown types cannot grow it without bound).
pub(crate) const MAX_CACHED: usize = 10_000;

/// Compiled schemas of the event types enqueues name, per API node, keyed by (tenant, name)
/// and stamped with the tenant's `event_catalog_version` when looked up.
///
/// Every change of a tenant's catalog bumps that version in the same transaction
/// ([`super::create`], [`super::update`], [`super::delete`]), and every enqueue reads the
/// tenant's row anyway: an entry whose stamp equals the version read is current, with no
/// statement at all. Otherwise one primary-key lookup of the row reads its `revision` and
/// schema; the schema is compiled again only when the revision moved. Entries are never stale
/// for a request: the lookup runs after the tenant row was read, so it sees the catalog at that
/// version or later. Several nodes each keep their own; the database's version keeps them
/// right.
#[derive(Default)]
pub struct Cache {
    entries: Mutex<HashMap<(Uuid, String), Entry>>,
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The cached answer for (`tenant_id`, `name`) at catalog `version`, if current; the stale
    /// one's [`Found`] otherwise (to reuse its compiled schema when the revision did not move).
    pub(super) fn get(
        &self,
        tenant_id: Uuid,
        name: &str,
        version: i64,
    ) -> std::result::Result<Option<Found>, Option<Found>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(&(tenant_id, name.to_string())) {
            Some(e) if e.version == version => Ok(e.found.clone()),
            Some(e) => Err(e.found.clone()),
            None => Err(None),
        }
    }

    /// Stores the answer for (`tenant_id`, `name`) at catalog `version`.
    pub(super) fn put(&self, tenant_id: Uuid, name: &str, version: i64, found: Option<Found>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_CACHED {
            entries.clear();
        }
        entries.insert((tenant_id, name.to_string()), Entry { version, found });
    }

    /// Entries held now (for tests and the measurement).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn violations_name_pointers_without_values() {
        let v = compile(&json!({
            "type": "object",
            "required": ["amount"],
            "properties": {"amount": {"type": "integer"}, "lines": {"type": "array",
                "items": {"type": "object", "properties": {"sku": {"type": "string"}}}}}
        }))
        .unwrap();
        assert!(violations(&v, &json!({"amount": 3})).is_empty());
        let got = violations(&v, &json!({"amount": "secret-ish", "lines": [{"sku": 7}]}));
        let pointers: Vec<_> = got.iter().map(|v| v.pointer.as_str()).collect();
        assert!(pointers.contains(&"/amount"), "{got:?}");
        assert!(pointers.contains(&"/lines/0/sku"), "{got:?}");
        assert!(
            got.iter().all(|v| !v.message.contains("secret-ish")),
            "{got:?}"
        );
        assert_eq!(violations(&v, &json!({}))[0].pointer, "");
    }

    #[test]
    fn bad_schemas_are_refused_on_schema() {
        for bad in [
            json!(3),
            json!({"type": "nope"}),
            json!({"$schema": "http://json-schema.org/draft-07/schema#"}),
            json!({"$ref": "https://example.com/remote.json"}),
            json!({"type": "string", "pattern": "(a)\\1"}),
        ] {
            match compile(&bad) {
                Err(Error::Invalid { field, .. }) => assert_eq!(field, "schema", "{bad}"),
                Err(e) => panic!("{bad}: {e}"),
                Ok(_) => panic!("{bad} accepted"),
            }
        }
        assert!(compile(&json!(true)).is_ok());
        assert!(compile(&json!({"$schema": DRAFT_2020_12, "type": "object"})).is_ok());
    }

    #[test]
    fn the_cache_answers_only_at_its_version() {
        let c = Cache::new();
        let t = Uuid::now_v7();
        assert!(c.get(t, "a.b", 1).is_err());
        c.put(t, "a.b", 1, None);
        assert!(matches!(c.get(t, "a.b", 1), Ok(None)));
        assert!(matches!(c.get(t, "a.b", 2), Err(None)));
        assert!(c.get(Uuid::now_v7(), "a.b", 1).is_err());
    }

    /// What [`super::check_event`] spends on a payload whose type has a schema: parsing the
    /// payload text and validating it (the compiled schema comes from the cache). Prints µs per
    /// validation for a 1 KiB and a 256 KiB (`api.max_payload_bytes`) payload against a
    /// realistic invoice schema, valid and invalid. Run it in release (BENCHMARKS.md):
    /// `cargo test -p breakwater-core --release --lib -- --ignored measure_validation --nocapture`
    #[test]
    #[ignore = "a measurement: run by hand in release"]
    fn measure_validation_cost() {
        let schema = json!({
            "$schema": DRAFT_2020_12,
            "type": "object",
            "required": ["invoice_id", "customer", "amount", "currency", "lines"],
            "properties": {
                "invoice_id": {"type": "string", "pattern": "^in_[A-Za-z0-9]+$"},
                "customer": {"type": "object", "required": ["id", "email"], "properties": {
                    "id": {"type": "string"}, "email": {"type": "string", "format": "email"},
                    "name": {"type": "string", "maxLength": 200}}},
                "amount": {"type": "integer", "minimum": 0},
                "currency": {"enum": ["EUR", "USD", "GBP"]},
                "paid_at": {"type": "string"},
                "lines": {"type": "array", "items": {
                    "type": "object", "required": ["sku", "qty", "unit_amount"],
                    "additionalProperties": false,
                    "properties": {
                        "sku": {"type": "string", "minLength": 1, "maxLength": 64},
                        "qty": {"type": "integer", "minimum": 1},
                        "unit_amount": {"type": "integer"},
                        "description": {"type": "string"}}}}
            }
        });
        let validator = compile(&schema).unwrap();
        // A payload with `n` lines, as the JSON text an enqueue carries.
        let payload = |n: usize| {
            let lines: Vec<Value> = (0..n)
                .map(|i| {
                    json!({"sku": format!("sku-{i:06}"), "qty": 1 + i % 5,
                    "unit_amount": 1999, "description": "a line of the invoice, described"})
                })
                .collect();
            json!({"invoice_id": "in_1a2b3c", "customer": {"id": "cus_42",
                "email": "billing@example.com", "name": "ACME"}, "amount": 1999 * n,
                "currency": "EUR", "paid_at": "2026-12-05T10:00:00Z", "lines": lines})
            .to_string()
        };
        let max = 256 * 1024;
        let small = payload(8);
        let mut n = 1;
        while payload(n + 1).len() <= max {
            n += 64;
        }
        while payload(n).len() > max {
            n -= 1;
        }
        let large = payload(n);
        let invalid_large = large.replacen("\"qty\":1", "\"qty\":0", 3);
        for (what, text, iterations) in [
            ("1 KiB valid", &small, 20_000),
            ("256 KiB valid", &large, 200),
            ("256 KiB invalid (3 errors)", &invalid_large, 200),
        ] {
            let run = || {
                let v: Value = serde_json::from_str(text).unwrap();
                violations(&validator, &v).len()
            };
            let errors = run();
            let start = std::time::Instant::now();
            for _ in 0..iterations {
                std::hint::black_box(run());
            }
            let per = start.elapsed().as_secs_f64() * 1e6 / iterations as f64;
            let parse_start = std::time::Instant::now();
            for _ in 0..iterations {
                std::hint::black_box(serde_json::from_str::<Value>(text).unwrap());
            }
            let parse = parse_start.elapsed().as_secs_f64() * 1e6 / iterations as f64;
            println!(
                "{what}: {} bytes, {errors} violations: {per:.1} µs per check \
                 (of which parsing {parse:.1} µs), {iterations} iterations",
                text.len()
            );
        }
        let start = std::time::Instant::now();
        let compiled = 100;
        for _ in 0..compiled {
            std::hint::black_box(compile(&schema).unwrap());
        }
        println!(
            "compiling the schema (once per change, cached): {:.1} µs",
            start.elapsed().as_secs_f64() * 1e6 / compiled as f64
        );
    }
}
