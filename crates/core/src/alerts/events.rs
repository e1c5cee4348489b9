//! Delivery-level operational events: what a tenant's on-call hears about
//! single deliveries and about a channel that fails often while its circuit stays closed.
//!
//! | event | default | when |
//! |---|---|---|
//! | `delivery.dead` | on | a delivery became `dead` on the worker's failure path (its last attempt failed, or a permanent 4xx) |
//! | `deliveries.dead` | with `delivery.dead` | the summary of a storm: deaths on one channel past `dead_alerts_per_window` within `dead_window_ms` |
//! | `channel.failing` | off | the share of failed attempts over `failing_window_ms` reaches `failing_threshold_percent` (with at least `failing_min_attempts` attempts) while the circuit is closed |
//! | `channel.recovered` | off | after `failing`: the share is back under the threshold (checked by the channel's event timer) |
//!
//! **Settings** are per tenant ([`EventSettings`], table `tenant_alert_events`; no row = the
//! defaults), changed with `PATCH /api/v1/tenant {"alert_events": {…}}` ([`set`]), each within
//! the bounds of [`EventSettingsPatch::validate`].
//!
//! **Bounds.** The decisions are pure functions of the channel's state, the settings and the
//! database's clock (an argument): [`on_dead`], [`summary_due`] and [`failing_step`]. The SQL that
//! applies them sits beside them ([`after_failed_attempt`], [`watch_step`]):
//! - a delivery's `delivery.dead` is enqueued in the transaction that made it dead (the worker's
//!   one failure transaction, fenced by its job's claim: a rolled-back result enqueues nothing),
//!   under the unique key `alert:dead:<delivery>:<attempts>`: one per death;
//! - per channel, at most `dead_alerts_per_window` `delivery.dead` per window (the window starts
//!   with its first death), then the window's further deaths are counted and summarised in one
//!   `deliveries.dead` (`count`, the first [`SAMPLE_IDS`] ids) when the window ends: at most
//!   `dead_alerts_per_window + 1` requests per channel per window, whatever the storm's size;
//! - one `channel.failing` per streak (`channel_event_state.failing_since` is set by its single
//!   winner under the channel row's lock), one `channel.recovered` at its end, and a streak lasts
//!   at least `failing_window_ms` (hysteresis): at most two of them per channel per window.
//!
//! **Cost.** Nothing on the success path: plain successes are recorded in batches and never come
//! here. A failed attempt of a tenant with an alert URL reads the tenant's settings (one indexed
//! join). A death writes the channel's event row (one upsert, one update: the channel row is
//! already locked by the failure's record, so this serialises nothing new). `channel.failing`
//! (opt-in) counts the channel's failed share from the attempts already kept
//! (`delivery_attempts`, index `(channel_id, started_at)`), over the window's most recent
//! [`SHARE_SAMPLE`] attempts at most, and only at a failure of a closed circuit that is not in a
//! streak yet; during a streak only the timer counts, every half window.
//!
//! **Not covered.** A delivery made dead outside the worker's failure path — its last attempt's
//! node died and the rescuer discarded the job (the database trigger marks it dead), or
//! `breakwater doctor` repaired it — sends no `delivery.dead`.

use super::{channel_alert, timer_job};
use crate::audit;
use crate::deliveries::Status;
use crate::jobs::AlertEventsWatchArgs;
use crate::jobs::{AlertArgs, JobArgs};
use crate::Error;
use crate::Result;
use chrono::TimeDelta;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// The alert of one dead delivery.
pub(crate) const EVENT_DELIVERY_DEAD: &str = "delivery.dead";
/// The alert summarising a channel's deaths past the per-window allowance.
pub(crate) const EVENT_DELIVERIES_DEAD: &str = "deliveries.dead";
/// The alert of a channel whose failed share crossed the threshold while its circuit is closed.
pub(crate) const EVENT_CHANNEL_FAILING: &str = "channel.failing";
/// The alert of a failing channel whose failed share is back under the threshold.
pub(crate) const EVENT_CHANNEL_RECOVERED: &str = "channel.recovered";
/// The audit action of a change of a tenant's event settings.
pub(crate) const ACTION_ALERT_EVENTS_CHANGED: &str = "tenant.alert_events_changed";
/// How many delivery ids a `deliveries.dead` summary lists (the first of the window's
/// coalesced deaths).
pub(crate) const SAMPLE_IDS: usize = 10;
/// The most recent attempts of the window that the failed share is counted over.
pub(crate) const SHARE_SAMPLE: i64 = 500;

