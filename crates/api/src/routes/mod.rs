//! One module per resource.

/// Declares the handler of one asset embedded in the binary (`GET $path`: 200 with `$body` as
/// `$mime`, headers from `$respond(&state, content_type, body)`) and its OpenAPI operation, for
/// the static pages (`admin`, `portal`).
macro_rules! asset_route {
    ($(#[$doc:meta])* $name:ident = $path:tt, $tag:tt, $operation_id:tt, $description:tt,
        $mime:tt, $body:expr, $respond:path) => {
        $(#[$doc])*
        #[utoipa::path(
            get,
            path = $path,
            tag = $tag,
            operation_id = $operation_id,
            responses((status = 200, description = $description, body = String,
                content_type = $mime)),
        )]
        pub(crate) async fn $name(
            axum::extract::State(state): axum::extract::State<crate::AppState>,
        ) -> axum::response::Response {
            $respond(&state, concat!($mime, "; charset=utf-8"), $body)
        }
    };
}

pub mod admin;
pub mod assets;
pub mod audit;
pub mod channels;
pub mod deliveries;
pub mod event_types;
pub mod health;
pub mod hosts;
pub mod keys;
pub mod lifecycle;
pub mod messages;
pub mod metrics;
pub mod openapi;
pub mod operator;
pub mod portal;
pub mod portal_sessions;
pub mod queues;
pub mod secrets;
pub mod tenants;

use crate::error::ApiError;
use breakwater_core::{targets, ColumnText};

/// The `PATCH` field deserializers every body here names as `super::nullable` and
/// `super::not_null`.
pub(crate) use breakwater_core::patch::{not_null, nullable};

/// Checks a URL field (form, then DNS unless private targets are allowed); errors name `field`.
pub(crate) async fn checked_url(
    field: &'static str,
    raw: &str,
    allow_private: bool,
) -> Result<String, ApiError> {
    let url =
        targets::parse_channel_url(raw, allow_private).map_err(|m| ApiError::invalid(field, m))?;
    targets::check_resolves_publicly(&url, allow_private)
        .await
        .map_err(|m| ApiError::invalid(field, m))?;
    Ok(url.to_string())
}

/// The `{action}` path segment of a manual-action route, looked up in `actions` (segment, what
/// it does); any other segment is a 404 naming the allowed ones in order, e.g. `action (one of
/// open, close) not found`.
pub(crate) fn path_action<T: Copy>(segment: &str, actions: &[(&str, T)]) -> Result<T, ApiError> {
    match actions.iter().find(|(name, _)| *name == segment) {
        Some(&(_, action)) => Ok(action),
        None => {
            let names: Vec<&str> = actions.iter().map(|&(name, _)| name).collect();
            Err(ApiError::not_found(&format!(
                "action (one of {})",
                names.join(", ")
            )))
        }
    }
}

/// A query's id `field` (a filter such as `?channel_id=`): absent → `None`; a UUID, else 422
/// naming `field`, as every bad query value. (A query struct holds an id as text for this: typed
/// as `Uuid`, serde would refuse it in the query parser, in its own words.)
pub(crate) fn query_id(
    field: &'static str,
    raw: Option<&str>,
) -> Result<Option<uuid::Uuid>, ApiError> {
    raw.map(|r| {
        r.trim()
            .parse::<uuid::Uuid>()
            .map_err(|_| ApiError::invalid(field, "must be a UUID"))
    })
    .transpose()
}

/// A list's filter `field` as a `T`: absent → `None`; any text that is not one of `T::ALL` → 422
/// on `field` naming the allowed values in order, e.g. `state: must be one of closed, open,
/// half_open`.
pub(crate) fn list_filter<T: ColumnText>(
    field: &'static str,
    raw: Option<&str>,
) -> Result<Option<T>, ApiError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    match T::ALL.iter().find(|v| v.as_str() == raw) {
        Some(&v) => Ok(Some(v)),
        None => {
            let names: Vec<&str> = T::ALL.iter().map(|v| v.as_str()).collect();
            Err(ApiError::invalid(
                field,
                format!("must be one of {}", names.join(", ")),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakwater_core::circuit::State as CircuitState;
    use breakwater_core::deliveries::Status as DeliveryStatus;
    use breakwater_core::hosts::State as HostState;

    #[test]
    fn a_list_filter_reads_its_values_and_names_them_in_order_when_refusing() {
        assert_eq!(list_filter::<HostState>("state", None).unwrap(), None);
        assert_eq!(
            list_filter::<HostState>("state", Some("half_open")).unwrap(),
            Some(HostState::HalfOpen)
        );
        let detail = |r: Result<(), ApiError>| r.unwrap_err().detail;
        assert_eq!(
            detail(list_filter::<HostState>("state", Some("")).map(drop)),
            "state: must be one of closed, open, half_open"
        );
        assert_eq!(
            detail(list_filter::<CircuitState>("state", Some("melted")).map(drop)),
            "state: must be one of closed, open, half_open, paused"
        );
        assert_eq!(
            detail(list_filter::<DeliveryStatus>("status", Some("melted")).map(drop)),
            "status: must be one of pending, delivering, paused, failed, delivered, dead, cancelled"
        );
    }
}
