//! Per-tenant quotas: how many channels and active API keys a tenant may
//! hold, and how many deliveries it may have accepted per second and per UTC day, counting every
//! delivery a request creates (a message fanned out to 1000 channels is 1000), not requests.
//! Also the tenant-wide ingress limit ([`take_ingress`]), which counts requests.
//!
//! **Where the numbers come from.** The cluster defaults are `api.quota_*` in
//! `config/default.toml` ([`QuotaDefaults`]); the operator overrides them per tenant
//! (`PATCH /api/v1/tenants/{id}` with `quotas`, [`set`]), stored as nullable columns on the
//! tenant row (`NULL` = the default, so a new default reaches every tenant without an
//! override). [`Quotas`] is what is in force.
//!
//! **Counts** (channels, active keys) are checked under the tenant row's exclusive lock
//! ([`crate::tenants::Hold::Exclusive`]), then counted by a later statement, so two creations
//! on two nodes cannot both take the last place. Over one: [`Error::QuotaExceeded`], which the
//! API answers 409 (the request conflicts with what the tenant holds now: waiting does not help,
//! deleting a channel or revoking a key, or the operator raising the quota, does).
//!
//! **Rates** (deliveries per second and per day) are taken by [`take_deliveries`] in the
//! enqueue's own transaction, after its deliveries are inserted and before it commits: the
//! tenant's `tenant_delivery_usage` row is locked by an upsert, the pure [`decide_deliveries`]
//! says whether the request fits, and one UPDATE writes the new state. The lock is held until
//! the commit, so two nodes cannot both pass a quota that allows only one of them, and a
//! refusal rolls the whole request back: no delivery of it is created. Over one: 429 with
//! `Retry-After` (when it will fit), or without it when the request alone is larger than the
//! quota (it never fits: split it, or ask the operator).

use crate::tenants::{DeliveryOverrides, Tenant};
use crate::{audit, Error, Result};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// Largest count quota (channels, active keys) the operator may set.
pub(crate) const MAX_COUNT_QUOTA: i64 = 1_000_000;
/// Largest deliveries-per-second quota the operator may set.
pub(crate) const MAX_PER_SECOND: i64 = 10_000_000;
/// Largest deliveries-per-day quota the operator may set.
pub(crate) const MAX_PER_DAY: i64 = 1_000_000_000_000;

/// One quota, as the API names it (the `quota` member of a refusal's problem body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Quota {
    /// Live (not deleted) channels.
    Channels,
    /// Unrevoked API keys.
    ActiveKeys,
    /// Deliveries accepted per second (GCRA; a second's worth may come at once).
    DeliveriesPerSecond,
    /// Deliveries accepted per UTC day.
    DeliveriesPerDay,
}

impl Quota {
    /// The quota's name in the API: `channels`, `active_keys`, `deliveries_per_second`,
    /// `deliveries_per_day`.
    pub fn as_str(self) -> &'static str {
        match self {
            Quota::Channels => "channels",
            Quota::ActiveKeys => "active_keys",
            Quota::DeliveriesPerSecond => "deliveries_per_second",
            Quota::DeliveriesPerDay => "deliveries_per_day",
        }
    }

    /// Whether the quota counts what a tenant holds (channels, keys: 409 over it) rather than
    /// what it does per unit of time (429 over it).
    pub fn is_count(self) -> bool {
        matches!(self, Quota::Channels | Quota::ActiveKeys)
    }
}

/// The cluster's default quotas (`api.quota_*` in `config/default.toml`), for tenants without
/// an override of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaDefaults {
    /// Live channels per tenant.
    pub channels: i64,
    /// Unrevoked API keys per tenant.
    pub active_keys: i64,
    /// Deliveries accepted per second per tenant; 0 = no limit.
    pub deliveries_per_second: i64,
    /// Deliveries accepted per UTC day per tenant; 0 = no limit.
    pub deliveries_per_day: i64,
}