/// A tenant's delivery-level event settings (the `alert_events` object of the tenant API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventSettings {
    /// Send `delivery.dead` (and its `deliveries.dead` summaries). Default true.
    pub delivery_dead: bool,
    /// Send `channel.failing`. Default false.
    pub channel_failing: bool,
    /// Send `channel.recovered` at the end of a failing streak. Default false.
    pub channel_recovered: bool,
    /// The storm window of one channel's deaths, ms (1 000 – 86 400 000; default 300 000).
    pub dead_window_ms: i64,
    /// `delivery.dead` alerts per channel per window; later deaths of the window are summarised
    /// in one `deliveries.dead` at its end (0 – 100; default 5; 0 = summaries only).
    pub dead_alerts_per_window: i32,
    /// The window the failed share is counted over, ms (1 000 – 86 400 000; default 300 000);
    /// also the shortest failing streak.
    pub failing_window_ms: i64,
    /// The failed share, percent, at or over which a channel is failing (1 – 100; default 50).
    pub failing_threshold_percent: i32,
    /// The fewest attempts in the window for a share to count (1 – 10 000; default 20).
    pub failing_min_attempts: i32,
}

impl Default for EventSettings {
    fn default() -> Self {
        Self {
            delivery_dead: true,
            channel_failing: false,
            channel_recovered: false,
            dead_window_ms: 300_000,
            dead_alerts_per_window: 5,
            failing_window_ms: 300_000,
            failing_threshold_percent: 50,
            failing_min_attempts: 20,
        }
    }
}

impl EventSettings {
    /// Whether a failing streak is tracked at all (either of its alerts is on).
    pub(crate) fn tracks_failing(&self) -> bool {
        self.channel_failing || self.channel_recovered
    }

    fn dead_window(&self) -> TimeDelta {
        TimeDelta::milliseconds(self.dead_window_ms)
    }

    fn failing_window(&self) -> TimeDelta {
        TimeDelta::milliseconds(self.failing_window_ms)
    }
}

/// Changes to a tenant's event settings: an absent field is left alone (none may be `null`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventSettingsPatch {
    /// Send `delivery.dead` and its summaries.
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = bool)]
    pub delivery_dead: Option<bool>,
    /// Send `channel.failing`.
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = bool)]
    pub channel_failing: Option<bool>,
    /// Send `channel.recovered`.
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = bool)]
    pub channel_recovered: Option<bool>,
    /// Storm window, ms, 1 000 – 86 400 000.
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = i64, minimum = 1000, maximum = 86400000)]
    pub dead_window_ms: Option<i64>,
    /// `delivery.dead` per channel per window, 0 – 100.
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = i32, minimum = 0, maximum = 100)]
    pub dead_alerts_per_window: Option<i32>,
    /// Failed-share window, ms, 1 000 – 86 400 000.
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = i64, minimum = 1000, maximum = 86400000)]
    pub failing_window_ms: Option<i64>,
    /// Failing threshold, percent, 1 – 100.
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = i32, minimum = 1, maximum = 100)]
    pub failing_threshold_percent: Option<i32>,
    /// Fewest attempts for a share to count, 1 – 10 000.
    #[serde(default, deserialize_with = "crate::patch::not_null")]
    #[schema(value_type = i32, minimum = 1, maximum = 10000)]
    pub failing_min_attempts: Option<i32>,
}

impl EventSettingsPatch {
    /// Checks each given value's range; errors name the field (`alert_events.<name>`).
    pub fn validate(&self) -> Result<()> {
        fn check(v: Option<i64>, field: &'static str, min: i64, max: i64) -> Result<()> {
            match v {
                Some(n) if !(min..=max).contains(&n) => Err(Error::invalid(
                    field,
                    format!("must be a whole number from {min} to {max}"),
                )),
                _ => Ok(()),
            }
        }
        check(
            self.dead_window_ms,
            "alert_events.dead_window_ms",
            1_000,
            86_400_000,
        )?;
        check(
            self.dead_alerts_per_window.map(i64::from),
            "alert_events.dead_alerts_per_window",
            0,
            100,
        )?;
        check(
            self.failing_window_ms,
            "alert_events.failing_window_ms",
            1_000,
            86_400_000,
        )?;
        check(
            self.failing_threshold_percent.map(i64::from),
            "alert_events.failing_threshold_percent",
            1,
            100,
        )?;
        check(
            self.failing_min_attempts.map(i64::from),
            "alert_events.failing_min_attempts",
            1,
            10_000,
        )
    }

