//! The audit trail: every state-changing API call writes exactly one audit row, in its own
//! transaction, with the actor, the old and new values (never a secret) and the request id.
//!
//! The routes are found by walking the API's router source (every `.route("…")` under
//! `crates/api/src/routes/`) and asking the running API which write methods each path accepts,
//! so a new state-changing route without a case here fails the test.

use breakwater::Role;
use breakwater_e2e::routes::served_routes;
use breakwater_e2e::{host_of, test_settings, Behavior, TestApp, OPERATOR_KEY};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::time::Duration;

/// Write routes that write no audit row, and why.
const NOT_AUDITED: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/api/v1/channels/{id}/deliveries",
        "an enqueue: the delivery row is its own record",
    ),
    (
        "POST",
        "/api/v1/channels/{id}/deliveries/batch",
        "an enqueue: the delivery rows are their own record",
    ),
    (
        "POST",
        "/api/v1/messages",
        "an enqueue (fan-out): the message and delivery rows are their own record",
    ),
    (
        "POST",
        "/api/v1/channels/{id}/filter/test",
        "a read: evaluates the channel's filter on a sample message; nothing is stored or sent",
    ),
];

/// The audit rows after `after_id` that people wrote (not the circuit breaker's own
/// transitions, which the workers may write at any time), oldest first.
async fn rows_after(
    pool: &PgPool,
    after_id: i64,
) -> Vec<(i64, String, String, Option<String>, Value)> {
    sqlx::query_as(
        "SELECT id, actor, action, request_id, details FROM audit_log
         WHERE id > $1 AND actor <> 'circuit_breaker' ORDER BY id",
    )
    .bind(after_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn last_id(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM audit_log")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// One call of a write route, and what its audit row must say.
struct Case {
    method: &'static str,
    /// The route pattern, as in the router.
    route: &'static str,
    /// The concrete path.
    path: String,
    key: String,
    body: Option<Value>,
    /// The actor: `operator` or the tenant's key (checked as `tenant:…`).
    operator: bool,
    action: &'static str,
    /// Fields that must appear under `details.old` and `details.new`.
    changed: &'static [&'static str],
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn every_state_changing_call_writes_exactly_one_audit_row(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    app.receiver.set("gone", Behavior::Status(410, None));

    // Fixtures made before the walk: a tenant, a channel, and a delivery that went dead.
    let (tenant, key) = app.tenant("audited", "default").await;
    let channel = app.channel(&key, "ok").await;
    let host = host_of(&pool, channel).await;
    let dead_channel = app.channel(&key, "gone").await;
    let dead = app.deliver(&key, dead_channel, json!({"n": 1})).await;
    // The delivery to a 410 endpoint went dead.
    app.wait_delivery(dead, "dead", Duration::from_secs(10))
        .await;
    // Lifecycle fixtures: a channel to delete, a parked delivery to cancel, a delivered one to
    // purge, keys to revoke, a tenant to delete.
    let doomed_channel = app.channel(&key, "doomed").await;
    let held = app.channel(&key, "held").await;
    app.pause(&key, held).await;
    let cancellable = app.deliver(&key, held, json!({"n": 2})).await;
    let purgeable = app.deliver(&key, channel, json!({"n": 3})).await;
    app.wait_delivery(purgeable, "delivered", Duration::from_secs(10))
        .await;
    let resendable = app.deliver(&key, channel, json!({"n": 4})).await;
    app.wait_delivery(resendable, "delivered", Duration::from_secs(10))
        .await;
    let key_id = |v: Value| v["id"].as_str().unwrap().to_string();
    let spare = key_id(app.create_key(&key, json!({"name": "spare"})).await);
    let (s, spare_op) = app
        .post(
            &format!("/api/v1/tenants/{tenant}/keys"),
            OPERATOR_KEY,
            &json!({}),
        )
        .await;
    assert_eq!(s, 201, "{spare_op}");
    let spare_op = key_id(spare_op);
    let (doomed_tenant, _) = app.tenant("doomed", "default").await;
    let (spare_session, _) = app.portal_session(tenant, "read").await;
    let (spare_session_op, _) = app.portal_session(tenant, "read").await;

    let cases = vec![
        Case {
            method: "POST",
            route: "/api/v1/tenants",
            path: "/api/v1/tenants".into(),
            key: OPERATOR_KEY.into(),
            body: Some(json!({"name": "second", "alert_url": app.receiver.url("alerts")})),
            operator: true,
            action: "tenant.created",
            changed: &[],
        },
        Case {
            method: "PATCH",
            route: "/api/v1/tenants/{id}",
            path: format!("/api/v1/tenants/{tenant}"),
            key: OPERATOR_KEY.into(),
            body: Some(json!({"name": "renamed", "tier": "high"})),
            operator: true,
            action: "tenant.updated",
            changed: &["name", "tier"],
        },
        Case {
            method: "POST",
            route: "/api/v1/tenants/{id}/alert-secret",
            path: format!("/api/v1/tenants/{tenant}/alert-secret"),
            key: OPERATOR_KEY.into(),
            body: None,
            operator: true,
            action: "tenant.alert_secret_rotated",
            changed: &[],
        },
        Case {
            method: "PATCH",
            route: "/api/v1/tenant",
            path: "/api/v1/tenant".into(),
            key: key.clone(),
            body: Some(
                json!({"alert_url": app.receiver.url("alerts"), "alert_on_manual": true,
                "reject_unknown_event_types": true}),
            ),
            operator: false,
            action: "tenant.updated",
            changed: &["alert_url", "alert_on_manual", "reject_unknown_event_types"],
        },
        Case {
            method: "POST",
            route: "/api/v1/event-types",
            path: "/api/v1/event-types".into(),
            key: key.clone(),
            body: Some(json!({"name": "audit.case", "schema": {"type": "object"}})),
            operator: false,
            action: "event_type.created",
            changed: &[],
        },
        Case {
            method: "PATCH",
            route: "/api/v1/event-types/{name}",
            path: "/api/v1/event-types/audit.case".into(),
            key: key.clone(),
            body: Some(json!({"description": "An audited type.", "deprecated": true})),
            operator: false,
            action: "event_type.updated",
            changed: &["description", "deprecated"],
        },
        Case {
            method: "DELETE",
            route: "/api/v1/event-types/{name}",
            path: "/api/v1/event-types/audit.case".into(),
            key: key.clone(),
            body: None,
            operator: false,
            action: "event_type.deleted",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/tenant/alert-secret",
            path: "/api/v1/tenant/alert-secret".into(),
            key: key.clone(),
            body: None,
            operator: false,
            action: "tenant.alert_secret_rotated",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/channels",
            path: "/api/v1/channels".into(),
            key: key.clone(),
            body: Some(json!({"url": app.receiver.url("new"), "rate_limit": "10/s"})),
            operator: false,
            action: "channel.created",
            changed: &[],
        },
        Case {
            method: "PATCH",
            route: "/api/v1/channels/{id}",
            path: format!("/api/v1/channels/{channel}"),
            key: key.clone(),
            body: Some(json!({
                "url": app.receiver.url("moved"),
                "rate_limit": "5/s",
                "failure_threshold": 7,
                "max_in_flight": 3,
                "filter": {"==": [{"var": "payload.status"}, "paid"]},
            })),
            operator: false,
            action: "channel.updated",
            changed: &[
                "url",
                "rate_limit",
                "failure_threshold",
                "max_in_flight",
                "filter",
            ],
        },
        Case {
            method: "POST",
            route: "/api/v1/channels/{id}/pause",
            path: format!("/api/v1/channels/{channel}/pause"),
            key: key.clone(),
            body: None,
            operator: false,
            action: "channel.paused",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/channels/{id}/resume",
            path: format!("/api/v1/channels/{channel}/resume"),
            key: key.clone(),
            body: None,
            operator: false,
            action: "channel.resumed",
            changed: &[],
        },
        Case {
            method: "PATCH",
            route: "/api/v1/admin/circuit-defaults",
            path: "/api/v1/admin/circuit-defaults".into(),
            key: OPERATOR_KEY.into(),
            body: Some(json!({"failure_threshold": 9})),
            operator: true,
            action: "circuit_defaults.changed",
            changed: &["failure_threshold"],
        },
        Case {
            method: "POST",
            route: "/api/v1/deliveries/{id}/replay",
            path: format!("/api/v1/deliveries/{dead}/replay"),
            key: key.clone(),
            body: None,
            operator: false,
            action: "delivery.replayed",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/channels/{id}/replay",
            path: format!("/api/v1/channels/{dead_channel}/replay"),
            key: key.clone(),
            body: Some(json!({})),
            operator: false,
            action: "deliveries.replayed",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/deliveries/{id}/resend",
            path: format!("/api/v1/deliveries/{resendable}/resend"),
            key: key.clone(),
            body: None,
            operator: false,
            action: "delivery.resent",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/channels/{id}/recover",
            path: format!("/api/v1/channels/{dead_channel}/recover"),
            key: key.clone(),
            body: Some(json!({"since": "2020-01-01T00:00:00Z"})),
            operator: false,
            action: "deliveries.recovered",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/channels/{id}/secret/rotate",
            path: format!("/api/v1/channels/{channel}/secret/rotate"),
            key: key.clone(),
            body: Some(json!({"grace_ms": 60000})),
            operator: false,
            action: "channel.secret_rotated",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/tenant/keys",
            path: "/api/v1/tenant/keys".into(),
            key: key.clone(),
            body: Some(json!({"name": "ci"})),
            operator: false,
            action: "key.created",
            changed: &[],
        },
        Case {
            method: "DELETE",
            route: "/api/v1/tenant/keys/{id}",
            path: format!("/api/v1/tenant/keys/{spare}"),
            key: key.clone(),
            body: None,
            operator: false,
            action: "key.revoked",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/tenants/{id}/keys",
            path: format!("/api/v1/tenants/{tenant}/keys"),
            key: OPERATOR_KEY.into(),
            body: Some(json!({})),
            operator: true,
            action: "key.created",
            changed: &[],
        },
        Case {
            method: "DELETE",
            route: "/api/v1/tenants/{id}/keys/{key_id}",
            path: format!("/api/v1/tenants/{tenant}/keys/{spare_op}"),
            key: OPERATOR_KEY.into(),
            body: None,
            operator: true,
            action: "key.revoked",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/tenant/portal-sessions",
            path: "/api/v1/tenant/portal-sessions".into(),
            key: key.clone(),
            body: Some(json!({"scope": "manage"})),
            operator: false,
            action: "portal_session.created",
            changed: &[],
        },
        Case {
            method: "DELETE",
            route: "/api/v1/tenant/portal-sessions/{id}",
            path: format!("/api/v1/tenant/portal-sessions/{spare_session}"),
            key: key.clone(),
            body: None,
            operator: false,
            action: "portal_session.revoked",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/tenants/{id}/portal-sessions",
            path: format!("/api/v1/tenants/{tenant}/portal-sessions"),
            key: OPERATOR_KEY.into(),
            body: Some(json!({"scope": "read", "ttl_s": 60})),
            operator: true,
            action: "portal_session.created",
            changed: &[],
        },
        Case {
            method: "DELETE",
            route: "/api/v1/tenants/{id}/portal-sessions/{session_id}",
            path: format!("/api/v1/tenants/{tenant}/portal-sessions/{spare_session_op}"),
            key: OPERATOR_KEY.into(),
            body: None,
            operator: true,
            action: "portal_session.revoked",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/deliveries/{id}/cancel",
            path: format!("/api/v1/deliveries/{cancellable}/cancel"),
            key: key.clone(),
            body: None,
            operator: false,
            action: "delivery.cancelled",
            changed: &["status"],
        },
        Case {
            method: "DELETE",
            route: "/api/v1/deliveries/{id}/payload",
            path: format!("/api/v1/deliveries/{purgeable}/payload"),
            key: key.clone(),
            body: None,
            operator: false,
            action: "delivery.payload_purged",
            changed: &[],
        },
        Case {
            method: "DELETE",
            route: "/api/v1/channels/{id}",
            path: format!("/api/v1/channels/{doomed_channel}"),
            key: key.clone(),
            body: None,
            operator: false,
            action: "channel.deleted",
            changed: &[],
        },
        Case {
            method: "DELETE",
            route: "/api/v1/tenants/{id}",
            path: format!("/api/v1/tenants/{doomed_tenant}"),
            key: OPERATOR_KEY.into(),
            body: None,
            operator: true,
            action: "tenant.deleted",
            changed: &[],
        },
        Case {
            method: "POST",
            route: "/api/v1/admin/channels/{id}/{action}",
            path: format!("/api/v1/admin/channels/{channel}/open"),
            key: OPERATOR_KEY.into(),
            body: None,
            operator: true,
            action: "circuit.forced_open",
            changed: &[],
        },
        Case {
            method: "PATCH",
            route: "/api/v1/admin/hosts/{host}",
            path: format!("/api/v1/admin/hosts/{host}"),
            key: OPERATOR_KEY.into(),
            body: Some(json!({"max_in_flight": 7})),
            operator: true,
            action: "host.settings_changed",
            changed: &["max_in_flight"],
        },
        Case {
            method: "POST",
            route: "/api/v1/admin/hosts/{host}/{action}",
            path: format!("/api/v1/admin/hosts/{host}/open"),
            key: OPERATOR_KEY.into(),
            body: None,
            operator: true,
            action: "host.forced_open",
            changed: &[],
        },
    ];

    // The walk: every write route is either a case here or exempt, and nothing else is.
    let found = served_routes(&app, &["POST", "PUT", "PATCH", "DELETE"]).await;
    let covered: BTreeSet<(String, String)> = cases
        .iter()
        .map(|c| (c.method.to_string(), c.route.to_string()))
        .chain(
            NOT_AUDITED
                .iter()
                .map(|(m, p, _)| (m.to_string(), p.to_string())),
        )
        .collect();
    let unchecked: Vec<_> = found.difference(&covered).collect();
    assert!(
        unchecked.is_empty(),
        "write routes with no audit case in this test: {unchecked:?}"
    );
    let stale: Vec<_> = covered.difference(&found).collect();
    assert!(
        stale.is_empty(),
        "cases for routes that do not exist: {stale:?}"
    );

    for (n, case) in cases.iter().enumerate() {
        let before = last_id(&pool).await;
        let request_id = format!("audit-test-{n}");
        let mut req = app
            .http
            .request(
                case.method.parse().unwrap(),
                format!("{}{}", app.api, case.path),
            )
            .bearer_auth(&case.key)
            .header("x-request-id", &request_id);
        if let Some(body) = &case.body {
            req = req.json(body);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        assert_eq!(
            r.headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok()),
            Some(request_id.as_str()),
            "{} {}: the request id is sent back",
            case.method,
            case.path
        );
        let text = r.text().await.unwrap();
        assert!(
            (200..300).contains(&status),
            "{} {}: {status} {text}",
            case.method,
            case.path
        );

        let rows = rows_after(&pool, before).await;
        assert_eq!(
            rows.len(),
            1,
            "{} {}: exactly one audit row, got {rows:?}",
            case.method,
            case.path
        );
        let (_, actor, action, rid, details) = &rows[0];
        assert_eq!(action, case.action, "{} {}", case.method, case.path);
        assert_eq!(
            rid.as_deref(),
            Some(request_id.as_str()),
            "{action}: request id"
        );
        if case.operator {
            assert_eq!(actor, "operator", "{action}");
        } else {
            assert!(actor.starts_with("tenant:"), "{action}: actor {actor}");
        }
        for field in case.changed {
            assert!(
                details["old"].get(field).is_some() && details["new"].get(field).is_some(),
                "{action}: old and new {field} in {details}"
            );
            assert_ne!(
                details["old"][field], details["new"][field],
                "{action}: {field}"
            );
        }
        if case.action == "tenant.created" || case.action == "channel.created" {
            assert!(
                details["new"].is_object(),
                "{action}: new values in {details}"
            );
        }
        // Never a secret: no signing secret, API key, or URL path in the row.
        let all = details.to_string();
        for secret in ["whsec_", "bw_", "bwp_", "/moved", "/alerts", "/new"] {
            assert!(!all.contains(secret), "{action}: {secret} in {all}");
        }
    }

    // A call that changes nothing writes nothing (a PATCH to the same values).
    let before = last_id(&pool).await;
    let r = app
        .http
        .patch(format!("{}/api/v1/channels/{channel}", app.api))
        .bearer_auth(&key)
        .json(&json!({"failure_threshold": 7}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        rows_after(&pool, before).await.is_empty(),
        "a no-op PATCH is not audited"
    );
    // The same for the circuit defaults: an empty body, and the values already set (set by the
    // case above: failure_threshold 9).
    for body in [json!({}), json!({"failure_threshold": 9})] {
        let (s, v) = app
            .patch("/api/v1/admin/circuit-defaults", OPERATOR_KEY, &body)
            .await;
        assert_eq!(s, 200, "{body}: {v}");
    }
    assert!(
        rows_after(&pool, before).await.is_empty(),
        "a no-op PATCH of the circuit defaults is not audited"
    );

    app.stop().await;
}

/// A change of the circuit defaults audits the fields it changed, each with its value in force
/// before and after, and nothing of the fields it did not send.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_circuit_defaults_change_audits_only_what_it_changed(pool: PgPool) {
    let app = TestApp::spawn_role(pool.clone(), Role::Api, |_| {}).await;
    let defaults = "/api/v1/admin/circuit-defaults";
    let (s, v) = app
        .patch(defaults, OPERATOR_KEY, &json!({"cooldown_ms": 15000}))
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = app
        .patch(defaults, OPERATOR_KEY, &json!({"failure_threshold": 7}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["cooldown_ms"], 15000,
        "the field not sent keeps its override"
    );
    let (s, v) = app
        .patch(defaults, OPERATOR_KEY, &json!({"cooldown_ms": null}))
        .await;
    assert_eq!(s, 200, "{v}");
    let configured = test_settings().circuit;
    let rows: Vec<serde_json::Value> = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE action = 'circuit_defaults.changed' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![
            json!({"old": {"cooldown_ms": configured.cooldown_ms}, "new": {"cooldown_ms": 15000}}),
            json!({"old": {"failure_threshold": configured.failure_threshold},
                   "new": {"failure_threshold": 7}}),
            json!({"old": {"cooldown_ms": 15000}, "new": {"cooldown_ms": configured.cooldown_ms}}),
        ]
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_failed_change_writes_no_audit_row(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("t", "default").await;
    let channel = app.channel(&key, "ok").await;
    let before = last_id(&pool).await;
    // Invalid values: 422, nothing changed, nothing audited.
    let r = app
        .http
        .patch(format!("{}/api/v1/channels/{channel}", app.api))
        .bearer_auth(&key)
        .json(&json!({"failure_threshold": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
    let (s, _) = app
        .post(
            "/api/v1/tenants",
            OPERATOR_KEY,
            &json!({"name": "x", "tier": "nonsense"}),
        )
        .await;
    assert_eq!(s, 422);
    assert!(rows_after(&pool, before).await.is_empty());
    // The suite's problem collector saw both bodies (TestApp::stop checks them all for internal
    // addresses).
    let seen = breakwater_e2e::problems();
    assert!(
        seen.iter().any(|b| b.contains("failure_threshold"))
            && seen.iter().any(|b| b.contains("tier")),
        "collected problem bodies: {seen:?}"
    );
    app.stop().await;
}

/// A client's malformed `x-request-id` (a space, markup, over 128 characters) is replaced by a
/// fresh one, and the response and the audit row carry the same id.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_malformed_request_id_is_replaced_and_the_response_matches_the_audit_row(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (_, key) = app.tenant("t", "default").await;
    let channel = app.channel(&key, "ok").await;
    for given in [
        "has space",
        "<img src=x onerror=alert(1)>",
        "<script>",
        "a\"b",
        &"x".repeat(300),
    ] {
        let before = last_id(&pool).await;
        let r = app
            .http
            .patch(format!("{}/api/v1/channels/{channel}", app.api))
            .bearer_auth(&key)
            .header("x-request-id", given)
            .json(&json!({"name": format!("n{}", given.len())}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let answered = r.headers()["x-request-id"].to_str().unwrap().to_string();
        assert_ne!(answered, given);
        let rows = rows_after(&pool, before).await;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].3.as_deref(), Some(answered.as_str()), "{given}");
    }
    app.stop().await;
}