impl Default for QuotaDefaults {
    /// The values of `config/default.toml` (see there for why).
    fn default() -> Self {
        Self {
            channels: 1_000,
            active_keys: 100,
            deliveries_per_second: 5_000,
            deliveries_per_day: 5_000_000,
        }
    }
}

/// The quotas in force for one tenant: its override where the operator set one, else the
/// cluster default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Quotas {
    /// Most live channels.
    pub channels: i64,
    /// Most unrevoked API keys.
    pub active_keys: i64,
    /// Most deliveries accepted per second (a second's worth may come at once); null = no limit.
    pub deliveries_per_second: Option<i64>,
    /// Most deliveries accepted per UTC day; null = no limit.
    pub deliveries_per_day: Option<i64>,
}

/// Whether a delivery quota (per second or per day) is in force for a tenant with these
/// overrides over `defaults`: the rule of [`Overrides::in_force`] (0 in the defaults = none).
fn delivery_quota_in_force(o: &DeliveryOverrides, defaults: &QuotaDefaults) -> bool {
    let quotas = Overrides {
        deliveries: *o,
        ..Overrides::default()
    }
    .in_force(defaults);
    quotas.deliveries_per_second.is_some() || quotas.deliveries_per_day.is_some()
}

/// A tenant's override columns (`tenants.quota_*`), `None` = the default: its channel and key
/// quotas, and its delivery quotas as the tenant's own read carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, sqlx::FromRow)]
struct Overrides {
    quota_channels: Option<i32>,
    quota_active_keys: Option<i32>,
    #[sqlx(flatten)]
    #[serde(flatten)]
    deliveries: DeliveryOverrides,
}

impl Overrides {
    fn in_force(&self, d: &QuotaDefaults) -> Quotas {
        let rate = |v: Option<i64>, default: i64| v.or((default > 0).then_some(default));
        Quotas {
            channels: self.quota_channels.map_or(d.channels, i64::from),
            active_keys: self.quota_active_keys.map_or(d.active_keys, i64::from),
            deliveries_per_second: rate(
                self.deliveries.quota_deliveries_per_second.map(i64::from),
                d.deliveries_per_second,
            ),
            deliveries_per_day: rate(
                self.deliveries.quota_deliveries_per_day,
                d.deliveries_per_day,
            ),
        }
    }

    /// As the audit log shows them: `null` = the cluster default.
    fn audited(&self) -> serde_json::Value {
        serde_json::json!({
            "channels": self.quota_channels,
            "active_keys": self.quota_active_keys,
            "deliveries_per_second": self.deliveries.quota_deliveries_per_second,
            "deliveries_per_day": self.deliveries.quota_deliveries_per_day,
        })
    }
}

const OVERRIDE_COLUMNS: &str =
    "quota_channels, quota_active_keys, quota_deliveries_per_second, quota_deliveries_per_day";

async fn overrides(exec: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<Overrides> {
    sqlx::query_as(&format!(
        "SELECT {OVERRIDE_COLUMNS} FROM tenants WHERE id = $1 AND deleted_at IS NULL"
    ))
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?
    .ok_or(Error::NotFound("tenant"))
}

/// The quotas in force for tenant `tenant_id` ([`Error::NotFound`] if it is missing or
/// deleted).
pub async fn get(
    exec: impl PgExecutor<'_>,
    tenant_id: Uuid,
    defaults: &QuotaDefaults,
) -> Result<Quotas> {
    Ok(overrides(exec, tenant_id).await?.in_force(defaults))
}

/// Changes to a tenant's quotas (the operator's `quotas` object): `None` leaves one alone,
/// `Some(None)` (a JSON `null`) puts it back to the cluster default, `Some(Some(n))` sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaPatch {
    /// Most live channels, 0 to 1 000 000 (null = the cluster default,
    /// `api.quota_channels`).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 1000000)]
    pub channels: Option<Option<i64>>,
    /// Most unrevoked API keys, 0 to 1 000 000 (null = the cluster default,
    /// `api.quota_active_keys`). Keys held above a lowered quota keep working; no new one is
    /// made until the tenant is under it.
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 1000000)]
    pub active_keys: Option<Option<i64>>,
    /// Most deliveries accepted per second, 1 to 10 000 000 (null = the cluster default,
    /// `api.quota_deliveries_per_second`).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 10000000)]
    pub deliveries_per_second: Option<Option<i64>>,
    /// Most deliveries accepted per UTC day, 1 to 10^12 (null = the cluster default,
    /// `api.quota_deliveries_per_day`).
    #[serde(default, deserialize_with = "crate::patch::nullable")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 1000000000000_i64)]
    pub deliveries_per_day: Option<Option<i64>>,
}

