//! Channel rate limits: `"80/s"`, `"1000/m"`, `"5000/h"`, enforced cluster-wide with GCRA state on
//! the channel row.
//!
//! **Design** (GCRA, the generic cell rate algorithm of ITU-T I.371, with two pointers on the
//! channel row):
//! - `rate_tat`, the *send budget*: the theoretical arrival time of the next request. A worker
//!   about to send checks and advances it in one conditional UPDATE: allowed when
//!   `rate_tat <= now()`, then `rate_tat = max(rate_tat, now()) + T`, where
//!   `T = period / count` is the emission interval (no tolerance). The row lock
//!   serialises nodes, so the whole cluster draws from one budget, and requests are spread one
//!   per `T` rather than sent as a burst at the start of a window.
//! - `rate_queue_tat`, the *turns* of waiting deliveries: a delivery refused by the send budget
//!   takes the next turn (`max(rate_queue_tat, rate_tat, now()) + T`), writes it on itself
//!   (`rate_slot_at`) and is snoozed until then (no attempt used; counted in
//!   `rate_limited_total`). It wakes near its turn and checks the send budget again; if it is a
//!   little early or late it waits for the budget, not for a new turn. So a backlog drains in
//!   order, at the limit, without waking every waiting job at once.
//!
//! **Strict, no burst**: sends are at least `T` apart on the database clock, so no window one
//! period long holds more than the limit (receivers that publish "N per period" answer the
//! N+1-th with 429). There is no burst allowance, at start-up or after a restart.
//!
//! **Cost per delivery** on a rate-limited channel: one conditional UPDATE of the channel row
//! when it goes at once; a delivery that must wait adds one UPDATE (its turn), a snooze in the
//! same transaction, and a gate read plus the budget UPDATE when it wakes. Channels without a
//! limit pay nothing.

use crate::{Error, Result};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use std::time::Duration;
use uuid::Uuid;

/// Largest accepted count in a rate limit.
pub const MAX_COUNT: u64 = 1_000_000;

/// A parsed rate limit: at most `count` requests per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests per period (1 ..= [`MAX_COUNT`]).
    pub count: u64,
    /// The period: 1 s, 1 min or 1 h.
    pub period: Duration,
}

const FORM: &str = "must look like \"80/s\", \"1000/m\" or \"5000/h\": a whole number from 1 to 1000000, a slash, then s, m or h";

impl RateLimit {
    /// Parses `"<count>/<s|m|h>"`; errors say the accepted form (field `rate_limit`).
    pub fn parse(s: &str) -> Result<Self> {
        let invalid = || Error::invalid("rate_limit", FORM);
        let (count, unit) = s.trim().split_once('/').ok_or_else(invalid)?;
        if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) || count.len() > 7 {
            return Err(invalid());
        }
        let count: u64 = count.parse().map_err(|_| invalid())?;
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(invalid());
        }
        let period = match unit {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(invalid()),
        };
        Ok(Self { count, period })
    }

    /// The emission interval `T = period / count`, in microseconds (≥ 1).
    pub fn interval_us(&self) -> i64 {
        ((self.period.as_micros() as u64 / self.count).max(1)) as i64
    }

    /// The canonical text form.
    pub fn to_text(&self) -> String {
        let unit = match self.period.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        format!("{}/{unit}", self.count)
    }
}

/// What the rate limit says about sending now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Send now (the budget is taken).
    Now,
    /// Wait this long (database clock), then ask again. `queued` is true when the delivery was
    /// held back just now (it took a turn: counted in `rate_limited_total`), false when it is
    /// waiting again near a turn it already held.
    Wait {
        /// How long.
        wait: Duration,
        /// Whether this call held the delivery back (took a new turn).
        queued: bool,
        /// The delivery's turn (pass it back as `reserved` when asking again).
        turn: DateTime<Utc>,
    },
}

/// A delivery's turn is kept if it is no older than this; older means the job was parked or
/// delayed in between, and it takes a new turn.
const TURN_GRACE: chrono::Duration = chrono::Duration::seconds(2);