    /// `s` with this patch applied.
    pub(crate) fn apply(&self, s: EventSettings) -> EventSettings {
        EventSettings {
            delivery_dead: self.delivery_dead.unwrap_or(s.delivery_dead),
            channel_failing: self.channel_failing.unwrap_or(s.channel_failing),
            channel_recovered: self.channel_recovered.unwrap_or(s.channel_recovered),
            dead_window_ms: self.dead_window_ms.unwrap_or(s.dead_window_ms),
            dead_alerts_per_window: self
                .dead_alerts_per_window
                .unwrap_or(s.dead_alerts_per_window),
            failing_window_ms: self.failing_window_ms.unwrap_or(s.failing_window_ms),
            failing_threshold_percent: self
                .failing_threshold_percent
                .unwrap_or(s.failing_threshold_percent),
            failing_min_attempts: self.failing_min_attempts.unwrap_or(s.failing_min_attempts),
        }
    }
}

/// The settings columns of `tenant_alert_events`, in [`EventSettings`]' order.
const SETTINGS_COLUMNS: &str =
    "delivery_dead, channel_failing, channel_recovered, dead_window_ms, \
     dead_alerts_per_window, failing_window_ms, failing_threshold_percent, failing_min_attempts";

type SettingsRow = (bool, bool, bool, i64, i32, i64, i32, i32);

fn from_row(r: SettingsRow) -> EventSettings {
    EventSettings {
        delivery_dead: r.0,
        channel_failing: r.1,
        channel_recovered: r.2,
        dead_window_ms: r.3,
        dead_alerts_per_window: r.4,
        failing_window_ms: r.5,
        failing_threshold_percent: r.6,
        failing_min_attempts: r.7,
    }
}

/// Tenant `tenant_id`'s event settings (the defaults when it never changed them).
pub async fn get(exec: impl PgExecutor<'_>, tenant_id: Uuid) -> Result<EventSettings> {
    let row: Option<SettingsRow> = sqlx::query_as(&format!(
        "SELECT {SETTINGS_COLUMNS} FROM tenant_alert_events WHERE tenant_id = $1"
    ))
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?;
    Ok(row.map(from_row).unwrap_or_default())
}

/// Applies `patch` to tenant `tenant_id`'s event settings in the caller's transaction, with one
/// `tenant.alert_events_changed` audit row by `actor` (old and new settings) when something
/// changed. Errors: a value out of range ([`Error::Invalid`], field `alert_events.<name>`), a
/// missing or deleted tenant ([`Error::NotFound`]). Returns the settings now in force.
pub async fn set(
    conn: &mut PgConnection,
    tenant_id: Uuid,
    patch: &EventSettingsPatch,
    actor: &str,
) -> Result<EventSettings> {
    patch.validate()?;
    crate::tenants::hold_live(&mut *conn, tenant_id, crate::tenants::Hold::Exclusive).await?;
    let old = get(&mut *conn, tenant_id).await?;
    let new = patch.apply(old);
    if new == old {
        return Ok(old);
    }
    sqlx::query(&format!(
        "INSERT INTO tenant_alert_events (tenant_id, {SETTINGS_COLUMNS})
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (tenant_id) DO UPDATE SET
             delivery_dead = EXCLUDED.delivery_dead, channel_failing = EXCLUDED.channel_failing,
             channel_recovered = EXCLUDED.channel_recovered,
             dead_window_ms = EXCLUDED.dead_window_ms,
             dead_alerts_per_window = EXCLUDED.dead_alerts_per_window,
             failing_window_ms = EXCLUDED.failing_window_ms,
             failing_threshold_percent = EXCLUDED.failing_threshold_percent,
             failing_min_attempts = EXCLUDED.failing_min_attempts, updated_at = now()"
    ))
    .bind(tenant_id)
    .bind(new.delivery_dead)
    .bind(new.channel_failing)
    .bind(new.channel_recovered)
    .bind(new.dead_window_ms)
    .bind(new.dead_alerts_per_window)
    .bind(new.failing_window_ms)
    .bind(new.failing_threshold_percent)
    .bind(new.failing_min_attempts)
    .execute(&mut *conn)
    .await?;
    audit::record(
        &mut *conn,
        &audit::Entry {
            tenant_id: Some(tenant_id),
            actor,
            action: ACTION_ALERT_EVENTS_CHANGED,
            details: serde_json::json!({ "old": old, "new": new }),
            ..Default::default()
        },
    )
    .await?;
    Ok(new)
}

