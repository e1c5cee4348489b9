//! A tenant's event-type catalog (table `event_types`): the event types it sends, each with an
//! optional description, JSON Schema (draft 2020-12) for its payload, example payload and
//! deprecation flag; and the check an enqueue or a message makes against it.
//!
//! - this file: the catalog's rows (create, read, list, update, delete, audited) and
//!   [`check_event`], the enqueue-time check;
//! - [`schema`]: compiling a schema, validating a payload, the per-node [`Cache`].
//!
//! **Names.** A catalogued name is 1–[`MAX_NAME_LEN`] characters: segments of ASCII letters,
//! digits, `_` and `-`, joined by single dots (`invoice.paid`, `order-line.v2_added`;
//! `^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`). Event types outside that form can still be sent
//! (unless the tenant refuses unknown types), they just cannot be catalogued.
//!
//! **Delete is a hard delete.** Channels name event types as text in their `event_types`
//! filter, not by reference, so deleting a catalogued type changes nothing for them: they keep
//! receiving messages of that type, which is then simply not in the catalog (accepted unless
//! the tenant refuses unknown types). The name can be registered again. The audit log keeps the
//! record. To retire a type softly, set `deprecated`.
//!
//! **Enqueue cost.** Every catalog change bumps the tenant's `event_catalog_version` in the
//! same transaction. An enqueue already reads the tenant's row, so a tenant that never had a
//! catalog (version 0) and accepts unknown types costs nothing more; otherwise the compiled
//! schema comes from the [`Cache`] and costs no statement while the catalog is unchanged.

pub mod schema;

pub use schema::Cache;
pub(crate) use schema::MAX_SCHEMA_BYTES;

use crate::tenants::Tenant;
use crate::{audit, Error, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor};
use std::sync::Arc;
use uuid::Uuid;

/// Longest catalogued event-type name, in characters.
pub(crate) const MAX_NAME_LEN: usize = 128;
/// Longest description, in characters.
pub(crate) const MAX_DESCRIPTION_LEN: usize = 1000;
/// Most subscribed channels [`subscribers`] lists.
pub(crate) const MAX_SUBSCRIBERS_SHOWN: i64 = 100;

/// A catalogued event type, as the API shows it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct EventType {
    /// The owning tenant.
    pub tenant_id: Uuid,
    /// The dotted name, e.g. `invoice.paid` (see the module docs for the form).
    #[schema(example = "invoice.paid")]
    pub name: String,
    /// What the event means, for a person.
    pub description: Option<String>,
    /// The JSON Schema (draft 2020-12) every payload of this type must match; null = any.
    #[schema(value_type = Option<serde_json::Value>)]
    pub schema: Option<Value>,
    /// An example payload (valid against `schema`).
    #[schema(value_type = Option<serde_json::Value>)]
    pub example: Option<Value>,
    /// Whether the type is deprecated (informational: it is still accepted).
    pub deprecated: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str =
    "tenant_id, name, description, schema, example, deprecated, created_at, updated_at";

/// One place a payload fails its event type's schema.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Violation {
    /// JSON pointer (RFC 6901) to the failing part of the payload (or of `example`), e.g.
    /// `/amount`; `""` is the whole value.
    #[schema(example = "/amount")]
    pub pointer: String,
    /// What is wrong, without quoting the value.
    #[schema(example = "value is not of type \"integer\"")]
    pub message: String,
}

/// A new catalog entry (input of [`create`]).
#[derive(Debug, Clone, Default)]
pub struct NewEventType {
    /// Dotted name ([`check_name`]).
    pub name: String,
    /// Description, at most [`MAX_DESCRIPTION_LEN`] characters (empty = none).
    pub description: Option<String>,
    /// JSON Schema, draft 2020-12 ([`schema::compile`]).
    pub schema: Option<Value>,
    /// Example payload, valid against `schema`.
    pub example: Option<Value>,
    /// Deprecated flag.
    pub deprecated: bool,
}

/// Changes to a catalog entry (input of [`update`]): `None` leaves a field alone, `Some(None)`
/// removes it.
#[derive(Debug, Clone, Default)]
pub struct EventTypePatch {
    /// New description, or removal.
    pub description: Option<Option<String>>,
    /// New schema, or removal.
    pub schema: Option<Option<Value>>,
    /// New example, or removal.
    pub example: Option<Option<Value>>,
    /// New deprecated flag.
    pub deprecated: Option<bool>,
}