impl QuotaPatch {
    /// Checks each given value's range; errors name the field (`quotas.channels`, …).
    pub fn validate(&self) -> Result<()> {
        let check =
            |v: Option<Option<i64>>, field: &'static str, min: i64, max: i64| match v.flatten() {
                Some(n) if !(min..=max).contains(&n) => Err(Error::invalid(
                    field,
                    format!("must be a whole number from {min} to {max}, or null for the default"),
                )),
                _ => Ok(()),
            };
        check(self.channels, "quotas.channels", 0, MAX_COUNT_QUOTA)?;
        check(self.active_keys, "quotas.active_keys", 0, MAX_COUNT_QUOTA)?;
        check(
            self.deliveries_per_second,
            "quotas.deliveries_per_second",
            1,
            MAX_PER_SECOND,
        )?;
        check(
            self.deliveries_per_day,
            "quotas.deliveries_per_day",
            1,
            MAX_PER_DAY,
        )
    }

    /// Whether the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Applies `patch` to tenant `tenant_id`'s quotas in the caller's transaction, with one
/// `tenant.quotas_changed` audit row by `actor` (old and new overrides, `null` = default) when
/// something changed. The tenant row is locked (`FOR NO KEY UPDATE`) by the update, so a
/// creation counting against the old quota (which holds the row) finishes first. Errors: a
/// value out of range ([`Error::Invalid`], field `quotas.<name>`), a missing or deleted tenant
/// ([`Error::NotFound`]). Returns the quotas now in force.
pub async fn set(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    patch: &QuotaPatch,
    defaults: &QuotaDefaults,
    actor: &str,
) -> Result<Quotas> {
    patch.validate()?;
    crate::tenants::hold_live(&mut *conn, tenant_id, crate::tenants::Hold::Exclusive).await?;
    let old = overrides(&mut *conn, tenant_id).await?;
    // Values are in range (checked above), so the narrowing casts cannot wrap.
    let int = |v: Option<Option<i64>>| v.map(|v| v.map(|n| n as i32));
    let (channels, keys, per_second) = (
        int(patch.channels),
        int(patch.active_keys),
        int(patch.deliveries_per_second),
    );
    let new: Overrides = sqlx::query_as(&format!(
        "UPDATE tenants SET
            quota_channels = CASE WHEN $2 THEN $3 ELSE quota_channels END,
            quota_active_keys = CASE WHEN $4 THEN $5 ELSE quota_active_keys END,
            quota_deliveries_per_second = CASE WHEN $6 THEN $7 ELSE quota_deliveries_per_second END,
            quota_deliveries_per_day = CASE WHEN $8 THEN $9 ELSE quota_deliveries_per_day END,
            updated_at = now()
         WHERE id = $1
         RETURNING {OVERRIDE_COLUMNS}"
    ))
    .bind(tenant_id)
    .bind(channels.is_some())
    .bind(channels.flatten())
    .bind(keys.is_some())
    .bind(keys.flatten())
    .bind(per_second.is_some())
    .bind(per_second.flatten())
    .bind(patch.deliveries_per_day.is_some())
    .bind(patch.deliveries_per_day.flatten())
    .fetch_one(&mut *conn)
    .await?;
    if let Some(details) = audit::changes(&old.audited(), &new.audited()) {
        audit::record(
            &mut *conn,
            &audit::Entry {
                tenant_id: Some(tenant_id),
                details,
                ..audit::Entry::new(actor, "tenant.quotas_changed")
            },
        )
        .await?;
    }
    Ok(new.in_force(defaults))
}

