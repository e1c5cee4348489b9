//! Classifying what happened to one HTTP attempt, and reading `Retry-After`.
//!
//! Pure functions, unit-tested without a network. The rules (docs/design.md, "The channel circuit"):
//! 2xx is success; connect errors, timeouts, 3xx, 408, 429 and 5xx are transient (retried, and
//! they count towards the channel's circuit); every other status is permanent (the delivery is
//! dead at once and the circuit does not move). 401 and 403 are also flagged as a configuration
//! problem of the channel.
//!
//! A redirect is never followed (the delivery client's redirect policy is `none`: a `Location`
//! could point anywhere, including inside the network) and is a transient failure, as peers
//! treat it: an endpoint that moved answers 301 to every request, and a permanent class would
//! dead-letter its whole backlog at once; as a transient one it is retried with backoff, opens
//! the channel's circuit (which parks the backlog until the tenant fixes the URL), and the
//! attempt log shows the status and where it pointed (see [`redirect_note`]).

use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

/// What an attempt observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// The endpoint answered with this HTTP status.
    Status(u16),
    /// No connection: DNS failure, refused, reset, TLS handshake failure.
    Connect,
    /// The connect or total timeout fired.
    Timeout,
    /// The request was refused before sending: the target resolves to a forbidden address.
    Blocked,
    /// Anything else that went wrong on the wire (e.g. the body could not be read).
    Other,
}

impl Observed {
    /// The HTTP status the endpoint answered (`delivery_attempts.status_code`, the span's
    /// `http.response.status_code`); `None` when no response came.
    pub fn status_code(self) -> Option<u16> {
        match self {
            Observed::Status(s) => Some(s),
            _ => None,
        }
    }

    /// Why no response came (`delivery_attempts.error_kind`, the span's `error.kind`):
    /// `connect`, `timeout`, `blocked` or `other`; `None` when the endpoint answered.
    pub fn error_kind(self) -> Option<&'static str> {
        match self {
            Observed::Status(_) => None,
            Observed::Connect => Some("connect"),
            Observed::Timeout => Some("timeout"),
            Observed::Blocked => Some("blocked"),
            Observed::Other => Some("other"),
        }
    }
}

/// The class of an attempt's outcome: the `delivery_attempts.outcome` column (`text`) and the
/// attempt log's `outcome` in the API.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[schema(as = AttemptOutcome)]
pub enum Class {
    /// Delivered.
    Success,
    /// Failed in a way that may pass: retry with backoff; counts towards the circuit.
    Transient,
    /// Failed in a way that will not pass by retrying: dead at once; never moves the circuit.
    Permanent,
}

column_text!(Class, field "outcome", what "attempt outcome", {
    Success => "success",
    Transient => "transient",
    Permanent => "permanent",
});

/// Classifies an attempt.
pub fn classify(observed: Observed) -> Class {
    match observed {
        Observed::Status(s) if (200..300).contains(&s) => Class::Success,
        Observed::Status(408 | 429) => Class::Transient,
        Observed::Status(s) if is_redirect(s) => Class::Transient,
        Observed::Status(s) if (500..600).contains(&s) => Class::Transient,
        Observed::Status(_) => Class::Permanent,
        Observed::Connect | Observed::Timeout | Observed::Other => Class::Transient,
        Observed::Blocked => Class::Permanent,
    }
}

/// The class of an attempt's outcome for its **host's** circuit ([`crate::hosts`]): as
/// [`classify`], except that a 429 is not a host failure but an answer. A 429 says the host is up
/// and is limiting the rate of this client for this endpoint (RFC 6585 §4: "the user has sent
/// too many requests"); the channel's `Retry-After` hold and its own circuit deal with it. So a
/// 429 counts nothing against the host and, as the host probe's answer, closes it: one tenant's
/// rate-limited endpoint must not help open a host that answers every other tenant.
pub(crate) fn host_class(observed: Observed) -> Class {
    match observed {
        Observed::Status(429) => Class::Permanent,
        o => classify(o),
    }
}