/// Takes the send budget of `channel_id` (limited by `limit`) for `delivery_id`, or says how
/// long to wait: until the delivery's turn (taken now if it has none, or a stale one) or, near
/// its turn, until the budget allows the next request. `reserved` is the turn the delivery
/// holds (`deliveries.rate_slot_at`). In the caller's transaction.
pub async fn take_slot(
    tx: &mut PgConnection,
    channel_id: Uuid,
    delivery_id: Uuid,
    reserved: Option<DateTime<Utc>>,
    limit: RateLimit,
) -> Result<Budget> {
    let t = limit.interval_us();
    // Strict: no request before its theoretical arrival time (a tolerance would let a request
    // come early and put limit + 1 into one period).
    let tolerance = 0i64;
    // Check and advance the send budget in one statement (the row lock serialises nodes).
    let (sent, rate_tat, now): (bool, Option<DateTime<Utc>>, DateTime<Utc>) = sqlx::query_as(
        "WITH cur AS (SELECT rate_tat, now() AS now FROM channels WHERE id = $1 FOR UPDATE),
              upd AS (
                UPDATE channels c
                SET rate_tat = greatest(coalesce(cur.rate_tat, cur.now), cur.now) + ($2::float8 * interval '1 microsecond')
                FROM cur
                WHERE c.id = $1 AND coalesce(cur.rate_tat, cur.now) <= cur.now + ($3::float8 * interval '1 microsecond')
                RETURNING 1)
         SELECT (SELECT count(*) FROM upd) = 1, cur.rate_tat, cur.now FROM cur",
    )
    .bind(channel_id)
    .bind(t)
    .bind(tolerance)
    .fetch_one(&mut *tx)
    .await?;
    if sent {
        return Ok(Budget::Now);
    }
    let budget_at = rate_tat.unwrap_or(now) - chrono::Duration::microseconds(tolerance);
    let (turn, queued) = match reserved {
        Some(turn) if turn >= now - TURN_GRACE => (turn, false),
        _ => {
            let turn: DateTime<Utc> = sqlx::query_scalar(
                "UPDATE channels
                 SET rate_queue_tat = greatest(coalesce(rate_queue_tat, now()), coalesce(rate_tat, now()), now())
                                      + ($2::float8 * interval '1 microsecond'),
                     rate_limited_total = rate_limited_total + 1
                 WHERE id = $1
                 RETURNING rate_queue_tat - ($2::float8 * interval '1 microsecond')",
            )
            .bind(channel_id)
            .bind(t)
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query!(
                "UPDATE deliveries SET rate_slot_at = $2 WHERE id = $1",
                delivery_id,
                turn,
            )
            .execute(&mut *tx)
            .await?;
            (turn, true)
        }
    };
    let wake = turn.max(budget_at);
    let wait = (wake - now)
        .to_std()
        .unwrap_or_default()
        .max(Duration::from_millis(1));
    Ok(Budget::Wait { wait, queued, turn })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_three_forms() {
        assert_eq!(
            RateLimit::parse("80/s").unwrap(),
            RateLimit {
                count: 80,
                period: Duration::from_secs(1)
            }
        );
        assert_eq!(
            RateLimit::parse("1000/m").unwrap().period,
            Duration::from_secs(60)
        );
        assert_eq!(RateLimit::parse("5000/h").unwrap().count, 5000);
        assert_eq!(RateLimit::parse(" 20/s ").unwrap().to_text(), "20/s");
        assert_eq!(RateLimit::parse("1000000/s").unwrap().count, MAX_COUNT);
    }

    #[test]
    fn rejects_bad_forms_with_the_accepted_form() {
        for bad in [
            "0/s",
            "-1/s",
            "80/d",
            "eighty/s",
            "80",
            "",
            "/s",
            "80/",
            "1.5/s",
            "80/S",
            "99999999999/s",
            "1000001/s",
            "80 /s",
            "+80/s",
        ] {
            let e = RateLimit::parse(bad).unwrap_err().to_string();
            assert!(e.contains("\"80/s\""), "{bad:?}: {e}");
        }
    }

    #[test]
    fn emission_interval_spreads_requests_evenly() {
        assert_eq!(RateLimit::parse("20/s").unwrap().interval_us(), 50_000);
        assert_eq!(RateLimit::parse("1000/m").unwrap().interval_us(), 60_000);
        assert_eq!(RateLimit::parse("5000/h").unwrap().interval_us(), 720_000);
    }
}