// ---------------------------------------------------------------------------------------------
// The pure rules.

/// A channel's storm window of deaths (`channel_event_state.dead_*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DeadWindow {
    /// When the current window began (its first death); `None` before the first death.
    pub start: Option<DateTime<Utc>>,
    /// Deaths in the current window, alerted or not.
    pub in_window: i32,
    /// Deaths past the allowance not summarised yet.
    pub coalesced: i32,
    /// The first [`SAMPLE_IDS`] of the coalesced deaths.
    pub sample: Vec<Uuid>,
}

/// A `deliveries.dead` summary to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The window it summarises began then.
    pub window_start: DateTime<Utc>,
    /// Deaths of the window not alerted one by one.
    pub count: i32,
    /// The first of their ids.
    pub sample: Vec<Uuid>,
}

/// What [`on_dead`] decides for one death.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeadDecision {
    /// The window after this death.
    pub window: DeadWindow,
    /// Send this death's own `delivery.dead`.
    pub alert: bool,
    /// The previous window ended with deaths not summarised yet: send its summary now (its
    /// timer finds nothing left).
    pub flush: Option<Summary>,
    /// This is the window's first coalesced death: the channel's event timer must run by then
    /// (the window's end) to send the summary.
    pub timer_at: Option<DateTime<Utc>>,
}

/// The storm rule for one death of delivery `id` at `now` (database clock): a death at or
/// after the window's end starts a new window (and flushes the old one's summary); within a
/// window the first `per_window` deaths alert one by one, the rest are counted (and the first
/// [`SAMPLE_IDS`] ids kept) for the window's summary.
pub(crate) fn on_dead(
    w: &DeadWindow,
    id: Uuid,
    now: DateTime<Utc>,
    window: TimeDelta,
    per_window: i32,
) -> DeadDecision {
    let expired = w.start.is_none_or(|s| now >= s + window);
    let (mut next, flush) = if expired {
        let flush = w.start.filter(|_| w.coalesced > 0).map(|start| Summary {
            window_start: start,
            count: w.coalesced,
            sample: w.sample.clone(),
        });
        let fresh = DeadWindow {
            start: Some(now),
            ..DeadWindow::default()
        };
        (fresh, flush)
    } else {
        (w.clone(), None)
    };
    next.in_window += 1;
    let alert = next.in_window <= per_window;
    let mut timer_at = None;
    if !alert {
        next.coalesced += 1;
        if next.sample.len() < SAMPLE_IDS {
            next.sample.push(id);
        }
        if next.coalesced == 1 {
            timer_at = next.start.map(|s| s + window);
        }
    }
    DeadDecision {
        window: next,
        alert,
        flush,
        timer_at,
    }
}

/// What the channel's event timer does with its storm window at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SummaryDue {
    /// Nothing to summarise.
    Nothing,
    /// The window has not ended: look again then.
    At(DateTime<Utc>),
    /// The window ended: send this summary (and clear the coalesced count).
    Send(Summary),
}

/// The timer's storm rule: a window with coalesced deaths is summarised once it has ended.
pub(crate) fn summary_due(w: &DeadWindow, now: DateTime<Utc>, window: TimeDelta) -> SummaryDue {
    match w.start {
        Some(start) if w.coalesced > 0 => {
            if now >= start + window {
                SummaryDue::Send(Summary {
                    window_start: start,
                    count: w.coalesced,
                    sample: w.sample.clone(),
                })
            } else {
                SummaryDue::At(start + window)
            }
        }
        _ => SummaryDue::Nothing,
    }
}

/// A channel's attempts over the failing window: how many failed (transient or permanent), of
/// how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Share {
    /// Failed attempts.
    pub failed: i64,
    /// All attempts.
    pub total: i64,
}

impl Share {
    /// Whether the share is known (enough attempts) and at or over the threshold.
    fn over(self, s: &EventSettings) -> Option<bool> {
        (self.total >= i64::from(s.failing_min_attempts).max(1))
            .then(|| self.failed * 100 >= i64::from(s.failing_threshold_percent) * self.total)
    }
}