fn count_refusal(quota: Quota, held: i64, limit: i64, what: &str, remedy: &str) -> Error {
    Error::QuotaExceeded {
        quota,
        limit,
        retry_after: None,
        message: format!(
            "the tenant holds {held} {what}, its `{}` quota is {limit}; {remedy}, or ask the \
             operator to raise the quota",
            quota.as_str()
        ),
    }
}

/// Checks that tenant `tenant_id` may create one more channel, in the caller's transaction,
/// and holds the tenant row (`FOR NO KEY UPDATE`) until it commits, so that the count stays
/// true: a second creation (on any node) waits for this one and then counts it. Call before
/// [`crate::channels::create`] in the same transaction. Errors: [`Error::NotFound`] for a
/// missing or deleted tenant, [`Error::QuotaExceeded`] ([`Quota::Channels`]) when it already
/// holds its quota of live channels.
pub async fn hold_for_channel(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    defaults: &QuotaDefaults,
) -> Result<()> {
    // The lock first, then the count in a later statement: under READ COMMITTED that statement's
    // snapshot is taken after the lock is won, so it sees every channel a creation that held the
    // lock before committed (one statement would count from a snapshot taken before waiting).
    crate::tenants::hold_live(&mut *conn, tenant_id, crate::tenants::Hold::Exclusive).await?;
    let limit = get(&mut *conn, tenant_id, defaults).await?.channels;
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM channels WHERE tenant_id = $1 AND deleted_at IS NULL",
    )
    .bind(tenant_id)
    .fetch_one(&mut *conn)
    .await?;
    if held >= limit {
        return Err(count_refusal(
            Quota::Channels,
            held,
            limit,
            "live channels",
            "delete one first",
        ));
    }
    Ok(())
}

/// Checks that tenant `tenant_id`, whose row the caller holds exclusively
/// ([`crate::tenants::Hold::Exclusive`]), may hold one more active key:
/// [`Error::QuotaExceeded`] ([`Quota::ActiveKeys`]) when `held` (its unrevoked keys, counted
/// after the lock) is already at its quota.
pub(crate) async fn check_new_key(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    held: i64,
    defaults: &QuotaDefaults,
) -> Result<()> {
    let limit = get(&mut *conn, tenant_id, defaults).await?.active_keys;
    if held >= limit {
        return Err(count_refusal(
            Quota::ActiveKeys,
            held,
            limit,
            "active API keys",
            "revoke one first",
        ));
    }
    Ok(())
}

/// What a tenant has used of its delivery quotas (`tenant_delivery_usage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    /// GCRA theoretical arrival time of the per-second quota (`None` = never used).
    pub rate_tat: Option<DateTime<Utc>>,
    /// The UTC day `day_count` counts (`None` = never used).
    pub day: Option<NaiveDate>,
    /// Deliveries accepted on `day`.
    pub day_count: i64,
}