/// Checks a catalogued name: 1–128 characters, dot-separated segments of ASCII letters,
/// digits, `_` and `-` (no empty segment). Errors name `name`.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok_segment = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.split('.').all(ok_segment) {
        return Err(Error::invalid(
            "name",
            format!(
                "must be 1 to {MAX_NAME_LEN} characters: segments of ASCII letters, digits, '_' \
                 and '-' joined by single dots (e.g. invoice.paid)"
            ),
        ));
    }
    Ok(())
}

fn check_description(d: Option<String>) -> Result<Option<String>> {
    let Some(d) = d else { return Ok(None) };
    let d = d.trim().to_string();
    if d.chars().count() > MAX_DESCRIPTION_LEN {
        return Err(Error::invalid(
            "description",
            format!("must be at most {MAX_DESCRIPTION_LEN} characters"),
        ));
    }
    Ok((!d.is_empty()).then_some(d))
}

/// Checks a schema and an example together: the schema compiles, the example is at most
/// [`MAX_SCHEMA_BYTES`] and valid against it (422 `schema_violation` on `example`).
fn check_schema_and_example(schema: Option<&Value>, example: Option<&Value>) -> Result<()> {
    let validator = schema.map(schema::compile).transpose()?;
    let Some(example) = example else {
        return Ok(());
    };
    let size = serde_json::to_string(example).map(|s| s.len()).unwrap_or(0);
    if size > MAX_SCHEMA_BYTES {
        return Err(Error::invalid(
            "example",
            format!("is {size} bytes as JSON; the limit is {MAX_SCHEMA_BYTES}"),
        ));
    }
    if let Some(v) = validator {
        let violations = schema::violations(&v, example);
        if !violations.is_empty() {
            return Err(Error::SchemaViolation {
                field: "example",
                violations,
            });
        }
    }
    Ok(())
}

/// What the audit log records of an entry: never the schema or the example themselves (they
/// can be large), only whether they are set and a digest that changes when they do.
fn audited(e: &EventType) -> Value {
    let digest = |v: &Option<Value>| {
        v.as_ref().map(|v| {
            use sha2::Digest;
            let text = serde_json::to_string(v).unwrap_or_default();
            hex::encode(&sha2::Sha256::digest(text.as_bytes())[..8])
        })
    };
    serde_json::json!({
        "name": e.name,
        "description": e.description,
        "deprecated": e.deprecated,
        "schema_sha256": digest(&e.schema),
        "example_sha256": digest(&e.example),
    })
}

/// Bumps tenant `tenant_id`'s catalog version (in the caller's transaction; the row stays
/// locked until it ends, so catalog changes of one tenant run one at a time) and returns the new
/// version. [`Error::NotFound`] for a missing or deleted tenant.
async fn bump_version(conn: &mut PgConnection, tenant_id: Uuid) -> Result<i64> {
    sqlx::query_scalar(
        "UPDATE tenants SET event_catalog_version = event_catalog_version + 1
         WHERE id = $1 AND deleted_at IS NULL
         RETURNING event_catalog_version",
    )
    .bind(tenant_id)
    .fetch_optional(conn)
    .await?
    .ok_or(Error::NotFound("tenant"))
}

/// Adds `new` to tenant `tenant_id`'s catalog, with an `event_type.created` audit row by
/// `actor`, in the caller's transaction. Errors: [`Error::Invalid`] naming the field (`name`,
/// `description`, `schema`, `example`), [`Error::SchemaViolation`] on `example`,
/// [`Error::Conflict`] when the name is already catalogued.
pub async fn create(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    new: &NewEventType,
    actor: &str,
) -> Result<EventType> {
    check_name(&new.name)?;
    let description = check_description(new.description.clone())?;
    check_schema_and_example(new.schema.as_ref(), new.example.as_ref())?;
    let version = bump_version(conn, tenant_id).await?;
    let sql = format!(
        "INSERT INTO event_types (tenant_id, name, description, schema, example, deprecated, revision)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (tenant_id, name) DO NOTHING
         RETURNING {COLUMNS}"
    );
    let created: EventType = sqlx::query_as(&sql)
        .bind(tenant_id)
        .bind(&new.name)
        .bind(description)
        .bind(&new.schema)
        .bind(&new.example)
        .bind(new.deprecated)
        .bind(version)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| {
            Error::Conflict(format!("event type {} is already in the catalog", new.name))
        })?;
    audit::record(
        &mut *conn,
        &audit::Entry {
            tenant_id: Some(tenant_id),
            details: serde_json::json!({ "new": audited(&created) }),
            ..audit::Entry::new(actor, "event_type.created")
        },
    )
    .await?;
    Ok(created)
}

