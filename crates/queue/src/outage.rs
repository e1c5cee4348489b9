//! Riding out a database outage: which errors mean "the database cannot be reached (or this
//! attempt was cut off) now", and how long to wait before the next try of a write that must
//! not be given up (a result the node already has).

use rand::Rng;
use std::time::Duration;

/// Whether `e` says the database could not be reached or the statement was cut off by
/// something that passes — an outage, a failover, a restart — rather than that the statement
/// itself is wrong: the same statement may succeed later, unchanged. True for:
/// - connection failures and lost connections (`Io`, `Tls`, `Protocol`, a pool that found
///   no connection in time, a crashed pool worker; not a closed pool, which never reopens);
/// - SQLSTATE class 08 (connection exception), 57P01–57P03 (the server shutting down,
///   crashed, or not yet accepting connections), 53300 (too many connections), 25006 (a
///   read-only transaction: a former primary during a failover), 40001 and 40P01
///   (serialization failure, deadlock: the transaction was rolled back and may be run again).
pub fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|c| {
            c.starts_with("08")
                || matches!(
                    &*c,
                    "57P01" | "57P02" | "57P03" | "53300" | "25006" | "40001" | "40P01"
                )
        }),
        _ => false,
    }
}

/// The wait before try `tries + 1` (`tries` ≥ 1 failed so far) of a write that is kept until
/// it succeeds: 200 ms doubling per try up to [`OUTAGE_RETRY_CAP`], then a random point in
/// `[half, whole]` of that ("equal jitter"), so the nodes that lost the database together do
/// not all come back in the same instant.
pub fn outage_delay(tries: u32) -> Duration {
    let nominal = Duration::from_millis(200)
        .saturating_mul(1u32 << tries.saturating_sub(1).min(16))
        .min(OUTAGE_RETRY_CAP);
    let half = nominal / 2;
    half + Duration::from_micros(rand::thread_rng().gen_range(0..=half.as_micros() as u64))
}

/// The longest [`outage_delay`] (before jitter): a kept result is written at most this long
/// after the database is back.
pub const OUTAGE_RETRY_CAP: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outage_delay_doubles_from_200_ms_and_stays_under_the_cap_with_jitter() {
        for _ in 0..200 {
            let d1 = outage_delay(1);
            assert!(d1 >= Duration::from_millis(100) && d1 <= Duration::from_millis(200));
            let d3 = outage_delay(3);
            assert!(d3 >= Duration::from_millis(400) && d3 <= Duration::from_millis(800));
            let d = outage_delay(40);
            assert!(d >= OUTAGE_RETRY_CAP / 2 && d <= OUTAGE_RETRY_CAP, "{d:?}");
        }
    }

    #[test]
    fn a_lost_connection_is_transient_and_a_bad_statement_is_not() {
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(is_transient(&io));
        assert!(is_transient(&sqlx::Error::PoolTimedOut));
        assert!(!is_transient(&sqlx::Error::RowNotFound));
        assert!(!is_transient(&sqlx::Error::ColumnNotFound("x".into())));
    }
}
