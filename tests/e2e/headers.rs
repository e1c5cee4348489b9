//! Custom headers and endpoint auth per channel: every delivery of a channel
//! carries its headers and its `Authorization` (Basic, Bearer, OAuth2 client credentials
//! against a token endpoint run by the test), no other channel and no alert gets them; bad
//! headers are 422 naming the header; secrets are masked on reads and absent from the audit log.

use breakwater_e2e::http::{assert_invalid, post, send};
use breakwater_e2e::{eventually, Behavior, TestApp};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// base64("user-1:pa55word")
const BASIC_USER_1: &str = "Basic dXNlci0xOnBhNTV3b3Jk";
/// base64("client-1:s3cr3t%2B"): the client secret `s3cr3t+` form-urlencoded before Basic, as
/// RFC 6749 §2.3.1 asks.
const CLIENT_1_BASIC: &str = "Basic Y2xpZW50LTE6czNjcjN0JTJC";

/// The value of header `name` in request `r`, if any.
pub(crate) fn header(r: &breakwater::receiver::Received, name: &str) -> Option<String> {
    r.headers.get(name).map(|v| v.to_str().unwrap().to_string())
}

/// An OAuth2 token endpoint on loopback (port 0) that counts its requests. It answers a
/// client-credentials request from `client-1`/`s3cr3t+` with the token `tok-<n>` (n from 1)
/// valid an hour, anything else 401 `invalid_client`, and every request 500 while `failing`.
#[derive(Clone, Default)]
struct TokenEndpoint {
    requests: Arc<AtomicUsize>,
    failing: Arc<AtomicBool>,
}

impl TokenEndpoint {
    /// Starts it; returns it and its URL.
    async fn start() -> (Self, String) {
        let me = TokenEndpoint::default();
        let state = me.clone();
        let app = axum::Router::new().route(
            "/token",
            axum::routing::post(
                |axum::extract::State(s): axum::extract::State<TokenEndpoint>,
                 headers: axum::http::HeaderMap,
                 body: String| async move {
                    let n = s.requests.fetch_add(1, Ordering::SeqCst) + 1;
                    if s.failing.load(Ordering::SeqCst) {
                        return (
                            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                            axum::Json(json!({ "error": "server_error" })),
                        );
                    }
                    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
                    let form_ok = body
                        .split('&')
                        .any(|p| p == "grant_type=client_credentials")
                        && body.split('&').any(|p| p == "scope=hooks.write");
                    if auth != Some(CLIENT_1_BASIC) || !form_ok {
                        return (
                            axum::http::StatusCode::UNAUTHORIZED,
                            axum::Json(json!({ "error": "invalid_client" })),
                        );
                    }
                    (
                        axum::http::StatusCode::OK,
                        axum::Json(json!({
                            "access_token": format!("tok-{n}"),
                            "token_type": "bearer",
                            "expires_in": 3600,
                        })),
                    )
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app.with_state(state)).await;
        });
        (me, format!("http://{addr}/token"))
    }

