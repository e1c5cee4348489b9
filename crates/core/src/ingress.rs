//! A tenant's ingress limit: requests per second for all its API keys on every node together
//! (GCRA with its state in Postgres, `tenant_ingress`). Used by the statement that
//! authenticates a tenant key ([`crate::tenants::authenticate_taking`]) and by portal sessions
//! ([`take_ingress`]); re-exported by [`crate::quotas`].

use crate::Result;
use sqlx::PgExecutor;
use std::time::Duration;
use uuid::Uuid;

/// µs between two cells at `per_second`.
pub(crate) fn interval_us(per_second: i64) -> f64 {
    1_000_000.0 / per_second as f64
}

/// A tenant ingress limit in force: `per_second` requests per second, `burst` of them at once
/// after a quiet spell (`api.ingress_per_second`, `api.ingress_burst`; see [`take_ingress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ingress {
    /// Requests per second (≥ 1; 0 is taken as 1).
    pub per_second: u32,
    /// Requests at once after a quiet spell (≥ 1; 0 is taken as 1).
    pub burst: u32,
}

impl Ingress {
    /// GCRA's emission interval `T` and tolerance `τ = burst·T`, both in µs.
    pub(crate) fn params(self) -> (f64, f64) {
        let t = interval_us(i64::from(self.per_second.max(1)));
        (t, t * f64::from(self.burst.max(1)))
    }
}

/// The upsert that takes one request from a tenant's ingress budget ([`take_ingress`]): the
/// tenant's id is the first column of `{rows}` (a `VALUES` or a `SELECT`), `{t}` and `{tau}`
/// are the statement's parameters holding `T` and `τ` in µs. Returns a row only if taken. One
/// text for [`take_ingress`] and the ingress step of [`crate::tenants::authenticate_taking`].
pub(crate) fn ingress_upsert(rows: &str, t: &str, tau: &str) -> String {
    format!(
        "INSERT INTO tenant_ingress AS i (tenant_id, tat)
         SELECT r.tenant_id, now() + {t}::float8 * interval '1 microsecond'
         FROM ({rows}) AS r(tenant_id)
         ON CONFLICT (tenant_id) DO UPDATE
             SET tat = greatest(i.tat, now()) + {t}::float8 * interval '1 microsecond'
             WHERE greatest(i.tat, now()) + {t}::float8 * interval '1 microsecond'
                   <= now() + {tau}::float8 * interval '1 microsecond'
         RETURNING 1"
    )
}

/// How long a refused request waits, in µs, from the tenant's `tenant_ingress` row as the
/// statement's snapshot sees it (before its own upsert): an SQL expression over that row's
/// `tat`, with `{t}` and `{tau}` as in [`ingress_upsert`].
pub(crate) fn ingress_wait_us(t: &str, tau: &str) -> String {
    format!(
        "(extract(epoch FROM (greatest(tat, now())
           + ({t}::float8 - {tau}::float8) * interval '1 microsecond' - now())) * 1e6)::float8"
    )
}

/// The wait a refused request is told: at least 1 ms.
pub(crate) fn ingress_wait(wait_us: Option<f64>) -> Duration {
    Duration::from_micros(wait_us.unwrap_or(0.0).max(1000.0) as u64)
}

/// Takes one request from tenant `tenant_id`'s ingress limit: `per_second` requests per
/// second, `burst` of them at once after a quiet spell (GCRA, the scheme of `governor` that the
/// per-key, per-node limit used before), for every key of the tenant on every node together.
/// `None` = allowed; `Some(wait)` = refused, retry after `wait`.
///
/// One autocommit upsert on the tenant's `tenant_ingress` row (unlogged: no WAL flush per
/// request), conditional on the budget: allowed when `max(tat, now) + T <= now + burst·T`, then
/// `tat` advances by `T = 1/per_second`. The row lock serialises concurrent requests of one
/// tenant across nodes; each re-reads the row after the lock, so no two take one cell. A refused
/// request reads the row once more for its wait. A request with a tenant API key takes its
/// cell in the statement that authenticates it instead
/// ([`crate::tenants::authenticate_taking`]); this one serves portal sessions.
pub async fn take_ingress(
    exec: impl PgExecutor<'_> + Copy,
    tenant_id: Uuid,
    per_second: u32,
    burst: u32,
) -> Result<Option<Duration>> {
    let (t, tau) = Ingress { per_second, burst }.params();
    let taken: Option<(i32,)> = sqlx::query_as(&ingress_upsert("VALUES ($1::uuid)", "$2", "$3"))
        .bind(tenant_id)
        .bind(t)
        .bind(tau)
        .fetch_optional(exec)
        .await?;
    if taken.is_some() {
        return Ok(None);
    }
    let wait_us: Option<f64> = sqlx::query_scalar(&format!(
        "SELECT {} FROM tenant_ingress WHERE tenant_id = $1",
        ingress_wait_us("$2", "$3")
    ))
    .bind(tenant_id)
    .bind(t)
    .bind(tau)
    .fetch_optional(exec)
    .await?;
    Ok(Some(ingress_wait(wait_us)))
}