/// What [`failing_step`] decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failing {
    /// Not failing, and no streak starts.
    Quiet,
    /// A streak starts now (`channel.failing`).
    Start,
    /// The streak goes on (or the share is not known: too few attempts).
    Hold,
    /// The streak ends now (`channel.recovered`).
    Recovered,
}

/// The failing rule at `now` for a channel in a streak since `since` (or none): a streak starts
/// when the share is known and at or over the threshold while the circuit is closed (an open
/// circuit has its own alerts); it ends when the share is known and under the threshold, not
/// before one window after it began (so a channel hovering at the threshold makes at most one
/// streak per window).
pub(crate) fn failing_step(
    since: Option<DateTime<Utc>>,
    share: Share,
    circuit_closed: bool,
    now: DateTime<Utc>,
    s: &EventSettings,
) -> Failing {
    match (since, share.over(s)) {
        (None, Some(true)) if circuit_closed => Failing::Start,
        (None, _) => Failing::Quiet,
        (Some(since), Some(false)) if now >= since + s.failing_window() => Failing::Recovered,
        (Some(_), _) => Failing::Hold,
    }
}

// ---------------------------------------------------------------------------------------------
// The SQL beside them.

/// A failed attempt as [`after_failed_attempt`] needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailedAttempt<'a> {
    /// The delivery.
    pub delivery_id: Uuid,
    /// Its channel.
    pub channel_id: Uuid,
    /// The delivery's status after the attempt (dead, failed or paused).
    pub status: Status,
    /// The attempt's error, URL-free.
    pub error: &'a str,
    /// Whether the answer came from a URL the channel has left (it speaks for nothing of the
    /// channel's: no failing share is counted).
    pub url_changed: bool,
}

/// What the failure path reads once: the channel's tenant, circuit and the tenant's settings.
struct Context {
    tenant_id: Uuid,
    circuit_state: String,
    generation: i64,
    settings: EventSettings,
}

/// Reads `channel_id`'s tenant, circuit and event settings; `None` when the tenant has no alert
/// URL (or is deleted): then nothing is tracked or sent.
async fn context(tx: &mut PgConnection, channel_id: Uuid) -> Result<Option<Context>> {
    type Row = (
        Uuid,
        String,
        i64,
        Option<bool>,
        Option<bool>,
        Option<bool>,
        Option<i64>,
        Option<i32>,
        Option<i64>,
        Option<i32>,
        Option<i32>,
    );
    let row: Option<Row> = sqlx::query_as(
        "SELECT c.tenant_id, c.circuit_state, c.circuit_generation, e.delivery_dead,
                e.channel_failing, e.channel_recovered, e.dead_window_ms,
                e.dead_alerts_per_window, e.failing_window_ms, e.failing_threshold_percent,
                e.failing_min_attempts
         FROM channels c
         JOIN tenants t ON t.id = c.tenant_id AND t.deleted_at IS NULL AND t.alert_url IS NOT NULL
         LEFT JOIN tenant_alert_events e ON e.tenant_id = c.tenant_id
         WHERE c.id = $1 AND c.deleted_at IS NULL",
    )
    .bind(channel_id)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(row.map(|r| {
        let d = EventSettings::default();
        Context {
            tenant_id: r.0,
            circuit_state: r.1,
            generation: r.2,
            settings: EventSettings {
                delivery_dead: r.3.unwrap_or(d.delivery_dead),
                channel_failing: r.4.unwrap_or(d.channel_failing),
                channel_recovered: r.5.unwrap_or(d.channel_recovered),
                dead_window_ms: r.6.unwrap_or(d.dead_window_ms),
                dead_alerts_per_window: r.7.unwrap_or(d.dead_alerts_per_window),
                failing_window_ms: r.8.unwrap_or(d.failing_window_ms),
                failing_threshold_percent: r.9.unwrap_or(d.failing_threshold_percent),
                failing_min_attempts: r.10.unwrap_or(d.failing_min_attempts),
            },
        }
    }))
}

/// A `channel_event_state` row as [`lock_state`] reads it, with the database's `now()`.
type StateRow = (
    Option<DateTime<Utc>>,
    i32,
    i32,
    Vec<Uuid>,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
);