/// Whether this node's own stall makes a failed attempt inconclusive: the
/// failure says nothing about the endpoint, so it is not counted against the channel's or the
/// host's circuit, does not feed the channel's adaptive concurrency limit, and the delivery is
/// tried again without using an attempt. The rule: a timeout counts against an endpoint only if
/// the node was running for the timeout's length.
///
/// - `stalled`: how long the node stood still during the attempt (its stall watch, on the
///   monotonic clock); `elapsed`: the attempt's wall time; `limit`: the timeout that fired,
///   for a [`Observed::Timeout`] (the connect timeout, or the request's own timeout, which
///   counts running time only and so is conclusive once it fires).
/// - A timeout is inconclusive when the node ran for less than `limit` (`elapsed − stalled <
///   limit`). A connection failure ([`Observed::Connect`], [`Observed::Other`]: refused, reset,
///   closed) or a 408 with any stall in the attempt is inconclusive too: the peer may have given
///   up on a node that stopped talking mid-request, and a reset then speaks of this node, not
///   of the endpoint.
/// - Never without a stall, and never for any other answer (the endpoint spoke), a blocked
///   target or a success.
pub fn stall_excuses(
    observed: Observed,
    elapsed: Duration,
    stalled: Duration,
    limit: Option<Duration>,
) -> bool {
    if stalled.is_zero() {
        return false;
    }
    match observed {
        Observed::Timeout => limit.is_none_or(|l| elapsed.saturating_sub(stalled) < l),
        Observed::Connect | Observed::Other | Observed::Status(408) => true,
        Observed::Status(_) | Observed::Blocked => false,
    }
}

/// Whether `status` is a redirect (3xx).
pub fn is_redirect(status: u16) -> bool {
    (300..400).contains(&status)
}

/// How an attempt log names a redirect that was not followed: `HTTP 301 redirect to
/// https://host:port/… (not followed)`. The `Location` (absolute, or relative to the endpoint
/// `endpoint`) is cut to its origin, as every URL in attempt errors, circuit reasons, alerts and
/// the audit log is: its path or query may carry a token.
pub fn redirect_note(status: u16, location: Option<&str>, endpoint: &str) -> String {
    let target = location.map(|l| {
        url::Url::parse(endpoint)
            .and_then(|base| base.join(l.trim()))
            .ok()
            .filter(|u| u.has_host())
            .map(|u| format!("{}/…", u.origin().ascii_serialization()))
    });
    match target {
        Some(Some(t)) => format!("HTTP {status} redirect to {t} (not followed)"),
        Some(None) => format!("HTTP {status} redirect to an unusable Location (not followed)"),
        None => format!("HTTP {status} redirect without a Location (not followed)"),
    }
}

/// Whether the outcome says the channel itself is misconfigured (401/403: the receiver rejects
/// our credentials or signature), which operators should hear about loudly.
pub fn is_configuration_problem(observed: Observed) -> bool {
    matches!(observed, Observed::Status(401 | 403))
}

/// Whether a `Retry-After` header on this outcome is honoured (429 and 503, RFC 9110 §10.2.3).
pub(crate) fn honours_retry_after(observed: Observed) -> bool {
    matches!(observed, Observed::Status(429 | 503))
}

