//! Bearer-key authentication: the operator key (from configuration), tenant keys (hashed in
//! `api_keys`) and tenant portal sessions (hashed in `portal_sessions`, a tenant credential with
//! a scope, [`breakwater_core::portal`]), one routine ([`authenticate`]) for either kind of key
//! ([`KeyKind`]); handlers get the caller through [`crate::call::Call`].
//!
//! A portal session reaches only what the portal needs ([`portal_may`]): the tenant's channels,
//! deliveries and messages, and reads of its own account and audit log. Everything else (API
//! keys, portal sessions, the alert secret, the tenant's settings, every operator route) is
//! refused with 403, and a `read` session is refused every method but `GET` and `HEAD` (403).
//! The list is an allow-list, so a route added later is closed to sessions until it is named
//! here.

use crate::error::ApiError;
use crate::AppState;
use axum::http::request::Parts;
use axum::http::Method;
use axum::http::{header, StatusCode};
use breakwater_core::{audit, keys, portal, quotas, tenants};
use std::future::Future;

/// The operator key. Its `Debug` never prints it.
#[derive(Clone)]
pub struct OperatorKey(String);

impl OperatorKey {
    /// Wraps a key; it must be at least 16 characters.
    pub fn new(key: String) -> Result<Self, String> {
        if key.chars().count() < 16 {
            return Err("BREAKWATER_OPERATOR_KEY must be at least 16 characters".into());
        }
        Ok(Self(key))
    }

    fn matches(&self, presented: &str) -> bool {
        keys::keys_match(presented, &self.0)
    }
}

impl std::fmt::Debug for OperatorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorKey(<redacted>)")
    }
}

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let unauthorized = |detail: &str| {
        let mut e = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", detail);
        e.headers.push((header::WWW_AUTHENTICATE, "Bearer".into()));
        e
    };
    let mut given = parts.headers.get_all(header::AUTHORIZATION).iter();
    let value = given
        .next()
        .ok_or_else(|| unauthorized("missing Authorization: Bearer <key> header"))?;
    // Two credentials are ambiguous (RFC 9110 §11.6.2 allows one): which one a proxy and the
    // service each read could differ, so neither is taken.
    if given.next().is_some() {
        return Err(unauthorized("send one Authorization header, not several"));
    }
    let value = value
        .to_str()
        .map_err(|_| unauthorized("malformed Authorization header"))?;
    let key = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| unauthorized("Authorization must be \"Bearer <key>\""))?;
    Ok(key)
}

/// The 401 for a credential nobody knows: named as what it looks like, a portal session token
/// (`bwp_…`, which expires) or an API key.
fn wrong_key(key: &str) -> ApiError {
    let detail = if key.starts_with(breakwater_core::portal::TOKEN_PREFIX) {
        "unknown, expired or revoked portal session"
    } else {
        "unknown or revoked API key"
    };
    let mut e = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", detail);
    e.headers.push((header::WWW_AUTHENTICATE, "Bearer".into()));
    e
}

/// A kind of key a route needs: the operator key ([`Operator`]) or a tenant key ([`Tenant`]).
///
/// [`authenticate`] checks the presented key as this kind first and only then as the other
/// kind, so each kind keeps its own order: the operator key is compared without the database
/// (a tenant lookup only tells a 403 from a 401), a tenant key is looked up first.
pub(crate) trait KeyKind: Sized + Send + Sync {
    /// The detail of the 403 for a key of the other kind.
    const OTHER_KIND: &'static str;

    /// The presented key as this kind, if it is one. A tenant key is also held to its tenant's
    /// ingress limit here (over it → 429).
    fn own(
        state: &AppState,
        parts: &Parts,
        key: &str,
    ) -> impl Future<Output = Result<Option<Self>, ApiError>> + Send;

    /// Whether the presented key is of the other kind.
    fn is_other(state: &AppState, key: &str)
        -> impl Future<Output = Result<bool, ApiError>> + Send;

    /// The audit actor of a call made with this key: `operator`, `tenant:<key id>`
    /// ([`breakwater_core::audit::tenant_actor`]) or `portal:<session id>`
    /// ([`breakwater_core::portal::actor`]).
    fn actor(&self) -> String;
}

/// The request's bearer key as a `K`. No or a malformed `Authorization` header → 401; a key of
/// the other kind → 403 ([`KeyKind::OTHER_KIND`]); an unknown or revoked key → 401. Every 401
/// carries `WWW-Authenticate: Bearer`.
pub(crate) async fn authenticate<K: KeyKind>(
    parts: &Parts,
    state: &AppState,
) -> Result<K, ApiError> {
    let key = bearer(parts)?;
    if let Some(own) = K::own(state, parts, key).await? {
        return Ok(own);
    }
    if K::is_other(state, key).await? {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            K::OTHER_KIND,
        ));
    }
    Err(wrong_key(key))
}

