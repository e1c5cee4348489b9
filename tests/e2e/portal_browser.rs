//! The tenant portal in a real browser (headless Chromium over WebDriver, the set-up of
//! [`crate::browser`]): opened with a portal session's link, it creates a channel, sends a test
//! event and shows it delivered, pauses and resumes the channel, replays a dead delivery, and a
//! read session is refused a write; and it edits a channel's event types (from the catalog),
//! custom headers, auth and filter, tests the filter, and test-sends a catalog example, the
//! secrets never coming back into the page.
//!
//! Screenshots go to the test artifacts directory ([`crate::browser::artifacts_dir`]):
//! `portal-channels.png` (the channel list), `portal-channel.png` (one channel and its settings),
//! `portal-deliveries.png` (the test send's result, the deliveries and a delivery's attempts),
//! `portal-circuit-open.png` (an open circuit in plain words) and `portal-read-only.png` (a read
//! session), `portal-channel-settings.png` (the channel editor: event types, headers, auth,
//! filter, the test send of a catalog example). Copies are committed under `docs/portal/`.

use crate::browser::{artifacts_dir, click, js, start_driver};
use crate::headers::header;
use breakwater_e2e::{wait_until, Behavior, TestApp};
use fantoccini::{Client, Locator};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// Replaces the text of input `css` with `text`.
async fn type_into(c: &Client, css: &str, text: &str) {
    let e = c.find(Locator::Css(css)).await.unwrap();
    e.clear().await.unwrap();
    e.send_keys(text).await.unwrap();
}

/// `document.querySelector(css)?.dataset[key]` in the page.
async fn data(c: &Client, css: &str, key: &str) -> Value {
    js(
        c,
        &format!(
            "const e = document.querySelector({}); return e ? (e.dataset[{}] ?? null) : null;",
            json!(css),
            json!(key)
        ),
    )
    .await
}

async fn wait_data(c: &Client, css: &str, key: &str, want: &str, within: Duration) {
    wait_until(within, &format!("{css} has data-{key}={want}"), || async {
        data(c, css, key).await == json!(want)
    })
    .await;
}

/// Opens `channel` from the list and waits until the page shows its circuit `state`.
async fn open_channel(c: &Client, channel: Uuid, state: &str) {
    click(
        c,
        &format!("button.open-channel[data-channel-id=\"{channel}\"]"),
    )
    .await;
    wait_data(c, "#ch-state", "state", state, Duration::from_secs(10)).await;
}

/// Sends the test event of the form and waits until the page shows its delivery `status`.
async fn test_send(c: &Client, status: &str) {
    click(c, "#test-send").await;
    wait_data(c, "#test-result", "status", status, Duration::from_secs(20)).await;
}