    fn count(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn oauth2(token_url: &str) -> Value {
    json!({
        "type": "oauth2_client_credentials",
        "token_url": token_url,
        "client_id": "client-1",
        "client_secret": "s3cr3t+",
        "scope": "hooks.write",
    })
}

/// The delivery's API view.
async fn delivery(app: &TestApp, key: &str, id: Uuid) -> Value {
    let (s, v) = app.get(&format!("/api/v1/deliveries/{id}"), key).await;
    assert_eq!(s, 200, "{v}");
    v
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn each_channel_sends_its_own_headers_and_auth_and_alerts_send_none(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant_with_alerts("acme", "oncall").await;
    let basic = app
        .channel_with(
            &key,
            "basic",
            json!({
                "headers": {
                    "X-Tenant": "acme",
                    "X-Api-Key": { "value": "k-secret-1", "sensitive": true },
                },
                "auth": { "type": "basic", "username": "user-1", "password": "pa55word" },
            }),
        )
        .await;
    let bearer = app
        .channel_with(
            &key,
            "bearer",
            json!({ "auth": { "type": "bearer", "token": "b-token-2" } }),
        )
        .await;
    let plain = app.channel(&key, "plain").await;
    app.deliver_many(&key, basic, 3).await;
    app.deliver_many(&key, bearer, 2).await;
    app.deliver_many(&key, plain, 2).await;
    app.wait_received("basic", 3, Duration::from_secs(20)).await;
    app.wait_received("bearer", 2, Duration::from_secs(20))
        .await;
    app.wait_received("plain", 2, Duration::from_secs(20)).await;

    for r in app.receiver.received("basic") {
        assert_eq!(r.signature_ok, Some(true));
        assert_eq!(header(&r, "x-tenant").as_deref(), Some("acme"));
        assert_eq!(header(&r, "x-api-key").as_deref(), Some("k-secret-1"));
        assert_eq!(header(&r, "authorization").as_deref(), Some(BASIC_USER_1));
    }
    for r in app.receiver.received("bearer") {
        assert_eq!(r.signature_ok, Some(true));
        assert_eq!(
            header(&r, "authorization").as_deref(),
            Some("Bearer b-token-2")
        );
        assert_eq!(header(&r, "x-api-key"), None, "another channel's header");
    }
    for r in app.receiver.received("plain") {
        assert_eq!(r.signature_ok, Some(true));
        for h in ["authorization", "x-api-key", "x-tenant"] {
            assert_eq!(header(&r, h), None, "{h} reached a channel without it");
        }
    }

    // A 401 of the Basic channel's endpoint sends the tenant an alert: it carries none of the
    // channel's headers or auth.
    app.receiver.set("basic", Behavior::Status(401, None));
    app.deliver(&key, basic, json!({ "n": "rejected" })).await;
    assert!(
        eventually(Duration::from_secs(20), || async {
            !app.alerts_of("oncall", "channel.endpoint_rejected")
                .is_empty()
        })
        .await,
        "no rejection alert"
    );
    for r in app.receiver.received("oncall") {
        for h in ["authorization", "x-api-key", "x-tenant"] {
            assert_eq!(header(&r, h), None, "{h} reached the alert endpoint");
        }
    }
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn an_oauth2_token_is_fetched_once_reused_and_fetched_again_after_a_401(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tokens, token_url) = TokenEndpoint::start().await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(&key, "oauth", json!({ "auth": oauth2(&token_url) }))
        .await;
    // Four deliveries (the 4th answered 401, then 200), one at a time.
    app.receiver.set(
        "oauth",
        Behavior::Sequence(vec![
            Behavior::Status(200, None),
            Behavior::Status(200, None),
            Behavior::Status(200, None),
            Behavior::Status(401, None),
            Behavior::Status(200, None),
        ]),
    );
    for n in 0..3 {
        let id = app.deliver(&key, ch, json!({ "n": n })).await;
        app.wait_delivery(id, "delivered", Duration::from_secs(20))
            .await;
    }
    assert_eq!(tokens.count(), 1, "the cached token was not reused");
    for r in app.receiver.received("oauth") {
        assert_eq!(header(&r, "authorization").as_deref(), Some("Bearer tok-1"));
    }

    let id = app.deliver(&key, ch, json!({ "n": 3 })).await;
    app.wait_delivery(id, "delivered", Duration::from_secs(20))
        .await;
    assert_eq!(tokens.count(), 2, "a 401 fetches one new token");
    let got = app.receiver.received("oauth");
    assert_eq!(got.len(), 5);
    assert_eq!(
        header(&got[3], "authorization").as_deref(),
        Some("Bearer tok-1")
    );
    assert_eq!(
        header(&got[4], "authorization").as_deref(),
        Some("Bearer tok-2")
    );
    // One attempt: the request sent again with the new token belongs to it.
    assert_eq!(delivery(&app, &key, id).await["attempts"], 1);
}

/// A token endpoint answering 500 fails the delivery and counts for its channel (its circuit's
/// failure count and `last_failure_reason` name the token endpoint), but not for the host of the
/// channel's URL, which a healthy channel shares: that host's circuit counts nothing (no
/// `host_failures` row, no failure reason) and the healthy channel keeps delivering.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_failing_token_endpoint_fails_the_delivery_and_counts_against_the_channel(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (tokens, token_url) = TokenEndpoint::start().await;
    tokens.failing.store(true, Ordering::SeqCst);
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app
        .channel_with(&key, "oauth", json!({ "auth": oauth2(&token_url) }))
        .await;
    let healthy = app.channel(&key, "healthy").await;
    let host_of = |id: Uuid| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT host_key FROM channels WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let host = host_of(ch).await;
    assert_eq!(host, host_of(healthy).await, "both channels on one host");
    let id = app.deliver(&key, ch, json!({ "n": 1 })).await;
    assert!(
        eventually(Duration::from_secs(20), || async {
            delivery(&app, &key, id).await["attempts"].as_i64() >= Some(1)
        })
        .await,
        "no attempt recorded"
    );
    let d = delivery(&app, &key, id).await;
    let error = d["last_error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("oauth2 token endpoint") && error.contains("HTTP 500"),
        "last_error: {d}"
    );
    assert!(!error.contains("s3cr3t"), "{error}");
    assert_eq!(app.receiver.count("oauth"), 0, "sent without a token");
    // Through the normal failure path: the channel counted it.
    let (_, c) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert!(
        c["last_failure_reason"]
            .as_str()
            .is_some_and(|r| r.contains("oauth2 token endpoint")),
        "{c}"
    );
    let failures: i32 =
        sqlx::query_scalar("SELECT consecutive_failures FROM channels WHERE id = $1")
            .bind(ch)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(failures >= 1, "the channel's circuit counted it");
    // The receiver's host was never asked: its circuit counts nothing.
    let (counted, state, reason): (i64, String, Option<String>) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM host_failures f WHERE f.host_key = h.host_key),
                h.state::text, h.last_failure_reason
         FROM host_circuits h WHERE h.host_key = $1",
    )
    .bind(&host)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (counted, state.as_str(), reason),
        (0, "closed", None),
        "a token endpoint's failure was counted against the receiver's host"
    );
    let d = app.deliver(&key, healthy, json!({ "n": 2 })).await;
    app.wait_delivery(d, "delivered", Duration::from_secs(10))
        .await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn bad_headers_are_422_naming_the_header(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let ch = app.channel(&key, "x").await;
    let url = app.receiver.url("x");
    let mut cases: Vec<(Value, &str)> = [
        "Host",
        "content-length",
        "Transfer-Encoding",
        "Connection",
        "Keep-Alive",
        "Upgrade",
        "TE",
        "Trailer",
        "Proxy-Authorization",
        "webhook-id",
        "Webhook-Timestamp",
        "webhook-signature",
        "Content-Type",
        "X Bad",
    ]
    .iter()
    .map(|n| (json!({ *n: "v" }), *n))
    .collect();
    cases.push((json!({ "X-Crlf": "a\r\nX-Injected: 1" }), "X-Crlf"));
    cases.push((json!({ "X-Nul": "a\u{0}b" }), "X-Nul"));
    cases.push((
        json!({ "X-Lf": { "value": "a\nb", "sensitive": true } }),
        "X-Lf",
    ));
    let many: serde_json::Map<String, Value> =
        (0..21).map(|i| (format!("X-H{i}"), json!("v"))).collect();
    cases.push((Value::Object(many), "at most 20"));
    cases.push((json!({ "X-Big": "v".repeat(4100) }), "4096"));
    for (headers, named) in cases {
        for resp in [
            post(
                &app,
                "/api/v1/channels",
                Some(&key),
                &json!({ "url": url, "headers": headers }),
            )
            .await,
            send(
                app.http
                    .patch(format!("{}/api/v1/channels/{ch}", app.api))
                    .bearer_auth(&key)
                    .json(&json!({ "headers": headers })),
            )
            .await,
        ] {
            let body = assert_invalid(resp, "headers").await;
            assert!(
                body["detail"].as_str().unwrap().contains(named),
                "{named}: {body}"
            );
        }
    }
    // `Authorization` beside `auth` collides.
    let (s, v) = app
        .patch_channel(
            &key,
            ch,
            json!({ "headers": { "Authorization": "x" }, "auth": { "type": "bearer", "token": "t" } }),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["detail"].as_str().unwrap().contains("Authorization"),
        "{v}"
    );
    // Auth without its secret.
    let (s, v) = app
        .patch_channel(
            &key,
            ch,
            json!({ "auth": { "type": "basic", "username": "u" } }),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["field"], "auth.password", "{v}");
    // Nothing was stored.
    let (_, c) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(c["headers"], json!({}));
    assert_eq!(c["auth"], Value::Null);
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn secrets_are_masked_on_reads_and_audited_as_changed_only(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let created = app
        .create_channel(
            &key,
            &app.receiver.url("m"),
            json!({
                "headers": {
                    "X-Plain": "shown",
                    "X-Api-Key": { "value": "hdr-secret-1", "sensitive": true },
                },
                "auth": { "type": "bearer", "token": "tok-secret-1" },
            }),
        )
        .await;
    let ch: Uuid = created["id"].as_str().unwrap().parse().unwrap();
    let masked = json!({
        "X-Api-Key": { "value": "********", "sensitive": true },
        "X-Plain": { "value": "shown", "sensitive": false },
    });
    assert_eq!(created["headers"], masked);
    assert_eq!(
        created["auth"],
        json!({ "type": "bearer", "token": "********" })
    );
    let (_, read) = app.get(&format!("/api/v1/channels/{ch}"), &key).await;
    assert_eq!(read["headers"], masked);
    assert_eq!(read["auth"]["token"], "********");
    let (_, list) = app.get("/api/v1/channels", &key).await;
    assert_eq!(list["data"][0]["headers"], masked);

    // A PATCH that keeps the sensitive value (no `value`) and changes the plain one.
    let (s, v) = app
        .patch_channel(
            &key,
            ch,
            json!({ "headers": { "X-Plain": "changed", "X-Api-Key": { "sensitive": true } } }),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    // Then new secrets.
    let (s, v) = app
        .patch_channel(
            &key,
            ch,
            json!({
                "headers": {
                    "X-Plain": "changed",
                    "X-Api-Key": { "value": "hdr-secret-2", "sensitive": true },
                },
                "auth": { "type": "bearer", "token": "tok-secret-2" },
            }),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["auth"]["token"], "********");
    let id = app.deliver(&key, ch, json!({})).await;
    app.wait_delivery(id, "delivered", Duration::from_secs(20))
        .await;
    let r = &app.receiver.received("m")[0];
    assert_eq!(header(r, "x-api-key").as_deref(), Some("hdr-secret-2"));
    assert_eq!(header(r, "x-plain").as_deref(), Some("changed"));
    assert_eq!(
        header(r, "authorization").as_deref(),
        Some("Bearer tok-secret-2")
    );

    let rows: Vec<(String, Value)> =
        sqlx::query_as("SELECT action, details FROM audit_log WHERE channel_id = $1 ORDER BY id")
            .bind(ch)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    let text = serde_json::to_string(&rows).unwrap();
    for secret in [
        "hdr-secret-1",
        "hdr-secret-2",
        "tok-secret-1",
        "tok-secret-2",
    ] {
        assert!(!text.contains(secret), "{secret} in the audit log: {text}");
    }
    let updates: Vec<&Value> = rows
        .iter()
        .filter(|(a, _)| a == "channel.updated")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(updates.len(), 2, "{text}");
    // The first PATCH: the plain value changed, the secret was kept (not a change).
    assert_eq!(updates[0]["new"]["headers"]["X-Plain"], "changed");
    assert_eq!(updates[0]["new"]["headers"]["X-Api-Key"], "(secret)");
    assert_eq!(updates[0]["new"].get("auth"), None, "{text}");
    // The second: both secrets changed, recorded as such.
    assert_eq!(
        updates[1]["new"]["headers"]["X-Api-Key"],
        "(secret, changed)"
    );
    assert_eq!(updates[1]["new"]["auth"]["token"], "(secret, changed)");

    // Removing them.
    let (s, v) = app
        .patch_channel(&key, ch, json!({ "headers": null, "auth": null }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["headers"], json!({}));
    assert_eq!(v["auth"], Value::Null);
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn an_internal_token_url_is_422_like_an_internal_channel_url(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.allow_private_targets = false).await;
    let (_, key) = app.tenant("acme", "default").await;
    // A literal public address: no DNS needed for the channel's own URL.
    let url = "https://93.184.215.14/hooks";
    for token_url in [
        "http://127.0.0.1:9/token",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/token",
        "http://[::1]/token",
        "http://localhost/token",
        "ftp://93.184.215.14/token",
    ] {
        let body = json!({ "url": url, "auth": oauth2(token_url) });
        assert_invalid(
            post(&app, "/api/v1/channels", Some(&key), &body).await,
            "auth.token_url",
        )
        .await;
    }
    let (s, v) = app
        .post(
            "/api/v1/channels",
            &key,
            &json!({ "url": url, "auth": oauth2("https://93.184.215.14/token") }),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let ch = v["id"].as_str().unwrap();
    let resp = send(
        app.http
            .patch(format!("{}/api/v1/channels/{ch}", app.api))
            .bearer_auth(&key)
            .json(&json!({ "auth": oauth2("http://127.0.0.1:9/token") })),
    )
    .await;
    assert_invalid(resp, "auth.token_url").await;
}