/// The channel's event row, made if missing and locked until the transaction ends, with the
/// database's `now()`.
async fn lock_state(
    tx: &mut PgConnection,
    channel_id: Uuid,
) -> Result<(DeadWindow, Option<DateTime<Utc>>, DateTime<Utc>)> {
    let (start, in_window, coalesced, sample, failing_since, now): StateRow = sqlx::query_as(
        "INSERT INTO channel_event_state (channel_id) VALUES ($1)
         ON CONFLICT (channel_id) DO UPDATE SET channel_id = EXCLUDED.channel_id
         RETURNING dead_window_start, dead_in_window, dead_coalesced, dead_sample, failing_since,
                   now()",
    )
    .bind(channel_id)
    .fetch_one(&mut *tx)
    .await?;
    let w = DeadWindow {
        start,
        in_window,
        coalesced,
        sample,
    };
    Ok((w, failing_since, now))
}

async fn write_window(tx: &mut PgConnection, channel_id: Uuid, w: &DeadWindow) -> Result<()> {
    sqlx::query(
        "UPDATE channel_event_state
         SET dead_window_start = $2, dead_in_window = $3, dead_coalesced = $4, dead_sample = $5
         WHERE channel_id = $1",
    )
    .bind(channel_id)
    .bind(w.start)
    .bind(w.in_window)
    .bind(w.coalesced)
    .bind(&w.sample)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Called by the failure path ([`crate::circuit::after_attempt`]) after a failed attempt was
/// recorded and the circuits moved, in the same transaction (the channel row is locked): a dead
/// delivery's `delivery.dead` under the storm rule ([`on_dead`]), and the start of a failing
/// streak ([`failing_step`]). Does nothing (one read) for a tenant without an alert URL.
pub(crate) async fn after_failed_attempt(
    tx: &mut PgConnection,
    f: &FailedAttempt<'_>,
) -> Result<()> {
    let Some(ctx) = context(tx, f.channel_id).await? else {
        return Ok(());
    };
    let s = ctx.settings;
    if f.status == Status::Dead && s.delivery_dead {
        let (w, _, now) = lock_state(tx, f.channel_id).await?;
        let d = on_dead(
            &w,
            f.delivery_id,
            now,
            s.dead_window(),
            s.dead_alerts_per_window,
        );
        write_window(tx, f.channel_id, &d.window).await?;
        if let Some(summary) = &d.flush {
            enqueue_summary(tx, &ctx, f.channel_id, summary, &s, now).await?;
        }
        if d.alert {
            enqueue_dead(tx, &ctx, f, now).await?;
        }
        if let Some(at) = d.timer_at {
            schedule_watch(tx, ctx.tenant_id, f.channel_id, at).await?;
        }
    }
    if s.tracks_failing() && !f.url_changed && ctx.circuit_state == "closed" {
        let since: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(
            "SELECT failing_since FROM channel_event_state WHERE channel_id = $1",
        )
        .bind(f.channel_id)
        .fetch_optional(&mut *tx)
        .await?;
        if since.flatten().is_none() {
            let (share, now) = share(tx, f.channel_id, &s).await?;
            if failing_step(None, share, true, now, &s) == Failing::Start {
                start_failing(tx, &ctx, f.channel_id, share, now).await?;
            }
        }
    }
    Ok(())
}

/// The channel's failed share over the window's most recent [`SHARE_SAMPLE`] attempts, and the
/// database's `now()`. One range scan of `delivery_attempts_channel_idx`.
async fn share(
    tx: &mut PgConnection,
    channel_id: Uuid,
    s: &EventSettings,
) -> Result<(Share, DateTime<Utc>)> {
    let (failed, total, now): (i64, i64, DateTime<Utc>) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE a.outcome <> 'success'), count(*), now()
         FROM (SELECT outcome FROM delivery_attempts
               WHERE channel_id = $1 AND started_at > now() - $2::float8 * interval '1 millisecond'
               ORDER BY started_at DESC LIMIT $3) a",
    )
    .bind(channel_id)
    .bind(s.failing_window_ms as f64)
    .bind(SHARE_SAMPLE)
    .fetch_one(&mut *tx)
    .await?;
    Ok((Share { failed, total }, now))
}