/// Whether `n` new deliveries fit tenant quotas `q` at `now`, given its `usage`: the usage
/// after taking them, or the refusal ([`Error::QuotaExceeded`], with `retry_after` when waiting
/// makes them fit). Pure: the clock is an argument.
///
/// Per second: GCRA with a tolerance of one second, i.e. up to `deliveries_per_second` at once
/// after a quiet second, then one per `1/deliveries_per_second` s; `n` deliveries take `n`
/// cells at once. Per day: the deliveries accepted on `now`'s UTC day, which resets at 00:00
/// UTC. The day is checked first: when both refuse, its wait is the longer.
pub(crate) fn decide_deliveries(
    usage: Usage,
    q: &Quotas,
    n: i64,
    now: DateTime<Utc>,
) -> Result<Usage> {
    let today = now.date_naive();
    let used_today = if usage.day == Some(today) {
        usage.day_count
    } else {
        0
    };
    if let Some(per_day) = q.deliveries_per_day {
        if used_today + n > per_day {
            let midnight = (today + chrono::Days::new(1))
                .and_hms_opt(0, 0, 0)
                .expect("midnight exists")
                .and_utc();
            let retry_after = (n <= per_day).then(|| (midnight - now).to_std().unwrap_or_default());
            return Err(Error::QuotaExceeded {
                quota: Quota::DeliveriesPerDay,
                limit: per_day,
                retry_after,
                message: if n > per_day {
                    format!(
                        "this request makes {n} deliveries, more than the tenant's \
                         `deliveries_per_day` quota of {per_day}; nothing was accepted"
                    )
                } else {
                    format!(
                        "this request makes {n} deliveries and {used_today} were accepted today \
                         (UTC); the tenant's `deliveries_per_day` quota is {per_day}; nothing was \
                         accepted; the count starts again at 00:00 UTC"
                    )
                },
            });
        }
    }
    let mut rate_tat = usage.rate_tat;
    if let Some(per_second) = q.deliveries_per_second {
        let start = usage.rate_tat.map_or(now, |t| t.max(now));
        let cells = chrono::Duration::microseconds(
            (n as f64 * crate::ingress::interval_us(per_second)) as i64,
        );
        let tolerance = chrono::Duration::seconds(1);
        let new_tat = start + cells;
        if new_tat > now + tolerance {
            let retry_after =
                (n <= per_second).then(|| (new_tat - now - tolerance).to_std().unwrap_or_default());
            return Err(Error::QuotaExceeded {
                quota: Quota::DeliveriesPerSecond,
                limit: per_second,
                retry_after,
                message: if n > per_second {
                    format!(
                        "this request makes {n} deliveries, more than the tenant's \
                         `deliveries_per_second` quota of {per_second} can ever take at once; \
                         nothing was accepted; split it"
                    )
                } else {
                    format!(
                        "this request makes {n} deliveries, over the tenant's \
                         `deliveries_per_second` quota of {per_second}; nothing was accepted"
                    )
                },
            });
        }
        rate_tat = Some(new_tat);
    }
    Ok(Usage {
        rate_tat,
        day: Some(today),
        day_count: used_today + n,
    })
}

