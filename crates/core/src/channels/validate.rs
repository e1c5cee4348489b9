//! The range and form checks of a channel's settings, as field errors ([`Error::Invalid`]).

use crate::{Error, Result};

/// Most event types in one channel's filter.
pub const MAX_EVENT_TYPES: usize = 100;
/// Longest event type in a channel's filter, in characters.
pub const MAX_FILTER_EVENT_TYPE_LEN: usize = 100;

/// The canonical form of a channel's event-type filter (sorted, without repeats), or the field
/// error. `None` (no filter: every type) stays `None`. Each entry is 1–100 characters of ASCII
/// letters, digits and `.` `_` `-` `:` `/` (e.g. `invoice.paid`, `orders/v2:created`); there
/// are 1–100 entries (an empty list would receive nothing: send `null` for every type). A
/// message matches a channel when its event type equals one of the entries exactly (no
/// wildcards), as with Svix's `filterTypes`.
pub fn canonical_event_types(types: Option<&[String]>) -> Result<Option<Vec<String>>> {
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
        if t.is_empty() || t.len() > MAX_FILTER_EVENT_TYPE_LEN || !t.chars().all(ok_char) {
            return Err(Error::invalid(
                "event_types",
                format!(
                    "event_types[{i}] must be 1 to {MAX_FILTER_EVENT_TYPE_LEN} characters of \
                     ASCII letters, digits, '.', '_', '-', ':' and '/'"
                ),
            ));
        }
    }
    let mut v = types.to_vec();
    v.sort();
    v.dedup();
    Ok(Some(v))
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