/// Starts a failing streak: one conditional UPDATE (`WHERE failing_since IS NULL`) under the
/// channel row's lock, whose single winner sends `channel.failing` (when on) and arms the timer
/// that ends the streak.
async fn start_failing(
    tx: &mut PgConnection,
    ctx: &Context,
    channel_id: Uuid,
    share: Share,
    now: DateTime<Utc>,
) -> Result<()> {
    let s = &ctx.settings;
    lock_state(tx, channel_id).await?;
    let won = sqlx::query(
        "UPDATE channel_event_state SET failing_since = $2, failing_alerted = $3
         WHERE channel_id = $1 AND failing_since IS NULL",
    )
    .bind(channel_id)
    .bind(now)
    .bind(s.channel_failing)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !won {
        return Ok(());
    }
    if s.channel_failing {
        let args = AlertArgs {
            from_state: None,
            to_state: ctx.circuit_state.clone(),
            reason: format!(
                "{} of the last {} attempts failed within {} ms (threshold {}%); the circuit is \
                 still closed",
                share.failed, share.total, s.failing_window_ms, s.failing_threshold_percent
            ),
            generation: ctx.generation,
            at: now,
            failed: Some(share.failed),
            attempts_in_window: Some(share.total),
            threshold_percent: Some(s.failing_threshold_percent),
            window_ms: Some(s.failing_window_ms),
            ..channel_alert(tx, EVENT_CHANNEL_FAILING, ctx.tenant_id, channel_id).await?
        };
        let key = format!(
            "alert:{channel_id}:{EVENT_CHANNEL_FAILING}:{}",
            now.timestamp_micros()
        );
        crate::jobs::enqueue_alert_job(tx, &args, key).await?;
    }
    schedule_watch(tx, ctx.tenant_id, channel_id, now + s.failing_window()).await
}

/// Enqueues dead delivery `f`'s `delivery.dead`, unique per (delivery, attempts): one per death.
async fn enqueue_dead(
    tx: &mut PgConnection,
    ctx: &Context,
    f: &FailedAttempt<'_>,
    now: DateTime<Utc>,
) -> Result<()> {
    let (event_type, message_id, attempts, last_error): (
        String,
        Option<Uuid>,
        i32,
        Option<String>,
    ) = sqlx::query_as(
        "SELECT event_type, message_id, attempts, last_error FROM deliveries WHERE id = $1",
    )
    .bind(f.delivery_id)
    .fetch_one(&mut *tx)
    .await?;
    let args = AlertArgs {
        from_state: None,
        to_state: ctx.circuit_state.clone(),
        reason: format!(
            "the delivery is dead after {attempts} attempts; last: {}",
            f.error
        ),
        generation: ctx.generation,
        at: now,
        delivery_id: Some(f.delivery_id),
        event_type: Some(event_type),
        message_id,
        attempts: Some(attempts),
        last_error: Some(last_error.unwrap_or_else(|| f.error.to_string())),
        ..channel_alert(tx, EVENT_DELIVERY_DEAD, ctx.tenant_id, f.channel_id).await?
    };
    let key = format!("alert:dead:{}:{attempts}", f.delivery_id);
    crate::jobs::enqueue_alert_job(tx, &args, key).await
}

/// Enqueues a window's `deliveries.dead` summary, unique per (channel, window start).
async fn enqueue_summary(
    tx: &mut PgConnection,
    ctx: &Context,
    channel_id: Uuid,
    summary: &Summary,
    s: &EventSettings,
    now: DateTime<Utc>,
) -> Result<()> {
    let args = AlertArgs {
        from_state: None,
        to_state: ctx.circuit_state.clone(),
        reason: format!(
            "{} more deliveries of this channel died within {} ms of {} (after the {} alerted \
             one by one)",
            summary.count, s.dead_window_ms, summary.window_start, s.dead_alerts_per_window
        ),
        generation: ctx.generation,
        at: now,
        count: Some(summary.count),
        delivery_ids: Some(summary.sample.clone()),
        window_start: Some(summary.window_start),
        window_ms: Some(s.dead_window_ms),
        ..channel_alert(tx, EVENT_DELIVERIES_DEAD, ctx.tenant_id, channel_id).await?
    };
    let key = format!(
        "alert:{channel_id}:{EVENT_DELIVERIES_DEAD}:{}",
        summary.window_start.timestamp_micros()
    );
    crate::jobs::enqueue_alert_job(tx, &args, key).await
}

/// The unique key of channel `channel_id`'s event timer.
pub(crate) fn watch_key(channel_id: Uuid) -> String {
    format!("alert-events:{channel_id}")
}

/// Makes the channel's event timer run no later than `at` (database time); a new timer goes in
/// its tenant's timer group ([`TenantGroup::AlertTimers`]).
async fn schedule_watch(
    tx: &mut PgConnection,
    tenant_id: Uuid,
    channel_id: Uuid,
    at: DateTime<Utc>,
) -> Result<()> {
    let args = AlertEventsWatchArgs { channel_id }.to_json();
    let kind = crate::jobs::JOB_ALERT_EVENTS_WATCH;
    let job = timer_job(tx, tenant_id, kind, args, watch_key(channel_id), at).await?;
    breakwater_queue::schedule_unique(&mut *tx, &job).await?;
    Ok(())
}