/// Parses a `Retry-After` value (RFC 9110 §10.2.3): delta-seconds, or an HTTP-date in any of
/// the three forms of RFC 9110 §5.6.7 (IMF-fixdate, obsolete RFC 850, asctime). Returns the wait
/// from `now`, capped at `cap`; a date in the past is a zero wait. `None` if the value is neither.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime, cap: Duration) -> Option<Duration> {
    let v = value.trim();
    let wait = if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Very long digit strings are still "a lot of seconds": saturate, then cap.
        Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(v).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(cap))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_hundreds_succeed() {
        for s in [200, 201, 202, 204, 299] {
            assert_eq!(classify(Observed::Status(s)), Class::Success, "{s}");
        }
    }

    #[test]
    fn transient_outcomes_are_connect_timeout_3xx_408_429_and_5xx() {
        for o in [
            Observed::Connect,
            Observed::Timeout,
            Observed::Other,
            Observed::Status(408),
            Observed::Status(429),
            Observed::Status(500),
            Observed::Status(502),
            Observed::Status(503),
            Observed::Status(504),
            Observed::Status(599),
            Observed::Status(300),
            Observed::Status(301),
            Observed::Status(302),
            Observed::Status(307),
            Observed::Status(308),
        ] {
            assert_eq!(classify(o), Class::Transient, "{o:?}");
        }
    }

    #[test]
    fn other_statuses_and_blocked_targets_are_permanent() {
        for o in [
            Observed::Status(400),
            Observed::Status(401),
            Observed::Status(403),
            Observed::Status(404),
            Observed::Status(410),
            Observed::Status(413),
            Observed::Status(422),
            Observed::Blocked,
        ] {
            assert_eq!(classify(o), Class::Permanent, "{o:?}");
        }
    }

    #[test]
    fn a_429_is_an_answer_for_the_host_and_everything_else_classifies_as_for_the_channel() {
        assert_eq!(host_class(Observed::Status(429)), Class::Permanent);
        for o in [
            Observed::Status(200),
            Observed::Status(408),
            Observed::Status(503),
            Observed::Status(404),
            Observed::Status(301),
            Observed::Connect,
            Observed::Timeout,
            Observed::Blocked,
        ] {
            assert_eq!(host_class(o), classify(o), "{o:?}");
        }
    }

    #[test]
    fn a_stall_excuses_a_timeout_only_if_the_node_ran_for_less_than_the_timeout() {
        let s = Duration::from_secs;
        // Frozen 15.2 s of a 15 s timeout: it ran for 0.8 s.
        assert!(stall_excuses(
            Observed::Timeout,
            Duration::from_millis(16_000),
            Duration::from_millis(15_200),
            Some(s(15))
        ));
        // Its own timeout, extended by a 2 s stall: it ran the 15 s.
        assert!(!stall_excuses(Observed::Timeout, s(17), s(2), Some(s(15))));
        // No stall: never excused.
        for o in [Observed::Timeout, Observed::Connect, Observed::Other] {
            assert!(
                !stall_excuses(o, s(16), Duration::ZERO, Some(s(15))),
                "{o:?}"
            );
        }
        // A reset or a 408 with a stall in it; never another answer.
        assert!(stall_excuses(Observed::Connect, s(3), s(2), None));
        assert!(stall_excuses(Observed::Other, s(3), s(2), None));
        assert!(stall_excuses(Observed::Status(408), s(3), s(2), None));
        for o in [
            Observed::Status(200),
            Observed::Status(503),
            Observed::Status(404),
            Observed::Blocked,
        ] {
            assert!(!stall_excuses(o, s(3), s(2), None), "{o:?}");
        }
    }

    #[test]
    fn redirect_notes_name_the_origin_only() {
        let ep = "https://hooks.example.com/in/secret-token?x=1";
        assert_eq!(
            redirect_note(
                301,
                Some("https://new.example.com:8443/v2/secret?t=abc"),
                ep
            ),
            "HTTP 301 redirect to https://new.example.com:8443/… (not followed)"
        );
        assert_eq!(
            redirect_note(308, Some("/moved/token"), ep),
            "HTTP 308 redirect to https://hooks.example.com/… (not followed)"
        );
        assert_eq!(
            redirect_note(302, None, ep),
            "HTTP 302 redirect without a Location (not followed)"
        );
        assert_eq!(
            redirect_note(302, Some("mailto:a@b.c"), ep),
            "HTTP 302 redirect to an unusable Location (not followed)"
        );
    }

    #[test]
    fn an_answer_has_a_status_and_no_answer_has_an_error_kind() {
        assert_eq!(Observed::Status(503).status_code(), Some(503));
        assert_eq!(Observed::Status(503).error_kind(), None);
        for (o, kind) in [
            (Observed::Connect, "connect"),
            (Observed::Timeout, "timeout"),
            (Observed::Blocked, "blocked"),
            (Observed::Other, "other"),
        ] {
            assert_eq!((o.status_code(), o.error_kind()), (None, Some(kind)));
        }
    }

    #[test]
    fn only_401_and_403_are_configuration_problems() {
        assert!(is_configuration_problem(Observed::Status(401)));
        assert!(is_configuration_problem(Observed::Status(403)));
        assert!(!is_configuration_problem(Observed::Status(404)));
        assert!(!is_configuration_problem(Observed::Status(500)));
    }

    #[test]
    fn retry_after_accepts_seconds_and_all_three_http_date_forms() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:00 GMT").unwrap();
        let cap = Duration::from_secs(3600);
        assert_eq!(
            parse_retry_after("120", now, cap),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now, cap), Some(Duration::ZERO));
        // IMF-fixdate, obsolete RFC 850, asctime: all 37 s after `now`.
        for v in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                parse_retry_after(v, now, cap),
                Some(Duration::from_secs(37)),
                "{v}"
            );
        }
    }

    #[test]
    fn retry_after_is_capped_and_past_dates_mean_now() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:00 GMT").unwrap();
        let cap = Duration::from_secs(60);
        assert_eq!(parse_retry_after("86400", now, cap), Some(cap));
        assert_eq!(
            parse_retry_after("99999999999999999999999", now, cap),
            Some(cap)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now, cap),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now, cap), None);
        assert_eq!(parse_retry_after("-5", now, cap), None);
        assert_eq!(parse_retry_after("", now, cap), None);
    }
}