/// A request made with the operator key. A tenant key here → 403; anything else → 401.
pub struct Operator;

impl KeyKind for Operator {
    const OTHER_KIND: &'static str =
        "this route needs the operator key; a tenant key cannot use it";

    async fn own(state: &AppState, _: &Parts, key: &str) -> Result<Option<Self>, ApiError> {
        Ok(state
            .settings()
            .operator_key
            .matches(key)
            .then_some(Operator))
    }

    async fn is_other(state: &AppState, key: &str) -> Result<bool, ApiError> {
        Ok(tenants::authenticate(state.pool(), key).await?.is_some()
            || portal::authenticate(state.pool(), key).await?.is_some())
    }

    fn actor(&self) -> String {
        audit::ACTOR_OPERATOR.to_string()
    }
}

/// A request made with a tenant credential: one of its API keys, or one of its portal sessions
/// where [`portal_may`] lets it. The operator key here → 403 (operators act on tenants'
/// channels through the operator API); anything else unknown, revoked or expired → 401.
pub struct Tenant {
    /// The tenant the credential belongs to.
    pub tenant_id: uuid::Uuid,
    /// Which credential.
    pub via: Via,
}

/// The credential of a tenant call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// An API key (its id).
    Key(uuid::Uuid),
    /// A portal session (its id and scope).
    Portal {
        /// The session's id.
        session_id: uuid::Uuid,
        /// What it may do.
        scope: portal::Scope,
    },
}