/// What the channel's event timer does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStep {
    /// Nothing left to watch: the timer is done.
    Done,
    /// Look again after this long.
    Wait(std::time::Duration),
}

/// The channel's event timer, in the caller's transaction: sends the storm window's summary
/// once the window ended ([`summary_due`]), and ends a failing streak once the share is back
/// under the threshold ([`failing_step`]), sending `channel.recovered` when on. Locks the
/// channel's event row (`FOR UPDATE`) first, so a death or a streak's start on another node
/// waits for it or is seen by it.
pub async fn watch_step(tx: &mut PgConnection, channel_id: Uuid) -> Result<WatchStep> {
    let exists: Option<bool> =
        sqlx::query_scalar("SELECT true FROM channel_event_state WHERE channel_id = $1 FOR UPDATE")
            .bind(channel_id)
            .fetch_optional(&mut *tx)
            .await?;
    if exists.is_none() {
        return Ok(WatchStep::Done);
    }
    let Some(ctx) = context(tx, channel_id).await? else {
        // No alert URL any more (or the channel is gone): forget the state, send nothing.
        sqlx::query(
            "UPDATE channel_event_state SET dead_coalesced = 0, dead_sample = '{}',
                    failing_since = NULL, failing_alerted = false
             WHERE channel_id = $1",
        )
        .bind(channel_id)
        .execute(&mut *tx)
        .await?;
        return Ok(WatchStep::Done);
    };
    let s = ctx.settings;
    let (mut w, failing_since, now) = lock_state(tx, channel_id).await?;
    let mut next: Option<DateTime<Utc>> = None;
    match summary_due(&w, now, s.dead_window()) {
        SummaryDue::Nothing => {}
        SummaryDue::At(at) => next = Some(at),
        SummaryDue::Send(summary) => {
            if s.delivery_dead {
                enqueue_summary(tx, &ctx, channel_id, &summary, &s, now).await?;
            }
            w.coalesced = 0;
            w.sample.clear();
            write_window(tx, channel_id, &w).await?;
        }
    }
    if let Some(since) = failing_since {
        let (share, now) = share(tx, channel_id, &s).await?;
        let closed = ctx.circuit_state == "closed";
        match failing_step(Some(since), share, closed, now, &s) {
            Failing::Recovered => {
                sqlx::query(
                    "UPDATE channel_event_state SET failing_since = NULL, failing_alerted = false
                     WHERE channel_id = $1",
                )
                .bind(channel_id)
                .execute(&mut *tx)
                .await?;
                if s.channel_recovered {
                    enqueue_recovered(tx, &ctx, channel_id, since, share, now).await?;
                }
            }
            _ => {
                let half = s.failing_window() / 2;
                let at = (since + s.failing_window()).max(now + half);
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
    }
    Ok(match next {
        None => WatchStep::Done,
        Some(at) => WatchStep::Wait((at - now).to_std().unwrap_or_default()),
    })
}

async fn enqueue_recovered(
    tx: &mut PgConnection,
    ctx: &Context,
    channel_id: Uuid,
    since: DateTime<Utc>,
    share: Share,
    now: DateTime<Utc>,
) -> Result<()> {
    let s = &ctx.settings;
    let args = AlertArgs {
        from_state: None,
        to_state: ctx.circuit_state.clone(),
        reason: format!(
            "{} of the last {} attempts failed within {} ms: under the threshold ({}%) again; \
             failing since {since}",
            share.failed, share.total, s.failing_window_ms, s.failing_threshold_percent
        ),
        generation: ctx.generation,
        at: now,
        failed: Some(share.failed),
        attempts_in_window: Some(share.total),
        threshold_percent: Some(s.failing_threshold_percent),
        window_ms: Some(s.failing_window_ms),
        failing_since: Some(since),
        ..channel_alert(tx, EVENT_CHANNEL_RECOVERED, ctx.tenant_id, channel_id).await?
    };
    let key = format!(
        "alert:{channel_id}:{EVENT_CHANNEL_RECOVERED}:{}",
        since.timestamp_micros()
    );
    crate::jobs::enqueue_alert_job(tx, &args, key).await
}

#[cfg(test)]
mod tests;