/// Tenant `tenant_id`'s catalog entry `name` ([`Error::NotFound`] for none, whoever's).
pub async fn get(exec: impl PgExecutor<'_>, tenant_id: Uuid, name: &str) -> Result<EventType> {
    let sql = format!("SELECT {COLUMNS} FROM event_types WHERE tenant_id = $1 AND name = $2");
    sqlx::query_as(&sql)
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(exec)
        .await?
        .ok_or(Error::NotFound("event type"))
}

/// A page of tenant `tenant_id`'s catalog by name (bytewise order); see [`crate::page`].
pub async fn list(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    page: &crate::page::Keyset<String>,
) -> Result<Vec<EventType>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM event_types WHERE tenant_id = $1{}{} LIMIT $2",
        page.seek("name", 3),
        page.order_by("name"),
    );
    let q = sqlx::query_as(&sql).bind(tenant_id).bind(page.limit);
    Ok(page.bind_cursor(q).fetch_all(exec).await?)
}

/// Applies `patch` to tenant `tenant_id`'s entry `name`, in the caller's transaction, with one
/// `event_type.updated` audit row by `actor` (`{"old": …, "new": …}` of what changed, and the
/// `name`; none when nothing changed). The resulting schema and example are checked together: a new schema that the
/// kept example fails is refused on `example`. Errors as [`create`]; [`Error::NotFound`] for
/// no such entry.
pub async fn update(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    name: &str,
    patch: &EventTypePatch,
    actor: &str,
) -> Result<EventType> {
    let description = patch
        .description
        .clone()
        .map(check_description)
        .transpose()?;
    let version = bump_version(conn, tenant_id).await?;
    let old = get(&mut *conn, tenant_id, name).await?;
    let schema = patch.schema.clone().unwrap_or_else(|| old.schema.clone());
    let example = patch.example.clone().unwrap_or_else(|| old.example.clone());
    check_schema_and_example(schema.as_ref(), example.as_ref())?;
    let sql = format!(
        "UPDATE event_types SET
            description = CASE WHEN $3 THEN $4 ELSE description END,
            schema = $5, example = $6,
            deprecated = coalesce($7, deprecated),
            revision = $8, updated_at = now()
         WHERE tenant_id = $1 AND name = $2
         RETURNING {COLUMNS}"
    );
    let new: EventType = sqlx::query_as(&sql)
        .bind(tenant_id)
        .bind(name)
        .bind(description.is_some())
        .bind(description.flatten())
        .bind(&schema)
        .bind(&example)
        .bind(patch.deprecated)
        .bind(version)
        .fetch_one(&mut *conn)
        .await?;
    if let Some(mut details) = audit::changes(&audited(&old), &audited(&new)) {
        details["name"] = name.into();
        audit::record(
            &mut *conn,
            &audit::Entry {
                tenant_id: Some(tenant_id),
                details,
                ..audit::Entry::new(actor, "event_type.updated")
            },
        )
        .await?;
    }
    Ok(new)
}

/// Removes tenant `tenant_id`'s entry `name` (a hard delete: see the module docs), with an
/// `event_type.deleted` audit row by `actor`, in the caller's transaction.
/// [`Error::NotFound`] for no such entry.
pub async fn delete(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    name: &str,
    actor: &str,
) -> Result<()> {
    bump_version(conn, tenant_id).await?;
    let sql =
        format!("DELETE FROM event_types WHERE tenant_id = $1 AND name = $2 RETURNING {COLUMNS}");
    let old: EventType = sqlx::query_as(&sql)
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(Error::NotFound("event type"))?;
    audit::record(
        &mut *conn,
        &audit::Entry {
            tenant_id: Some(tenant_id),
            details: serde_json::json!({ "old": audited(&old) }),
            ..audit::Entry::new(actor, "event_type.deleted")
        },
    )
    .await?;
    Ok(())
}

/// A channel that takes an event type.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Subscriber {
    /// The channel id.
    pub id: Uuid,
    /// The channel's display name, if any.
    pub name: Option<String>,
    /// The entry of the channel's `event_types` filter that takes the type (the exact name, or
    /// a wildcard such as `invoice.*`); null when the channel has no filter (it takes every
    /// type).
    pub matched_by: Option<String>,
}

