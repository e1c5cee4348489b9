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
//! - `rate_queue_tat`, the end of the *line* of waiting deliveries: a delivery refused by the
//!   send budget takes a turn, writes it on itself (`rate_slot_at`) and is snoozed until then (no
//!   attempt used; counted in `rate_limited_total`). The line is in acceptance order: a new
//!   delivery's turn is the end (`max(rate_queue_tat, rate_tat, now())`, then the end moves by
//!   `T`), but a delivery that lost its turn — a retry (an attempt clears it), or a job parked
//!   past its turn — goes back in before the deliveries accepted after it, whose turns move back
//!   by `T` ([`take_slot`]). It wakes at its turn and checks the send budget; if the budget is a
//!   little late it waits for the budget, not for a new turn. So a backlog drains in order, at
//!   the limit, without waking every waiting job at once, and a retry's delay is its backoff,
//!   not the length of the backlog (issue 31, item 4).
//!
//! **Strict, no burst**: sends are at least `T` apart on the database clock, so no window one
//! period long holds more than the limit (receivers that publish "N per period" answer the
//! N+1-th with 429). There is no burst allowance, at start-up or after a restart.
//!
//! **Cost per delivery** on a rate-limited channel: a locked read of the channel row and one
//! index read of the line, plus one conditional UPDATE of the channel row when it goes at once; a
//! delivery that must wait adds one UPDATE of the channel (the end of the line) and one of itself
//! (its turn), a snooze in the same transaction, and a gate read plus the budget UPDATE when it
//! wakes. A delivery that goes back in ahead of others (a retry amid a backlog) also moves their
//! turns: one UPDATE of the turns behind it. Channels without a limit pay nothing.

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
        /// The delivery's turn (`deliveries.rate_slot_at`, as it stands after this call).
        turn: DateTime<Utc>,
    },
}

/// A delivery's turn is kept if it is no older than this; older means the job was parked or
/// delayed in between, and it takes a new turn. Turns older than this also no longer count as
/// someone waiting in line.
const TURN_GRACE: chrono::Duration = chrono::Duration::seconds(2);

/// Delivery statuses that wait for a turn (a turn of any other delivery is not in the line).
const WAITING: [&str; 2] = ["pending", "failed"];

