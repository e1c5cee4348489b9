//! Rotating a channel's signing secret, with a grace period for the previous one.

use crate::{audit, signing, Error, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

/// Default grace period of a secret rotation: 24 h, in ms (as Svix).
pub const DEFAULT_ROTATION_GRACE_MS: i64 = 86_400_000;
/// Longest grace period of a secret rotation: 7 days, in ms.
pub(crate) const MAX_ROTATION_GRACE_MS: i64 = 7 * 86_400_000;

/// The result of [`rotate_secret`]: the new secret, shown once.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RotatedSecret {
    /// The channel.
    pub channel_id: Uuid,
    /// The new Standard Webhooks secret (`whsec_…`), which signs every request from now on.
    pub signing_secret: String,
    /// Until when requests also carry a signature made with the old secret (database time);
    /// `None` with a zero grace period (the old secret stops at once).
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
}

/// Rotates `tenant_id`'s channel `id` to a fresh signing secret ([`Error::NotFound`] for another
/// tenant's). For `grace_ms` (0 to [`MAX_ROTATION_GRACE_MS`], else [`Error::Invalid`] naming
/// `grace_ms`) the old secret keeps signing too: each request's `webhook-signature` carries
/// `v1,<new> v1,<old>` (Standard Webhooks allows several space-separated signatures, and its
/// verifiers accept a request if any one verifies), so receivers can switch at their own pace.
/// After it, only `v1,<new>`. The period is measured on the database clock.
///
/// Only one old secret is kept: rotating again within a grace period drops the oldest at once
/// (the secret being replaced becomes the old one). Writes one `channel.secret_rotated` audit row
/// by `actor` with the grace period and its end, never a secret; in the caller's transaction.
/// An attempt already in flight was signed before the rotation and still verifies with the old
/// secret; one that starts later signs with both.
pub async fn rotate_secret(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    id: Uuid,
    grace_ms: i64,
    actor: &str,
) -> Result<RotatedSecret> {
    if !(0..=MAX_ROTATION_GRACE_MS).contains(&grace_ms) {
        return Err(Error::invalid(
            "grace_ms",
            format!("must be between 0 and {MAX_ROTATION_GRACE_MS} (7 days)"),
        ));
    }
    let secret = signing::generate_secret();
    // One conditional UPDATE: the row lock orders it with any concurrent rotation, so two
    // rotations at once each keep the secret they replaced, never a lost one.
    let expires: Option<(Option<DateTime<Utc>>,)> = sqlx::query_as(
        "UPDATE channels SET
            previous_signing_secret = CASE WHEN $3 > 0 THEN signing_secret END,
            previous_secret_expires_at = CASE WHEN $3 > 0
                THEN now() + $3 * interval '1 millisecond' END,
            signing_secret = $4,
            updated_at = now()
         WHERE id = $1 AND tenant_id = $2
         RETURNING previous_secret_expires_at",
    )
    .bind(id)
    .bind(tenant_id)
    .bind(grace_ms)
    .bind(&secret)
    .fetch_optional(&mut *conn)
    .await?;
    let (expires,) = expires.ok_or(Error::NotFound("channel"))?;
    audit::record(
        &mut *conn,
        &audit::Entry {
            details: serde_json::json!({
                "grace_ms": grace_ms,
                "previous_secret_expires_at": expires,
            }),
            ..audit::Entry::channel(tenant_id, id, actor, "channel.secret_rotated")
        },
    )
    .await?;
    Ok(RotatedSecret {
        channel_id: id,
        signing_secret: secret,
        previous_secret_expires_at: expires,
    })
}