async fn shot(c: &Client, name: &str) {
    let path = artifacts_dir().join(name);
    std::fs::write(&path, c.screenshot().await.unwrap()).unwrap();
    println!("portal screenshot: {}", path.display());
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_portal_manages_a_tenants_channels_in_a_browser(pool: PgPool) {
    // A long cooldown keeps a failing channel open (not probing) while the page shows it.
    let app = TestApp::spawn_with(pool.clone(), |s| {
        s.circuit.cooldown_ms = 120_000;
        s.circuit.max_cooldown_ms = 120_000;
    })
    .await;
    let (driver, c) = start_driver().await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let (_, other_key) = app.tenant("globex", "default").await;
    let foreign = app
        .named_channel(&other_key, "globex-secret", json!({}))
        .await;
    let (session, token) = app.portal_session(tenant, "manage").await;

    // The link opens the page; the token leaves the address bar at once.
    c.goto(&format!("{}/portal#token={token}", app.api))
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(10),
        "the portal shows the tenant",
        || async {
            js(
                &c,
                "return document.getElementById('tenant-name').textContent",
            )
            .await
                == json!("acme")
        },
    )
    .await;
    let url = c.current_url().await.unwrap();
    assert!(!url.as_str().contains(&token), "{url}");
    assert!(!url.as_str().contains('#'), "{url}");
    assert_eq!(
        js(
            &c,
            "return sessionStorage.getItem('breakwater.portalToken')"
        )
        .await,
        json!(token)
    );
    assert_eq!(
        js(&c, "return document.getElementById('scope').textContent").await,
        json!("manage")
    );

    // Create a channel from the page.
    click(&c, "#new-channel").await;
    type_into(&c, "#create-url", &app.receiver.url("portal-orders")).await;
    type_into(&c, "#create-name", "orders").await;
    type_into(&c, "#create-rate-limit", "50/s").await;
    click(&c, "#create-submit").await;
    wait_until(Duration::from_secs(10), "the new channel is listed", || async {
        js(
            &c,
            "return [...document.querySelectorAll('#channels tbody tr')].some(r => r.textContent.includes('orders'))",
        )
        .await
            == json!(true)
    })
    .await;
    let secret = js(
        &c,
        "return document.getElementById('created-secret-value').textContent",
    )
    .await;
    let secret = secret.as_str().unwrap();
    assert!(secret.starts_with("whsec_"), "{secret}");
    app.receiver.set_secret("portal-orders", secret);
    let (channel, rate_limit): (Uuid, Option<String>) = sqlx::query_as(
        "SELECT id, rate_limit FROM channels WHERE tenant_id = $1 AND name = 'orders'",
    )
    .bind(tenant)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(rate_limit.as_deref(), Some("50/s"));
    // Another tenant's channel is not listed.
    let listed = js(&c, "return document.getElementById('channels').textContent").await;
    assert!(!listed.as_str().unwrap().contains("globex"), "{listed}");
    assert!(!listed.as_str().unwrap().contains(&foreign.to_string()));
    shot(&c, "portal-channels.png").await;

    // Open it and send a test event: the page shows it delivered.
    open_channel(&c, channel, "closed").await;
    type_into(&c, "#test-event-type", "invoice.paid").await;
    type_into(&c, "#test-payload", r#"{"invoice": 42}"#).await;
    test_send(&c, "delivered").await;
    let got = app.receiver.received("portal-orders");
    assert_eq!(got.len(), 1);
    assert_eq!(
        serde_json::from_slice::<Value>(&got[0].body).unwrap()["data"],
        json!({ "invoice": 42 })
    );
    assert_eq!(
        got[0].signature_ok,
        Some(true),
        "the receiver verified the signature"
    );

    // Pause and resume from the page, audited as the session.
    click(&c, "#pause").await;
    wait_data(&c, "#ch-state", "state", "paused", Duration::from_secs(10)).await;
    assert_eq!(app.circuit_state(channel).await, "paused");
    click(&c, "#resume").await;
    wait_data(&c, "#ch-state", "state", "closed", Duration::from_secs(10)).await;
    assert_eq!(app.circuit_state(channel).await, "closed");
    let actors: Vec<(String, String)> = sqlx::query_as(
        "SELECT action, actor FROM audit_log WHERE channel_id = $1 AND action IN ('channel.created', 'channel.paused', 'channel.resumed') ORDER BY id",
    )
    .bind(channel)
    .fetch_all(&pool)
    .await
    .unwrap();
    let actor = format!("portal:{session}");
    assert_eq!(
        actors,
        [
            ("channel.created".to_string(), actor.clone()),
            ("channel.paused".to_string(), actor.clone()),
            ("channel.resumed".to_string(), actor.clone()),
        ]
    );

    // A delivery goes dead (the endpoint refuses it for good); fixed, it is replayed from the page.
    app.receiver
        .set("portal-orders", Behavior::Status(410, None));
    type_into(&c, "#test-event-type", "invoice.failed").await;
    test_send(&c, "dead").await;
    let dead: Uuid = data(&c, "#test-result", "deliveryId")
        .await
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    app.receiver
        .set("portal-orders", Behavior::Status(200, None));
    // Only dead deliveries: the filter narrows the list.
    c.find(Locator::Css("#f-status"))
        .await
        .unwrap()
        .select_by_value("dead")
        .await
        .unwrap();
    click(&c, "#f-apply").await;
    wait_until(Duration::from_secs(10), "only the dead delivery is listed", || async {
        js(&c, "return [...document.querySelectorAll('#deliveries tbody tr')].map(r => r.dataset.deliveryId)").await
            == json!([dead.to_string()])
    })
    .await;
    click(
        &c,
        &format!("button.show-attempts[data-delivery-id=\"{dead}\"]"),
    )
    .await;
    wait_until(
        Duration::from_secs(10),
        "the attempts are shown",
        || async {
            js(
                &c,
                "return document.querySelector('#attempts tbody').textContent",
            )
            .await
            .as_str()
            .is_some_and(|t| t.contains("HTTP 410") && t.contains("ms"))
        },
    )
    .await;
    click(&c, &format!("button.replay[data-delivery-id=\"{dead}\"]")).await;
    app.wait_delivery(dead, "delivered", Duration::from_secs(20))
        .await;
    let replayed: String = sqlx::query_scalar(
        "SELECT actor FROM audit_log WHERE action = 'delivery.replayed' AND details->>'delivery_id' = $1",
    )
    .bind(dead.to_string())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(replayed, actor);
    // Back to every delivery, with the attempts of the first test send open.
    c.find(Locator::Css("#f-status"))
        .await
        .unwrap()
        .select_by_value("")
        .await
        .unwrap();
    click(&c, "#f-apply").await;
    wait_until(Duration::from_secs(10), "both deliveries are listed, delivered", || async {
        js(&c, "return [...document.querySelectorAll('#deliveries tbody tr')].map(r => r.dataset.status)").await
            == json!(["delivered", "delivered"])
    })
    .await;
    js(&c, "window.scrollTo(0, 0); return null").await;
    shot(&c, "portal-channel.png").await;
    js(
        &c,
        "document.getElementById('deliveries').scrollIntoView(); return null",
    )
    .await;
    shot(&c, "portal-deliveries.png").await;

    // A channel whose endpoint keeps failing: the page says in plain words why it stopped, the
    // last failure, and when the next test delivery is due.
    let failing = app.named_channel(&key, "portal-broken", json!({})).await;
    app.receiver
        .set("portal-broken", Behavior::Status(503, None));
    app.deliver_many(&key, failing, 8).await;
    app.wait_circuit(failing, "open", Duration::from_secs(30))
        .await;
    click(&c, "#back").await;
    open_channel(&c, failing, "open").await;
    let words = js(
        &c,
        "return document.getElementById('ch-state-text').textContent",
    )
    .await;
    let words = words.as_str().unwrap();
    for part in [
        "Sending stopped",
        "failed",
        "503",
        "next test delivery is due",
        "waiting",
    ] {
        assert!(words.contains(part), "{part:?} in {words:?}");
    }
    js(&c, "window.scrollTo(0, 0); return null").await;
    shot(&c, "portal-circuit-open.png").await;

    // Edit it from the page (name, event types, max in flight), then delete it.
    type_into(&c, "#edit-name", "broken-renamed").await;
    type_into(&c, "#edit-event-types", "invoice.paid, invoice.failed").await;
    type_into(&c, "#edit-max-in-flight", "3").await;
    click(&c, "#edit-submit").await;
    wait_until(Duration::from_secs(10), "the edit is saved", || async {
        let row: (Option<String>, Option<Vec<String>>, Option<i32>) =
            sqlx::query_as("SELECT name, event_types, max_in_flight FROM channels WHERE id = $1")
                .bind(failing)
                .fetch_one(&pool)
                .await
                .unwrap();
        row == (
            Some("broken-renamed".into()),
            Some(vec!["invoice.failed".into(), "invoice.paid".into()]),
            Some(3),
        )
    })
    .await;
    click(&c, "#delete-channel").await;
    c.accept_alert()
        .await
        .expect("the page asks before deleting");
    wait_until(
        Duration::from_secs(10),
        "the channel is deleted",
        || async {
            let deleted: bool =
                sqlx::query_scalar("SELECT deleted_at IS NOT NULL FROM channels WHERE id = $1")
                    .bind(failing)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            deleted
        },
    )
    .await;
    wait_until(Duration::from_secs(10), "the list no longer shows it", || async {
        !js(&c, "return document.getElementById('channels-view').hidden").await.as_bool().unwrap_or(true)
            && js(&c, &format!("return !!document.querySelector('#channels tr[data-channel-id=\"{failing}\"]')")).await
                == json!(false)
    })
    .await;

    // A read session: the page says so, its write buttons are off, and the API refuses a write
    // made from the page.
    let (_, read) = app.portal_session(tenant, "read").await;
    c.goto(&format!("{}/portal#token={read}", app.api))
        .await
        .unwrap();
    wait_until(Duration::from_secs(10), "the read-only banner", || async {
        js(&c, "return !document.getElementById('readonly').hidden && document.getElementById('scope').textContent").await
            == json!("read-only")
    })
    .await;
    assert_eq!(
        js(&c, "return document.getElementById('new-channel').disabled").await,
        json!(true)
    );
    let refused = c
        .execute_async(
            &format!(
                "const done = arguments[arguments.length - 1];
                 window.__portal.api('POST', '/api/v1/channels/{channel}/pause')
                   .then(() => done('accepted'), (e) => {{ window.__portal.fail(e); done(e.status + ' ' + e.message); }});"
            ),
            vec![],
        )
        .await
        .unwrap();
    let refused = refused.as_str().unwrap();
    assert!(
        refused.starts_with("403 ") && refused.contains("read scope"),
        "{refused}"
    );
    wait_until(Duration::from_secs(5), "the refusal is shown", || async {
        js(&c, "return document.getElementById('toast').textContent")
            .await
            .as_str()
            .is_some_and(|t| t.contains("Refused (403)"))
    })
    .await;
    assert_eq!(app.circuit_state(channel).await, "closed");
    open_channel(&c, channel, "closed").await;
    assert_eq!(
        js(&c, "return [...document.querySelectorAll('#channel-view button.write')].every(b => b.disabled)").await,
        json!(true),
        "every write button of a read session is off"
    );
    shot(&c, "portal-read-only.png").await;

    // Nothing of the token reached the audit log.
    let everything: String =
        sqlx::query_scalar("SELECT string_agg(to_jsonb(a)::text, ' ') FROM audit_log a")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(!everything.contains(&token) && !everything.contains(&read));
    let _ = key;

    c.close().await.unwrap();
    drop(driver);
    app.stop().await;
}

/// Ticks or unticks checkbox `css` (a click when it is not as wanted).
async fn check(c: &Client, css: &str, on: bool) {
    let now = js(
        c,
        &format!("return document.querySelector({}).checked", json!(css)),
    )
    .await;
    if now != json!(on) {
        click(c, css).await;
    }
}

/// Picks the option `value` of select `css`.
async fn select(c: &Client, css: &str, value: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .select_by_value(value)
        .await
        .unwrap();
}

/// Everything the page holds as text: its markup and every field's current value (a value typed
/// into an input is not in the markup).
async fn everything_in_the_page(c: &Client) -> String {
    js(
        c,
        "return document.documentElement.outerHTML + ' ' + \
         [...document.querySelectorAll('input, textarea, select')].map(e => e.value).join(' ')",
    )
    .await
    .as_str()
    .unwrap()
    .to_string()
}

/// The channel as the tenant API shows it.
async fn channel_view(app: &TestApp, key: &str, id: Uuid) -> Value {
    let (s, v) = app.get(&format!("/api/v1/channels/{id}"), key).await;
    assert_eq!(s, 200, "{v}");
    v
}

/// Saves the channel editor, waits until the API shows `done`, then until the page has filled
/// its form again from the saved channel (a save ends with that reload: an edit typed before
/// the reload lands would be overwritten by it, and the next save would send the old values).
/// The reload replaces `#edit-headers`' children, so a marker put there before the save is
/// gone once the form is filled.
async fn save_until(
    c: &Client,
    app: &TestApp,
    key: &str,
    id: Uuid,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    js(
        c,
        "const m = document.createElement('span'); m.id = 'test-form-not-reloaded'; \
         document.getElementById('edit-headers').append(m); return true",
    )
    .await;
    click(c, "#edit-submit").await;
    wait_until(Duration::from_secs(10), what, || async {
        done(&channel_view(app, key, id).await)
    })
    .await;
    wait_until(
        Duration::from_secs(10),
        "the page fills its form again from the saved channel",
        || async {
            js(
                c,
                "return !document.getElementById('test-form-not-reloaded')",
            )
            .await
                == json!(true)
        },
    )
    .await;
    channel_view(app, key, id).await
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_portal_edits_headers_auth_filter_and_event_types_in_a_browser(pool: PgPool) {
    let app = TestApp::spawn(pool.clone()).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    // The catalog: a type with a schema and an example, one more under `invoice.`, one deprecated.
    let example = json!({"invoice_id": "in_77", "amount": 1200, "currency": "EUR"});
    for body in [
        json!({
            "name": "invoice.paid",
            "description": "An invoice was paid.",
            "schema": {"type": "object", "required": ["invoice_id", "amount", "currency"]},
            "example": example,
        }),
        json!({ "name": "invoice.voided", "example": {"invoice_id": "in_1"} }),
        json!({ "name": "order.created", "deprecated": true }),
    ] {
        let (s, v) = app.post("/api/v1/event-types", &key, &body).await;
        assert_eq!(s, 201, "{v}");
    }
    // More channels than one page of the list holds (the page asks for 2 a page here).
    let billing = app.named_channel(&key, "portal-billing", json!({})).await;
    for i in 0..4 {
        app.named_channel(&key, &format!("portal-extra-{i}"), json!({}))
            .await;
    }
    let (_, token) = app.portal_session(tenant, "manage").await;
    let (c_driver, c) = start_driver().await;
    c.goto(&format!("{}/portal?page_size=2#token={token}", app.api))
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(10),
        "every channel is listed, over three pages",
        || async {
            js(
                &c,
                "return document.querySelectorAll('#channels tbody tr').length",
            )
            .await
                == json!(5)
        },
    )
    .await;
    assert_eq!(
        js(&c, "return document.getElementById('channels-more').hidden").await,
        json!(true)
    );

    // Open the channel: the event-type picker offers the catalog and its wildcards.
    open_channel(&c, billing, "closed").await;
    assert_eq!(
        js(
            &c,
            "return [...document.querySelectorAll('#edit-types input.type-choice')].map(b => b.value)"
        )
        .await,
        json!(["invoice.*", "invoice.paid", "invoice.voided", "order.*", "order.created"])
    );

    // Event types, two headers (one sensitive), Basic auth and a filter, saved from the page.
    check(&c, "#edit-types input[value=\"invoice.*\"]", true).await;
    check(&c, "#edit-types input[value=\"order.created\"]", true).await;
    type_into(&c, "#edit-event-types", "refund.issued").await;
    click(&c, "#add-header").await;
    click(&c, "#add-header").await;
    type_into(
        &c,
        "#edit-headers .header-row:nth-child(1) .header-name",
        "X-Tenant",
    )
    .await;
    type_into(
        &c,
        "#edit-headers .header-row:nth-child(1) .header-value",
        "acme",
    )
    .await;
    type_into(
        &c,
        "#edit-headers .header-row:nth-child(2) .header-name",
        "X-Api-Key",
    )
    .await;
    check(
        &c,
        "#edit-headers .header-row:nth-child(2) .header-sensitive",
        true,
    )
    .await;
    type_into(
        &c,
        "#edit-headers .header-row:nth-child(2) .header-value",
        "k-secret-123",
    )
    .await;
    select(&c, "#auth-type", "basic").await;
    type_into(&c, "#auth-username", "hook-user").await;
    type_into(&c, "#auth-password", "pa55-secret").await;
    type_into(
        &c,
        "#edit-filter",
        r#"{"==": [{"var": "payload.currency"}, "EUR"]}"#,
    )
    .await;
    let v = save_until(&c, &app, &key, billing, "the settings are saved", |v| {
        v["auth"]["type"] == "basic"
    })
    .await;
    assert_eq!(
        v["event_types"],
        json!(["invoice.*", "order.created", "refund.issued"])
    );
    assert_eq!(
        v["headers"],
        json!({
            "X-Api-Key": {"value": "********", "sensitive": true},
            "X-Tenant": {"value": "acme", "sensitive": false},
        })
    );
    assert_eq!(
        v["auth"],
        json!({"type": "basic", "username": "hook-user", "password": "********"})
    );
    assert_eq!(
        v["filter"],
        json!({"==": [{"var": "payload.currency"}, "EUR"]})
    );
    // The page reloads the form from the API: the secrets are "set", never shown.
    wait_until(Duration::from_secs(10), "the form shows the saved settings", || async {
        js(&c, "return !document.querySelector('[data-secret-set=basic]').hidden && document.querySelectorAll('#edit-headers .header-row .set').length === 1").await
            == json!(true)
    })
    .await;
    let page = everything_in_the_page(&c).await;
    for secret in ["k-secret-123", "pa55-secret", "********"] {
        assert!(!page.contains(secret), "{secret} is in the page");
    }
    assert_eq!(
        js(&c, "return document.getElementById('auth-username').value").await,
        json!("hook-user")
    );
    assert_eq!(
        js(
            &c,
            "return [...document.querySelectorAll('#edit-types input:checked')].map(b => b.value)"
        )
        .await,
        json!(["invoice.*", "order.created"])
    );
    assert_eq!(
        js(
            &c,
            "return document.getElementById('edit-event-types').value"
        )
        .await,
        json!("refund.issued")
    );

    // The filter, tried from the page on a sample (the saved filter, nothing sent).
    type_into(&c, "#filter-test-payload", r#"{"currency": "USD"}"#).await;
    click(&c, "#filter-test").await;
    wait_data(
        &c,
        "#filter-test-result",
        "matches",
        "false",
        Duration::from_secs(10),
    )
    .await;
    type_into(&c, "#filter-test-payload", r#"{"currency": "EUR"}"#).await;
    click(&c, "#filter-test").await;
    wait_data(
        &c,
        "#filter-test-result",
        "matches",
        "true",
        Duration::from_secs(10),
    )
    .await;

    // A test send of the catalog's example: picked by type, the payload prefilled, delivered
    // with the headers and the auth.
    app.receiver.set_secret(
        "portal-billing",
        sqlx::query_scalar::<_, String>("SELECT signing_secret FROM channels WHERE id = $1")
            .bind(billing)
            .fetch_one(&pool)
            .await
            .unwrap()
            .as_str(),
    );
    select(&c, "#test-catalog", "invoice.paid").await;
    assert_eq!(
        js(
            &c,
            "return document.getElementById('test-event-type').value"
        )
        .await,
        json!("invoice.paid")
    );
    let prefilled = js(&c, "return document.getElementById('test-payload').value").await;
    assert_eq!(
        serde_json::from_str::<Value>(prefilled.as_str().unwrap()).unwrap(),
        example
    );
    test_send(&c, "delivered").await;
    let got = app.receiver.received("portal-billing");
    assert_eq!(got.len(), 1);
    let body: Value = serde_json::from_slice(&got[0].body).unwrap();
    assert_eq!(
        (&body["type"], &body["data"]),
        (&json!("invoice.paid"), &example)
    );
    assert_eq!(got[0].signature_ok, Some(true));
    assert_eq!(header(&got[0], "x-tenant").as_deref(), Some("acme"));
    assert_eq!(
        header(&got[0], "x-api-key").as_deref(),
        Some("k-secret-123")
    );
    assert_eq!(
        header(&got[0], "authorization").as_deref(),
        Some("Basic aG9vay11c2VyOnBhNTUtc2VjcmV0")
    );
    js(
        &c,
        "document.getElementById('edit-headers-field').scrollIntoView(); return null",
    )
    .await;
    shot(&c, "portal-channel-settings.png").await;

    // Bearer instead of Basic; the sensitive header left empty keeps its value.
    select(&c, "#auth-type", "bearer").await;
    type_into(&c, "#auth-token", "tok-secret-456").await;
    save_until(&c, &app, &key, billing, "bearer is saved", |v| {
        v["auth"] == json!({"type": "bearer", "token": "********"})
    })
    .await;
    let (s, d) = app
        .post(
            &format!("/api/v1/channels/{billing}/deliveries"),
            &key,
            &json!({ "event_type": "invoice.paid", "payload": example }),
        )
        .await;
    assert_eq!(s, 202, "{d}");
    app.wait_received("portal-billing", 2, Duration::from_secs(20))
        .await;
    let got = app.receiver.received("portal-billing");
    assert_eq!(
        header(&got[1], "x-api-key").as_deref(),
        Some("k-secret-123")
    );
    assert_eq!(
        header(&got[1], "authorization").as_deref(),
        Some("Bearer tok-secret-456")
    );

    // OAuth2 client credentials; saved again without retyping the secret, it is kept.
    select(&c, "#auth-type", "oauth2_client_credentials").await;
    let token_url = format!("{}/token", app.api);
    type_into(&c, "#auth-token-url", &token_url).await;
    type_into(&c, "#auth-client-id", "client-9").await;
    type_into(&c, "#auth-client-secret", "cs-secret-789").await;
    type_into(&c, "#auth-scope", "hooks.write").await;
    let v = save_until(&c, &app, &key, billing, "oauth2 is saved", |v| {
        v["auth"]["type"] == "oauth2_client_credentials"
    })
    .await;
    assert_eq!(
        v["auth"],
        json!({
            "type": "oauth2_client_credentials", "token_url": token_url, "client_id": "client-9",
            "client_secret": "********", "scope": "hooks.write",
        })
    );
    wait_until(Duration::from_secs(10), "the client secret is shown as set", || async {
        js(&c, "return !document.querySelector('[data-secret-set=oauth2_client_credentials]').hidden").await
            == json!(true)
    })
    .await;
    type_into(&c, "#edit-name", "billing").await;
    save_until(&c, &app, &key, billing, "the rename is saved", |v| {
        v["name"] == "billing"
    })
    .await;
    let (secret, api_key): (Option<String>, Option<String>) = sqlx::query_as(
        "SELECT auth->>'client_secret', (SELECT h->>'value' FROM jsonb_array_elements(headers) h WHERE h->>'name' = 'X-Api-Key')
           FROM channels WHERE id = $1",
    )
    .bind(billing)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (secret.as_deref(), api_key.as_deref()),
        (Some("cs-secret-789"), Some("k-secret-123")),
        "secrets left empty are kept"
    );
    let page = everything_in_the_page(&c).await;
    for secret in ["k-secret-123", "tok-secret-456", "cs-secret-789"] {
        assert!(!page.contains(secret), "{secret} is in the page");
    }

    // Cleared from the page: no headers, no auth, no filter, every event type.
    for _ in 0..2 {
        click(&c, "#edit-headers .remove-header").await;
    }
    select(&c, "#auth-type", "").await;
    check(&c, "#edit-types input[value=\"invoice.*\"]", false).await;
    check(&c, "#edit-types input[value=\"order.created\"]", false).await;
    type_into(&c, "#edit-event-types", "").await;
    type_into(&c, "#edit-filter", "").await;
    let v = save_until(&c, &app, &key, billing, "everything is cleared", |v| {
        v["auth"].is_null()
    })
    .await;
    assert_eq!(
        (&v["headers"], &v["event_types"], &v["filter"]),
        (&json!({}), &Value::Null, &Value::Null)
    );
    let audited: String = sqlx::query_scalar(
        "SELECT string_agg(details::text, ' ') FROM audit_log WHERE channel_id = $1",
    )
    .bind(billing)
    .fetch_one(&pool)
    .await
    .unwrap();
    for secret in [
        "k-secret-123",
        "pa55-secret",
        "tok-secret-456",
        "cs-secret-789",
    ] {
        assert!(!audited.contains(secret), "{secret} is in the audit log");
    }

    c.close().await.unwrap();
    drop(c_driver);
    app.stop().await;
}