/// Whether a portal session with `scope` may make `method` on `path`, or the detail of its 403.
///
/// The portal's routes only, by prefix: `/api/v1/channels…`, `/api/v1/deliveries…`,
/// `/api/v1/messages…`, and `GET` of `/api/v1/tenant`, `/api/v1/audit`,
/// `/api/v1/portal/session` and the event-type catalog (`/api/v1/event-types…`: the platform
/// defines its event types; the portal's users read them to subscribe and to test). Not API
/// keys, portal sessions, the alert secret or the tenant's settings: a session is for the
/// tenant's users on the portal page, not a way to mint a standing credential. A `read`
/// session: `GET` and `HEAD`, and the one `POST` that only reads, a channel's
/// `…/filter/test`.
pub(crate) fn portal_may(scope: portal::Scope, method: &Method, path: &str) -> Result<(), String> {
    let under = |prefix: &str| {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    let reads = method == Method::GET || method == Method::HEAD;
    let portal_route = under("/api/v1/channels")
        || (reads && path == "/api/v1/portal/session")
        || under("/api/v1/deliveries")
        || under("/api/v1/messages")
        || (reads && (path == "/api/v1/tenant" || path == "/api/v1/audit"))
        || (reads && under("/api/v1/event-types"));
    // Says whether a payload matches a channel's filter: stores, sends and audits nothing.
    let read_only_post = method == Method::POST
        && path.starts_with("/api/v1/channels/")
        && path.ends_with("/filter/test");
    if !portal_route {
        return Err(
            "a portal session cannot use this route: it needs the tenant's API key".to_string(),
        );
    }
    if scope == portal::Scope::Read && !reads && !read_only_post {
        return Err("this portal session has the read scope: it cannot change anything".into());
    }
    Ok(())
}

impl KeyKind for Tenant {
    const OTHER_KIND: &'static str =
        "this route needs a tenant key; the operator key cannot use it";

    async fn own(state: &AppState, parts: &Parts, key: &str) -> Result<Option<Self>, ApiError> {
        // The key and the tenant's ingress limit in one statement.
        if let Some((t, refused)) =
            tenants::authenticate_taking(state.pool(), key, ingress_limit(state)).await?
        {
            if let Some(wait) = refused {
                return Err(rate_limited(state, wait));
            }
            return Ok(Some(Tenant {
                tenant_id: t.tenant_id,
                via: Via::Key(t.key_id),
            }));
        }
        let Some(s) = portal::authenticate(state.pool(), key).await? else {
            return Ok(None);
        };
        portal_may(s.scope, &parts.method, parts.uri.path())
            .map_err(|detail| ApiError::new(StatusCode::FORBIDDEN, "forbidden", detail))?;
        check_ingress(state, s.tenant_id).await?;
        Ok(Some(Tenant {
            tenant_id: s.tenant_id,
            via: Via::Portal {
                session_id: s.session_id,
                scope: s.scope,
            },
        }))
    }

    async fn is_other(state: &AppState, key: &str) -> Result<bool, ApiError> {
        Ok(state.settings().operator_key.matches(key))
    }

    fn actor(&self) -> String {
        match self.via {
            Via::Key(key_id) => audit::tenant_actor(key_id),
            Via::Portal { session_id, .. } => portal::actor(session_id),
        }
    }
}

/// The tenant ingress limit in force (`api.ingress_per_second` and `api.ingress_burst`, for all
/// of a tenant's keys on every node together, [`breakwater_core::quotas::take_ingress`]), or
/// `None` when it is off (`api.ingress_per_second` = 0).
fn ingress_limit(state: &AppState) -> Option<quotas::Ingress> {
    let cfg = &state.settings().config;
    (cfg.ingress_per_second > 0).then_some(quotas::Ingress {
        per_second: cfg.ingress_per_second,
        burst: cfg.ingress_burst,
    })
}

/// Takes one request from tenant `tenant_id`'s ingress limit ([`ingress_limit`]); over it → 429
/// `rate_limited` ([`rate_limited`]). For portal sessions: a tenant key takes its request in the
/// statement that authenticates it.
async fn check_ingress(state: &AppState, tenant_id: uuid::Uuid) -> Result<(), ApiError> {
    let Some(limit) = ingress_limit(state) else {
        return Ok(());
    };
    match quotas::take_ingress(state.pool(), tenant_id, limit.per_second, limit.burst).await? {
        Some(wait) => Err(rate_limited(state, wait)),
        None => Ok(()),
    }
}

/// The 429 `rate_limited` of a request over its tenant's ingress limit, with `Retry-After`
/// (whole seconds, at least 1) after `wait`.
fn rate_limited(state: &AppState, wait: std::time::Duration) -> ApiError {
    let cfg = &state.settings().config;
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let mut e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        format!(
            "too many requests for this tenant (all its API keys together: {} per second, {} at \
             once); retry in {} ms",
            cfg.ingress_per_second,
            cfg.ingress_burst,
            wait.as_millis()
        ),
    );
    e.headers
        .push((header::RETRY_AFTER, secs.max(1).to_string()));
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use portal::Scope::{Manage, Read};

    #[test]
    fn a_portal_session_reaches_the_portal_routes_only() {
        for (method, path) in [
            (Method::GET, "/api/v1/channels"),
            (Method::POST, "/api/v1/channels"),
            (Method::PATCH, "/api/v1/channels/x"),
            (Method::POST, "/api/v1/channels/x/secret/rotate"),
            (Method::POST, "/api/v1/deliveries/x/replay"),
            (Method::POST, "/api/v1/messages"),
            (Method::GET, "/api/v1/tenant"),
            (Method::GET, "/api/v1/audit"),
            (Method::GET, "/api/v1/event-types"),
            (Method::GET, "/api/v1/event-types/invoice.paid"),
        ] {
            assert!(portal_may(Manage, &method, path).is_ok(), "{method} {path}");
        }
        for (method, path) in [
            (Method::POST, "/api/v1/tenant/keys"),
            (Method::GET, "/api/v1/tenant/keys"),
            (Method::POST, "/api/v1/tenant/portal-sessions"),
            (Method::POST, "/api/v1/tenant/alert-secret"),
            (Method::PATCH, "/api/v1/tenant"),
            (Method::GET, "/api/v1/channelsx"),
            (Method::GET, "/api/v1/admin/channels"),
            (Method::POST, "/api/v1/event-types"),
            (Method::PATCH, "/api/v1/event-types/invoice.paid"),
            (Method::DELETE, "/api/v1/event-types/invoice.paid"),
        ] {
            assert!(
                portal_may(Manage, &method, path).is_err(),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn a_read_session_only_reads() {
        assert!(portal_may(Read, &Method::GET, "/api/v1/channels/x").is_ok());
        assert!(portal_may(Read, &Method::HEAD, "/api/v1/channels/x").is_ok());
        assert!(portal_may(Read, &Method::POST, "/api/v1/channels/x/filter/test").is_ok());
        assert!(portal_may(Read, &Method::GET, "/api/v1/event-types/a.b").is_ok());
        for m in [Method::POST, Method::PATCH, Method::DELETE, Method::PUT] {
            let e = portal_may(Read, &m, "/api/v1/channels/x").unwrap_err();
            assert!(e.contains("read scope"), "{e}");
        }
    }
}