/// Takes `n` deliveries from tenant `tenant_id`'s delivery quotas, in the caller's transaction
/// (the enqueue's, after it inserted them and before it commits), or refuses them all
/// ([`Error::QuotaExceeded`]; the caller rolls back, so nothing of the request is created).
/// `n` = 0 (an idempotent replay) takes nothing and locks nothing, nor does a tenant for which
/// neither delivery quota is in force (both off in the defaults, no override): its usage is not
/// counted, so a per-day quota set later counts from then. `tenant` is the tenant as the
/// request read it: when its overrides ([`Tenant::delivery_quota`]) and `defaults` put no
/// delivery quota in force, this runs no statement at all (the common case, on the hot path).
///
/// Otherwise two statements. An upsert locks the tenant's usage row (making it on first use) and reads it
/// with the tenant's quota overrides and the database clock; [`decide_deliveries`] decides; an
/// UPDATE writes the new usage. The row stays locked until the caller commits: an enqueue of the
/// same tenant on any node waits at the upsert and then reads this one's usage, so two requests
/// cannot both pass a quota that has room for one. Other tenants' enqueues lock other rows.
/// Lock order: the enqueue holds its channel rows (`FOR SHARE`) before this row, as every
/// enqueue does, and nothing that holds this row waits for a channel row, so there is no cycle.
pub async fn take_deliveries(
    conn: &mut PgConnection,
    tenant: &Tenant,
    n: usize,
    defaults: &QuotaDefaults,
) -> Result<()> {
    if n == 0 || !delivery_quota_in_force(&tenant.delivery_quota, defaults) {
        return Ok(());
    }
    let tenant_id = tenant.id;
    type Row = (
        Option<i32>,
        Option<i32>,
        Option<i32>,
        Option<i64>,
        DateTime<Utc>,
        bool,
        Option<DateTime<Utc>>,
        Option<NaiveDate>,
        Option<i64>,
    );
    // The tenant's overrides, then the usage row, locked and read, only when a delivery quota is
    // in force for it (a tenant without one takes no lock and writes nothing). `SET day_count =
    // u.day_count` changes nothing but makes the conflict path lock the row (`FOR NO KEY
    // UPDATE`) and return it.
    let row: Option<Row> = sqlx::query_as(&format!(
        "WITH q AS (
             SELECT {OVERRIDE_COLUMNS} FROM tenants WHERE id = $1
         ), usage AS (
             INSERT INTO tenant_delivery_usage AS u (tenant_id)
             SELECT $1 FROM q
             WHERE coalesce(q.quota_deliveries_per_second, $2) > 0
                OR coalesce(q.quota_deliveries_per_day, $3) > 0
             ON CONFLICT (tenant_id) DO UPDATE SET day_count = u.day_count
             RETURNING rate_tat, day, day_count)
         SELECT q.*, now(), usage.day_count IS NOT NULL, usage.rate_tat, usage.day, usage.day_count
         FROM q LEFT JOIN usage ON true"
    ))
    .bind(tenant_id)
    .bind(defaults.deliveries_per_second)
    .bind(defaults.deliveries_per_day)
    .fetch_optional(&mut *conn)
    .await?;
    let (c, k, s, d, now, limited, rate_tat, day, day_count) =
        row.ok_or(Error::NotFound("tenant"))?;
    if !limited {
        return Ok(());
    }
    let quotas = Overrides {
        quota_channels: c,
        quota_active_keys: k,
        deliveries: DeliveryOverrides {
            quota_deliveries_per_second: s,
            quota_deliveries_per_day: d,
        },
    }
    .in_force(defaults);
    let usage = Usage {
        rate_tat,
        day,
        day_count: day_count.unwrap_or(0),
    };
    let next = decide_deliveries(usage, &quotas, n as i64, now)?;
    sqlx::query(
        "UPDATE tenant_delivery_usage SET rate_tat = $2, day = $3, day_count = $4
         WHERE tenant_id = $1",
    )
    .bind(tenant_id)
    .bind(next.rate_tat)
    .bind(next.day)
    .bind(next.day_count)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub use crate::ingress::{take_ingress, Ingress};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_delivery_quota_is_in_force_by_default_or_by_override_and_0_is_none() {
        let none = QuotaDefaults {
            deliveries_per_second: 0,
            deliveries_per_day: 0,
            ..QuotaDefaults::default()
        };
        let plain = DeliveryOverrides::default();
        assert!(!delivery_quota_in_force(&plain, &none));
        assert!(delivery_quota_in_force(&plain, &QuotaDefaults::default()));
        let per_second = DeliveryOverrides {
            quota_deliveries_per_second: Some(10),
            ..plain
        };
        assert!(delivery_quota_in_force(&per_second, &none));
        let per_day = DeliveryOverrides {
            quota_deliveries_per_day: Some(1_000),
            ..plain
        };
        assert!(delivery_quota_in_force(&per_day, &none));
        let per_day_only_default = QuotaDefaults {
            deliveries_per_day: 100,
            ..none
        };
        assert!(delivery_quota_in_force(&plain, &per_day_only_default));
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn quotas(per_second: Option<i64>, per_day: Option<i64>) -> Quotas {
        Quotas {
            channels: 10,
            active_keys: 10,
            deliveries_per_second: per_second,
            deliveries_per_day: per_day,
        }
    }

    const FRESH: Usage = Usage {
        rate_tat: None,
        day: None,
        day_count: 0,
    };

    #[test]
    fn a_second_worth_fits_at_once_and_one_more_waits_its_interval() {
        let now = at("2026-12-05T10:00:00Z");
        let q = quotas(Some(10), None);
        let u = decide_deliveries(FRESH, &q, 10, now).unwrap();
        assert_eq!(u.rate_tat, Some(now + chrono::Duration::seconds(1)));
        let Err(Error::QuotaExceeded {
            quota, retry_after, ..
        }) = decide_deliveries(u, &q, 1, now)
        else {
            panic!("the 11th is refused")
        };
        assert_eq!(quota, Quota::DeliveriesPerSecond);
        assert_eq!(retry_after, Some(Duration::from_millis(100)));
        // 100 ms later one more fits.
        assert!(decide_deliveries(u, &q, 1, now + chrono::Duration::milliseconds(100)).is_ok());
    }

    #[test]
    fn a_fan_out_larger_than_the_quota_never_fits_and_says_so() {
        let now = at("2026-12-05T10:00:00Z");
        let Err(Error::QuotaExceeded {
            quota, retry_after, ..
        }) = decide_deliveries(FRESH, &quotas(Some(5), None), 6, now)
        else {
            panic!("refused")
        };
        assert_eq!((quota, retry_after), (Quota::DeliveriesPerSecond, None));
    }

    #[test]
    fn the_day_counts_deliveries_and_resets_at_utc_midnight() {
        let now = at("2026-12-05T23:59:30Z");
        let q = quotas(None, Some(100));
        let u = decide_deliveries(FRESH, &q, 60, now).unwrap();
        assert_eq!((u.day_count, u.rate_tat), (60, None));
        let Err(Error::QuotaExceeded {
            quota, retry_after, ..
        }) = decide_deliveries(u, &q, 41, now)
        else {
            panic!("over the day")
        };
        assert_eq!(quota, Quota::DeliveriesPerDay);
        assert_eq!(retry_after, Some(Duration::from_secs(30)));
        let next_day = decide_deliveries(u, &q, 100, at("2026-12-06T00:00:01Z")).unwrap();
        assert_eq!(next_day.day_count, 100);
    }

    #[test]
    fn no_limit_takes_nothing_but_counts_the_day() {
        let now = at("2026-12-05T10:00:00Z");
        let u = decide_deliveries(FRESH, &quotas(None, None), 1_000_000, now).unwrap();
        assert_eq!((u.rate_tat, u.day_count), (None, 1_000_000));
    }

    #[test]
    fn overrides_win_and_zero_defaults_mean_no_limit() {
        let d = QuotaDefaults {
            channels: 5,
            active_keys: 6,
            deliveries_per_second: 0,
            deliveries_per_day: 0,
        };
        let none = Overrides::default().in_force(&d);
        assert_eq!(
            (
                none.channels,
                none.deliveries_per_second,
                none.deliveries_per_day
            ),
            (5, None, None)
        );
        let set = Overrides {
            quota_channels: Some(2),
            deliveries: DeliveryOverrides {
                quota_deliveries_per_second: Some(7),
                ..Default::default()
            },
            ..Default::default()
        }
        .in_force(&d);
        assert_eq!((set.channels, set.active_keys), (2, 6));
        assert_eq!(set.deliveries_per_second, Some(7));
    }

    #[test]
    fn patch_values_are_range_checked_naming_the_field() {
        let bad = QuotaPatch {
            deliveries_per_second: Some(Some(0)),
            ..Default::default()
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.starts_with("quotas.deliveries_per_second"), "{e}");
        let reset = QuotaPatch {
            channels: Some(None),
            ..Default::default()
        };
        assert!(reset.validate().is_ok());
    }
}
