//! The range and form checks of a channel's settings, as field errors ([`Error::Invalid`]).

use crate::{Error, Result};

/// Most event types in one channel's filter.
pub(crate) const MAX_EVENT_TYPES: usize = 100;
/// Longest event type in a channel's filter, in characters.
pub(crate) const MAX_FILTER_EVENT_TYPE_LEN: usize = 100;

/// The canonical form of a channel's event-type filter (sorted, without repeats), or the field
/// error. `None` (no filter: every type) stays `None`. There are 1–100 entries (an empty list
/// would receive nothing: send `null` for every type), each 1–100 characters, of two forms:
///
/// - an exact type: ASCII letters, digits and `.` `_` `-` `:` `/` (e.g. `invoice.paid`,
///   `orders/v2:created`), matched when a message's event type equals it;
/// - a prefix wildcard `P.*` (e.g. `invoice.*`), where `P` is 1 or more characters of that same
///   set: it matches every event type that starts with `P.` and has at least one character
///   after that dot (`invoice.*` takes `invoice.paid` and `invoice.line.added`, not `invoice`,
///   `invoice.` or `invoices.paid`). A `*` anywhere else is refused.
///
/// A message matches a channel when any entry matches its event type ([`matching_patterns`]).
pub(crate) fn canonical_event_types(types: Option<&[String]>) -> Result<Option<Vec<String>>> {
    let Some(types) = types else {
        return Ok(None);
    };
    if types.is_empty() || types.len() > MAX_EVENT_TYPES {
        return Err(Error::invalid(
            "event_types",
            format!(
                "must hold 1 to {MAX_EVENT_TYPES} event types, not {} (null receives every type)",
                types.len()
            ),
        ));
    }
    for (i, t) in types.iter().enumerate() {
        let ok_char =
            |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/');
        let body = t.strip_suffix(".*").unwrap_or(t);
        if body.is_empty() || t.len() > MAX_FILTER_EVENT_TYPE_LEN || !body.chars().all(ok_char) {
            return Err(Error::invalid(
                "event_types",
                format!(
                    "event_types[{i}] must be 1 to {MAX_FILTER_EVENT_TYPE_LEN} characters of \
                     ASCII letters, digits, '.', '_', '-', ':' and '/', optionally ending in \
                     '.*' (a prefix wildcard such as 'invoice.*'; '*' nowhere else)"
                ),
            ));
        }
    }
    let mut v = types.to_vec();
    v.sort();
    v.dedup();
    Ok(Some(v))
}

/// The filter entries that match `event_type` ([`canonical_event_types`]): the type itself and,
/// for each `.` that has a character after it, the wildcard of everything before it
/// (`invoice.line.added` → `invoice.line.added`, `invoice.*`, `invoice.line.*`). A channel
/// takes the type when its filter holds any of them, so the fan-out matches wildcards with the
/// same one array overlap (`event_types && $patterns`) as exact names. An event type is at most
/// 200 characters, so there are at most 100 of them.
pub(crate) fn matching_patterns(event_type: &str) -> Vec<String> {
    let mut out = vec![event_type.to_string()];
    for (i, b) in event_type.bytes().enumerate() {
        if b == b'.' && i > 0 && i + 1 < event_type.len() {
            out.push(format!("{}.*", &event_type[..i]));
        }
    }
    out
}

pub(super) fn check_max_in_flight(m: Option<i32>) -> Result<()> {
    if m.is_some_and(|m| !(1..=10_000).contains(&m)) {
        return Err(Error::invalid(
            "max_in_flight",
            "must be between 1 and 10000",
        ));
    }
    Ok(())
}

/// The canonical form of a rate limit, or the field error.
pub(super) fn canonical_rate_limit(r: Option<&str>) -> Result<Option<String>> {
    r.map(|r| crate::ratelimit::RateLimit::parse(r).map(|l| l.to_text()))
        .transpose()
}

pub(super) fn check_replay_window(w: Option<i64>) -> Result<()> {
    if w.is_some_and(|w| !(1..=30 * 86_400_000).contains(&w)) {
        return Err(Error::invalid(
            "replay_window_ms",
            "must be between 1 and 2592000000 (30 days)",
        ));
    }
    Ok(())
}

pub(super) fn check_overrides(
    failure_threshold: Option<i32>,
    cooldown_ms: Option<i64>,
) -> Result<()> {
    crate::circuit::check_overrides(failure_threshold, cooldown_ms)
}

/// A channel's display name, when it has one ([`crate::names::display_name`], as a tenant's
/// and a key's; `null` is how a channel has none), as stored: trimmed.
pub(super) fn check_name(name: Option<&str>) -> Result<Option<String>> {
    name.map(crate::names::display_name).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_wildcard_matches_deeper_types_only() {
        let m = matching_patterns("invoice.line.added");
        assert_eq!(m, ["invoice.line.added", "invoice.*", "invoice.line.*"]);
        assert!(matching_patterns("invoice.paid").contains(&"invoice.*".to_string()));
        assert!(!matching_patterns("invoices.x").contains(&"invoice.*".to_string()));
        assert_eq!(matching_patterns("invoice"), ["invoice"]);
        assert_eq!(matching_patterns("invoice."), ["invoice."]);
        assert_eq!(matching_patterns(".x"), [".x"]);
    }

    #[test]
    fn wildcards_are_accepted_only_as_a_dot_star_suffix() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(canonical_event_types(Some(&v(&["invoice.*", "a.b.*", "x"]))).is_ok());
        for bad in [
            "*",
            ".*",
            "invoice*",
            "in*voice.paid",
            "invoice.*.paid",
            "invoice.**",
        ] {
            assert!(
                canonical_event_types(Some(&v(&[bad]))).is_err(),
                "{bad} should be refused"
            );
        }
    }
}