/// Takes the send budget of `channel_id` (limited by `limit`) for `delivery_id`, or says how
/// long to wait: until the delivery's turn or, near its turn, until the budget allows the next
/// request. In the caller's transaction, under the channel row's lock (`FOR UPDATE`), which
/// serialises every node's calls for the channel: the budget and every turn change happen
/// under it.
///
/// The budget first: when it is free the delivery goes now — unless it holds a live turn that
/// has not come yet (the free instant belongs to whoever holds it; a delivery whose turn was
/// moved back, below, would otherwise take the instant of the one that moved it). Otherwise its
/// turn (`deliveries.rate_slot_at`, read here under the lock, so a turn another call moved is
/// seen):
/// - **it holds a live turn** (no older than [`TURN_GRACE`]): it waits until the turn, or the
///   budget, whichever is later, keeping the turn;
/// - **it holds none** (first try, a retry — an attempt clears the turn —, or a stale turn of a
///   job that was parked or delayed): it takes its **place in line by acceptance order**
///   (`created_at`, then id; issue 31, item 4). If no delivery accepted after it holds a live
///   turn, its turn is the end of the line (`max(rate_queue_tat, rate_tat, now)`, and the end
///   moves by `T`), as a new delivery's. If some do, it takes the earliest of their turns (`X`)
///   and every live turn at or after `X`, and the end of the line, move back by one interval
///   `T` (one UPDATE of those deliveries; their jobs wake at the old time and wait for the new
///   one, or take the budget if it is free then). So a retry due at `D` waits for the first
///   turn at or after `D` not held by a delivery accepted before it, ahead of those accepted
///   after it: its real delay is its backoff plus about an interval, not the length of the
///   backlog (before, it took a turn behind everything queued: 55 s instead of 12 s at 1/s with
///   60 waiting).
///
/// The limit itself is the send budget alone (`rate_tat`, advanced by `T` per request in one
/// conditional UPDATE): turns only order the deliveries and time their wake-ups, so moving them
/// never lets more than one request through per `T`, cluster-wide.
///
/// Cost: one statement (lock, budget, the delivery's turn) when the delivery goes or holds a
/// live turn; for one without, one or two reads of `deliveries_rate_turn_idx` (the last turn in
/// line, and, only when a delivery accepted after it is waiting, the first such), one channel
/// UPDATE and one delivery UPDATE, and when it goes ahead of others one UPDATE of the turns
/// behind it (as many rows as wait behind it).
pub async fn take_slot(
    tx: &mut PgConnection,
    channel_id: Uuid,
    delivery_id: Uuid,
    limit: RateLimit,
) -> Result<Budget> {
    let t = limit.interval_us();
    // Strict: no request before its theoretical arrival time (a tolerance would let a request
    // come early and put limit + 1 into one period).
    let tolerance = 0i64;
    // Check and advance the send budget in one statement (the row lock serialises nodes), and
    // read the delivery's turn under that lock.
    let BudgetRead {
        sent,
        rate_tat,
        now,
        rate_slot_at: reserved,
        created_at,
    } = sqlx::query_as(
        "WITH cur AS (SELECT c.rate_tat, now() AS now, d.rate_slot_at, d.created_at
                      FROM channels c LEFT JOIN deliveries d ON d.id = $4
                      WHERE c.id = $1 FOR UPDATE OF c),
              upd AS (
                UPDATE channels c
                SET rate_tat = greatest(coalesce(cur.rate_tat, cur.now), cur.now) + ($2::float8 * interval '1 microsecond')
                FROM cur
                WHERE c.id = $1 AND coalesce(cur.rate_tat, cur.now) <= cur.now + ($3::float8 * interval '1 microsecond')
                  AND (cur.rate_slot_at IS NULL OR cur.rate_slot_at <= cur.now
                       OR cur.rate_slot_at < cur.now - $5::float8 * interval '1 microsecond')
                RETURNING 1)
         SELECT (SELECT count(*) FROM upd) = 1 AS sent, cur.rate_tat, cur.now, cur.rate_slot_at,
                cur.created_at
         FROM cur",
    )
    .bind(channel_id)
    .bind(t)
    .bind(tolerance)
    .bind(delivery_id)
    .bind(TURN_GRACE.num_microseconds().unwrap_or(i64::MAX))
    .fetch_one(&mut *tx)
    .await?;
    if sent {
        return Ok(Budget::Now);
    }
    let budget_at = rate_tat.unwrap_or(now) - chrono::Duration::microseconds(tolerance);
    let live = now - TURN_GRACE;
    if let Some(turn) = reserved.filter(|&turn| turn >= live) {
        return Ok(wait_until(turn.max(budget_at), now, false, turn));
    }
    // No live turn: find this delivery's place in line. The last live turn first (one index
    // probe from the end): a new delivery is usually later than everyone waiting.
    let created_at = created_at.unwrap_or(now);
    let last: Option<(DateTime<Utc>, Uuid)> = sqlx::query_as(
        "SELECT created_at, id FROM deliveries
         WHERE channel_id = $1 AND rate_slot_at >= $2 AND id <> $3 AND status = ANY($4)
         ORDER BY rate_slot_at DESC LIMIT 1",
    )
    .bind(channel_id)
    .bind(live)
    .bind(delivery_id)
    .bind(&WAITING[..])
    .fetch_optional(&mut *tx)
    .await?;
    let ahead_of: Option<DateTime<Utc>> = match last {
        Some(key) if key > (created_at, delivery_id) => {
            // Someone accepted after it is waiting: its place is before the first of them.
            sqlx::query_scalar(
                "SELECT rate_slot_at FROM deliveries
                 WHERE channel_id = $1 AND rate_slot_at >= $2 AND id <> $3 AND status = ANY($4)
                   AND (created_at, id) > ($5, $3)
                 ORDER BY rate_slot_at LIMIT 1",
            )
            .bind(channel_id)
            .bind(live)
            .bind(delivery_id)
            .bind(&WAITING[..])
            .bind(created_at)
            .fetch_optional(&mut *tx)
            .await?
        }
        // Nobody waiting, or the last in line was accepted before it: its place is the end.
        _ => None,
    };
    let turn: DateTime<Utc> = match ahead_of {
        Some(x) => {
            // Every live turn from `x` on moves back one interval, and the end of the line too.
            sqlx::query(
                "UPDATE deliveries SET rate_slot_at = rate_slot_at + ($3::float8 * interval '1 microsecond')
                 WHERE channel_id = $1 AND rate_slot_at >= $2 AND status = ANY($4)",
            )
            .bind(channel_id)
            .bind(x)
            .bind(t)
            .bind(&WAITING[..])
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE channels
                 SET rate_queue_tat = greatest(coalesce(rate_queue_tat, $2), $2 + ($3::float8 * interval '1 microsecond'))
                                      + ($3::float8 * interval '1 microsecond'),
                     rate_limited_total = rate_limited_total + 1
                 WHERE id = $1",
            )
            .bind(channel_id)
            .bind(x)
            .bind(t)
            .execute(&mut *tx)
            .await?;
            x
        }
        None => {
            sqlx::query_scalar(
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
            .await?
        }
    };
    sqlx::query!(
        "UPDATE deliveries SET rate_slot_at = $2 WHERE id = $1",
        delivery_id,
        turn,
    )
    .execute(&mut *tx)
    .await?;
    Ok(wait_until(turn.max(budget_at), now, true, turn))
}

/// What [`take_slot`]'s first statement reads under the channel row's lock.
#[derive(sqlx::FromRow)]
struct BudgetRead {
    /// Whether it took the send budget.
    sent: bool,
    /// The budget's theoretical arrival time before the statement (`None`: never used).
    rate_tat: Option<DateTime<Utc>>,
    /// The database's `now()`.
    now: DateTime<Utc>,
    /// The delivery's turn, if it holds one.
    rate_slot_at: Option<DateTime<Utc>>,
    /// When the delivery was accepted (its place in line).
    created_at: Option<DateTime<Utc>>,
}

/// [`Budget::Wait`] until `at` (at least 1 ms), seen from `now`.
fn wait_until(at: DateTime<Utc>, now: DateTime<Utc>, queued: bool, turn: DateTime<Utc>) -> Budget {
    let wait = (at - now)
        .to_std()
        .unwrap_or_default()
        .max(Duration::from_millis(1));
    Budget::Wait { wait, queued, turn }
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