/// The first [`MAX_SUBSCRIBERS_SHOWN`] of tenant `tenant_id`'s live channels (by id) that take
/// event type `name` in a fan-out (the same match as [`crate::messages::send`]), and whether
/// there are more.
pub async fn subscribers(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    name: &str,
) -> Result<(Vec<Subscriber>, bool)> {
    let patterns = crate::channels::matching_patterns(name);
    let rows: Vec<(Uuid, Option<String>, Option<Vec<String>>)> = sqlx::query_as(
        "SELECT id, name, event_types FROM channels
         WHERE tenant_id = $1 AND deleted_at IS NULL
           AND (event_types IS NULL OR event_types && $2)
         ORDER BY id LIMIT $3",
    )
    .bind(tenant_id)
    .bind(&patterns)
    .bind(MAX_SUBSCRIBERS_SHOWN + 1)
    .fetch_all(exec)
    .await?;
    let more = rows.len() as i64 > MAX_SUBSCRIBERS_SHOWN;
    let out = rows
        .into_iter()
        .take(MAX_SUBSCRIBERS_SHOWN as usize)
        .map(|(id, name, filter)| Subscriber {
            id,
            name,
            // The most specific entry: the exact name first, then the longest wildcard.
            matched_by: filter.map(|f| {
                patterns
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| f.contains(p))
                    .max_by_key(|(i, p)| (*i == 0, p.len()))
                    .map(|(_, p)| p.clone())
                    .unwrap_or_default()
            }),
        })
        .collect();
    Ok((out, more))
}

/// Checks one event (of an enqueue or a message) of `tenant` against its catalog: refuses an
/// event type that is not catalogued when the tenant says so (`reject_unknown_event_types`:
/// 422 on `event_type`), and a payload that fails the type's schema
/// ([`Error::SchemaViolation`] on `payload`, naming the first [`MAX_VIOLATIONS`] JSON pointers).
///
/// Cost: nothing for a tenant that never had a catalog and accepts unknown types (the `tenant`
/// row the caller already read says so); else no statement while the cached answer is current,
/// one primary-key lookup when the catalog changed (see [`Cache`]); the schema is compiled only
/// when it changed, and a payload is parsed only when its type has one.
pub async fn check_event(
    conn: &mut PgConnection,
    cache: &Cache,
    tenant: &Tenant,
    event_type: &str,
    payload: &RawValue,
) -> Result<()> {
    let version = tenant.event_catalog_version;
    if version == 0 && !tenant.reject_unknown_event_types {
        return Ok(());
    }
    let found = match cache.get(tenant.id, event_type, version) {
        Ok(found) => found,
        Err(stale) => {
            let row: Option<(i64, Option<Value>)> = sqlx::query_as(
                "SELECT revision, schema FROM event_types WHERE tenant_id = $1 AND name = $2",
            )
            .bind(tenant.id)
            .bind(event_type)
            .fetch_optional(&mut *conn)
            .await?;
            let found = match row {
                None => None,
                Some((revision, _)) if stale.as_ref().is_some_and(|s| s.revision == revision) => {
                    stale
                }
                Some((revision, schema)) => Some(schema::Found {
                    revision,
                    // Stored schemas compiled when they were written; one that no longer does
                    // (a library upgrade) is treated as none rather than refusing every event.
                    validator: schema
                        .as_ref()
                        .and_then(|s| schema::compile(s).ok())
                        .map(Arc::new),
                }),
            };
            cache.put(tenant.id, event_type, version, found.clone());
            found
        }
    };
    let Some(found) = found else {
        if tenant.reject_unknown_event_types {
            return Err(Error::invalid(
                "event_type",
                format!(
                    "{event_type:?} is not in the tenant's event-type catalog, and the tenant \
                     refuses unknown event types (reject_unknown_event_types)"
                ),
            ));
        }
        return Ok(());
    };
    let Some(validator) = found.validator else {
        return Ok(());
    };
    let instance: Value = serde_json::from_str(payload.get())
        .map_err(|e| Error::invalid("payload", format!("is not JSON: {e}")))?;
    let violations = schema::violations(&validator, &instance);
    if violations.is_empty() {
        Ok(())
    } else {
        Err(Error::SchemaViolation {
            field: "payload",
            violations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dotted_segments() {
        for ok in ["invoice", "invoice.paid", "a-b.c_d.E9", &"a".repeat(128)] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".a",
            "a.",
            "a..b",
            "a b",
            "a.*",
            "a:b",
            "é",
            &"a".repeat(129),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_example_must_match_the_schema() {
        let schema = serde_json::json!({"type": "object", "required": ["id"]});
        assert!(
            check_schema_and_example(Some(&schema), Some(&serde_json::json!({"id": 1}))).is_ok()
        );
        match check_schema_and_example(Some(&schema), Some(&serde_json::json!({}))) {
            Err(Error::SchemaViolation { field, violations }) => {
                assert_eq!(field, "example");
                assert_eq!(violations[0].pointer, "");
            }
            other => panic!("{other:?}"),
        }
    }
}
